/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vqtx_pop.c — the worker's TX pop (Carousel §5.2: frames are taken
 * without a copy, their descriptors left outstanding): each descriptor
 * chain becomes a chain of mbufs whose external buffers are the guest
 * buffers, sharing the head's slot shared info, so the last free
 * completes the descriptor (sn_vqtx_done.c). The pop stamps the slot with
 * the iteration clock and the frame's hold class (the opt-in marker,
 * sn_vqtx.h), and takes mbufs from the worker's recycle stash first.
 */
#include "sn_vqtx_impl.h"

#include <rte_byteorder.h>

#include "sn_vnethdr.h"

/* Owner: account a frame's marker; true if it may be held long. */
static bool optin_frame(struct sn_vqtx *q, const struct sn_vring_pkt *p, uint32_t *marked)
{
	if (p->hdr.num_buffers != rte_cpu_to_le_16(SN_VQTX_OPTIN_MAGIC)) {
		ctr_inc(&q->st.unmarked);
		if (!q->opted_out) {
			q->opted_out = true;
			ctr_set(&q->st.opted_in, 0);
			ctr_set(&q->st.opted_out, 1);
		}
		return false;
	}
	(*marked)++;
	if (q->opted_out)
		return false;
	if (q->marked_run < SN_VQTX_OPTIN_AFTER && ++q->marked_run == SN_VQTX_OPTIN_AFTER)
		ctr_set(&q->st.opted_in, 1);
	return true;
}

/* Owner: return mbufs that get_mbufs() handed out and wrap_frame() did not
 * use: stashed ones back to the stash, fresh ones to the pool. A stashed
 * mbuf that does not fit is freed alone, its dummy shinfo's count set to
 * 1 first so that the detach finds it exactly as after an attach. */
static void put_back(struct sn_vqtx_worker *w, struct rte_mbuf **m, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (!RTE_MBUF_HAS_EXTBUF(m[i])) {
			rte_pktmbuf_free(m[i]);
		} else if (w->nstash < STASH_MAX) {
			w->stash[w->nstash++] = m[i];
		} else {
			rte_mbuf_ext_refcnt_set(&w->stash_shinfo, 1);
			rte_pktmbuf_free(m[i]);
		}
	}
}

/* Owner: up to n mbufs of pool mp for sn_vqtx_recv(): stashed ones first
 * (reset like a fresh allocation, still external: wrap_frame re-attaches
 * every field of the buffer), the rest from the pool. Returns how many
 * (n, or the stashed count when the pool is short). */
static uint32_t get_mbufs(struct sn_vqtx_worker *w, struct rte_mempool *mp,
			  struct rte_mbuf **out, uint32_t n)
{
	uint32_t k = 0;

	if (mp == w->stash_mp) {
		uint32_t ns = w->nstash;   /* in a register across the stores */

		while (k < n && ns) {
			struct rte_mbuf *m = w->stash[--ns];

			rte_pktmbuf_reset(m);   /* keeps RTE_MBUF_F_EXTERNAL */
			out[k++] = m;
		}
		w->nstash = ns;
	}
	if (k < n && rte_pktmbuf_alloc_bulk(mp, out + k, n - k) == 0)
		k = n;
	return k;
}

/* Recycled mbuf (get_mbufs): what rte_pktmbuf_attach_extbuf sets, on an
 * mbuf that is external already. */
static inline __attribute__((always_inline)) void
reattach(struct rte_mbuf *m, void *base, uint16_t len, struct rte_mbuf_ext_shared_info *shinfo)
{
	m->buf_addr = base;
	rte_mbuf_iova_set(m, (rte_iova_t)(uintptr_t)base);
	m->buf_len = len;
	m->data_off = 0;
	m->shinfo = shinfo;
}

/* Owner: wrap one good frame's segments (mbufs from *stash, refilled one
 * frame at a time when it runs dry) around its guest buffers. Returns the
 * head mbuf, or NULL when no mbuf could be had (counted by the caller). */
