/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_qfq_class.c — QFQ's control path: create / free, class add, change
 * and delete (a backlogged class is deactivated, changed and reactivated,
 * as Linux qfq_change_class does), queries and the self-check. The
 * algorithm and the datapath are in sn_qfq.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_qfq.h"
#include "sn_qfq_impl.h"
#include "sn_sched_impl.h"

static void list_remove(struct qfq_class **head, struct qfq_class *cl)
{
	struct qfq_class **pp = head;

	while (*pp != cl) {
		SN_VERIFY(*pp);
		pp = &(*pp)->next;
	}
	*pp = cl->next;
	cl->next = NULL;
}

/* Recompute every group's set from its definition (after a class left a
 * group other than through dequeue). V jumps to the smallest group start if
 * no group is eligible, as update_eligible does. */
static void rebuild_states(struct sn_qfq *q)
{
	int any = 0, eligible = 0;
	uint64_t minS = 0;

	memset(q->bitmaps, 0, sizeof(q->bitmaps));
	for (int i = 0; i < NGROUPS; i++) {
		struct qfq_group *g = &q->groups[i];

		if (!g->full_slots)
			continue;
		if (!sn_time_after(g->S, q->V))
			eligible = 1;
		if (!any || sn_time_before(g->S, minS))
			minS = g->S;
		any = 1;
	}
	if (any && !eligible)
		q->V = minS;
	for (int i = NGROUPS - 1; i >= 0; i--) {
		struct qfq_group *g = &q->groups[i];

		if (g->full_slots)
			q->bitmaps[qfq_calc_state(q, q->bitmaps, q->V, g)] |= 1u << g->index;
	}
}

/* Take a backlogged class out of its bucket list (queue untouched). */
static void deactivate(struct sn_qfq *q, struct qfq_class *cl)
{
	struct qfq_group *g = &q->groups[cl->grp];
	uint32_t pos = (uint32_t)((g->front + ((qfq_round_down(cl->S, g->slot_shift) - g->S) >>
					      g->slot_shift)) & (NSLOTS - 1));

	list_remove(&g->slots[pos], cl);
	if (!g->slots[pos])
		g->full_slots &= ~(1ULL << ((pos - g->front) & (NSLOTS - 1)));
	cl->F = cl->S;
	if (g->full_slots) {
		struct qfq_class *head = qfq_slot_scan(g);

		g->S = qfq_round_down(head->S, g->slot_shift);
		g->F = g->S + (2ULL << g->slot_shift);
	}
	rebuild_states(q);
}

struct sn_qfq *sn_qfq_create(uint32_t max_classes, uint32_t queue_len)
{
	struct sn_qfq *q;

	if (sn_sched_check_params(max_classes, queue_len)) {
		errno = EINVAL;
		return NULL;
	}
	q = aligned_alloc(SN_CACHE_LINE, sizeof(*q));
	if (!q)
		goto fail;
	memset(q, 0, sizeof(*q));
	q->classes = aligned_alloc(SN_CACHE_LINE, sizeof(*q->classes) * max_classes);
	if (!q->classes)
		goto free_q;
	memset(q->classes, 0, sizeof(*q->classes) * max_classes);
	q->weights = calloc(max_classes, sizeof(*q->weights));
	if (!q->weights)
		goto free_classes;
	q->max_classes = max_classes;
	q->queue_len = queue_len;
	q->iwsum = ONE_FP;
	for (uint32_t i = 0; i < NGROUPS; i++) {
		q->groups[i].index = i;
		q->groups[i].slots = q->slot_heads[i];
		q->groups[i].slot_shift = MIN_SLOT_SHIFT + i;
	}
	return q;

free_classes:
	free(q->classes);
free_q:
	free(q);
fail:
	errno = ENOMEM;
	return NULL;
}

void sn_qfq_free(struct sn_qfq *q)
{
	if (!q)
		return;
	for (uint32_t i = 0; i < q->max_classes; i++)
		sn_sched_q_fini(&q->classes[i].q);
	free(q->weights);
	free(q->classes);
	free(q);
}

static struct qfq_class *lookup(const struct sn_qfq *q, uint32_t id)
{
	if (id >= q->max_classes || !q->classes[id].q.lmax)
		return NULL;
	return &q->classes[id];
}

static void set_wsum(struct sn_qfq *q, uint32_t wsum)
{
	q->wsum = wsum;
	q->iwsum = wsum ? ONE_FP / wsum : ONE_FP;
}

