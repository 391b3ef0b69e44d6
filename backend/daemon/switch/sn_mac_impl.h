/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_mac_impl.h — the MAC table's layout and its per-frame operations
 * (learn, lookup), static inline so that the worker loop inlines them.
 * The contract is sn_mac.h's. Include it after defining
 * ALLOW_EXPERIMENTAL_API (rte_seqlock is experimental in DPDK 22.11).
 */
#ifndef SN_MAC_IMPL_H
#define SN_MAC_IMPL_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_ether.h>
#include <rte_seqlock.h>

#include "sn_mac.h"

struct sn_mac_entry {
	uint64_t key;    /* MAC | SN_MAC_VALID, 0 = empty */
	uint64_t seen;   /* TSC of the last frame from it */
	uint32_t gen;    /* port generation */
	uint16_t slot;   /* port slot */
	uint16_t pad;
};

struct sn_mac_bucket {
	rte_seqlock_t lock;
	struct sn_mac_entry e[SN_MAC_WAYS];
} __rte_cache_aligned;

struct sn_mac {
	unsigned nb;                 /* buckets (pow2) */
	unsigned bucket_shift;       /* 64 - log2(nb) */
	uint64_t aging_tsc;
	bool rte_mem;                /* sn_mac_create(): freed by sn_mac_free() */
	struct sn_mac_stats ms;      /* fetch-add by any worker */
	struct sn_mac_bucket b[] __rte_cache_aligned;
};

/* What sn_mac_learn() did (the burst memo of the worker loop needs it). */
enum sn_mac_learn_res {
	SN_MAC_KNOWN,  /* key -> port already, nothing but `seen` written */
	SN_MAC_WROTE,  /* key -> port now, the entry was written (new or moved) */
	SN_MAC_FULL,   /* not learned: bucket full (counted) */
};

#define SN_MAC_LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define SN_MAC_ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* A MAC table counter (several writers). */
static inline void sn_mac_ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

/* Both keys of a frame with one 8-byte load each (the 14-byte header must
 * be in the first segment: the caller checks it). */
static inline void sn_mac_keys(const struct rte_ether_hdr *eth, uint64_t *dkey, uint64_t *skey)
{
	const uint8_t *h = (const uint8_t *)eth;
	uint64_t d, s;

	static_assert(sizeof(*eth) >= 6 + sizeof(s), "src MAC + 2 bytes of ethertype");
	memcpy(&d, h, sizeof(d));
	memcpy(&s, h + 6, sizeof(s));
	*dkey = (rte_le_to_cpu_64(d) & 0xffffffffffffULL) | SN_MAC_VALID;
	*skey = (rte_le_to_cpu_64(s) & 0xffffffffffffULL) | SN_MAC_VALID;
}

static inline struct sn_mac_bucket *sn_mac_bucket(struct sn_mac *t, uint64_t key)
{
	return &t->b[(key * 0x9E3779B97F4A7C15ULL) >> t->bucket_shift];
}

static inline bool sn_mac_expired(const struct sn_mac *t, uint64_t seen, uint64_t now)
{
	return now - seen > t->aging_tsc;
}

/* A lock-free snapshot of the entry for key in b: its way, or -1. */
static inline int sn_mac_read(const struct sn_mac_bucket *b, uint64_t key, struct sn_mac_entry *out)
{
	uint32_t sn;
	int hit;

	do {
		sn = rte_seqlock_read_begin(&b->lock);
		hit = -1;
		for (unsigned w = 0; w < SN_MAC_WAYS; w++) {
			if (SN_MAC_LD(b->e[w].key) == key) {
				out->seen = SN_MAC_LD(b->e[w].seen);
				out->gen = SN_MAC_LD(b->e[w].gen);
				out->slot = SN_MAC_LD(b->e[w].slot);
				hit = (int)w;
				break;
			}
		}
	} while (rte_seqlock_read_retry(&b->lock, sn));
	return hit;
}

/* Learn key -> (slot, gen) at now: refresh a known entry, move one seen on
 * another port, or take a free or expired way of its bucket. */
static inline enum sn_mac_learn_res sn_mac_learn(struct sn_mac *t, uint64_t key, uint16_t slot,
						 uint32_t gen, uint64_t now)
{
	struct sn_mac_bucket *b = sn_mac_bucket(t, key);
	struct sn_mac_entry *free_e = NULL, cur = { 0 };
	int hit = sn_mac_read(b, key, &cur);
	enum sn_mac_learn_res res = SN_MAC_WROTE;

	if (hit >= 0 && cur.slot == slot && cur.gen == gen) {
		/* Fast path, no lock (sn_mac.h). */
		if (now - cur.seen > t->aging_tsc / SN_MAC_SEEN_REFRESH)
			SN_MAC_ST(b->e[hit].seen, now);
		return SN_MAC_KNOWN;
	}
	rte_seqlock_write_lock(&b->lock);
	for (unsigned w = 0; w < SN_MAC_WAYS; w++) {
		struct sn_mac_entry *e = &b->e[w];

		if (e->key == key) {
			if (e->slot != slot || e->gen != gen) {
				SN_MAC_ST(e->slot, slot);
				SN_MAC_ST(e->gen, gen);
				sn_mac_ctr_add(&t->ms.moves, 1);
			}
			SN_MAC_ST(e->seen, now);
			goto unlock;
		}
		if (!free_e && (!e->key || sn_mac_expired(t, SN_MAC_LD(e->seen), now)))
			free_e = e;
	}
	if (!free_e) {
		sn_mac_ctr_add(&t->ms.full, 1);
		res = SN_MAC_FULL;
		goto unlock;
	}
	if (free_e->key) {
		sn_mac_ctr_add(&t->ms.aged, 1);
		sn_mac_ctr_add(&t->ms.entries, -1ULL);
	}
	SN_MAC_ST(free_e->key, key);
	SN_MAC_ST(free_e->seen, now);
	SN_MAC_ST(free_e->slot, slot);
	SN_MAC_ST(free_e->gen, gen);
	sn_mac_ctr_add(&t->ms.entries, 1);
	sn_mac_ctr_add(&t->ms.learned, 1);
unlock:
	rte_seqlock_write_unlock(&b->lock);
	return res;
}

/* The port (slot, generation) key was learned on, unless unknown or
 * expired at now (false). The caller checks that the port still exists. */
static inline bool sn_mac_lookup(struct sn_mac *t, uint64_t key, uint64_t now, uint16_t *slot,
				 uint32_t *gen)
{
	struct sn_mac_entry e;

	if (sn_mac_read(sn_mac_bucket(t, key), key, &e) < 0 || sn_mac_expired(t, e.seen, now))
		return false;
	*slot = e.slot;
	*gen = e.gen;
	return true;
}

#endif /* SN_MAC_IMPL_H */