static struct rte_mbuf *wrap_frame(struct sn_vqtx *q, struct rte_mempool *mp,
				   const struct sn_vring_pkt *p, const struct sn_vnethdr_offl *o,
				   struct rte_mbuf **stash, uint32_t *nstash, bool hold_long,
				   uint64_t now)
{
	struct rte_mbuf *own[SN_VRING_MAX_SEGS], **segs;
	struct slot *s;

	if (*nstash >= p->nseg) {
		*nstash -= p->nseg;
		segs = &stash[*nstash];
	} else if (rte_pktmbuf_alloc_bulk(mp, own, p->nseg) == 0) {
		segs = own;
	} else {
		return NULL;
	}
	s = &q->slots[p->head];         /* q, head, free_cb, fcb_opaque: set at start */
	s->nseg = (uint8_t)p->nseg;     /* charged by the caller */
	s->epoch = q->epoch;
	s->mgen = q->mgen;
	s->pop_tsc = hold_long ? now & ~1ULL : now | 1;  /* hold class */
	rte_mbuf_ext_refcnt_set(&s->shinfo, p->nseg);
	if (likely(p->nseg == 1 && RTE_MBUF_HAS_EXTBUF(segs[0]))) {
		/* the common frame on a recycled mbuf: the loop below for
		 * j = 0 of 1, without the loop */
		struct rte_mbuf *m = segs[0];
		const uint16_t len = (uint16_t)p->iov[0].iov_len;

		reattach(m, p->iov[0].iov_base, len, &s->shinfo);
		m->data_len = len;
		m->next = NULL;
		m->nb_segs = 1;
		m->pkt_len = p->len;
		goto offl;
	}
	for (uint16_t j = 0; j < p->nseg; j++) {
		struct rte_mbuf *m = segs[j];
		uint16_t len = (uint16_t)p->iov[j].iov_len;

		if (RTE_MBUF_HAS_EXTBUF(m)) {
			reattach(m, p->iov[j].iov_base, len, &s->shinfo);
		} else {
			rte_pktmbuf_attach_extbuf(m, p->iov[j].iov_base,
						  (rte_iova_t)(uintptr_t)p->iov[j].iov_base,
						  len, &s->shinfo);
		}
		m->data_len = len;
		m->next = j + 1 < p->nseg ? segs[j + 1] : NULL;
	}
	segs[0]->nb_segs = p->nseg;
	segs[0]->pkt_len = p->len;
offl:
	if (o->ol_flags) {
		segs[0]->ol_flags |= o->ol_flags;
		segs[0]->l2_len = o->l2;
		segs[0]->l3_len = o->l3;
		segs[0]->l4_len = o->l4;
		segs[0]->tso_segsz = o->segsz;
		ctr_inc(o->segsz ? &q->st.gso_requests : &q->st.csum_requests);
	}
	return segs[0];
}

/* Owner: charge frame p's segments beyond the one taken for it after the
 * pop (*granted: units taken and not yet charged; left: frames of the
 * burst from p on). False: they do not fit. */
static inline bool charge(struct sn_vqtx *q, const struct sn_vring_pkt *p, uint32_t *granted,
			  uint32_t left)
{
	uint32_t more;

	if (!q->mq)
		return true;
	/* keep one unit for each frame after this one */
	if (*granted >= left - 1 + p->nseg) {
		*granted -= p->nseg;
		return true;
	}
	more = left - 1 + p->nseg - *granted;
	*granted += sn_quota_take(q->mq, q->mq_owner, more);
	if (*granted < left - 1 + p->nseg)
		return false;
	*granted -= p->nseg;
	return true;
}

uint16_t sn_vqtx_recv(struct sn_vqtx *q, struct rte_mempool *mp,
		      struct rte_mbuf **pkts, uint16_t max, uint64_t now, uint64_t *bytes)
{
	struct sn_vring_pkt *vp = q->scratch;
	struct rte_mbuf *stash[SN_CONFIG_BURST_MAX];
	uint32_t n, nstash = 0, good = 0, marked = 0, granted, nseg_max = 1;
	uint64_t by = 0;
	uint16_t out = 0;