int sn_qfq_class_add(struct sn_qfq *q, uint32_t id, uint32_t weight, uint32_t lmax)
{
	struct qfq_class *cl;
	uint32_t inv_w;
	int idx, rc;

	rc = sn_sched_check_class(q->max_classes, id, weight, lmax);
	if (rc)
		return rc;
	cl = &q->classes[id];
	if (cl->q.lmax)
		return -EEXIST;
	if ((uint64_t)q->wsum + weight > SN_SCHED_MAX_WSUM)
		return -ENOSPC;
	inv_w = (uint32_t)(ONE_FP / weight);
	idx = qfq_calc_index(inv_w, lmax);
	if (idx < 0)
		return idx;
	memset(cl, 0, sizeof(*cl));
	cl->id = id;
	rc = sn_sched_q_init(&cl->q, q->queue_len);
	if (rc)
		return rc;
	cl->inv_w = inv_w;
	q->weights[id] = weight;
	cl->q.lmax = lmax;
	cl->glmax = lmax;
	cl->grp = (uint32_t)idx;
	cl->S = cl->F = q->V;
	set_wsum(q, q->wsum + weight);
	return 0;
}

int sn_qfq_class_change(struct sn_qfq *q, uint32_t id, uint32_t weight, uint32_t lmax)
{
	struct qfq_class *cl = lookup(q, id);
	uint32_t inv_w;
	uint32_t head_len = 0;
	int idx, rc;

	if (!cl)
		return -ENOENT;
	rc = sn_sched_check_class(q->max_classes, id, weight, lmax);
	if (rc)
		return rc;
	if ((uint64_t)q->wsum - q->weights[id] + weight > SN_SCHED_MAX_WSUM)
		return -ENOSPC;
	inv_w = (uint32_t)(ONE_FP / weight);
	idx = qfq_calc_index(inv_w, lmax);
	if (idx < 0)
		return idx;
	cl->glmax = lmax;
	if (sn_sched_q_count(&cl->q)) {
		/* queued packets longer than the new lmax stay valid: size the
		 * group for them until the class next goes idle */
		for (uint32_t i = cl->q.head; i != cl->q.tail; i++)
			cl->glmax = SN_MAX(cl->glmax, cl->q.v[i & cl->q.mask].len);
		idx = qfq_calc_index(inv_w, cl->glmax);
		SN_VERIFY(idx >= 0);
		head_len = sn_sched_q_head_len(&cl->q);
		deactivate(q, cl);
	}
	set_wsum(q, q->wsum - q->weights[id] + weight);
	cl->inv_w = inv_w;
	q->weights[id] = weight;
	cl->q.lmax = lmax;
	cl->grp = (uint32_t)idx;
	if (head_len)
		qfq_activate(q, q->bitmaps, &q->V, cl, head_len);
	return 0;
}

int sn_qfq_class_del(struct sn_qfq *q, uint32_t id,
		     void (*drop)(void *item, uint32_t len, void *arg), void *arg)
{
	struct qfq_class *cl = lookup(q, id);

	if (!cl)
		return -ENOENT;
	if (sn_sched_q_count(&cl->q)) {
		deactivate(q, cl);
		q->backlog -= sn_sched_q_count(&cl->q);
		sn_sched_q_flush(&cl->q, drop, arg);
	}
	set_wsum(q, q->wsum - q->weights[id]);
	q->weights[id] = 0;
	sn_sched_q_fini(&cl->q);
	return 0;
}

/* The class leaves its bucket list, its queue is filtered, and what is
 * left activates again as a class that just got its first packet. */
uint32_t sn_qfq_class_purge(struct sn_qfq *q, uint32_t id,
			    bool (*take)(void *item, uint32_t len, void *arg), void *arg)
{
	struct qfq_class *cl = lookup(q, id);
	uint32_t n;

	if (!cl || !sn_sched_q_count(&cl->q))
		return 0;
	deactivate(q, cl);
	n = sn_sched_q_purge(&cl->q, take, arg);
	q->backlog -= n;
	if (sn_sched_q_count(&cl->q)) {
		if (cl->glmax != cl->q.lmax) {
			cl->glmax = cl->q.lmax;
			cl->grp = (uint32_t)qfq_calc_index(cl->inv_w, cl->glmax);
		}
		qfq_activate(q, q->bitmaps, &q->V, cl, sn_sched_q_head_len(&cl->q));
	}
	return n;
}

void sn_qfq_times(const struct sn_qfq *q, uint32_t id, uint64_t *V, uint64_t *S, uint64_t *F)
{
	const struct qfq_class *cl = lookup(q, id);

	*V = q->V;
	*S = cl ? cl->S : 0;
	*F = cl ? cl->F : 0;
}

int sn_qfq_peek_len(struct sn_qfq *q, uint32_t *len)
{
	struct qfq_group *g;

	if (!q->bitmaps[ER])
		return -ENOENT;
	g = qfq_first_group(q, q->bitmaps[ER]);
	*len = sn_sched_q_head_len(&g->slots[g->front]->q);
	return 0;
}

uint64_t sn_qfq_backlog(const struct sn_qfq *q)
{
	return q->backlog;
}

