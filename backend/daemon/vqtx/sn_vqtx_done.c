/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vqtx_done.c — completion of deferred frames when their last mbuf is
 * freed (Carousel §5.2: the used entry is written when the frame leaves,
 * in whatever order frames leave), and the worker's mbuf recycle stash.
 *
 * The free callback of a frame's shared info (sn_vqtx_extbuf_free_cb)
 * completes it whatever path it took. The common end of a deferred frame
 * is a copy into a peer VM's RX ring, after which the worker frees it:
 * rte_pktmbuf_free() of an extbuf mbuf would detach it (restore its own
 * buffer, look up the pool's private sizes and the object's IOVA) and
 * return it to the mempool, only for the next burst to allocate it again
 * and attach another guest buffer. sn_vqtx_free_bulk() instead completes
 * such a frame directly (frame_done's accounting, per run of frames of one
 * queue) and keeps the mbuf, still external, in its worker's stash, which
 * the next sn_vqtx_recv() re-attaches first. A stashed mbuf holds no guest
 * reference: its shinfo is the worker's dummy whose callback does nothing,
 * so freeing it the ordinary way (stash overflow, idle, worker exit)
 * detaches it harmlessly.
 */
#include "sn_vqtx_impl.h"

#include <stdlib.h>

#include <rte_lcore.h>

#include "sn_log.h"

static void hold_record(struct sn_vqtx *q, uint64_t cycles)
{
	unsigned b = cycles ? 63u - (unsigned)__builtin_clzll(cycles) : 0;

	if (b >= SN_VQTX_HOLD_BUCKETS)
		b = SN_VQTX_HOLD_BUCKETS - 1;
	ctr_inc(&q->st.hold_hist[b]);
	if (cycles > q->st.hold_max)
		ctr_set(&q->st.hold_max, cycles);
}

/* The frame of slot s is done (left, or dropped): its guest buffer is no
 * longer referenced. Owner worker only. */
static inline void frame_done(struct slot *s)
{
	struct sn_vqtx *q = s->q;
	struct sn_vqtx_worker *w = q->w;

	if (unlikely(sn_vqtx_self != w)) {
		sn_log_err("vqtx: fatal: frame freed on lcore %u, owner is worker %u on lcore %u",
		       rte_lcore_id(), w->idx, __atomic_load_n(&w->lcore, __ATOMIC_RELAXED));
		abort();
	}
	hold_record(q, w->now > s->pop_tsc ? w->now - s->pop_tsc : 0);
	ctr_set(&q->st.extbuf_in_use, q->outstanding - 1);
	if (q->mq)
		sn_quota_give(q->mq, q->mq_owner, s->nseg);
	if (s->epoch != q->epoch || !q->vr ||
	    unlikely(__atomic_load_n(&q->abandoned, __ATOMIC_RELAXED))) {
		ctr_inc(&q->st.late_free);
		late_done(q);
		/* The last access to q and s: from it on, sn_vqtx_free()
		 * may free q. */
		sn_vqtx_late_put(q, 1);
		return;
	}
	q->outstanding--;
	if (unlikely(s->mgen != q->mgen))
		old_frame_done(q);
	complete(q, s->head);
}

void sn_vqtx_extbuf_free_cb(void *addr, void *opaque)
{
	(void)addr;
	frame_done(opaque);
}

static void stash_noop_cb(void *addr, void *opaque)
{
	(void)addr, (void)opaque;
}

/* Owner: the stash back to the pool. Stashed mbufs hold no guest buffer:
 * detached by the no-op callback (the dummy shinfo's count set to 1 before
 * each, as after an attach). Out of line: sn_vqtx_set_now() stays a leaf
 * without a frame on its per-iteration path. */
__rte_noinline void sn_vqtx_stash_flush(struct sn_vqtx_worker *w)
{
	while (w->nstash) {
		rte_mbuf_ext_refcnt_set(&w->stash_shinfo, 1);
		rte_pktmbuf_free(w->stash[--w->nstash]);
	}
	w->stash_idle = 0;
}

