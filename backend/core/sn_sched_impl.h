/* sn_sched_impl.h — pieces shared by the scheduler algorithms behind
 * sn_sched.h (sn_qfq.c, sn_drr.c, sn_fifo.c). Internal: not part of the
 * public API.
 *
 * - sn_sched_check_class(): the one validation of class parameters, so
 *   every algorithm rejects the same inputs with the same errno.
 * - struct sn_sched_q: a per-class FIFO of (item, len) in a power-of-two
 *   ring. Single-threaded like the schedulers that own it: no barriers.
 * - QFQ's state layout and per-packet bodies (qfq_*, sn_qfq_*_inl), as
 *   inline functions so that sn_sched.c's dispatch compiles the whole QFQ
 *   enqueue / dequeue into itself: no call, no prologue, and the compiler
 *   sees the group-set bitmaps as locals (rte_ring_core.h / *_pvt.h style).
 *   The algorithm, its paper and its invariants are described in sn_qfq.c,
 *   which holds the control path and calls the same bodies.
 */
#ifndef SN_SCHED_IMPL_H
#define SN_SCHED_IMPL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_sched.h"

#define SN_SCHED_MIN_LMAX 64u

/* Largest per-class ring accepted (items); keeps index math in 32 bits. */
#define SN_SCHED_MAX_QUEUE_LEN (1u << 24)

static inline int sn_sched_check_class(uint32_t max_classes, uint32_t id,
				       uint32_t weight, uint32_t lmax)
{
	if (id >= max_classes || weight < 1 || weight > SN_SCHED_MAX_WEIGHT ||
	    lmax < SN_SCHED_MIN_LMAX || lmax > SN_SCHED_MAX_LMAX)
		return -EINVAL;
	return 0;
}

static inline int sn_sched_check_params(uint32_t max_classes, uint32_t queue_len)
{
	if (max_classes == 0 || max_classes > (1u << 24) || queue_len == 0 ||
	    queue_len > SN_SCHED_MAX_QUEUE_LEN)
		return -EINVAL;
	return 0;
}

struct sn_sched_qent {
	void *item;
	uint32_t len;
};

/* head counts dequeues, tail counts enqueues; both wrap freely (u32).
 * lmax (the class's admission limit, 0 = no class) lives here so that an
 * enqueue touches one cache line of class state. */
struct sn_sched_q {
	struct sn_sched_qent *v;
	uint32_t head;
	uint32_t tail;
	uint32_t mask;
	uint32_t lmax;
};

static_assert(sizeof(struct sn_sched_q) == 24, "sn_sched_q layout");

static inline int sn_sched_q_init(struct sn_sched_q *q, uint32_t queue_len)
{
	uint32_t cap = (uint32_t)sn_align_pow2(queue_len);

	q->v = calloc(cap, sizeof(*q->v));
	if (!q->v)
		return -ENOMEM;
	q->head = q->tail = 0;
	q->mask = cap - 1;
	q->lmax = 0;
	return 0;
}

static inline void sn_sched_q_fini(struct sn_sched_q *q)
{
	free(q->v);
	q->v = NULL;
	q->lmax = 0;
}

static inline uint32_t sn_sched_q_count(const struct sn_sched_q *q)
{
	return q->tail - q->head;
}

static inline int sn_sched_q_full(const struct sn_sched_q *q)
{
	return q->tail - q->head > q->mask;
}

static inline void sn_sched_q_push(struct sn_sched_q *q, void *item, uint32_t len)
{
	struct sn_sched_qent *e = &q->v[q->tail & q->mask];

	e->item = item;
	e->len = len;
	q->tail++;
}

/* Caller guarantees the queue is not empty. */
static inline uint32_t sn_sched_q_head_len(const struct sn_sched_q *q)
{
	return q->v[q->head & q->mask].len;
}

static inline void *sn_sched_q_pop(struct sn_sched_q *q, uint32_t *len)
{
	struct sn_sched_qent *e = &q->v[q->head & q->mask];

	q->head++;
	*len = e->len;
	return e->item;
}

