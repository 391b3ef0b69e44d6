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
#include "sn_quota.h"

struct sn_mac_entry {
	uint64_t key;    /* MAC | SN_MAC_VALID, 0 = empty */
	uint64_t seen;   /* TSC of the last frame from it */
	uint32_t gen;    /* port generation */
	uint16_t slot;   /* port slot */
	uint16_t flags;  /* SN_MAC_E_* */
};

/* Entry flags. */
#define SN_MAC_E_VM     1u   /* learned on a VM port */
#define SN_MAC_E_STATIC 2u   /* an allowed_macs entry: never expires, never
                              * moved but to a port that allows it */

struct sn_mac_bucket {
	rte_seqlock_t lock;
	struct sn_mac_entry e[SN_MAC_WAYS];
} __rte_cache_aligned;

struct sn_mac {
	unsigned nb;                 /* buckets (pow2) */
	unsigned bucket_shift;       /* 64 - log2(nb) */
	uint64_t aging_tsc;
	bool rte_mem;                /* sn_mac_create(): freed by sn_mac_free() */
	bool move_any;               /* SN_MAC_MOVE_ANY, else SN_MAC_MOVE_VM_STICKY */
	struct sn_quota *q;          /* entries per port slot; NULL = none */
	struct sn_mac_stats ms;      /* fetch-add by any worker */
	struct sn_mac_bucket b[] __rte_cache_aligned;
};

/* What sn_mac_learn() did (the burst memo of the worker loop needs it). */
enum sn_mac_learn_res {
	SN_MAC_KNOWN,  /* key -> port already, nothing but `seen` written */
	SN_MAC_WROTE,  /* key -> port now, the entry was written (new or moved) */
	SN_MAC_FULL,   /* not learned: bucket full (counted) */
	SN_MAC_QUOTA,  /* not learned: the port's quota or its share of the
	                * bucket is used up (counted) */
	SN_MAC_REFUSED, /* not moved: the move policy keeps the entry where
	                 * it is (counted as move_refused) */
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

/* Expired at now. Workers read the clock once per loop pass, so another
 * writer's later `seen` can exceed a worker's `now`: a signed difference
 * keeps such an entry live instead of wrapping to "long expired". */
static inline bool sn_mac_expired(const struct sn_mac *t, uint64_t seen, uint64_t now)
{
	return (int64_t)(now - seen) > (int64_t)t->aging_tsc;
}

/* An entry (its seen and flags) that is a miss at now. */
static inline bool sn_mac_entry_expired(const struct sn_mac *t, uint64_t seen, uint16_t flags,
					uint64_t now)
{
	return !(flags & SN_MAC_E_STATIC) && sn_mac_expired(t, seen, now);
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
				out->flags = SN_MAC_LD(b->e[w].flags);
				hit = (int)w;
				break;
			}
		}
	} while (rte_seqlock_read_retry(&b->lock, sn));
	return hit;
}

/* Whether the entry e (bucket locked) may move to a port of `in` flags:
 * the move policy of sn_mac.h. */
static inline bool sn_mac_may_move(const struct sn_mac *t, const struct sn_mac_entry *e,
				   unsigned in, uint64_t now)
{
	/* A static entry follows the guest's frames (live migration), never
	 * another port's install. */
	if (e->flags & SN_MAC_E_STATIC)
		return (in & SN_MAC_IN_ALLOWED) && !(in & SN_MAC_IN_STATIC);
	if (in & SN_MAC_IN_ALLOWED)
		return true;
	if (sn_mac_expired(t, SN_MAC_LD(e->seen), now))
		return true;
	/* vm_sticky: a live learned entry stays on its side, VM or uplink. */
	return __atomic_load_n(&t->move_any, __ATOMIC_RELAXED) ||
	       !(e->flags & SN_MAC_E_VM) == !(in & SN_MAC_IN_VM);
}

/* Bucket locked: the quota unit of the entry e goes to `slot` (a new or
 * moved entry); false (nothing changed, a hit counted) if refused. */
static inline bool sn_mac_charge(struct sn_mac *t, const struct sn_mac_entry *e, uint16_t slot)
{
	if (!t->q || (e->key && e->slot == slot))
		return true;
	if (sn_quota_take(t->q, slot, 1) != 1)
		return false;
	if (e->key)
		sn_quota_give(t->q, e->slot, 1);
	return true;
}

