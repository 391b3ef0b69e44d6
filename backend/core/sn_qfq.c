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
 * That control path, and the self-check, are in sn_qfq_class.c; the state
 * and the per-packet steps both files use are in sn_qfq_impl.h.
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
#include <stdint.h>

#include "sn_common.h"
#include "sn_qfq_impl.h"
#include "sn_sched_impl.h"

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
