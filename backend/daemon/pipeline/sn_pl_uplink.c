/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_uplink.c — transmission on the uplink, for either half.
 *
 * The sender is a worker (its TX queue k, its counters; frames of unshaped
 * classes and of ports whose class is not ready) or the arbiter half (its
 * TX queue, the counters it keeps per worker; PSPAT §3.3: the arbiter is
 * the dispatcher). Frames of deferred-completion ports reach the PMD as
 * private copies unless the PMD is done with its mbufs when tx_burst
 * returns on this lcore (tx_sync); a net_vhost uplink with a connected
 * peer is written directly (sn_port_uplink_enqueue). Guest GSO frames are
 * segmented by the switch's hook, on a worker.
 */
#include "sn_pl_internal.h"

static void count_uplink(struct sn_pipeline *pl, struct sn_pl_arb *a, struct rte_mbuf *m)
{
	struct sn_pipeline_port_stats *st = side_st(pl, a, m);
	const struct meta *md = meta_at(a ? a->meta_off : pl->meta_off, m);

	count_sent(pl, a, m);
	ctr_add(&st->uplink_packets, 1);
	ctr_add(&st->uplink_bytes, m->pkt_len);
	if (!a || !a->remote) {
		sn_classify_uplinked(pl->cls, md->src, md->cls, m->pkt_len);
	} else if (md->cls < SN_POLICY_CLASSES_MAX) {
		/* Remote arbiter: its own copy (sn_classify is the worker's). */
		uint64_t *c = a->slot[md->src].clup[md->cls];

		ctr_add(&c[0], 1);
		ctr_add(&c[1], m->pkt_len);
	}
}

/* count_uplink()'s per-port part for rpk frames / rby bytes of one port
 * (sent + uplink). */
static inline void count_run(struct sn_pipeline_port_stats *st, uint64_t rpk, uint64_t rby)
{
	ctr_add(&st->sent_packets, rpk);
	ctr_add(&st->sent_bytes, rby);
	ctr_add(&st->uplink_packets, rpk);
	ctr_add(&st->uplink_bytes, rby);
}

/* count_uplink()'s per-class part for one frame. */
static void count_class_uplink(struct sn_pipeline *pl, struct sn_pl_arb *a, uint16_t src,
			       uint8_t cls, uint32_t len)
{
	if (!a || !a->remote) {
		sn_classify_uplinked(pl->cls, src, cls, len);
	} else if (cls < SN_POLICY_CLASSES_MAX) {
		uint64_t *c = a->slot[src].clup[cls];

		ctr_add(&c[0], 1);
		ctr_add(&c[1], len);
	}
}

/* The uplink port's TX counters for k of n frames sent (bytes: theirs). A
 * remote arbiter counts them in a->up (the workers write up->st): one
 * writer per counter. */
static inline void count_port_tx(struct sn_pl_arb *a, struct sn_port *up, bool remote,
				 uint16_t k, uint16_t n, uint64_t bytes)
{
	sn_port_ctr_add(remote ? &a->up.tx_packets : &up->st.tx_packets, k);
	sn_port_ctr_add(remote ? &a->up.tx_bytes : &up->st.tx_bytes, bytes);
	if (k < n)
		sn_port_ctr_add(remote ? &a->up.ring_full : &up->st.drop[SN_DROP_RING_FULL], n - k);
}

/* tx_plain() to a net_vhost uplink's peer directly: the frames are still
 * ours after the copy, so the counters are taken from them in one pass
 * over the sent ones, then all n are freed in bulk. With arb_release()'s
 * runs (rr), every frame sent and none with a class, the counters come
 * from the runs without that pass. */
static void tx_direct(struct sn_pipeline *pl, struct sn_pl_arb *a, struct sn_port *up, int vid,
		      struct rte_mbuf **pkts, uint16_t n, const struct rel_runs *rr)
{
	const bool remote = a && a->remote;
	const uint16_t k = sn_port_uplink_enqueue(vid, a ? a->txq : pl->txq, pkts, n);
	struct sn_pipeline_port_stats *cur = NULL;
	uint64_t bytes = 0, rby0 = 0;