/* Hand every queued item to drop (may be NULL), leaving the queue empty. */
static inline void sn_sched_q_flush(struct sn_sched_q *q,
				    void (*drop)(void *item, uint32_t len, void *arg),
				    void *arg)
{
	while (q->head != q->tail) {
		uint32_t len;
		void *item = sn_sched_q_pop(q, &len);

		if (drop)
			drop(item, len, arg);
	}
}

/* ---- QFQ: state layout and per-packet bodies (algorithm: sn_qfq.c) ---- */

#define QFQ_FRAC_BITS      30
#define QFQ_ONE_FP         (1ULL << QFQ_FRAC_BITS)
#define QFQ_MIN_SLOT_SHIFT 20  /* log2(64 B * 2^30 / 2^16) */
#define QFQ_NGROUPS        27  /* shifts 20 .. 46 = log2(2^16 B * 2^30 / 1) */
#define QFQ_NSLOTS         64  /* bucket-list length; full_slots is a u64 */

/* Group sets, one u32 bitmap each: IR = ER|1, EB = ER|2, IB = IR|2. */
enum { QFQ_ER, QFQ_IR, QFQ_EB, QFQ_IB, QFQ_NSTATES };

static_assert(QFQ_NGROUPS < 32, "group masks are u32 and index + 1 < 32");

struct qfq_class {
	/* One cache line: everything enqueue / dequeue touch. */
	struct sn_sched_q q;         /* q.lmax != 0 <=> class exists */
	uint64_t S;
	uint64_t F;
	struct qfq_class *next;      /* bucket list of the slot (singly linked) */
	uint32_t glmax;              /* length the group is sized for, >= q.lmax */
	uint32_t id;                 /* own index in sn_qfq.classes */
	uint32_t inv_w;              /* QFQ_ONE_FP / weight, <= 2^30 */
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
	struct qfq_class **slots;    /* QFQ_NSLOTS heads: sn_qfq.slot_heads[index] */
	uint32_t front;
	uint32_t slot_shift;
	uint32_t index;
} SN_CACHE_ALIGNED;

static_assert(sizeof(struct qfq_group) == SN_CACHE_LINE, "qfq_group is one line");

struct sn_qfq {
	/* First cache line: every enqueue / dequeue. */
	uint64_t V;
	uint64_t iwsum;              /* QFQ_ONE_FP / wsum */
	uint32_t bitmaps[QFQ_NSTATES];
	uint64_t backlog;
	struct qfq_class *classes;
	uint32_t max_classes;
	uint32_t queue_len;
	/* Read mostly / control path. */
	uint32_t *weights;
	uint32_t wsum;
	uint64_t clamps;
	struct qfq_group groups[QFQ_NGROUPS];
	struct qfq_class *slot_heads[QFQ_NGROUPS][QFQ_NSLOTS];
};

static_assert(offsetof(struct sn_qfq, queue_len) < SN_CACHE_LINE, "sn_qfq hot line");

/* Tiny helpers are forced inline: the per-packet path is their only
 * reason to exist, and a call would cost more than their bodies. */
#define QFQ_INLINE static inline __attribute__((always_inline))

QFQ_INLINE uint64_t qfq_round_down(uint64_t ts, uint32_t shift)
{
	return ts >> shift << shift;
}

/* Bits of bitmap at positions >= from (from <= QFQ_NGROUPS < 32). */
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

	if (size <= (1ULL << QFQ_MIN_SLOT_SHIFT))
		return 0;
	idx = 64 - __builtin_clzll(size - 1) - QFQ_MIN_SLOT_SHIFT;
	return idx < QFQ_NGROUPS ? idx : -EINVAL;
}

