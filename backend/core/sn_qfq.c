/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_qfq.c — Quick Fair Queueing.
 *
 * Follows F. Checconi, L. Rizzo, P. Valente, "QFQ: Efficient Packet
 * Scheduling With Tight Guarantees", IEEE/ACM Transactions on Networking
 * 21(3), 2013 (per-flow QFQ, not the aggregate-based QFQ+), as PSPAT's
 * arbiter uses it (L. Rizzo, P. Valente, G. Lettieri, V. Maffione, "PSPAT:
 * software packet scheduling at hardware speed", Computer Communications
 * 2018, §3.4; T-WFI of eq. 2: 6 L_k/(phi_k B) + (L - L_k)/B).
 *
 * QFQ approximates WF2Q+: each class k has virtual start/finish times S_k,
 * F_k = S_k + len/phi_k, and the system virtual time V advances by len/W
 * (W = sum of weights) per packet served. Instead of sorting classes by F
 * (O(log N)), classes are bucketed into groups by their maximum slot size
 * L_k/phi_k rounded up to a power of two sigma_i; inside a group, classes
 * sit in a ring of slots of width sigma_i by their rounded-down S (the
 * "bucket list", with the full_slots bitmap). A group has S = rounded S of
 * its first slot and F = S + 2 sigma_i. Groups are in one of four sets,
 * kept as bitmaps indexed by group: Eligible (S <= V) or Ineligible, and
 * Ready or Blocked (Blocked: an eligible-ready group of higher index has a
 * smaller F). The next class to serve is the head of the front slot of the
 * lowest-index ER group: find-first-set, O(1).
 *
 * Fixed point: timestamps are u64 in units of 2^-30 virtual bytes
 * (FRAC_BITS), compared wrap-safely (sn_time_before/after), so V may wrap.
 * inv_w = 2^30 / weight. Slot sizes run from 2^20 (64 B at weight 2^16) to
 * 2^46 (64 KiB at weight 1): 27 groups, each with 64 slots.
 *
 * Bounds (the Linux CVE-2023-31436 class of bug): the group index computed
 * from (lmax, weight) is checked against the group array, and enqueue
 * rejects packets longer than the class lmax. sn_sched.h lets lmax be
 * lowered while longer packets are queued: then the class's group is sized
 * for the longest queued packet (glmax) until the class next goes idle, so
 * QFQ's invariant F - S <= sigma_i keeps holding (Linux trusted lmax here
 * and indexed past its bucket list). As a last line of defence, a start
 * time that would still leave the bucket list is clamped back into it (as
 * Linux QFQ+'s qfq_slot_insert does) and counted (sn_qfq_clamps()).
 *
 * Class add / delete / change while backlogged: the class is taken out of
 * its bucket (deactivate), the group sets are recomputed from their
 * definitions, its parameters change, and it is re-activated with its head
 * packet (Linux qfq_change_class does the same deactivate/reactivate).
 *
 * Per-packet cost (measured with callgrind, see the bench notes): an
 * enqueue to a backlogged class only appends to its ring; a dequeue only
 * re-stamps the class it served and, if that class left the front slot
 * and the slot emptied, its group. Everything on that path is forced
 * inline into sn_qfq_enqueue / sn_qfq_dequeue; no division (inv_w and
 * 1/wsum are precomputed reciprocals); eligibility updates are branch-free
 * bit operations, skipped behind one test when V did not cross a slot
 * boundary of the smallest ineligible group (nothing can move then); a
 * dequeue that leaves its group in place skips the V-jump test (ER cannot
 * be empty); group headers are one cache line each, bucket heads apart; a
 * class caches its own id. sn_qfq_check() is never called here.
 *
 * Bursts (the arbiter's path): sn_qfq_enqueue_burst reads the class line
 * once and activates an idle class once, with its first packet (nothing
 * else can change between the pushes); sn_qfq_dequeue_burst runs the same
 * inlined dequeue in a loop, so dispatch and register saves are paid once
 * per burst. Both give exactly the schedule of the single calls.
 */
#include "sn_qfq.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
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

/* An enqueue to a backlogged class only appends to its ring: QFQ's state
 * changes only when a class activates. */
int sn_qfq_enqueue(struct sn_qfq *q, uint32_t id, void *item, uint32_t len)
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

/* n enqueues to one class, as n sn_qfq_enqueue calls would do: the class
 * line is read once, the per-item work is the two admission checks and the
 * ring write, and a class that was idle activates once, with its first
 * packet (V and the group sets cannot change between the pushes, so this
 * is the state the first single enqueue would have produced). */
uint32_t sn_qfq_enqueue_burst(struct sn_qfq *q, uint32_t id, void *const *items,
			      const uint32_t *lens, uint32_t n, int *err)
{
	struct qfq_class *cl;
	uint32_t lmax, room, was, i;

	if (sn_unlikely(id >= q->max_classes || !q->classes[id].q.lmax)) {
		if (n)
			*err = -ENOENT;
		return 0;
	}
	cl = &q->classes[id];
	lmax = cl->q.lmax;
	was = sn_sched_q_count(&cl->q);
	room = cl->q.mask + 1 - was;
	/* The ring's tail, mask and array in registers (a store into an
	 * entry could alias cl->q for the compiler), stored back once; the
	 * room check is the loop bound, so item `room` (when n > room) is
	 * still judged on its length first, as a single enqueue would. */
	{
		struct sn_sched_qent *v = cl->q.v;
		const uint32_t mask = cl->q.mask, lim = SN_MIN(n, room);
		uint32_t tail = cl->q.tail;

		for (i = 0; i < lim; i++) {
			struct sn_sched_qent *e;

			if (sn_unlikely(lens[i] - 1 >= lmax))
				break;
			e = &v[tail++ & mask];
			e->item = items[i];
			e->len = lens[i];
		}
		cl->q.tail = tail;
		if (i < n)
			*err = lens[i] - 1 >= lmax ? -EMSGSIZE : -ENOBUFS;
	}
	q->backlog += i;
	if (!was && i)
		qfq_enqueue_activate(q, cl, lens[0]);
	return i;
}

/* Serve the head class of the front slot of the lowest-index ER group,
 * then re-stamp only that class and group.
 * GCC's SLP vectorizer would merge the group-set stores into one SSE store
 * assembled with shuffles: more instructions than it saves. */
#if defined(__GNUC__) && !defined(__clang__)
#define QFQ_NO_SLP __attribute__((optimize("no-tree-slp-vectorize")))
#else
#define QFQ_NO_SLP
#endif
/* The head packet (plen bytes) of class cl, the head of g's front slot in
 * the lowest ER group, has just left; more: cl still has a packet, of
 * next_len bytes. V, cl and g are re-stamped, the group sets updated.
 * Shared by qfq_dequeue_one (packets from the class ring) and
 * sn_qfq_pass_burst (packets from the caller's arrays). */
QFQ_INLINE void qfq_served(struct sn_qfq *q, struct qfq_group *g, struct qfq_class *cl,
			   uint32_t plen, bool more, uint32_t next_len)
{
	uint32_t *bm = q->bitmaps;
	uint64_t V, old_V, roundedS, old_F;
	uint32_t bit;

	old_V = q->V;
	V = old_V + (uint64_t)plen * q->iwsum;
	cl->S = cl->F;
	if (more) {
		cl->F = cl->S + (uint64_t)next_len * cl->inv_w;
		roundedS = qfq_round_down(cl->S, g->slot_shift);
		if (roundedS == g->S)
			goto unchanged;  /* still in the front slot */
		qfq_front_slot_remove(g);
		qfq_slot_insert(q, g, cl, roundedS);
	} else {
		qfq_front_slot_remove(g);
	}
	if (g->full_slots & 1)
		goto unchanged;  /* front slot still occupied */

	old_F = g->F;
	bit = 1u << g->index;
	if (!qfq_slot_scan(g)) {
		bm[ER] &= ~bit;
	} else {
		roundedS = qfq_round_down(g->slots[g->front]->S, g->slot_shift);
		if (g->S == roundedS)
			goto unchanged;
		g->S = roundedS;
		g->F = roundedS + (2ULL << g->slot_shift);
		bm[ER] &= ~bit;
		bm[qfq_calc_state(q, bm, V, g)] |= bit;
	}
	qfq_unblock_groups(q, bm, g->index, old_F);
	qfq_update_eligible(q, bm, &V, old_V, 0);
	q->V = V;
	return;
unchanged:
	/* the group keeps its S, F and set: ER is not empty */
	qfq_update_eligible(q, bm, &V, old_V, 1);
	q->V = V;
}

QFQ_INLINE void *qfq_dequeue_one(struct sn_qfq *q, uint32_t *len, uint32_t *id)
{
	const uint32_t *bm = q->bitmaps;
	struct qfq_group *g;
	struct qfq_class *cl;
	uint32_t plen;
	bool more;
	void *item;

	if (sn_unlikely(!bm[ER]))
		return NULL;
	g = qfq_first_group(q, bm[ER]);
	cl = g->slots[g->front];
	item = sn_sched_q_pop(&cl->q, &plen);
	q->backlog--;
	if (len)
		*len = plen;
	if (id)
		*id = cl->id;
	more = sn_sched_q_count(&cl->q) != 0;
	qfq_served(q, g, cl, plen, more, more ? sn_sched_q_head_len(&cl->q) : 0);
	return item;
}

QFQ_NO_SLP void *sn_qfq_dequeue(struct sn_qfq *q, uint32_t *len, uint32_t *id)
{
	return qfq_dequeue_one(q, len, id);
}

/* The dequeues that qfq_dequeue_one would end at its `unchanged` label,
 * back to back. With no ineligible group (update_eligible then changes
 * nothing, so the group sets stay as they are and the lowest ER group
 * stays g), the head of g's front slot is still cl (that path moves no
 * class); while cl keeps a packet after the pop (count >= 2) and its next
 * S (its current F) rounds down to g->S, the next qfq_dequeue_one would
 * serve cl and take exactly these steps: pop, V += len/W, S = F,
 * F = S + next len/w_k. The loop takes them on register copies and stores
 * the results back once, so the items, S, F, V and group sets are those of
 * the general loop (test_sched.c: test_dequeue_burst_equals_singles). Any
 * other case returns to the general path. Returns the new i.
 * noinline: alone, its loop has fewer live values than registers; inlined
 * into sn_qfq_dequeue_burst's loop around qfq_dequeue_one() it spills. */
static QFQ_NO_SLP __attribute__((noinline)) uint32_t qfq_dequeue_run(struct sn_qfq *q, void **items,
							  uint32_t *lens, uint32_t i, uint32_t n,
							  uint64_t budget, uint32_t overhead,
							  uint64_t *taken)
{
	const uint32_t *bm = q->bitmaps;
	const struct qfq_group *g;
	struct qfq_class *cl;
	const struct sn_sched_qent *v;
	uint64_t t = *taken, V, S, F, gS, iwsum, inv_w;
	uint32_t head, tail, mask, shift, i0 = i;

	if (!bm[ER] || (bm[IR] | bm[IB]))
		return i;
	g = qfq_first_group(q, bm[ER]);
	cl = g->slots[g->front];
	v = cl->q.v;
	head = cl->q.head;
	tail = cl->q.tail;
	mask = cl->q.mask;
	shift = g->slot_shift;
	gS = g->S;
	iwsum = q->iwsum;
	inv_w = cl->inv_w;
	V = q->V;
	F = cl->F;
	/* i < n and tail - head >= 2 as one bound (lim), and
	 * round_down(F, shift) == gS as F - gS < 2^shift (gS is a multiple
	 * of 2^shift; F < gS wraps to a large value): the same test. */
	const uint32_t lim = i + SN_MIN(n - i, tail - head - 1 < tail - head ? tail - head - 1 : 0);
	const uint64_t width = 1ULL << shift;

	/* The loop keeps d = F - gS (the slot test is d < width) and
	 * neither S nor V: after the run, F = gS + d, S is the F before the
	 * last step (F minus the new head's len/w_k) and V moves by the
	 * run's bytes; the same 64-bit values as the per-step updates
	 * (modular sums and products distribute), with fewer live values. */
	const uint64_t t0 = t;
	uint64_t d = F - gS;

	while (i < lim && t < budget && d < width) {
		const struct sn_sched_qent *e = &v[head++ & mask];
		const uint32_t plen = e->len;

		items[i] = e->item;
		lens[i++] = plen;
		t += (uint64_t)plen + overhead;
		d += (uint64_t)v[head & mask].len * inv_w;
	}
	if (i != i0) {
		F = gS + d;
		S = F - (uint64_t)v[head & mask].len * inv_w;
		V += (t - t0 - (uint64_t)(i - i0) * overhead) * iwsum;   /* the run's bytes */
		cl->q.head = head;
		q->backlog -= i - i0;
		cl->S = S;
		cl->F = F;
		q->V = V;
		*taken = t;
	}
	return i;
}

/* The dequeue loop of link emulation in one call: no dispatch, and the
 * register saves of a dequeue paid once per burst; runs of one class that
 * stays in its front slot take the short path (qfq_dequeue_run). */
QFQ_NO_SLP uint32_t sn_qfq_dequeue_burst(struct sn_qfq *q, void **items, uint32_t *lens,
					 uint32_t n, uint64_t budget, uint32_t overhead,
					 uint64_t *bytes)
{
	uint64_t taken = 0;
	uint32_t i = 0;

	while (i < n && taken < budget && q->bitmaps[ER]) {
		items[i] = qfq_dequeue_one(q, &lens[i], NULL);
		taken += (uint64_t)lens[i] + overhead;
		i = qfq_dequeue_run(q, items, lens, i + 1, n, budget, overhead, &taken);
	}
	*bytes = taken;
	return i;
}

/* ---- A burst through an empty scheduler ----------------------------------
 * sn_qfq_pass_ok() says whether sn_qfq_enqueue_burst(id, n items with
 * lengths in min_len .. max_len) would accept all n into an empty
 * scheduler; if so, sn_qfq_pass_burst() leaves the scheduler exactly as
 * that enqueue followed by sn_qfq_dequeue_burst(room, budget, overhead)
 * would: the same
 * items out (items[0 .. k), in order), the rest in the class ring, the
 * same V, S, F, group sets and slots, the same bytes taken. The packets it
 * serves never enter the class ring: their lengths come from lens[], and
 * the steps after each pop are qfq_served()'s and, along one slot,
 * qfq_dequeue_run()'s (on the array; test_sched.c compares the two ways
 * state by state). The arbiter uses it for a local burst that finds the
 * scheduler empty (sn_arbiter.c). */
/* An empty scheduler, a class id, and room in its ring for n >= 1. */
static inline bool pass_room(const struct sn_qfq *q, uint32_t id, uint32_t n)
{
	return n != 0 && q->backlog == 0 && id < q->max_classes && q->classes[id].q.lmax &&
	       n <= q->classes[id].q.mask + 1;
}

bool sn_qfq_pass_ok(const struct sn_qfq *q, uint32_t id, uint32_t n, uint32_t min_len,
		    uint32_t max_len)
{
	/* the enqueue's admission: a class, room for n, 1 <= len <= lmax */
	return pass_room(q, id, n) && min_len >= 1 && max_len <= q->classes[id].q.lmax;
}

/* qfq_dequeue_run() on lens[] (the class's packets i .. n - 1 are the
 * ones still queued): the same steps, stops and post-run state. */
static QFQ_NO_SLP __attribute__((noinline)) uint32_t qfq_pass_run(struct sn_qfq *q,
							       const uint32_t *lens,
							       uint32_t i, uint32_t n,
							       uint32_t room, uint64_t budget,
							       uint32_t overhead,
							       uint64_t *taken)
{
	const uint32_t *bm = q->bitmaps;
	const struct qfq_group *g;
	struct qfq_class *cl;
	uint64_t t = *taken, gS, inv_w, d;
	uint32_t i0 = i;

	if (i >= n || !bm[ER] || (bm[IR] | bm[IB]))
		return i;
	g = qfq_first_group(q, bm[ER]);
	cl = g->slots[g->front];
	gS = g->S;
	inv_w = cl->inv_w;
	/* dequeue_run's bound: i < room, and a packet after the one served */
	const uint32_t lim = SN_MIN(room, n - 1);
	const uint64_t width = 1ULL << g->slot_shift, t0 = t;

	d = cl->F - gS;
	while (i < lim && t < budget && d < width) {
		t += (uint64_t)lens[i] + overhead;
		d += (uint64_t)lens[++i] * inv_w;
	}
	if (i != i0) {
		const uint64_t F = gS + d;

		cl->S = F - (uint64_t)lens[i] * inv_w;
		cl->F = F;
		q->V += (t - t0 - (uint64_t)(i - i0) * overhead) * q->iwsum;
		*taken = t;
	}
	return i;
}

QFQ_NO_SLP uint32_t sn_qfq_pass_burst(struct sn_qfq *q, uint32_t id, void *const *items,
				      const uint32_t *lens, uint32_t n, uint32_t room,
				      uint64_t budget, uint32_t overhead, uint64_t *bytes)
{
	struct qfq_class *cl = &q->classes[id];
	uint64_t taken = 0;
	uint32_t i = 0;

	/* sn_qfq_pass_ok's conditions, the ones a wrong call would break */
	SN_VERIFY(pass_room(q, id, n));

	/* the enqueue: a class of an empty scheduler activates with its first
	 * packet (sn_qfq_enqueue_burst) */
	qfq_enqueue_activate(q, cl, lens[0]);
	/* the dequeue: sn_qfq_dequeue_burst's loop. The scheduler had no
	 * other packet, so the lowest ER group's front slot holds cl. */
	while (i < room && i < n && taken < budget && q->bitmaps[ER]) {
		struct qfq_group *g = qfq_first_group(q, q->bitmaps[ER]);
		const bool more = i + 1 < n;

		qfq_served(q, g, cl, lens[i], more, more ? lens[i + 1] : 0);
		taken += (uint64_t)lens[i] + overhead;
		i = qfq_pass_run(q, lens, i + 1, n, room, budget, overhead, &taken);
	}
	/* what the dequeue left stays queued, as after the enqueue */
	for (uint32_t j = i; j < n; j++)
		sn_sched_q_push(&cl->q, items[j], lens[j]);
	q->backlog = n - i;
	*bytes = taken;
	return i;
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