	if (rr && k == n && !rr->cls) {
		for (uint16_t r = 0; r < rr->nr; r++)
			count_run(&rr->ctr[r]->st, (uint64_t)(rr->start[r + 1] - rr->start[r]),
				  rr->bytes[r + 1] - rr->bytes[r]);
		count_port_tx(a, up, remote, k, n, rr->bytes[rr->nr]);
		goto release;
	}
	/* A run of one counter block is found on the meta's (src, wk) bytes
	 * (side_st() is a function of them), its block looked up once per
	 * run; a run's frames and bytes are differences of the index and of
	 * the byte total at its start. */
	const int moff = a ? a->meta_off : pl->meta_off;
	uint32_t last = UINT32_MAX;
	uint16_t rs = 0;

	for (uint16_t i = 0; i < k; i++) {
		struct rte_mbuf *m = pkts[i];
		const struct meta *md = RTE_MBUF_DYNFIELD(m, moff, const struct meta *);
		const uint32_t key = (uint32_t)md->src | (uint32_t)md->wk << 16;
		const uint32_t len = m->pkt_len;

		if (key != last) {
			if (cur)
				count_run(cur, (uint64_t)(i - rs), bytes - rby0);
			cur = side_st(pl, a, m);
			last = key;
			rs = i;
			rby0 = bytes;
		}
		bytes += len;
		if (md->cls != SN_CLASSIFY_NONE)
			count_class_uplink(pl, a, md->src, md->cls, len);
	}
	if (cur)
		count_run(cur, (uint64_t)(k - rs), bytes - rby0);
	count_port_tx(a, up, remote, k, n, bytes);
release:
	/* Copied (sent) or refused (ring_full): all ours. A remote arbiter
	 * holds no deferred originals (sn_pl_uplink_tx copied them) and may not
	 * use the worker's mbuf stash. */
	if (remote)
		rte_pktmbuf_free_bulk(pkts, n);
	else
		sn_vqtx_free_bulk(pkts, n);
}

/* Frames without GSO to the uplink (up): one burst; takes ownership.
 * vlan: some frame may ask for VLAN insertion (only the PMD does it). */
static void tx_plain(struct sn_pipeline *pl, struct sn_pl_arb *a, struct sn_port *up,
		     struct rte_mbuf **pkts, uint16_t n, bool vlan, const struct rel_runs *rr)
{
	const bool remote = a && a->remote;
	const uint16_t txq = a ? a->txq : pl->txq;
	const int moff = a ? a->meta_off : pl->meta_off;
	/* A net_vhost uplink whose peer is connected takes the frames
	 * straight into the peer's ring (sn_port_uplink_enqueue: the
	 * vhost-library copy the PMD makes, without its per-frame
	 * statistics, queue-state atomics and per-mbuf free); every mbuf then
	 * stays ours and is freed here in bulk. We are a QSBR reader between
	 * quiescent states (worker or arbiter loop), which keeps vid valid
	 * (sn_port.h). Same counters, same ring_full drops, completion still
	 * after the copy. */
	const int vid = vlan ? -1 : sn_port_uplink_vid(up);

	if (vid >= 0) {
		tx_direct(pl, a, up, vid, pkts, n, rr);
		return;
	}
	/* What the counters need is read before tx_burst (a PMD done with
	 * its mbufs when tx_burst returns has freed them by then) and added
	 * per run of frames of one port. */
	struct sn_pipeline_port_stats *sts[BATCH], *cur;
	uint32_t lens[BATCH];
	uint8_t cls[BATCH];
	uint16_t srcs[BATCH];
	uint64_t bytes = 0, rpk = 0, rby = 0;
	uint16_t k;
	/* A PMD done with its mbufs when tx_burst returns (up->tx_sync) frees
	 * each frame it sent one by one, for a deferred guest frame the
	 * extbuf detach + completion callback + mempool put. A one-segment
	 * frame only we reference gets a second reference before tx_burst,
	 * so the PMD's free only drops that one, and the frame is freed here
	 * in bulk by sn_vqtx_free_bulk() (completes it, keeps its mbuf for the
	 * next sn_vqtx_recv()). Same completion, same thread: only when the
	 * sender runs on a worker (!remote). Not for a frame asking the PMD
	 * for VLAN insertion (it needs the mbuf unshared). took: bit i =
	 * pkts[i] got the extra reference. */
	const bool take = !remote && up->tx_sync;
	struct rte_mbuf *mine[BATCH];
	uint64_t took = 0;
	uint16_t nm = 0;