/* The set g belongs in, given the sets bm and virtual time V. */
QFQ_INLINE int qfq_calc_state(struct sn_qfq *q, const uint32_t *bm, uint64_t V,
			      const struct qfq_group *g)
{
	int state = sn_time_after(g->S, V) ? QFQ_IR : QFQ_ER;
	uint32_t mask = qfq_mask_from(bm[QFQ_ER], g->index);

	if (mask && sn_time_after(g->F, qfq_first_group(q, mask)->F))
		state |= QFQ_EB;
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

	if (sn_unlikely(slot > QFQ_NSLOTS - 2)) {
		uint64_t delta = roundedS - g->S - ((uint64_t)(QFQ_NSLOTS - 2) << g->slot_shift);

		cl->S -= delta;
		cl->F -= delta;
		slot = QFQ_NSLOTS - 2;
		q->clamps++;
	}
	head = &g->slots[(g->front + slot) & (QFQ_NSLOTS - 1)];
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
	g->front = (g->front + i) & (QFQ_NSLOTS - 1);
	g->full_slots >>= i;
	return g->slots[g->front];
}

/* Groups whose S crossed V since old_V become eligible (QFQ §4: a group of
 * index i can only change eligibility when V crosses a multiple of sigma_i).
 * Branch-free: V crosses some 2^20 boundary on most dequeues, in a pattern
 * no predictor learns; a zero mask makes the moves no-ops. */
QFQ_INLINE void qfq_make_eligible(uint32_t *bm, uint64_t V, uint64_t old_V)
{
	uint64_t x = (V ^ old_V) >> QFQ_MIN_SLOT_SHIFT;
	/* bits 0 .. fls(x)-1; 2 << 63 wraps to 0, giving all ones */
	uint64_t smear = (2ULL << (63 - __builtin_clzll(x | 1))) - 1;
	uint32_t mask = (uint32_t)(smear & -(uint64_t)(x != 0));

	qfq_move_groups2(bm, mask, QFQ_IR, QFQ_ER, QFQ_IB, QFQ_EB);
}

QFQ_INLINE void qfq_update_eligible(struct sn_qfq *q, uint32_t *bm, uint64_t *V,
				    uint64_t old_V)
{
	uint32_t ineligible = bm[QFQ_IR] | bm[QFQ_IB];

	if (ineligible) {
		if (!bm[QFQ_ER]) {
			struct qfq_group *g = qfq_first_group(q, ineligible);

			if (sn_time_after(g->S, *V))
				*V = g->S;
		}
		qfq_make_eligible(bm, *V, old_V);
	}
}

/* Group `index` moved its F forward from old_F: groups it blocked may now
 * be ready, unless a higher ER group still blocks them. */
QFQ_INLINE void qfq_unblock_groups(struct sn_qfq *q, uint32_t *bm, uint32_t index,
				   uint64_t old_F)
{
	uint32_t mask = qfq_mask_from(bm[QFQ_ER], index + 1);

	if (mask && !sn_time_after(qfq_first_group(q, mask)->F, old_F))
		return;
	mask = (1u << index) - 1;
	qfq_move_groups2(bm, mask, QFQ_EB, QFQ_ER, QFQ_IB, QFQ_IR);
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
		uint32_t mask = qfq_mask_from(bm[QFQ_ER], g->index);

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
 * bm / *V are the scheduler's sets and virtual time (or local copies). */
static inline void qfq_activate(struct sn_qfq *q, uint32_t *bm, uint64_t *V,
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
		room = QFQ_NSLOTS - 1 - (63 - __builtin_clzll(g->full_slots));
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
		g->front = (uint32_t)((g->front - i) & (QFQ_NSLOTS - 1));
		for (int s = 0; s < QFQ_NSTATES; s++)
			bm[s] &= ~bit;
	} else if (!bm[QFQ_ER] && sn_time_after(roundedS, *V)) {
		*V = roundedS;
	}
	g->S = roundedS;
	g->F = roundedS + (2ULL << g->slot_shift);
	bm[qfq_calc_state(q, bm, *V, g)] |= bit;
insert:
	qfq_slot_insert(q, g, cl, roundedS);
}

/* Enqueue's slow half: cl's queue just went from empty to one packet. */
static inline void qfq_enqueue_activate(struct sn_qfq *q, struct qfq_class *cl,
					uint32_t len)
{
	if (sn_unlikely(cl->glmax != cl->q.lmax)) {
		/* oversize packets from before an lmax change are gone */
		cl->glmax = cl->q.lmax;
		cl->grp = (uint32_t)qfq_calc_index(cl->inv_w, cl->glmax);
	}
	qfq_activate(q, q->bitmaps, &q->V, cl, len);
}