/* frame_done()'s accounting for a run of
 * frames of one queue, added once: the owner check once per run,
 * outstanding and extbuf_in_use once, the hold histogram per run of one
 * bucket, hold_max once (the same sums and maximum as per frame), and the
 * run's completions in order with one sn_vring_used_put0_bulk() (the same
 * used entries as complete() per frame). Everything lives in the caller's
 * registers: the helpers are inlined. */
struct done_run {
	struct sn_vqtx *q;
	uint32_t n;
	uint32_t units;        /* their segments charged to q->mq (slot nseg) */
	unsigned b;            /* current hold bucket, SN_VQTX_HOLD_BUCKETS: none */
	uint64_t bn;           /* frames in it */
	uint64_t max;          /* longest hold of the run */
	uint64_t last_pop;     /* pop_tsc whose bucket is b (valid while bn > 0) */
	uint32_t nh;           /* heads to complete, in order */
	/* q's epoch and map generation and whether its ring exists, read at
	 * run_start (nothing in sn_vqtx_free_bulk changes them) */
	uint32_t epoch;
	uint16_t mgen;
	bool live;
	bool late;             /* some frame of the run was late */
};

#define DONE_INLINE static inline __attribute__((always_inline))

DONE_INLINE void heads_flush(struct done_run *r, const uint16_t *heads)
{
	if (r->nh) {
		if (sn_vring_used_put0_bulk(r->q->vr, heads, r->nh))
			r->q->dirty = true;
		r->nh = 0;
	}
}

DONE_INLINE void hold_flush(struct done_run *r)
{
	if (r->bn) {
		uint64_t *c = &r->q->st.hold_hist[r->b];

		ctr_set(c, *c + r->bn);
		r->bn = 0;
	}
}

DONE_INLINE void run_flush(struct done_run *r, const uint16_t *heads)
{
	struct sn_vqtx *q = r->q;

	if (!q)
		return;
	heads_flush(r, heads);
	hold_flush(r);
	ctr_set(&q->st.extbuf_in_use, q->outstanding - r->n);
	if (q->mq && r->units)
		sn_quota_give(q->mq, q->mq_owner, r->units);
	if (r->max > q->st.hold_max)
		ctr_set(&q->st.hold_max, r->max);
	r->q = NULL;
	/* The decrement is the last access to q: from it on, sn_vqtx_free()
	 * may free q (a late run). */
	if (unlikely(r->late))
		sn_vqtx_late_put(q, r->n);   /* may free q */
	else
		q->outstanding -= r->n;
}

static __rte_noinline void owner_abort(const struct sn_vqtx *q)
{
	sn_log_err("vqtx: fatal: frame freed on lcore %u, owner is worker %u on lcore %u",
	       rte_lcore_id(), q->w->idx, __atomic_load_n(&q->w->lcore, __ATOMIC_RELAXED));
	abort();
}

DONE_INLINE void run_start(struct done_run *r, const uint16_t *heads, struct sn_vqtx *q)
{
	run_flush(r, heads);
	if (unlikely(sn_vqtx_self != q->w))
		owner_abort(q);
	r->q = q;
	r->n = 0;
	r->units = 0;
	r->b = SN_VQTX_HOLD_BUCKETS;
	r->bn = 0;
	r->max = 0;
	r->nh = 0;
	r->epoch = q->epoch;
	r->mgen = q->mgen;
	r->live = q->vr != NULL && !__atomic_load_n(&q->abandoned, __ATOMIC_RELAXED);
	r->late = false;
}

