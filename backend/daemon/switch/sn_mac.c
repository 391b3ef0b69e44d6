/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_mac.c — the MAC learning table's setup, aging scan and counters. The
 * per-frame operations are inline in sn_mac_impl.h; the contract is in
 * sn_mac.h.
 */
/* rte_seqlock is experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API
#include "sn_mac_impl.h"

#include <errno.h>

#include <rte_malloc.h>

size_t sn_mac_mem_size(unsigned entries)
{
	if (entries < 16 || (entries & (entries - 1)))
		return 0;
	return sizeof(struct sn_mac) + sizeof(struct sn_mac_bucket) * (entries / SN_MAC_WAYS);
}

struct sn_mac *sn_mac_init(void *mem, unsigned entries, uint64_t aging_tsc)
{
	struct sn_mac *t = mem;
	unsigned buckets = entries / SN_MAC_WAYS;

	if (!mem || !sn_mac_mem_size(entries)) {
		errno = EINVAL;
		return NULL;
	}
	for (unsigned i = 0; i < buckets; i++)
		rte_seqlock_init(&t->b[i].lock);
	t->nb = buckets;
	t->bucket_shift = 64 - (unsigned)__builtin_ctz(buckets);
	t->aging_tsc = aging_tsc;
	return t;
}

struct sn_mac *sn_mac_create(unsigned entries, uint64_t aging_tsc)
{
	size_t size = sn_mac_mem_size(entries);
	struct sn_mac *t;
	void *mem;

	if (!size) {
		errno = EINVAL;
		return NULL;
	}
	mem = rte_zmalloc("sn_mac", size, RTE_CACHE_LINE_SIZE);
	if (!mem) {
		errno = ENOMEM;
		return NULL;
	}
	t = sn_mac_init(mem, entries, aging_tsc);
	t->rte_mem = true;
	return t;
}

void sn_mac_free(struct sn_mac *t)
{
	if (t && t->rte_mem)
		rte_free(t);
}

unsigned sn_mac_buckets(const struct sn_mac *t)
{
	return t->nb;
}

unsigned sn_mac_age(struct sn_mac *t, unsigned from, uint64_t now)
{
	unsigned end = RTE_MIN(from + SN_MAC_AGE_SLICE / SN_MAC_WAYS, t->nb);

	for (unsigned i = from; i < end; i++) {
		struct sn_mac_bucket *b = &t->b[i];
		bool any = false;

		for (unsigned w = 0; w < SN_MAC_WAYS; w++)
			any |= SN_MAC_LD(b->e[w].key) &&
			       sn_mac_entry_expired(t, SN_MAC_LD(b->e[w].seen),
						    SN_MAC_LD(b->e[w].flags), now);
		if (!any)
			continue;
		rte_seqlock_write_lock(&b->lock);
		for (unsigned w = 0; w < SN_MAC_WAYS; w++) {
			struct sn_mac_entry *e = &b->e[w];

			if (e->key && sn_mac_entry_expired(t, SN_MAC_LD(e->seen), e->flags, now)) {
				if (t->q)
					sn_quota_give(t->q, e->slot, 1);
				SN_MAC_ST(e->key, 0);
				sn_mac_ctr_add(&t->ms.aged, 1);
				sn_mac_ctr_add(&t->ms.entries, -1ULL);
			}
		}
		rte_seqlock_write_unlock(&b->lock);
	}
	return end;
}

void sn_mac_stats(const struct sn_mac *t, struct sn_mac_stats *out)
{
	const struct sn_mac_stats *ms = &t->ms;

	out->entries = __atomic_load_n(&ms->entries, __ATOMIC_RELAXED);
	out->learned = __atomic_load_n(&ms->learned, __ATOMIC_RELAXED);
	out->aged = __atomic_load_n(&ms->aged, __ATOMIC_RELAXED);
	out->moves = __atomic_load_n(&ms->moves, __ATOMIC_RELAXED);
	out->full = __atomic_load_n(&ms->full, __ATOMIC_RELAXED);
	out->move_refused = __atomic_load_n(&ms->move_refused, __ATOMIC_RELAXED);
	out->quota = __atomic_load_n(&ms->quota, __ATOMIC_RELAXED);
}

void sn_mac_set_quota(struct sn_mac *t, struct sn_quota *q)
{
	t->q = q;
}

void sn_mac_set_move(struct sn_mac *t, enum sn_mac_move move)
{
	__atomic_store_n(&t->move_any, move == SN_MAC_MOVE_ANY, __ATOMIC_RELAXED);
}

unsigned sn_mac_forget(struct sn_mac *t, uint16_t slot)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->nb; i++) {
		struct sn_mac_bucket *b = &t->b[i];
		bool any = false;

		for (unsigned w = 0; w < SN_MAC_WAYS; w++)
			any |= SN_MAC_LD(b->e[w].key) && SN_MAC_LD(b->e[w].slot) == slot;
		if (!any)
			continue;
		rte_seqlock_write_lock(&b->lock);
		for (unsigned w = 0; w < SN_MAC_WAYS; w++) {
			struct sn_mac_entry *e = &b->e[w];

			if (e->key && e->slot == slot) {
				if (t->q)
					sn_quota_give(t->q, slot, 1);
				SN_MAC_ST(e->key, 0);
				sn_mac_ctr_add(&t->ms.entries, -1ULL);
				n++;
			}
		}
		rte_seqlock_write_unlock(&b->lock);
	}
	return n;
}

uint32_t sn_mac_quota_auto(unsigned table_entries, unsigned max_ports)
{
	uint32_t share = table_entries / 2 / (max_ports ? max_ports : 1);

	return RTE_MIN(RTE_MAX(share, 2u * SN_MAC_WAYS), table_entries / 4);
}
