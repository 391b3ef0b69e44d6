/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_qfq_impl.h — QFQ's state and its per-packet steps, shared by the
 * datapath (sn_qfq.c) and the control path (sn_qfq_class.c). Internal:
 * included by those two files only. The algorithm and its fixed-point
 * units are described in sn_qfq.c.
 */
#ifndef SN_QFQ_IMPL_H
#define SN_QFQ_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sn_common.h"
#include "sn_qfq.h"
#include "sn_sched_impl.h"

#define FRAC_BITS      30
#define ONE_FP         (1ULL << FRAC_BITS)
#define MIN_SLOT_SHIFT 20  /* log2(64 B * 2^30 / 2^16) */
#define NGROUPS        27  /* shifts 20 .. 46 = log2(2^16 B * 2^30 / 1) */
#define NSLOTS         64  /* bucket-list length; full_slots is a u64 */

/* Group sets, one u32 bitmap each: IR = ER|1, EB = ER|2, IB = IR|2. */
enum { ER, IR, EB, IB, NSTATES };

static_assert(NGROUPS < 32, "group masks are u32 and index + 1 < 32");

struct qfq_class {
	/* One cache line: everything enqueue / dequeue touch. */
	struct sn_sched_q q;         /* q.lmax != 0 <=> class exists */
	uint64_t S;
	uint64_t F;
	struct qfq_class *next;      /* bucket list of the slot (singly linked) */
	uint32_t glmax;              /* length the group is sized for, >= q.lmax */
	uint32_t id;                 /* own index in sn_qfq.classes */
	uint32_t inv_w;              /* ONE_FP / weight, <= 2^30 */
	uint32_t grp;                /* group index */
} SN_CACHE_ALIGNED;

/* One line per class; weights (control path only) live in sn_qfq.weights. */
static_assert(sizeof(struct qfq_class) == SN_CACHE_LINE, "qfq_class is one line");

/* Group headers are one line each and contiguous (27 lines), so the F of
 * the next ER group (calc_state, unblock) is a cheap, usually cached read;
 * the bucket-list heads live apart in sn_qfq.slot_heads. */
struct qfq_group {
	uint64_t S;
	uint64_t F;
	uint64_t full_slots;         /* bit j: slot (front + j) % NSLOTS non-empty */
	struct qfq_class **slots;    /* NSLOTS heads: sn_qfq.slot_heads[index] */
	uint32_t front;
	uint32_t slot_shift;
	uint32_t index;
} SN_CACHE_ALIGNED;

static_assert(sizeof(struct qfq_group) == SN_CACHE_LINE, "qfq_group is one line");

struct sn_qfq {
	/* First cache line: every enqueue / dequeue. */
	uint64_t V;
	uint64_t iwsum;              /* ONE_FP / wsum */
	uint32_t bitmaps[NSTATES];
	uint64_t backlog;
	struct qfq_class *classes;
	uint32_t max_classes;
	uint32_t queue_len;
	/* Read mostly / control path. */
	uint32_t *weights;
	uint32_t wsum;
	uint64_t clamps;
	struct qfq_group groups[NGROUPS];
	struct qfq_class *slot_heads[NGROUPS][NSLOTS];
};

static_assert(offsetof(struct sn_qfq, queue_len) < SN_CACHE_LINE, "sn_qfq hot line");

/* The per-packet helpers are forced inline: enqueue and dequeue are each
 * compiled as one function, and a call would cost more than most bodies. */
#define QFQ_INLINE static inline __attribute__((always_inline))

QFQ_INLINE uint64_t qfq_round_down(uint64_t ts, uint32_t shift)
{
	return ts >> shift << shift;
}

/* Bits of bitmap at positions >= from (from <= NGROUPS < 32). */
QFQ_INLINE uint32_t qfq_mask_from(uint32_t bitmap, uint32_t from)
{
	return bitmap & ~((1u << from) - 1);
}

QFQ_INLINE struct qfq_group *qfq_first_group(struct sn_qfq *q, uint32_t bitmap)
{
	return &q->groups[__builtin_ctz(bitmap)];
}

/* Move the groups in mask from set src to set dst, for two (src, dst)
 * pairs at once: each word is loaded and stored once. */
