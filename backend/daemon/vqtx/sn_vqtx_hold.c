/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vqtx_hold.c — how long a deferred frame may be held (Carousel §5.2:
 * the shaper holds the guest's frames, whose descriptors stay out until
 * they leave), and the check of a whole burst in one comparison.
 *
 * Verdict. A frame's stamp is its pop TSC, lowest bit = hold class (1: not
 * opted in, the queue's unmarked_hold_tsc; 0: max_hold_tsc, 0 = no
 * limit). A frame is kept until its deadline and while its queue has no
 * stop pending; the worker judges by its iteration clock (w->now), any
 * other lcore by rte_rdtsc().
 *
 * Burst bound. At the end of each loop iteration, after its last pop, the
 * worker scans its queues (keep_bound_begin/add/end): for each, the oldest
 * held frame's stamp plus the queue's short limit (no frame of the queue
 * has an earlier deadline: every frame out was popped no earlier than the
 * oldest held one, and unmarked_hold_tsc <= max_hold_tsc when that is
 * set). The minimum is w->keep_until. The scan gives no bound (0) when a
 * queue holds frames of an earlier connection (late_out) or frames
 * without a live ring. Frames popped after the scan have a stamp >= the
 * next iteration's clock & ~1 and a limit >= w->min_hold_tsc >= 2 ticks:
 * not due within their own iteration. So while w->now < keep_until and
 * the worker has no stop open (w->stops_open, read each time), every
 * frame of its queues is kept: sn_vqtx_keep_all() is keep_run()'s verdict
 * for the worker's own frames. The hold limits may change while the
 * port runs (sn_vqtx_set_holds, relaxed stores and loads): a bound
 * computed with a longer limit may then keep frames past a lowered one
 * until that iteration ends, so the caller waits a grace period
 * (sn_ports_set_holds), after which every worker's bound uses the new
 * limits.
 *
 * Stock-guest fallback. A guest that did not opt in must never fare worse
 * than on an immediate port: a frame of its short hold class that would
 * still be inside schednic at its deadline is copied out instead
 * (sn_vqtx_copy_out: a private copy from the pool its mbufs come from,
 * the original freed, which completes the descriptor) and the copy goes
 * on in the frame's place. The pipeline asks at submit, when the port's
 * rate limit has given the frame its release time (sn_vqtx_copy_by_ns:
 * the deadline less a margin for the stages after the wheel), and again
 * wherever a frame is found past its deadline later. The margin is a
 * quarter of the limit (250 us at the 1 ms default): a ring that drains
 * within three quarters of it (64 B at 1 Gbit/s: 256 frames in 172 us)
 * is never copied.
 */
#include "sn_vqtx_impl.h"

#include <rte_cycles.h>

struct sn_vqtx *sn_vqtx_of(const struct rte_mbuf *m, uint64_t *pop_tsc)
{
	const struct slot *s;

	if (!RTE_MBUF_HAS_EXTBUF(m) || m->shinfo->free_cb != sn_vqtx_extbuf_free_cb)
		return NULL;
	s = m->shinfo->fcb_opaque;
	*pop_tsc = s->pop_tsc;
	return s->q;
}

bool sn_vqtx_is_stock(const struct rte_mbuf *m)
{
	const struct slot *s;

	if (!RTE_MBUF_HAS_EXTBUF(m) || m->shinfo->free_cb != sn_vqtx_extbuf_free_cb)
		return false;
	s = m->shinfo->fcb_opaque;
	return (s->pop_tsc & 1) != 0;
}

uint64_t sn_vqtx_copy_by_tsc(const struct rte_mbuf *m)
{
	const struct slot *s;
	uint64_t now, dl, margin;

	if (!RTE_MBUF_HAS_EXTBUF(m) || m->shinfo->free_cb != sn_vqtx_extbuf_free_cb)
		return UINT64_MAX;
	s = m->shinfo->fcb_opaque;
	if (!(s->pop_tsc & 1))
		return UINT64_MAX;
	now = sn_vqtx_self ? sn_vqtx_self->now : rte_rdtsc();
	dl = __atomic_load_n(&s->q->unmarked_hold_tsc, __ATOMIC_RELAXED);
	margin = dl / 4;
	dl += s->pop_tsc;
	return dl <= now + margin ? 0 : dl - now - margin;
}

uint64_t sn_vqtx_copy_by_ns(const struct rte_mbuf *m)
{
	const uint64_t t = sn_vqtx_copy_by_tsc(m);

	if (t == 0 || t == UINT64_MAX)
		return t;
	return (uint64_t)((double)t * 1e9 / (double)rte_get_tsc_hz());
}

struct rte_mbuf *sn_vqtx_copy_out(struct rte_mbuf *m)
{
	const struct slot *s = m->shinfo->fcb_opaque;
	struct sn_vqtx *q = s->q;
	struct rte_mbuf *c = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX);

	/* Counted first: the free may be the last frame of a deleted queue,
	 * which then frees q (sn_vqtx_free). */
	ctr_inc(c ? &q->st.copied_out : &q->st.copy_no_mbuf);
	rte_pktmbuf_free(m);   /* completes the descriptor */
	return c;
}

void sn_vqtx_count_copied(struct sn_vqtx *q, bool ok)
{
	ctr_inc(ok ? &q->st.copied_out : &q->st.copy_no_mbuf);
}

