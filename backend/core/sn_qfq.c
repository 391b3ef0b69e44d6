/* sn_qfq.c — Quick Fair Queueing.
 *
 * Follows F. Checconi, L. Rizzo, P. Valente, "QFQ: Efficient Packet
 * Scheduling With Tight Guarantees", IEEE/ACM ToN 21(3), 2013 (per-flow
 * QFQ, not the aggregate-based QFQ+), as used by PSPAT's arbiter (PSPAT
 * §3.4; T-WFI of eq. 2: 6 L_k/(phi_k B) + (L - L_k)/B).
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
 */
#include "sn_qfq.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_sched_impl.h"

#define FRAC_BITS       30
#define ONE_FP          (1ULL << FRAC_BITS)
#define MIN_SLOT_SHIFT  20  /* log2(64 B * 2^30 / 2^16) */
#define NGROUPS         27  /* shifts 20 .. 46 = log2(2^16 B * 2^30 / 1) */
#define NSLOTS          64  /* bucket-list length; full_slots is a u64 */

enum { ER, IR, EB, IB, NSTATES };  /* IR = ER|1, EB = ER|2, IB = IR|2 */

struct qfq_group;

struct qfq_class {
	/* First cache line: everything enqueue / dequeue touch. */
	struct sn_sched_q q;         /* q.lmax != 0 <=> class exists */
	uint64_t S;
	uint64_t F;
	struct qfq_class *next;      /* bucket list of the slot (singly linked) */
	uint32_t glmax;              /* length the group is sized for, >= q.lmax */
	uint32_t pad;
	uint32_t inv_w;              /* ONE_FP / weight, <= 2^30 */
	uint32_t grp;                /* group index */
} SN_CACHE_ALIGNED;

/* One line per class; weights (control path only) live in sn_qfq.weights. */
static_assert(sizeof(struct qfq_class) == SN_CACHE_LINE, "qfq_class is one line");

struct qfq_group {
	uint64_t S;
	uint64_t F;
	uint64_t full_slots;         /* bit j: slot (front + j) % NSLOTS non-empty */
	uint32_t front;
	uint32_t slot_shift;
	uint32_t index;
	struct qfq_class *slots[NSLOTS];
};

struct sn_qfq {
	/* First cache line: every enqueue / dequeue. */
	uint64_t V;
	uint64_t iwsum;              /* ONE_FP / wsum */
	uint32_t bitmaps[NSTATES];
	uint64_t backlog;
	struct qfq_class *classes;
	/* Read mostly. */
	uint32_t *weights;
	uint32_t max_classes;
	uint32_t queue_len;
	uint32_t wsum;
	uint64_t clamps;
	struct qfq_group groups[NGROUPS];
};

static inline uint64_t round_down(uint64_t ts, uint32_t shift)
{
	return ts & ~((1ULL << shift) - 1);
}

static inline uint32_t mask_from(uint32_t bitmap, uint32_t from)
{
	return from >= 32 ? 0 : bitmap & ~((1u << from) - 1);
}

static inline struct qfq_group *first_group(struct sn_qfq *q, uint32_t bitmap)
{
	return &q->groups[__builtin_ctz(bitmap)];
}

static inline void move_groups(struct sn_qfq *q, uint32_t mask, int src, int dst)
{
	uint32_t m = q->bitmaps[src] & mask;

	q->bitmaps[dst] |= m;
	q->bitmaps[src] &= ~m;
}

static inline void clear_group(struct sn_qfq *q, const struct qfq_group *g)
{
	for (int s = 0; s < NSTATES; s++)
		q->bitmaps[s] &= ~(1u << g->index);
}

/* Group index for a class: smallest i with lmax * inv_w <= 2^(20 + i).
 * Returns -EINVAL if that leaves the group array. */
static int calc_index(uint64_t inv_w, uint32_t lmax)
{
	uint64_t size = (uint64_t)lmax * inv_w;
	int idx;

	if (size <= (1ULL << MIN_SLOT_SHIFT))
		return 0;
	idx = 64 - __builtin_clzll(size - 1) - MIN_SLOT_SHIFT;
	return idx < NGROUPS ? idx : -EINVAL;
}