QFQ_INLINE void qfq_move_groups2(uint32_t *bm, uint32_t mask, int src1, int dst1,
				 int src2, int dst2)
{
	uint32_t s1 = bm[src1], s2 = bm[src2];

	bm[dst1] |= s1 & mask;
	bm[dst2] |= s2 & mask;
	bm[src1] = s1 & ~mask;
	bm[src2] = s2 & ~mask;
}

/* Group index for a class: smallest i with lmax * inv_w <= 2^(20 + i).
 * Returns -EINVAL if that leaves the group array. */
static inline int qfq_calc_index(uint64_t inv_w, uint32_t lmax)
{
	uint64_t size = (uint64_t)lmax * inv_w;
	int idx;

	if (size <= (1ULL << MIN_SLOT_SHIFT))
		return 0;
	idx = 64 - __builtin_clzll(size - 1) - MIN_SLOT_SHIFT;
	return idx < NGROUPS ? idx : -EINVAL;
}

/* The set g belongs in, given the sets bm and virtual time V. */
QFQ_INLINE int qfq_calc_state(struct sn_qfq *q, const uint32_t *bm, uint64_t V,
			      const struct qfq_group *g)
{
	int state = sn_time_after(g->S, V) ? IR : ER;
	uint32_t mask = qfq_mask_from(bm[ER], g->index);

	if (mask && sn_time_after(g->F, qfq_first_group(q, mask)->F))
		state |= EB;
	return state;
}

/* Insert cl at its rounded start; clamp a start beyond the bucket list.
 * Slots are singly linked, pushed and popped at the head: the datapath
 * never touches a second class's cache line. */
QFQ_INLINE void qfq_slot_insert(struct sn_qfq *q, struct qfq_group *g,
				struct qfq_class *cl, uint64_t roundedS)
{
	uint64_t slot = (roundedS - g->S) >> g->slot_shift;
	struct qfq_class **head;

	if (sn_unlikely(slot > NSLOTS - 2)) {
		uint64_t delta = roundedS - g->S - ((uint64_t)(NSLOTS - 2) << g->slot_shift);

		cl->S -= delta;
		cl->F -= delta;
		slot = NSLOTS - 2;
		q->clamps++;
	}
	head = &g->slots[(g->front + slot) & (NSLOTS - 1)];
	cl->next = *head;
	*head = cl;
	g->full_slots |= 1ULL << slot;
}

QFQ_INLINE void qfq_front_slot_remove(struct qfq_group *g)
{
	struct qfq_class *cl = g->slots[g->front];

	g->slots[g->front] = cl->next;
	if (!cl->next)
		g->full_slots &= ~1ULL;
	cl->next = NULL;
}

/* Advance front to the first non-empty slot; its head class, or NULL. */
QFQ_INLINE struct qfq_class *qfq_slot_scan(struct qfq_group *g)
{
	uint32_t i;

	if (!g->full_slots)
		return NULL;
	i = (uint32_t)__builtin_ctzll(g->full_slots);
	g->front = (g->front + i) & (NSLOTS - 1);
	g->full_slots >>= i;
	return g->slots[g->front];
}

/* Groups whose S crossed V since old_V become eligible (QFQ §4: a group of
 * index i can only change eligibility when V crosses a multiple of sigma_i).
 * Branch-free: V crosses some 2^20 boundary on most dequeues, in a pattern
 * no predictor learns; a zero mask makes the moves no-ops. */
QFQ_INLINE void qfq_make_eligible(uint32_t *bm, uint64_t V, uint64_t old_V)
{
	uint64_t x = (V ^ old_V) >> MIN_SLOT_SHIFT;
	/* bits 0 .. fls(x)-1; 2 << 63 wraps to 0, giving all ones */
	uint64_t smear = (2ULL << (63 - __builtin_clzll(x | 1))) - 1;
	uint32_t mask = (uint32_t)(smear & -(uint64_t)(x != 0));

	qfq_move_groups2(bm, mask, IR, ER, IB, EB);
}