uint32_t sn_vqtx_ring_size(const struct sn_vqtx *q)
{
	return q->vr ? q->size : 0;
}

uint64_t sn_vqtx_deadline(const struct sn_vqtx *q, uint64_t pop_tsc)
{
	const uint64_t maxh = __atomic_load_n(&q->max_hold_tsc, __ATOMIC_RELAXED);

	if (pop_tsc & 1)
		return pop_tsc + __atomic_load_n(&q->unmarked_hold_tsc, __ATOMIC_RELAXED);
	return maxh ? pop_tsc + maxh : UINT64_MAX;
}

enum sn_vqtx_verdict sn_vqtx_verdict(const struct rte_mbuf *m, struct sn_vqtx **q)
{
	const struct slot *s;
	uint64_t now;

	if (!RTE_MBUF_HAS_EXTBUF(m) || m->shinfo->free_cb != sn_vqtx_extbuf_free_cb) {
		*q = NULL;
		return SN_VQTX_KEEP;
	}
	s = m->shinfo->fcb_opaque;
	*q = s->q;
	if (stop_pending(s->q))
		return SN_VQTX_STOPPING;
	now = sn_vqtx_self ? sn_vqtx_self->now : rte_rdtsc();
	return sn_vqtx_deadline(s->q, s->pop_tsc) <= now ? SN_VQTX_EXPIRED : SN_VQTX_KEEP;
}

/* sn_vqtx_verdict() over a burst, the queue's stop flag and hold limits
 * read once per run of frames of one queue and the clock once per call
 * (see the header). */
uint16_t sn_vqtx_keep_run(struct rte_mbuf *const *pkts, uint16_t n, uint64_t *ol_or)
{
	const struct sn_vqtx_worker *self = sn_vqtx_self;
	const uint64_t now = self ? self->now : rte_rdtsc();
	const struct sn_vqtx *lq = NULL;
	uint64_t unmarked = 0, maxh = 0, fl = 0;
	uint16_t i;

	for (i = 0; i < n; i++) {
		const struct rte_mbuf *m = pkts[i];
		const uint64_t f = m->ol_flags;
		const struct slot *s;
		uint64_t pop;

		if (!(f & RTE_MBUF_F_EXTERNAL) || m->shinfo->free_cb != sn_vqtx_extbuf_free_cb) {
			fl |= f;
			continue;
		}
		s = m->shinfo->fcb_opaque;
		if (s->q != lq) {
			lq = s->q;
			if (stop_pending(lq))
				break;
			unmarked = __atomic_load_n(&lq->unmarked_hold_tsc, __ATOMIC_RELAXED);
			maxh = __atomic_load_n(&lq->max_hold_tsc, __ATOMIC_RELAXED);
		}
		/* sn_vqtx_deadline(lq, pop) <= now */
		pop = s->pop_tsc;
		if (pop & 1 ? pop + unmarked <= now : maxh && pop + maxh <= now)
			break;
		fl |= f;
	}
	*ol_or = fl;
	return i;
}

void sn_vqtx_keep_bound_begin(unsigned worker)
{
	struct sn_vqtx_worker *w = &sn_vqtx_workers[worker];

	w->kb_min = __atomic_load_n(&w->min_hold_tsc, __ATOMIC_RELAXED) >= 2 ? UINT64_MAX : 0;
}

/* keep_bound_add() of a queue with frames out, out of line: the common
 * case (nothing out, or no bound already) returns without a frame. */
static __rte_noinline void keep_bound_scan(const struct sn_vqtx *q)
{
	struct sn_vqtx_worker *w = q->w;
	int id;

	/* Every frame out is of the current connection, so its descriptor is
	 * held and it was popped no earlier than the oldest held one, whose
	 * slot has that pop's stamp (slots are zeroed at each start and a
	 * stamp is written only at a pop: never later than the pop it
	 * belongs to). Acquire pairs with the release in sn_vqtx_start(). */
	if (q->late_out || !__atomic_load_n(&q->live, __ATOMIC_ACQUIRE) ||
	    (id = sn_vring_oldest_held(q->vr)) < 0) {
		w->kb_min = 0;
		return;
	}
	w->kb_min = RTE_MIN(w->kb_min, (q->slots[id].pop_tsc & ~1ULL) +
			    __atomic_load_n(&q->unmarked_hold_tsc, __ATOMIC_RELAXED));
}

void sn_vqtx_keep_bound_add(const struct sn_vqtx *q)
{
	if (q->w->kb_min && q->outstanding)
		keep_bound_scan(q);
}

void sn_vqtx_keep_bound_end(unsigned worker)
{
	struct sn_vqtx_worker *w = &sn_vqtx_workers[worker];

	if (sn_vqtx_self == w)
		w->keep_until = w->kb_min;
}

bool sn_vqtx_worker_stops_open(unsigned worker)
{
	return __atomic_load_n(&sn_vqtx_workers[worker].stops_open, __ATOMIC_SEQ_CST) != 0;
}

bool sn_vqtx_keep_all(unsigned worker)
{
	const struct sn_vqtx_worker *w = &sn_vqtx_workers[worker];

	/* seq_cst load: pairs with sn_vqtx_stop()'s increment (stops_open) */
	return sn_vqtx_self == w && w->now < w->keep_until &&
	       __atomic_load_n(&w->stops_open, __ATOMIC_SEQ_CST) == 0;
}