	static_assert(BATCH <= 64, "took is a 64-bit mask");
	SN_VERIFY(n <= BATCH);
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const struct meta *md = meta_at(moff, m);

		sts[i] = side_st(pl, a, m);
		lens[i] = m->pkt_len;
		cls[i] = md->cls;
		srcs[i] = md->src;
	}
	for (uint16_t i = 0; take && i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		if (m->nb_segs == 1 && rte_mbuf_refcnt_read(m) == 1 &&
		    !(m->ol_flags & RTE_MBUF_F_TX_VLAN)) {
			rte_mbuf_refcnt_set(m, 2);
			mine[nm++] = m;
			took |= 1ull << i;
		}
	}
	k = rte_eth_tx_prepare(up->eth_port, txq, pkts, n);
	k = rte_eth_tx_burst(up->eth_port, txq, pkts, k);
	cur = k ? sts[0] : NULL;
	for (uint16_t i = 0; i < k; i++) {
		if (sts[i] != cur) {
			count_run(cur, rpk, rby);
			cur = sts[i];
			rpk = rby = 0;
		}
		rpk++;
		rby += lens[i];
		bytes += lens[i];
		if (cls[i] != SN_CLASSIFY_NONE)
			count_class_uplink(pl, a, srcs[i], cls[i], lens[i]);
	}
	if (k)
		count_run(cur, rpk, rby);
	count_port_tx(a, up, remote, k, n, bytes);
	/* Not sent (the caller's again): one reference each, freed with the
	 * sent ones that kept our extra reference (above). */
	for (uint16_t i = k; i < n; i++) {
		if (took & (1ull << i))
			rte_mbuf_refcnt_set(pkts[i], 1);
		else
			rte_pktmbuf_free(pkts[i]);
	}
	if (nm)
		sn_vqtx_free_bulk(mine, nm);
}

/* One guest GSO frame to the uplink: segmented by the switch's hook.
 * Counted as one frame (sent, or ring_full / gso_failed on the uplink, as
 * the switch counts its own). On a worker only (pl: the hook is the
 * switch's). Takes ownership. */
static void tx_gso(struct sn_pipeline *pl, struct sn_pl_arb *a, struct sn_port *up,
		   struct rte_mbuf *m)
{
	int rc = pl->gso ? pl->gso(pl->gso_arg, up, m) : -1;

	if (rc == 1) {
		count_uplink(pl, a, m);
		sn_port_ctr_add(&up->st.tx_packets, 1);
		sn_port_ctr_add(&up->st.tx_bytes, m->pkt_len);
	} else {
		sn_port_ctr_add(&up->st.drop[rc == 0 ? SN_DROP_RING_FULL : SN_DROP_GSO_FAILED], 1);
	}
	rte_pktmbuf_free(m);
}

/* Transmit on the uplink now; takes ownership of every frame. A remote
 * arbiter returns deferred originals (after the copy) and GSO frames to
 * their worker. rr, if not NULL, serves the burst hold check and, if
 * every frame goes to tx_plain() as it is, the counters. */