void sn_vqtx_free_bulk(struct rte_mbuf **pkts, unsigned n)
{
	struct rte_mbuf *rest[SN_CONFIG_BURST_MAX];
	uint16_t heads[SN_CONFIG_BURST_MAX];
	struct done_run r = { .q = NULL };
	/* The frames' worker, from the first frame of ours (run_start checks
	 * that every one is of the calling worker), and its stash count, pool
	 * and clock in locals (the loop's stores may alias w for the
	 * compiler). */
	struct sn_vqtx_worker *w = NULL;
	struct rte_mempool *smp = NULL;
	unsigned nrest = 0, nstash = 0;
	uint64_t now = 0;
	bool stashed = false;

	for (unsigned i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		/* Ours, one segment, no other reference to the mbuf or to the
		 * guest buffer, room in the stash and of its pool: complete
		 * here and keep the mbuf. */
		if (RTE_MBUF_HAS_EXTBUF(m) && m->shinfo->free_cb == sn_vqtx_extbuf_free_cb &&
		    m->nb_segs == 1 && rte_mbuf_refcnt_read(m) == 1 &&
		    rte_mbuf_ext_refcnt_read(m->shinfo) == 1) {
			/* frame_done(s), its counters per run (done_run) */
			struct slot *s = m->shinfo->fcb_opaque;
			struct sn_vqtx *q = s->q;
			const uint64_t pop = s->pop_tsc;

			if (q != r.q) {
				run_start(&r, heads, q);
				if (w == NULL) {
					w = q->w;
					nstash = w->nstash;
					now = w->now;
					if (w->stash_mp == NULL) {   /* its first frame stashed */
						w->stash_mp = m->pool;
						w->stash_shinfo.free_cb = stash_noop_cb;
					}
					smp = w->stash_mp;
				}
			}
			/* a run started for a frame freed below instead only
			 * splits the queue's completions in two bulk writes */
			if (unlikely(nstash >= STASH_MAX || m->pool != smp))
				goto not_stashed;
			r.n++;
			/* what the pop charged: a frame whose tail was freed
			 * apart is one mbuf now, still charged for all */
			r.units += s->nseg;
			/* the frames of a burst were mostly popped in one
			 * iteration (one pop_tsc per hold class): a frame with
			 * the previous frame's pop_tsc has its hold, bucket and
			 * max, so only the bucket's count moves */
			if (pop != r.last_pop || r.bn == 0) {
				const uint64_t cycles = now > pop ? now - pop : 0;
				unsigned b = cycles ? 63u - (unsigned)__builtin_clzll(cycles) : 0;

				if (b >= SN_VQTX_HOLD_BUCKETS)
					b = SN_VQTX_HOLD_BUCKETS - 1;
				if (b != r.b) {
					hold_flush(&r);
					r.b = b;
				}
				r.max = RTE_MAX(r.max, cycles);
				r.last_pop = pop;
			}
			r.bn++;
			if (s->epoch != r.epoch || !r.live) {
				ctr_inc(&q->st.late_free);
				late_done(q);
				r.late = true;
			} else {
				/* popped through an older guest memory map */
				if (unlikely(s->mgen != r.mgen))
					old_frame_done(q);
				/* complete(q, s->head), in order */
				if (unlikely(r.nh == RTE_DIM(heads)))
					heads_flush(&r, heads);
				heads[r.nh++] = s->head;
			}
			/* the dummy's count is set to 1 once, after the loop:
			 * only a free of a stashed mbuf reads it, and each of
			 * those sets it first (stash_flush, put_back) */
			m->shinfo = &w->stash_shinfo;
			w->stash[nstash++] = m;
			stashed = true;
			continue;
		}
not_stashed:
		rest[nrest++] = m;
		if (nrest == SN_CONFIG_BURST_MAX) {
			/* its completions come after those before it; the run
			 * ends here, as one of these frees may reap its queue */
			run_flush(&r, heads);
			if (w)
				w->nstash = nstash;
			rte_pktmbuf_free_bulk(rest, nrest);
			nrest = 0;
		}
	}
	run_flush(&r, heads);
	if (w)
		w->nstash = nstash;
	if (stashed) {
		rte_mbuf_ext_refcnt_set(&w->stash_shinfo, 1);
		w->stash_idle = 0;
	}
	if (nrest)
		rte_pktmbuf_free_bulk(rest, nrest);
}

void sn_vqtx_set_now(unsigned worker, uint64_t now)
{
	struct sn_vqtx_worker *w = &sn_vqtx_workers[worker];

	w->now = now;
	if (unlikely(w->nstash != 0) && ++w->stash_idle >= STASH_IDLE_ITERS)
		sn_vqtx_stash_flush(w);
}
