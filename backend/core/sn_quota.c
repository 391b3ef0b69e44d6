/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_quota.c — per-owner budgets on one shared pool (contract: sn_quota.h). */
#include "sn_quota.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"

/* One owner per cache line: takes on one port never bounce another's. */
struct owner {
	_Atomic uint64_t word;      /* min << 32 | used */
	_Atomic uint32_t max;
	uint32_t pad_;
	_Atomic uint64_t hits, refused;
	char pad2_[64 - 32];
};
_Static_assert(sizeof(struct owner) == 64, "one owner per cache line");

struct sn_quota {
	uint32_t n, total;
	_Atomic uint32_t reserved;   /* sum of the owners' min (written by set only) */
	char pad_[64 - 12];
	_Atomic uint32_t shared;     /* sum of the owners' excess */
	char pad2_[64 - 4];
	struct owner o[];
};

static inline uint32_t w_used(uint64_t w) { return (uint32_t)w; }
static inline uint32_t w_min(uint64_t w) { return (uint32_t)(w >> 32); }
static inline uint64_t w_pack(uint32_t min, uint32_t used) { return (uint64_t)min << 32 | used; }
static inline uint32_t excess(uint32_t used, uint32_t min) { return used > min ? used - min : 0; }

static void die(const char *what, uint32_t owner, uint32_t a, uint32_t b)
{
	fprintf(stderr, "sn_quota: %s (owner %u: %u, %u) at %s:%d\n", what, owner, a, b,
		__FILE__, __LINE__);
	abort();
}