void sn_pl_uplink_tx(struct sn_pipeline *pl, struct sn_pl_arb *a, struct rte_mbuf **pkts,
		     uint16_t n, const struct rel_runs *rr)
{
	struct sn_port *up = a ? a->uplink : pl->uplink;
	const bool remote = a && a->remote;
	uint64_t flags = 0;       /* OR of the frames' ol_flags */
	uint16_t kept;

	if (!up || !sn_port_is_up(up)) {
		for (uint16_t i = 0; i < n; i++) {
			if (a)
				sn_pl_a_drop(a, pkts[i], SN_PL_DROP_DST_GONE);
			else
				drop(pl, pkts[i], SN_PL_DROP_DST_GONE);
		}
		return;
	}
	/* Frames of deferred ports: guest memory must not outlive a device
	 * stop in the PMD, so the uplink gets a private copy; freeing the
	 * original completes its descriptor (sent = completed). */
	const bool sync = !remote && up->tx_sync;

	kept = 0;
	/* The hold check per burst: frames [0, ok) are known to be kept
	 * (sn_vqtx_keep_run); the frame at ok gets the per-frame check (drop
	 * or keep), then the run after it is found again. When every frame
	 * is kept and the PMD takes them as they are (sync), the loop below
	 * would only OR their flags (keep_run did): skipped. */
	uint64_t ok_flags;
	uint16_t ok;

	/* With one worker every deferred frame is of a queue of that worker;
	 * on its lcore (not a remote arbiter) its bound says at once whether
	 * keep_run would keep them all (on any other thread sn_vqtx_keep_all
	 * is false). Only for arb_release()'s batches, whose pass already
	 * gave the flags (rr). */
	if (rr && !remote && a->n_wk == 1 && sn_vqtx_keep_all(pl->wk_id)) {
		ok = n;
		ok_flags = rr->flags;
	} else {
		ok = sn_vqtx_keep_run(pkts, n, &ok_flags);
	}

	if (likely(sync && ok == n)) {
		flags = ok_flags;
		kept = n;
		n = 0;
	} else {
		rr = NULL;
	}
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i], *c;
		uint64_t pop;

		const bool rgso = remote && (m->ol_flags & GSO_FLAGS);

		flags |= m->ol_flags;
		if (unlikely(i == ok)) {
			/* pkts[i + 1 ..] are not compacted over yet (kept <= i) */
			ok = (uint16_t)(i + 1 + sn_vqtx_keep_run(&pkts[i + 1], (uint16_t)(n - i - 1),
								  &ok_flags));
			if (!rgso && deferred_drop(pl, a, &m))
				continue;
		}
		if (rgso) {
			sn_pl_ret_push(a, m, RET_GSO, 0);
			continue;
		}
		/* A PMD done with its mbufs when tx_burst returns takes a
		 * deferred guest frame itself (its free completes it on this
		 * lcore). */
		if (sync || !sn_vqtx_of(m, &pop)) {
			pkts[kept++] = m;
			continue;
		}
		c = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX);   /* dynfields (meta) too */
		if (!c) {
			if (a)
				sn_pl_a_drop(a, m, SN_PL_DROP_NO_MBUF);
			else
				drop(pl, m, SN_PL_DROP_NO_MBUF);
			continue;
		}
		if (remote)
			sn_pl_ret_push(a, m, RET_SENT, 0);
		else
			rte_pktmbuf_free(m);
		pkts[kept++] = c;
	}
	n = kept;
	if (!(flags & GSO_FLAGS)) {   /* no GSO frame: one burst */
		if (n)
			tx_plain(pl, a, up, pkts, n, flags & RTE_MBUF_F_TX_VLAN, rr);
		return;
	}
	/* Plain frames in bursts; guest GSO frames are segmented by the
	 * switch one at a time, in order. */
	for (uint16_t i = 0, run = 0; i <= n; i++) {
		struct rte_mbuf *m = i < n ? pkts[i] : NULL;

		if (m && !(m->ol_flags & GSO_FLAGS))
			continue;
		if (i > run)
			tx_plain(pl, a, up, &pkts[run], (uint16_t)(i - run),
				 flags & RTE_MBUF_F_TX_VLAN, NULL);
		run = (uint16_t)(i + 1);
		if (m)
			tx_gso(pl, a, up, m);
	}
}