static int calc_state(const struct sn_qfq *q, const struct qfq_group *g)
{
	int state = sn_time_after(g->S, q->V) ? IR : ER;
	uint32_t mask = mask_from(q->bitmaps[ER], g->index);

	if (mask) {
		const struct qfq_group *next = &q->groups[__builtin_ctz(mask)];

		if (sn_time_after(g->F, next->F))
			state |= EB;
	}
	return state;
}

/* Bucket lists are singly linked: the datapath only pushes at a slot's
 * head and pops the front slot's head, so neither touches another class's
 * cache line; removal from the middle (class delete / change) walks the
 * slot. */
static void list_push(struct qfq_class **head, struct qfq_class *cl)
{
	cl->next = *head;
	*head = cl;
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

/* Insert cl at its rounded start; clamp a start beyond the bucket list. */
static void slot_insert(struct sn_qfq *q, struct qfq_group *g, struct qfq_class *cl,
			uint64_t roundedS)
{
	uint64_t slot = (roundedS - g->S) >> g->slot_shift;

	if (sn_unlikely(slot > NSLOTS - 2)) {
		uint64_t delta = roundedS - g->S - ((uint64_t)(NSLOTS - 2) << g->slot_shift);

		cl->S -= delta;
		cl->F -= delta;
		slot = NSLOTS - 2;
		q->clamps++;
	}
	list_push(&g->slots[(g->front + slot) & (NSLOTS - 1)], cl);
	g->full_slots |= 1ULL << slot;
}

static void front_slot_remove(struct qfq_group *g)
{
	struct qfq_class *cl = g->slots[g->front];

	g->slots[g->front] = cl->next;
	cl->next = NULL;
	if (!g->slots[g->front])
		g->full_slots &= ~1ULL;
}

/* Advance front to the first non-empty slot; its head class, or NULL. */
static struct qfq_class *slot_scan(struct qfq_group *g)
{
	uint32_t i;

	if (!g->full_slots)
		return NULL;
	i = (uint32_t)__builtin_ctzll(g->full_slots);
	if (i) {
		g->front = (g->front + i) & (NSLOTS - 1);
		g->full_slots >>= i;
	}
	return g->slots[g->front];
}

/* Groups whose S crossed V since old_V become eligible (QFQ §4: a group of
 * index i can only change eligibility when V crosses a multiple of sigma_i). */
static void make_eligible(struct sn_qfq *q, uint64_t old_V)
{
	uint64_t vslot = q->V >> MIN_SLOT_SHIFT;
	uint64_t old_vslot = old_V >> MIN_SLOT_SHIFT;

	if (vslot != old_vslot) {
		int fls = 64 - __builtin_clzll(vslot ^ old_vslot);
		uint32_t mask = fls >= 32 ? ~0u : (1u << fls) - 1;

		move_groups(q, mask, IR, ER);
		move_groups(q, mask, IB, EB);
	}
}

static void update_eligible(struct sn_qfq *q, uint64_t old_V)
{
	uint32_t ineligible = q->bitmaps[IR] | q->bitmaps[IB];

	if (ineligible) {
		if (!q->bitmaps[ER]) {
			struct qfq_group *g = first_group(q, ineligible);

			if (sn_time_after(g->S, q->V))
				q->V = g->S;
		}
		make_eligible(q, old_V);
	}
}

/* Group `index` moved its F forward from old_F: groups it blocked may now
 * be ready, unless a higher ER group still blocks them. */
static void unblock_groups(struct sn_qfq *q, uint32_t index, uint64_t old_F)
{
	uint32_t mask = mask_from(q->bitmaps[ER], index + 1);

	if (mask) {
		struct qfq_group *next = first_group(q, mask);

		if (!sn_time_after(next->F, old_F))
			return;
	}
	mask = (1u << index) - 1;
	move_groups(q, mask, EB, ER);
	move_groups(q, mask, IB, IR);
}

/* Start time of a class becoming backlogged (QFQ's update_start). */
static void update_start(struct sn_qfq *q, struct qfq_class *cl)
{
	const struct qfq_group *g = &q->groups[cl->grp];
	uint32_t shift = g->slot_shift;
	uint64_t roundedF = round_down(cl->F, shift);
	uint64_t limit = round_down(q->V, shift) + (1ULL << shift);

	if (!sn_time_after(cl->F, q->V) || sn_time_after(roundedF, limit)) {
		/* stale finish time */
		uint32_t mask = mask_from(q->bitmaps[ER], g->index);

		if (mask) {
			struct qfq_group *next = first_group(q, mask);

			if (sn_time_after(roundedF, next->F)) {
				cl->S = sn_time_after(limit, next->F) ? next->F : limit;
				return;
			}
		}
		cl->S = q->V;
	} else {
		cl->S = cl->F;
	}
}

static void activate(struct sn_qfq *q, struct qfq_class *cl, uint32_t len)
{
	struct qfq_group *g = &q->groups[cl->grp];
	uint64_t roundedS;

	update_start(q, cl);
	cl->F = cl->S + (uint64_t)len * cl->inv_w;
	roundedS = round_down(cl->S, g->slot_shift);

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
		clear_group(q, g);
	} else if (!q->bitmaps[ER] && sn_time_after(roundedS, q->V)) {
		q->V = roundedS;
	}
	g->S = roundedS;
	g->F = roundedS + (2ULL << g->slot_shift);
	q->bitmaps[calc_state(q, g)] |= 1u << g->index;
insert:
	slot_insert(q, g, cl, roundedS);
}