/* er_known: the caller knows ER is not empty (V cannot jump). */
QFQ_INLINE void qfq_update_eligible(struct sn_qfq *q, uint32_t *bm, uint64_t *V,
				    uint64_t old_V, int er_known)
{
	uint32_t ineligible = bm[IR] | bm[IB];

	if (ineligible) {
		if (!er_known && !bm[ER]) {
			struct qfq_group *g = qfq_first_group(q, ineligible);

			if (sn_time_after(g->S, *V))
				*V = g->S;
		}
		/* nothing moves unless V crossed a multiple of the smallest
		 * slot size among the ineligible groups: a cheap, mostly
		 * not-taken test in front of the mask arithmetic */
		if ((*V ^ old_V) >> (MIN_SLOT_SHIFT + __builtin_ctz(ineligible)))
			qfq_make_eligible(bm, *V, old_V);
	}
}

/* Group `index` moved its F forward from old_F: groups it blocked may now
 * be ready, unless a higher ER group still blocks them. */
QFQ_INLINE void qfq_unblock_groups(struct sn_qfq *q, uint32_t *bm, uint32_t index,
				   uint64_t old_F)
{
	uint32_t mask = qfq_mask_from(bm[ER], index + 1);

	if (mask && !sn_time_after(qfq_first_group(q, mask)->F, old_F))
		return;
	mask = (1u << index) - 1;
	qfq_move_groups2(bm, mask, EB, ER, IB, IR);
}

/* Start time of a class becoming backlogged (QFQ's update_start). */
QFQ_INLINE void qfq_update_start(struct sn_qfq *q, const uint32_t *bm, uint64_t V,
				 struct qfq_class *cl)
{
	const struct qfq_group *g = &q->groups[cl->grp];
	uint32_t shift = g->slot_shift;
	uint64_t roundedF = qfq_round_down(cl->F, shift);
	uint64_t limit = qfq_round_down(V, shift) + (1ULL << shift);

	if (!sn_time_after(cl->F, V) || sn_time_after(roundedF, limit)) {
		/* stale finish time */
		uint32_t mask = qfq_mask_from(bm[ER], g->index);

		if (mask) {
			struct qfq_group *next = qfq_first_group(q, mask);

			if (sn_time_after(roundedF, next->F)) {
				cl->S = sn_time_after(limit, next->F) ? next->F : limit;
				return;
			}
		}
		cl->S = V;
	} else {
		cl->S = cl->F;
	}
}

/* cl just became backlogged with a head packet of len bytes: stamp it and
 * put it in its group's bucket list, updating the group's S/F and set.
 * bm / *V are the scheduler's sets and virtual time. */
QFQ_INLINE void qfq_activate(struct sn_qfq *q, uint32_t *bm, uint64_t *V,
				struct qfq_class *cl, uint32_t len)
{
	struct qfq_group *g = &q->groups[cl->grp];
	uint32_t bit = 1u << g->index;
	uint64_t roundedS;

	qfq_update_start(q, bm, *V, cl);
	cl->F = cl->S + (uint64_t)len * cl->inv_w;
	roundedS = qfq_round_down(cl->S, g->slot_shift);

	if (g->full_slots) {
		uint64_t i, room;

		if (!sn_time_after(g->S, cl->S))
			goto insert;
		/* cl starts before the group: rotate the bucket list back,
		 * keeping the last occupied slot inside it. */
		i = (g->S - roundedS) >> g->slot_shift;
		room = NSLOTS - 1 - (63 - __builtin_clzll(g->full_slots));
		if (sn_unlikely(i > room)) {
			uint64_t delta = (i - room) << g->slot_shift;

			cl->S += delta;
			cl->F += delta;
			roundedS += delta;
			i = room;
			q->clamps++;
			if (!i)
				goto insert;
		}
		g->full_slots <<= i;
		g->front = (uint32_t)((g->front - i) & (NSLOTS - 1));
		for (int s = 0; s < NSTATES; s++)
			bm[s] &= ~bit;
	} else if (!bm[ER] && sn_time_after(roundedS, *V)) {
		*V = roundedS;
	}
	g->S = roundedS;
	g->F = roundedS + (2ULL << g->slot_shift);
	bm[qfq_calc_state(q, bm, *V, g)] |= bit;
insert:
	qfq_slot_insert(q, g, cl, roundedS);
}

#endif /* SN_QFQ_IMPL_H */