	if (max > SN_CONFIG_BURST_MAX)
		max = SN_CONFIG_BURST_MAX;
	/* A pop that returns nothing may still have counted (heads skipped
	 * as head_oob/head_busy, or the ring broken by avail_jump): mark dirty
	 * whenever the avail index moved or the ring broke, so
	 * sn_vqtx_service() publishes those counters while the guest is still
	 * connected. */
	uint16_t a0, a1, u;
	bool was_broken;

	/* A new guest memory table (memory hotplug), rare. */
	if (unlikely(__atomic_load_n(&q->next_map, __ATOMIC_RELAXED) != NULL))
		sn_vqtx_take_map(q);
	was_broken = sn_vring_is_broken(q->vr);

	max = vqtx_budget(q, max);
	if (max == 0) {
		*bytes = 0;
		return 0;
	}
	sn_vring_get_base(q->vr, &a0, &u);
	n = sn_vring_tx_pop(q->vr, vp, max);
	sn_vring_get_base(q->vr, &a1, &u);
	if (n || a1 != a0 || sn_vring_is_broken(q->vr) != was_broken)
		q->dirty = true;
	if (a1 != a0)
		rec_popped(q, vp, n, a1);   /* every head popped, bad ones too */
	*bytes = 0;
	if (n == 0)
		return 0;
	/* one unit per frame popped (the room was read above; a take that
	 * raced another lcore's gets less, and charge() tries again) */
	granted = q->mq ? sn_quota_take(q->mq, q->mq_owner, n) : 0;
	/* One mempool access per burst (the common frame is one segment);
	 * frames that need more, or a pool too low for the whole burst, fall
	 * back to one allocation per frame. Left-overs go back at the end. */
	nstash = get_mbufs(q->w, mp, stash, n);
	for (uint32_t i = 0; i < n; i++) {
		struct sn_vring_pkt *p = &vp[i];
		struct sn_vnethdr_offl o;
		struct rte_mbuf *m;
		bool hold_long;

		if (p->err) {  /* counted by sn_vring under its cause */
			complete(q, p->head);
			continue;
		}
		hold_long = optin_frame(q, p, &marked);
		/* A header asking for nothing (the common frame) skips the
		 * parser call and its memset. */
		if (sn_vnethdr_none(p)) {
			o.ol_flags = 0;
		} else if (sn_vnethdr_parse(p, &o)) {
			ctr_inc(&q->st.offload);
			complete(q, p->head);
			continue;
		}
		if (p->nseg > nseg_max)
			nseg_max = p->nseg;
		if (!charge(q, p, &granted, n - i)) {
			ctr_inc(&q->st.quota_mbufs_dropped);
			complete(q, p->head);
			continue;
		}
		m = wrap_frame(q, mp, p, &o, stash, &nstash, hold_long, now);
		if (m == NULL) {
			if (q->mq)
				sn_quota_give(q->mq, q->mq_owner, p->nseg);
			ctr_inc(&q->st.no_mbuf);
			complete(q, p->head);
			continue;
		}
		q->outstanding++;
		good++;
		by += p->len;
		pkts[out++] = m;
	}
	*bytes = by;
	q->seg_hint = nseg_max >= q->seg_hint / 2 ? nseg_max : q->seg_hint / 2;
	if (granted)   /* the units of frames not wrapped (bad, dropped) */
		sn_quota_give(q->mq, q->mq_owner, granted);
	if (nstash)
		put_back(q->w, stash, nstash);
	/* Per-frame counters once per burst (one writer: this worker). */
	if (marked)
		ctr_set(&q->st.marked, q->st.marked + marked);
	if (good)
		ctr_set(&q->st.popped, q->st.popped + good);
	ctr_set(&q->st.extbuf_in_use, q->outstanding);
	return out;
}