uint32_t sn_qfq_class_backlog(const struct sn_qfq *q, uint32_t id)
{
	const struct qfq_class *cl = lookup(q, id);

	return cl ? sn_sched_q_count(&cl->q) : 0;
}

uint64_t sn_qfq_clamps(const struct sn_qfq *q)
{
	return q->clamps;
}

#define CHECK(cond, ...) do {                                              \
	if (!(cond)) {                                                     \
		fprintf(stderr, "sn_qfq_check: %s: ", #cond);              \
		fprintf(stderr, __VA_ARGS__);                              \
		fputc('\n', stderr);                                       \
		return -EFAULT;                                            \
	}                                                                  \
} while (0)

int sn_qfq_check(const struct sn_qfq *q)
{
	uint64_t backlog = 0, wsum = 0, linked = 0, active = 0;
	uint32_t all = 0;

	for (int s = 0; s < NSTATES; s++) {
		CHECK(!(all & q->bitmaps[s]), "group in two sets (state %d)", s);
		all |= q->bitmaps[s];
	}
	for (uint32_t i = 0; i < NGROUPS; i++) {
		const struct qfq_group *g = &q->groups[i];
		int in_set = !!(all & (1u << i));

		CHECK(in_set == !!g->full_slots, "group %u set membership", i);
		if (g->full_slots) {
			int eligible = !!((q->bitmaps[ER] | q->bitmaps[EB]) & (1u << i));

			CHECK(g->full_slots & 1, "group %u front slot empty", i);
			CHECK(g->F == g->S + (2ULL << g->slot_shift), "group %u F", i);
			CHECK(g->S == qfq_round_down(g->S, g->slot_shift), "group %u S unaligned", i);
			/* QFQ's eligibility: E sets hold exactly the groups with
			 * S <= V (guards the make_eligible shortcut) */
			CHECK(eligible == !sn_time_after(g->S, q->V),
			      "group %u in an %s set with S %s V", i, eligible ? "eligible" : "ineligible",
			      eligible ? ">" : "<=");
		}
		if (q->bitmaps[ER] & (1u << i)) {
			uint32_t higher = qfq_mask_from(q->bitmaps[ER], i + 1);

			CHECK(!higher || !sn_time_after(g->F, q->groups[__builtin_ctz(higher)].F),
			      "ER group %u should be blocked", i);
		}
		for (uint32_t p = 0; p < NSLOTS; p++) {
			uint32_t off = (p - g->front) & (NSLOTS - 1);
			int full = !!(g->full_slots & (1ULL << off));
			uint64_t len = 0;

			CHECK(full == !!g->slots[p], "group %u slot %u bitmap", i, p);
			for (const struct qfq_class *cl = g->slots[p]; cl; cl = cl->next) {
				uint64_t rs = qfq_round_down(cl->S, g->slot_shift);

				CHECK(++len <= q->max_classes, "group %u slot %u list cycles", i, p);
				CHECK(cl->grp == i, "class in wrong group %u", i);
				CHECK(!sn_time_before(rs, g->S) &&
				      ((rs - g->S) >> g->slot_shift) == off,
				      "class S outside its slot (group %u slot %u)", i, p);
				CHECK(sn_sched_q_count(&cl->q) > 0, "empty class linked");
				CHECK(cl->F == cl->S + (uint64_t)sn_sched_q_head_len(&cl->q) * cl->inv_w,
				      "class F != S + len/w");
				linked++;
			}
		}
	}
	for (uint32_t id = 0; id < q->max_classes; id++) {
		const struct qfq_class *cl = &q->classes[id];

		if (!cl->q.lmax)
			continue;
		CHECK(cl->id == id, "class %u id", id);
		CHECK(cl->inv_w == ONE_FP / q->weights[id], "class %u inv_w", id);
		CHECK(cl->glmax >= cl->q.lmax, "class %u glmax", id);
		CHECK((int)cl->grp == qfq_calc_index(cl->inv_w, cl->glmax), "class %u group", id);
		for (uint32_t k = cl->q.head; k != cl->q.tail; k++)
			CHECK(cl->q.v[k & cl->q.mask].len <= cl->glmax,
			      "class %u queues a packet longer than its group allows", id);
		CHECK(sn_sched_q_count(&cl->q) <= cl->q.mask + 1, "class %u queue count", id);
		backlog += sn_sched_q_count(&cl->q);
		wsum += q->weights[id];
		active += sn_sched_q_count(&cl->q) > 0;
	}
	CHECK(backlog == q->backlog, "backlog %llu != %llu", (unsigned long long)backlog,
	      (unsigned long long)q->backlog);
	CHECK(linked == active, "linked %llu != active %llu", (unsigned long long)linked,
	      (unsigned long long)active);
	CHECK(wsum == q->wsum && wsum <= SN_SCHED_MAX_WSUM, "wsum");
	CHECK(!!q->bitmaps[ER] == !!q->backlog, "ER empty with backlog (or not)");
	return 0;
}