/* Learn key -> (slot, gen) at now for a port of flags `in` (SN_MAC_IN_*):
 * refresh a known entry, move one seen on another port (if the move
 * policy allows it), or take a free or expired way of its bucket (if the
 * port's quota and its share of the bucket allow it). */
static inline enum sn_mac_learn_res sn_mac_learn(struct sn_mac *t, uint64_t key, uint16_t slot,
						 uint32_t gen, unsigned in, uint64_t now)
{
	struct sn_mac_bucket *b = sn_mac_bucket(t, key);
	struct sn_mac_entry *free_e = NULL, cur = { 0 };
	int hit = sn_mac_read(b, key, &cur);
	enum sn_mac_learn_res res = SN_MAC_WROTE;
	const uint16_t flags = (uint16_t)(((in & SN_MAC_IN_VM) ? SN_MAC_E_VM : 0) |
					  ((in & (SN_MAC_IN_STATIC | SN_MAC_IN_ALLOWED)) ?
					   SN_MAC_E_STATIC : 0));
	unsigned mine = 0;

	if (hit >= 0 && cur.slot == slot && cur.gen == gen &&
	    (cur.flags & SN_MAC_E_STATIC) >= (flags & SN_MAC_E_STATIC)) {
		/* Fast path, no lock (sn_mac.h). */
		if ((int64_t)(now - cur.seen) > (int64_t)(t->aging_tsc / SN_MAC_SEEN_REFRESH))
			SN_MAC_ST(b->e[hit].seen, now);
		return SN_MAC_KNOWN;
	}
	rte_seqlock_write_lock(&b->lock);
	for (unsigned w = 0; w < SN_MAC_WAYS; w++) {
		struct sn_mac_entry *e = &b->e[w];
		const bool dead = !e->key || sn_mac_entry_expired(t, SN_MAC_LD(e->seen), e->flags, now);

		if (e->key == key) {
			if (e->slot != slot || e->gen != gen) {
				if (!sn_mac_may_move(t, e, in, now)) {
					sn_mac_ctr_add(&t->ms.move_refused, 1);
					res = SN_MAC_REFUSED;
					goto unlock;
				}
				if (!sn_mac_charge(t, e, slot)) {
					sn_mac_ctr_add(&t->ms.quota, 1);
					res = SN_MAC_QUOTA;
					goto unlock;
				}
				SN_MAC_ST(e->slot, slot);
				SN_MAC_ST(e->gen, gen);
				sn_mac_ctr_add(&t->ms.moves, 1);
			}
			SN_MAC_ST(e->flags, flags);
			SN_MAC_ST(e->seen, now);
			goto unlock;
		}
		if (!free_e && dead)
			free_e = e;
		mine += !dead && e->slot == slot && !(e->flags & SN_MAC_E_STATIC);
	}
	if (!free_e && (in & SN_MAC_IN_STATIC)) {
		/* A static entry takes the way of the oldest learned one. */
		for (unsigned w = 0; w < SN_MAC_WAYS; w++) {
			struct sn_mac_entry *e = &b->e[w];

			if (!(e->flags & SN_MAC_E_STATIC) &&
			    (!free_e || (int64_t)(SN_MAC_LD(e->seen) - SN_MAC_LD(free_e->seen)) < 0))
				free_e = e;
		}
	}
	if (!free_e) {
		sn_mac_ctr_add(&t->ms.full, 1);
		res = SN_MAC_FULL;
		goto unlock;
	}
	if (((in & SN_MAC_IN_VM) && !(in & SN_MAC_IN_STATIC) && mine >= SN_MAC_BUCKET_PORT_MAX) ||
	    !sn_mac_charge(t, free_e, slot)) {
		sn_mac_ctr_add(&t->ms.quota, 1);
		res = SN_MAC_QUOTA;
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
	SN_MAC_ST(free_e->flags, flags);
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

	if (sn_mac_read(sn_mac_bucket(t, key), key, &e) < 0 ||
	    sn_mac_entry_expired(t, e.seen, e.flags, now))
		return false;
	*slot = e.slot;
	*gen = e.gen;
	return true;
}

#endif /* SN_MAC_IMPL_H */