/* sn_sched_enqueue() for QFQ. An enqueue to a backlogged class only
 * appends to its ring: QFQ's state changes only when a class activates. */
QFQ_INLINE int sn_qfq_enqueue_inl(struct sn_qfq *q, uint32_t id, void *item, uint32_t len)
{
	struct qfq_class *cl;
	uint32_t lmax;

	if (sn_unlikely(id >= q->max_classes))
		return -ENOENT;
	cl = &q->classes[id];
	lmax = cl->q.lmax;
	/* one compare: len == 0 wraps, and lmax == 0 (no class) rejects all */
	if (sn_unlikely(len - 1 >= lmax))
		return lmax ? -EMSGSIZE : -ENOENT;
	if (sn_unlikely(sn_sched_q_full(&cl->q)))
		return -ENOBUFS;
	sn_sched_q_push(&cl->q, item, len);
	q->backlog++;
	if (sn_sched_q_count(&cl->q) == 1)
		qfq_enqueue_activate(q, cl, len);
	return 0;
}

/* sn_sched_dequeue() for QFQ: serve the head class of the front slot of
 * the lowest-index ER group, then re-stamp only that class and group.
 * Sets and V are worked on in locals and written back once. */
QFQ_INLINE void *sn_qfq_dequeue_inl(struct sn_qfq *q, uint32_t *len, uint32_t *id)
{
	uint32_t *bm = q->bitmaps;
	struct qfq_group *g;
	struct qfq_class *cl;
	uint64_t V, old_V, roundedS, old_F;
	uint32_t plen, bit;
	void *item;

	if (sn_unlikely(!bm[QFQ_ER]))
		return NULL;
	g = qfq_first_group(q, bm[QFQ_ER]);
	cl = g->slots[g->front];
	item = sn_sched_q_pop(&cl->q, &plen);
	q->backlog--;
	if (len)
		*len = plen;
	if (id)
		*id = cl->id;

	old_V = q->V;
	V = old_V + (uint64_t)plen * q->iwsum;
	cl->S = cl->F;
	if (sn_sched_q_count(&cl->q)) {
		cl->F = cl->S + (uint64_t)sn_sched_q_head_len(&cl->q) * cl->inv_w;
		roundedS = qfq_round_down(cl->S, g->slot_shift);
		if (roundedS == g->S)
			goto eligible;   /* still in the front slot: group unchanged */
		qfq_front_slot_remove(g);
		qfq_slot_insert(q, g, cl, roundedS);
	} else {
		qfq_front_slot_remove(g);
	}
	if (g->full_slots & 1)
		goto eligible;   /* front slot still occupied: same S, same F */

	old_F = g->F;
	bit = 1u << g->index;
	if (!qfq_slot_scan(g)) {
		bm[QFQ_ER] &= ~bit;
	} else {
		roundedS = qfq_round_down(g->slots[g->front]->S, g->slot_shift);
		if (g->S == roundedS)
			goto eligible;
		g->S = roundedS;
		g->F = roundedS + (2ULL << g->slot_shift);
		bm[QFQ_ER] &= ~bit;
		bm[qfq_calc_state(q, bm, V, g)] |= bit;
	}
	qfq_unblock_groups(q, bm, g->index, old_F);
eligible:
	qfq_update_eligible(q, bm, &V, old_V);
	q->V = V;
	return item;
}

QFQ_INLINE int sn_qfq_peek_len_inl(struct sn_qfq *q, uint32_t *len)
{
	struct qfq_group *g;

	if (!q->bitmaps[QFQ_ER])
		return -ENOENT;
	g = qfq_first_group(q, q->bitmaps[QFQ_ER]);
	*len = sn_sched_q_head_len(&g->slots[g->front]->q);
	return 0;
}

#endif /* SN_SCHED_IMPL_H */