struct sn_quota *sn_quota_create(uint32_t owners, uint32_t total)
{
	if (owners == 0 || owners > SN_QUOTA_OWNERS_MAX || total == 0 || total > SN_QUOTA_TOTAL_MAX) {
		errno = EINVAL;
		return NULL;
	}
	size_t sz = sizeof(struct sn_quota) + (size_t)owners * sizeof(struct owner);
	struct sn_quota *q = aligned_alloc(64, (sz + 63) & ~(size_t)63);
	if (q == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	memset(q, 0, sz);
	q->n = owners;
	q->total = total;
	for (uint32_t i = 0; i < owners; i++)
		atomic_init(&q->o[i].max, total);
	return q;
}

void sn_quota_free(struct sn_quota *q)
{
	free(q);
}

static void give(struct sn_quota *q, uint32_t owner, uint32_t n)
{
	struct owner *o = &q->o[owner];
	uint64_t w = atomic_load_explicit(&o->word, memory_order_relaxed);
	uint32_t used, min;
	do {
		used = w_used(w);
		min = w_min(w);
		if (n > used)
			die("give of more than held", owner, n, used);
	} while (!atomic_compare_exchange_weak_explicit(&o->word, &w, w_pack(min, used - n),
							memory_order_relaxed,
							memory_order_relaxed));
	uint32_t d = excess(used, min) - excess(used - n, min);
	if (d)
		atomic_fetch_sub_explicit(&q->shared, d, memory_order_relaxed);
}

void sn_quota_give(struct sn_quota *q, uint32_t owner, uint32_t n)
{
	if (owner >= q->n)
		die("owner out of range", owner, n, q->n);
	if (n)
		give(q, owner, n);
}

uint32_t sn_quota_take(struct sn_quota *q, uint32_t owner, uint32_t want)
{
	if (want == 0)
		return 0;
	if (owner >= q->n)
		die("owner out of range", owner, want, q->n);
	struct owner *o = &q->o[owner];
	uint64_t w = atomic_load_explicit(&o->word, memory_order_relaxed);
	uint32_t used, min, g;
	for (;;) {
		uint32_t max = atomic_load_explicit(&o->max, memory_order_relaxed);
		used = w_used(w);
		min = w_min(w);
		g = used >= max ? 0 : SN_MIN(want, max - used);
		if (g == 0)
			break;
		if (atomic_compare_exchange_weak_explicit(&o->word, &w, w_pack(min, used + g),
							  memory_order_relaxed,
							  memory_order_relaxed))
			break;
	}
	uint32_t d = g ? excess(used + g, min) - excess(used, min) : 0;
	if (d) {
		/* seq_cst: pairs with sn_quota_set's store of `reserved` and
		 * load of `shared` (a raise of a reserve against this take). */
		uint32_t s = atomic_fetch_add_explicit(&q->shared, d, memory_order_seq_cst) + d;
		uint32_t res = atomic_load_explicit(&q->reserved, memory_order_seq_cst);
		uint32_t lim = q->total - SN_MIN(res, q->total);
		if (s > lim) {
			uint32_t over = SN_MIN(d, s - lim);
			give(q, owner, over);
			g -= over;
		}
	}
	if (g < want) {
		atomic_fetch_add_explicit(&o->hits, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&o->refused, want - g, memory_order_relaxed);
	}
	return g;
}

int sn_quota_set(struct sn_quota *q, uint32_t owner, uint32_t min, uint32_t max)
{
	if (owner >= q->n || min > max || max > q->total)
		return -EINVAL;
	struct owner *o = &q->o[owner];
	uint32_t res = atomic_load_explicit(&q->reserved, memory_order_relaxed);
	uint32_t old_min = w_min(atomic_load_explicit(&o->word, memory_order_relaxed));
	uint64_t nres = (uint64_t)res - old_min + min;
	if (nres > q->total)
		return -ENOSPC;
	/* A larger sum of reserves shrinks the shared part before the
	 * reserve exists, a smaller one after: takers never see a shared
	 * part bigger than the pool allows. A larger one must also fit
	 * beside the excess the owners hold now (reserved + shared <= total,
	 * what keeps every grant inside the pool), this owner's own excess
	 * shrinking by the raise: else it is undone. The seq_cst store of
	 * `reserved` and load of `shared` pair with the seq_cst add to
	 * `shared` and load of `reserved` in sn_quota_take: either that take
	 * sees the new reserve and returns its overshoot, or this check sees
	 * the take's excess. */
	if (nres > res) {
		atomic_store_explicit(&q->reserved, (uint32_t)nres, memory_order_seq_cst);
		uint32_t used0 = w_used(atomic_load_explicit(&o->word, memory_order_relaxed));
		uint32_t sh = atomic_load_explicit(&q->shared, memory_order_seq_cst);
		uint32_t own = excess(used0, old_min) - excess(used0, min);
		if (nres + sh - SN_MIN(own, sh) > q->total) {
			atomic_store_explicit(&q->reserved, res, memory_order_relaxed);
			return -ENOSPC;
		}
	}
	atomic_store_explicit(&o->max, max, memory_order_relaxed);
	uint64_t w = atomic_load_explicit(&o->word, memory_order_relaxed);
	uint32_t used;
	do {
		used = w_used(w);
	} while (!atomic_compare_exchange_weak_explicit(&o->word, &w, w_pack(min, used),
							memory_order_relaxed,
							memory_order_relaxed));
	uint32_t e0 = excess(used, old_min), e1 = excess(used, min);
	if (e1 > e0)
		atomic_fetch_add_explicit(&q->shared, e1 - e0, memory_order_relaxed);
	else if (e0 > e1)
		atomic_fetch_sub_explicit(&q->shared, e0 - e1, memory_order_relaxed);
	if (nres < res)
		atomic_store_explicit(&q->reserved, (uint32_t)nres, memory_order_relaxed);
	return 0;
}

uint32_t sn_quota_used(const struct sn_quota *q, uint32_t owner)
{
	return owner < q->n ? w_used(atomic_load_explicit(&q->o[owner].word, memory_order_relaxed)) : 0;
}

uint32_t sn_quota_room(const struct sn_quota *q, uint32_t owner)
{
	if (owner >= q->n)
		return 0;
	const struct owner *o = &q->o[owner];
	uint64_t w = atomic_load_explicit(&o->word, memory_order_relaxed);
	uint32_t used = w_used(w), min = w_min(w);
	uint32_t max = atomic_load_explicit(&o->max, memory_order_relaxed);
	if (used >= max)
		return 0;
	uint32_t res = atomic_load_explicit(&q->reserved, memory_order_relaxed);
	uint32_t lim = q->total - SN_MIN(res, q->total);
	uint32_t sh = atomic_load_explicit(&q->shared, memory_order_relaxed);
	uint64_t room = (min > used ? min - used : 0) + (uint64_t)(sh < lim ? lim - sh : 0);
	return (uint32_t)SN_MIN(room, (uint64_t)(max - used));
}

void sn_quota_owner_stats(const struct sn_quota *q, uint32_t owner,
			  struct sn_quota_owner_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (owner >= q->n)
		return;
	const struct owner *o = &q->o[owner];
	uint64_t w = atomic_load_explicit(&o->word, memory_order_relaxed);
	out->used = w_used(w);
	out->min = w_min(w);
	out->max = atomic_load_explicit(&o->max, memory_order_relaxed);
	out->hits = atomic_load_explicit(&o->hits, memory_order_relaxed);
	out->refused = atomic_load_explicit(&o->refused, memory_order_relaxed);
}

uint32_t sn_quota_total(const struct sn_quota *q) { return q->total; }
uint32_t sn_quota_owners(const struct sn_quota *q) { return q->n; }

uint32_t sn_quota_reserved(const struct sn_quota *q)
{
	return atomic_load_explicit(&q->reserved, memory_order_relaxed);
}

uint32_t sn_quota_shared_used(const struct sn_quota *q)
{
	return atomic_load_explicit(&q->shared, memory_order_relaxed);
}