/* cl (head of g's front slot) just sent a packet. true if g's S or
 * content changed so its state must be recomputed. */
static int update_class(struct sn_qfq *q, struct qfq_group *g, struct qfq_class *cl)
{
	uint64_t roundedS;

	cl->S = cl->F;
	if (!sn_sched_q_count(&cl->q)) {
		front_slot_remove(g);
		return 1;
	}
	cl->F = cl->S + (uint64_t)sn_sched_q_head_len(&cl->q) * cl->inv_w;
	roundedS = round_down(cl->S, g->slot_shift);
	if (roundedS == g->S)
		return 0;
	front_slot_remove(g);
	slot_insert(q, g, cl, roundedS);
	return 1;
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
			q->bitmaps[calc_state(q, g)] |= 1u << g->index;
	}
}

/* Take a backlogged class out of its bucket list (queue untouched). */
static void deactivate(struct sn_qfq *q, struct qfq_class *cl)
{
	struct qfq_group *g = &q->groups[cl->grp];
	uint32_t pos = (uint32_t)((g->front + ((round_down(cl->S, g->slot_shift) - g->S) >>
					      g->slot_shift)) & (NSLOTS - 1));

	list_remove(&g->slots[pos], cl);
	if (!g->slots[pos])
		g->full_slots &= ~(1ULL << ((pos - g->front) & (NSLOTS - 1)));
	cl->F = cl->S;
	if (g->full_slots) {
		struct qfq_class *head = slot_scan(g);

		g->S = round_down(head->S, g->slot_shift);
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
	q = calloc(1, sizeof(*q));
	if (!q)
		goto fail;
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
	idx = calc_index(inv_w, lmax);
	if (idx < 0)
		return idx;
	memset(cl, 0, sizeof(*cl));
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
	idx = calc_index(inv_w, lmax);
	if (idx < 0)
		return idx;
	cl->glmax = lmax;
	if (sn_sched_q_count(&cl->q)) {
		/* queued packets longer than the new lmax stay valid: size the
		 * group for them until the class next goes idle */
		for (uint32_t i = cl->q.head; i != cl->q.tail; i++)
			cl->glmax = SN_MAX(cl->glmax, cl->q.v[i & cl->q.mask].len);
		idx = calc_index(inv_w, cl->glmax);
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
		activate(q, cl, head_len);
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

int sn_qfq_enqueue(struct sn_qfq *q, uint32_t id, void *item, uint32_t len)
{
	struct qfq_class *cl = lookup(q, id);

	if (sn_unlikely(!cl))
		return -ENOENT;
	if (sn_unlikely(len == 0 || len > cl->q.lmax))
		return -EMSGSIZE;
	if (sn_unlikely(sn_sched_q_full(&cl->q)))
		return -ENOBUFS;
	sn_sched_q_push(&cl->q, item, len);
	q->backlog++;
	if (sn_sched_q_count(&cl->q) == 1) {
		if (sn_unlikely(cl->glmax != cl->q.lmax)) {
			/* oversize packets from before an lmax change are gone */
			cl->glmax = cl->q.lmax;
			cl->grp = (uint32_t)calc_index(cl->inv_w, cl->glmax);
		}
		activate(q, cl, len);
	}
	return 0;
}

void *sn_qfq_dequeue(struct sn_qfq *q, uint32_t *len, uint32_t *id)
{
	struct qfq_group *g;
	struct qfq_class *cl;
	uint64_t old_V;
	uint32_t plen;
	void *item;

	if (sn_unlikely(!q->bitmaps[ER]))
		return NULL;
	g = first_group(q, q->bitmaps[ER]);
	cl = g->slots[g->front];
	item = sn_sched_q_pop(&cl->q, &plen);
	q->backlog--;
	if (len)
		*len = plen;
	if (id)
		*id = (uint32_t)(cl - q->classes);

	old_V = q->V;
	q->V += (uint64_t)plen * q->iwsum;
	if (update_class(q, g, cl)) {
		uint64_t old_F = g->F;
		struct qfq_class *head = slot_scan(g);

		if (!head) {
			q->bitmaps[ER] &= ~(1u << g->index);
		} else {
			uint64_t roundedS = round_down(head->S, g->slot_shift);

			if (g->S == roundedS)
				goto skip_unblock;
			g->S = roundedS;
			g->F = roundedS + (2ULL << g->slot_shift);
			q->bitmaps[ER] &= ~(1u << g->index);
			q->bitmaps[calc_state(q, g)] |= 1u << g->index;
		}
		unblock_groups(q, g->index, old_F);
	}
skip_unblock:
	update_eligible(q, old_V);
	return item;
}

int sn_qfq_peek_len(struct sn_qfq *q, uint32_t *len)
{
	struct qfq_group *g;

	if (!q->bitmaps[ER])
		return -ENOENT;
	g = first_group(q, q->bitmaps[ER]);
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
			CHECK(g->full_slots & 1, "group %u front slot empty", i);
			CHECK(g->F == g->S + (2ULL << g->slot_shift), "group %u F", i);
			CHECK(g->S == round_down(g->S, g->slot_shift), "group %u S unaligned", i);
		}
		if (q->bitmaps[ER] & (1u << i)) {
			uint32_t higher = mask_from(q->bitmaps[ER], i + 1);

			CHECK(!higher || !sn_time_after(g->F, q->groups[__builtin_ctz(higher)].F),
			      "ER group %u should be blocked", i);
		}
		for (uint32_t p = 0; p < NSLOTS; p++) {
			uint32_t off = (p - g->front) & (NSLOTS - 1);
			int full = !!(g->full_slots & (1ULL << off));
			uint64_t len = 0;

			CHECK(full == !!g->slots[p], "group %u slot %u bitmap", i, p);
			for (const struct qfq_class *cl = g->slots[p]; cl; cl = cl->next) {
				uint64_t rs = round_down(cl->S, g->slot_shift);

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
		CHECK(cl->inv_w == ONE_FP / q->weights[id], "class %u inv_w", id);
		CHECK(cl->glmax >= cl->q.lmax, "class %u glmax", id);
		CHECK((int)cl->grp == calc_index(cl->inv_w, cl->glmax), "class %u group", id);
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
