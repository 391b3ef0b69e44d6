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
 *    migrated guest's announce) and on MAIN (static installs at port.add
 *    and policy publication), a writer like the others. Each writer's
 *    `now` is its own clock reading: an entry seen "in the future" of a
 *    reader's `now` is live. Per bucket, one rte_seqlock (a spinlock for writers + a
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
 *
 * Source binding (doc/isolation.md "MAC entries and source-address
 * binding"). An entry learned on a VM port is marked VM; one installed
 * for a port's allowed_macs (SN_MAC_IN_STATIC) or learned from a port
 * whose allowed_macs hold it (SN_MAC_IN_ALLOWED) is STATIC: it never
 * expires nor ages out, and a static install may take the way of the
 * oldest learned entry of a full bucket. Move policy for a known MAC seen
 * on another port (or port generation):
 *  - a STATIC entry moves only with a frame or announce from a port
 *    whose allowed_macs hold it (live migration: the new port lists the
 *    guest's MAC), never with a static install (SN_MAC_IN_STATIC): one
 *    port's install does not take another port's static entry;
 *  - a learned entry moves to a port whose allowed_macs hold it (frame
 *    or install);
 *  - an expired learned entry moves anywhere;
 *  - SN_MAC_MOVE_VM_STICKY (default): a live learned entry moves only
 *    between ports of one kind: a VM entry is not moved by the uplink (a
 *    port without SN_MAC_IN_VM), an uplink entry not by a VM port (without
 *    allowed_macs holding it); SN_MAC_MOVE_ANY: any learned entry moves.
 * A refused move changes nothing and counts move_refused.
 * Quotas: with a quota pool attached (sn_mac_set_quota), every entry holds
 * one unit of its port slot's budget (taken when an entry is written for
 * the slot, given back when it ages out, is taken over or moved, or its
 * port is forgotten); a new MAC of a slot without room is not learned
 * (SN_MAC_QUOTA, counted `quota`). A VM port may also hold at most
 * SN_MAC_BUCKET_PORT_MAX live learned entries of one bucket, so no single
 * port fills a bucket: a victim's MAC stays learnable however an attacker
 * picks its MACs (two attackers could fill a bucket; a static entry keeps
 * its way whatever the others do).
 *  - sn_mac_age(): one thread only (worker 0), a slice of buckets per
 *    call; it locks a bucket only when that bucket has an expired entry.
 *  - sn_mac_forget(), sn_mac_set_move(), sn_mac_set_quota(): MAIN, with
 *    workers running (forget takes each bucket's write lock that holds an
 *    entry of the slot; the move policy is a relaxed flag the writers
 *    load).
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
#define SN_MAC_BUCKET_PORT_MAX 2           /* learned entries of a VM port per bucket */

/* What learns (sn_mac_learn's `in`). */
#define SN_MAC_IN_VM      1u   /* a VM port (else the uplink) */
#define SN_MAC_IN_ALLOWED 2u   /* the port's allowed_macs hold the MAC */
#define SN_MAC_IN_STATIC  4u   /* install of an allowed_macs entry (MAIN) */

enum sn_mac_move {
	SN_MAC_MOVE_VM_STICKY,   /* default: live learned entries stay on their
	                          * side (VM ports / uplink) */
	SN_MAC_MOVE_ANY,         /* any port moves a learned entry */
};

struct sn_mac;

struct sn_mac_stats {
	uint64_t entries;  /* currently valid */
	uint64_t learned;  /* new entries */
	uint64_t aged;     /* removed by aging, taken over once expired, or
	                    * given up to a static entry of a full bucket */
	uint64_t moves;    /* MAC seen on another port */
	uint64_t full;     /* could not learn: bucket full */
	uint64_t move_refused; /* MAC seen on another port, kept (move policy) */
	uint64_t quota;    /* could not learn: the port's quota or bucket share */
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

struct sn_quota;
/* Threads that may learn at once: every worker (SN_CONFIG_WORKERS_MAX at
 * most), the VHOST thread and MAIN. A writer takes its new entry's unit
 * before the entry it replaces gives one back, so each holds one unit
 * more than the table for a moment. */
#define SN_MAC_WRITERS_MAX 10u
/* Units of the quota pool of a table of `entries`: the entries, plus one
 * per writer, so that a move or the take-over of an expired way in a full
 * table is never refused for the moment its unit is counted twice. */
static inline unsigned sn_mac_quota_units(unsigned entries)
{
	return entries + SN_MAC_WRITERS_MAX;
}
/* MAIN, before the workers start: account entries per port slot in q
 * (owners: port slots, total: sn_mac_quota_units() of the table's entries;
 * the caller keeps it and sets each slot's reserve and cap with
 * sn_quota_set). */
void sn_mac_set_quota(struct sn_mac *t, struct sn_quota *q);
/* MAIN, any time: the move policy (default SN_MAC_MOVE_VM_STICKY). */
void sn_mac_set_move(struct sn_mac *t, enum sn_mac_move move);
/* MAIN, after the port of slot is out of the workers' sight (deleted,
 * grace period over): remove every entry of slot, static ones included,
 * giving their units back. Returns the entries removed. */
unsigned sn_mac_forget(struct sn_mac *t, uint16_t slot);

/* Pure: the default MAC-entry cap of a VM port for a table of
 * table_entries shared by max_ports VM ports: an even share of half the
 * table (the other half stays for the uplink's LAN), at least
 * 2 * SN_MAC_WAYS, at most table_entries / 4. */
uint32_t sn_mac_quota_auto(unsigned table_entries, unsigned max_ports);

#endif /* SN_MAC_H */
