/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_policy_store.c — the liburcu QSBR publication of the policy table
 * the datapath reads (contract table in sn_policy.h), and the NBA
 * instances of its aggregates, which live one grace period past the last
 * table naming them.
 */
#define _LGPL_SOURCE
#include "sn_policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <urcu-qsbr.h>

#include "sn_common.h"
#include "sn_nba.h"

struct sn_policy_store {
	struct sn_policy *cur;   /* RCU-protected; main is the only writer */
	uint64_t next_gen;
	unsigned n_workers;      /* the NBA splits aggregates over these */
};

/* ---- publication ------------------------------------------------------- */

static struct sn_nba *nba_new(const struct sn_policy_aggregate *a, unsigned n_workers)
{
	return sn_nba_create(&(struct sn_nba_cfg){
		.n_cores = n_workers,
		.aggregate_bps = a->rate_bps / 8,
		.period_ns = (uint64_t)a->update_ms * 1000000ull });
}

/* Give every aggregate of n an NBA instance: the one of the same entry in
 * `old` (same name and period; its rate updated in place), or a new one.
 * On ENOMEM frees the new ones and returns -ENOMEM, n unchanged. */
static int nba_attach(struct sn_policy_store *st, const struct sn_policy *old,
		      struct sn_policy *n)
{
	bool reused[SN_POLICY_AGGS_MAX] = { false };

	for (unsigned i = 0; i < n->n_aggs; i++) {
		struct sn_policy_aggregate *a = &n->aggs[i];
		int j = old ? sn_policy_agg_find(old, a->name) : -1;

		if (j >= 0 && old->aggs[j].nba && old->aggs[j].update_ms == a->update_ms) {
			a->nba = old->aggs[j].nba;
			reused[i] = true;
			continue;
		}
		a->nba = nba_new(a, st->n_workers);
		if (!a->nba) {
			for (unsigned k = 0; k < i; k++)
				if (!reused[k])
					sn_nba_free(n->aggs[k].nba);
			for (unsigned k = 0; k < n->n_aggs; k++)
				n->aggs[k].nba = NULL;
			return -ENOMEM;
		}
	}
	for (unsigned i = 0; i < n->n_aggs; i++)
		if (reused[i])
			SN_VERIFY(sn_nba_set_aggregate(n->aggs[i].nba, n->aggs[i].rate_bps / 8) == 0);
	return 0;
}

/* Free the NBA instances of `old` that `n` does not carry on. */
static void nba_detach(const struct sn_policy *old, const struct sn_policy *n)
{
	for (unsigned i = 0; i < old->n_aggs; i++) {
		bool kept = false;

		for (unsigned k = 0; n && k < n->n_aggs; k++)
			kept |= n->aggs[k].nba == old->aggs[i].nba;
		if (!kept)
			sn_nba_free(old->aggs[i].nba);
	}
}

struct sn_policy_store *sn_policy_store_create(const struct sn_policy *initial)
{
	struct sn_policy_store *st = calloc(1, sizeof(*st));

	if (!st)
		goto fail;
	st->n_workers = 1;
	st->cur = malloc(sizeof(*st->cur));
	if (!st->cur)
		goto free_store;
	*st->cur = *initial;
	if (nba_attach(st, NULL, st->cur))
		goto free_cur;
	st->cur->gen = 1;
	st->next_gen = 2;
	return st;
free_cur:
	free(st->cur);
free_store:
	free(st);
fail:
	errno = ENOMEM;
	return NULL;
}

void sn_policy_store_destroy(struct sn_policy_store *st)
{
	if (!st)
		return;
	nba_detach(st->cur, NULL);
	free(st->cur);
	free(st);
}

const struct sn_policy *sn_policy_main(const struct sn_policy_store *st)
{
	return st->cur;
}

int sn_policy_publish(struct sn_policy_store *st, const struct sn_policy *p)
{
	struct sn_policy *n = malloc(sizeof(*n)), *old;

	if (!n)
		return -ENOMEM;
	*n = *p;
	if (nba_attach(st, st->cur, n)) {
		free(n);
		return -ENOMEM;
	}
	n->gen = st->next_gen++;
	/* Release (inside rcu_xchg_pointer) pairs with rcu_dereference() in
	 * sn_policy_current(): the worker sees a fully written table. */
	old = rcu_xchg_pointer(&st->cur, n);
	/* Every datapath thread passes a quiescent state per loop iteration;
	 * after this no one reads `old`, nor an NBA instance only it named. */
	synchronize_rcu();
	nba_detach(old, n);
	free(old);
	/* A changed aggregate rate marked its NBA dirty (set_aggregate): the
	 * next sn_policy_tick recomputes it at once, not after a period. */
	return 0;
}

int sn_policy_store_set_workers(struct sn_policy_store *st, unsigned n_workers)
{
	struct sn_policy *cur = st->cur;
	struct sn_nba *prev[SN_POLICY_AGGS_MAX];

	if (n_workers == 0 || n_workers > SN_NBA_MAX_CORES)
		return -EINVAL;
	for (unsigned i = 0; i < cur->n_aggs; i++) {
		prev[i] = cur->aggs[i].nba;
		cur->aggs[i].nba = NULL;
	}
	st->n_workers = n_workers;
	if (nba_attach(st, NULL, cur)) {
		for (unsigned i = 0; i < cur->n_aggs; i++)
			cur->aggs[i].nba = prev[i];
		return -ENOMEM;
	}
	for (unsigned i = 0; i < cur->n_aggs; i++)
		sn_nba_free(prev[i]);
	return 0;
}

unsigned sn_policy_store_workers(const struct sn_policy_store *st)
{
	return st->n_workers;
}

int sn_policy_tick(struct sn_policy_store *st, uint64_t now_ns)
{
	int n = 0;

	for (unsigned i = 0; i < st->cur->n_aggs; i++)
		n += sn_nba_update(st->cur->aggs[i].nba, now_ns) == 1;
	return n;
}

const struct sn_policy *sn_policy_current(struct sn_policy_store *st)
{
	return rcu_dereference(st->cur);
}
