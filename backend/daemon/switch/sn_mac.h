/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_mac.h — the switch's MAC learning table: source MAC -> (port slot,
 * port generation), 4-way set-associative, with aging (IEEE 802.1D
 * filtering database).
 *
 * A key is a MAC's 6 bytes as the low 48 bits of a little-endian word,
 * | SN_MAC_VALID (sn_mac_keys()); 0 is no key. An entry names its port by
 * slot and generation, so an entry of a deleted port never matches the
 * port that takes its slot next. An entry expires aging_tsc after the
 * last frame from its MAC: an expired entry is a miss for lookups, free
 * for learning, and removed by the aging scan.
 *
 * Concurrency contract (one table shared by every worker lcore):
 *  - create / init / free: main thread, no worker running.
 *  - sn_mac_learn(), sn_mac_lookup() (sn_mac_impl.h): any worker, at any
 *    time; sn_mac_learn() also on the VHOST thread (sn_switch_learn, a
 *    migrated guest's announce), a writer like the others. Per bucket, one rte_seqlock (a spinlock for writers + a
 *    sequence counter for readers). Readers (lookup, and learning's fast
 *    path: a known MAC on the same port) take no lock: they read the
 *    bucket's entries with relaxed atomic loads between
 *    rte_seqlock_read_begin() and rte_seqlock_read_retry(), whose acquire
 *    fences pair with the writer's release in write_lock / write_unlock,
 *    and retry if a writer was inside. Writers (a new MAC, a move to
 *    another port, aging) take the bucket's write lock and store with
 *    relaxed atomic stores. `seen` alone is refreshed outside the lock
 *    (relaxed store, at most once per 1/SN_MAC_SEEN_REFRESH of the aging
 *    time): a racing refresh of an entry a writer just replaced only makes
 *    that entry look fresh, which is harmless. Entries are values, never
 *    freed: no reader holds a pointer into the table past its read
 *    section.
 *  - sn_mac_age(): one thread only (worker 0), a slice of buckets per
 *    call; it locks a bucket only when that bucket has an expired entry.
 *  - sn_mac_stats(): any thread. The counters are updated with relaxed
 *    atomic fetch-adds (several writers) and read with relaxed loads: a
 *    set may be torn between fields, never a field.
 */
#ifndef SN_MAC_H
#define SN_MAC_H

#include <stddef.h>
#include <stdint.h>

#define SN_MAC_WAYS      4                 /* entries per bucket */
#define SN_MAC_VALID     (1ULL << 63)      /* set in every key */
#define SN_MAC_AGE_SLICE 256               /* entries aged per sn_mac_age() */
#define SN_MAC_SEEN_REFRESH 64             /* `seen` refreshed after 1/64 of aging */

struct sn_mac;

struct sn_mac_stats {
	uint64_t entries;  /* currently valid */
	uint64_t learned;  /* new entries */
	uint64_t aged;     /* removed by aging */
	uint64_t moves;    /* MAC seen on another port */
	uint64_t full;     /* could not learn: bucket full */
};

/* Bytes of a table of `entries` (a power of two >= 16), 0 if invalid. */
size_t sn_mac_mem_size(unsigned entries);
/* Lay a table of `entries` out in mem (sn_mac_mem_size() bytes, zeroed,
 * cache-line aligned; the caller keeps ownership). aging_tsc: an entry's
 * lifetime in TSC ticks (the unit of every `now`). NULL + errno EINVAL. */
struct sn_mac *sn_mac_init(void *mem, unsigned entries, uint64_t aging_tsc);
/* The same in hugepage memory (rte_zmalloc): main thread, after EAL init.
 * NULL + errno (EINVAL, ENOMEM). */
struct sn_mac *sn_mac_create(unsigned entries, uint64_t aging_tsc);
/* Frees a table of sn_mac_create() (NULL: nothing). */
void sn_mac_free(struct sn_mac *t);

/* Buckets of the table: the aging scan's range [0, sn_mac_buckets()). */
unsigned sn_mac_buckets(const struct sn_mac *t);
/* Aging scan: remove the expired entries of SN_MAC_AGE_SLICE entries'
 * worth of buckets from bucket `from` on; returns the next bucket to scan
 * (sn_mac_buckets(t) when the scan is done). */
unsigned sn_mac_age(struct sn_mac *t, unsigned from, uint64_t now);

void sn_mac_stats(const struct sn_mac *t, struct sn_mac_stats *out);

#endif /* SN_MAC_H */
