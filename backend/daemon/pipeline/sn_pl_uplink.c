/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_uplink.c — uplink transmission: PMD burst, direct vhost enqueue, guest GSO. */
#include "sn_pl_internal.h"

static void count_uplink(struct sn_pipeline *pl, struct rte_mbuf *m, bool arb)
{
	struct sn_pipeline_port_stats *st = side_st(pl, m, arb);

	count_sent(pl, m, arb);
	ctr_add(&st->uplink_packets, 1);
	ctr_add(&st->uplink_bytes, m->pkt_len);
	if (!arb || !pl->arb_remote) {
		sn_classify_uplinked(pl->cls, meta_of(pl, m)->src, meta_of(pl, m)->cls, m->pkt_len);
	} else if (meta_of(pl, m)->cls < SN_POLICY_CLASSES_MAX) {
		/* Remote arbiter: its own copy (sn_classify is the worker's). */
		uint64_t *c = pl->ps[meta_of(pl, m)->src].a_clup[meta_of(pl, m)->cls];

		ctr_add(&c[0], 1);
		ctr_add(&c[1], m->pkt_len);
	}
}

/* s11-S: count_uplink()'s per-port part for rpk frames / rby bytes of one
 * port (sent + uplink), and its per-class part for one frame. */
static inline void count_run(struct sn_pipeline_port_stats *st, uint64_t rpk, uint64_t rby)
{
	ctr_add(&st->sent_packets, rpk);
	ctr_add(&st->sent_bytes, rby);
	ctr_add(&st->uplink_packets, rpk);
	ctr_add(&st->uplink_bytes, rby);
}

static void count_class_uplink(struct sn_pipeline *pl, uint16_t src, uint8_t cls, uint32_t len,
			       bool arb)
{
	if (!arb || !pl->arb_remote) {
		sn_classify_uplinked(pl->cls, src, cls, len);
	} else if (cls < SN_POLICY_CLASSES_MAX) {
		uint64_t *c = pl->ps[src].a_clup[cls];

		ctr_add(&c[0], 1);
		ctr_add(&c[1], len);
	}
}

/* The uplink port's TX counters for k of n frames sent (bytes: theirs). */
static inline void count_port_tx(struct sn_pipeline *pl, struct sn_port *up, bool remote,
				 uint16_t k, uint16_t n, uint64_t bytes)
{
	sn_port_ctr_add(remote ? &pl->up.tx_packets : &up->st.tx_packets, k);
	sn_port_ctr_add(remote ? &pl->up.tx_bytes : &up->st.tx_bytes, bytes);
	if (k < n)
		sn_port_ctr_add(remote ? &pl->up.ring_full : &up->st.drop[SN_DROP_RING_FULL], n - k);
}

/* s14-S4: tx_plain() to a net_vhost uplink's peer directly (see there):
 * the frames are still ours after the copy, so the counters are taken from
 * them in one pass over the sent ones, then all n are freed in bulk. s20:
 * with arb_release()'s runs (rr, arbiter half) and every frame sent and
 * none with a class, the counters come from the runs without that pass. */
static void tx_direct(struct sn_pipeline *pl, struct sn_port *up, int vid, struct rte_mbuf **pkts,
		      uint16_t n, bool arb, const struct rel_runs *rr)
{
	const bool remote = arb && pl->arb_remote;
	const uint16_t k = sn_port_uplink_enqueue(vid, arb ? pl->arb_txq : pl->txq, pkts, n);
	struct sn_pipeline_port_stats *cur = NULL;
	uint64_t bytes = 0, rby0 = 0;

	if (rr && k == n && !rr->cls) {
		for (uint16_t r = 0; r < rr->nr; r++)
			count_run(&rr->own[r]->ps[rr->src[r]].ast,
				  (uint64_t)(rr->start[r + 1] - rr->start[r]),
				  rr->bytes[r + 1] - rr->bytes[r]);
		count_port_tx(pl, up, remote, k, n, rr->bytes[rr->nr]);
		goto release;
	}
	/* s15-P5: a run of one counter block is found on the meta's (src,
	 * wk) bytes (side_st() is a function of them), its block looked up
	 * once per run; a run's frames and bytes are differences of the
	 * index and of the byte total at its start. */
	const int moff = pl->meta_off;
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
			cur = side_st(pl, m, arb);
			last = key;
			rs = i;
			rby0 = bytes;
		}
		bytes += len;
		if (md->cls != SN_CLASSIFY_NONE)
			count_class_uplink(pl, md->src, md->cls, len, arb);
	}
	if (cur)
		count_run(cur, (uint64_t)(k - rs), bytes - rby0);
	count_port_tx(pl, up, remote, k, n, bytes);
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
static void tx_plain(struct sn_pipeline *pl, struct sn_port *up, struct rte_mbuf **pkts,
		     uint16_t n, bool arb, bool vlan, const struct rel_runs *rr)
{
	/* A remote arbiter counts the uplink's TX in pl->up (the worker
	 * writes up->st): one writer per counter. */
	const bool remote = arb && pl->arb_remote;
	const uint16_t txq = arb ? pl->arb_txq : pl->txq;
	/* s14-S4 (issue 6 throughput): a net_vhost uplink whose peer is
	 * connected takes the frames straight into the peer's ring
	 * (sn_port_uplink_enqueue: the same vhost-library copy the PMD
	 * makes, without its per-frame statistics, queue-state atomics and
	 * per-mbuf free: ~90 instructions per frame, callgrind); every mbuf
	 * then stays ours and the sent ones are freed here in bulk (the
	 * worker: sn_vqtx_free_bulk completes deferred guest frames and keeps
	 * their mbufs). We are a QSBR reader between quiescent states (worker
	 * or arbiter loop), which is what keeps vid valid (sn_port.h). Same
	 * counters, same ring_full drops, completion still after the copy. */
	const int vid = vlan ? -1 : sn_port_uplink_vid(up);

	if (vid >= 0) {
		tx_direct(pl, up, vid, pkts, n, arb, rr);
		return;
	}
	/* s11-S: what the counters need is read before tx_burst (a PMD done
	 * with its mbufs when tx_burst returns, net_vhost, has freed them by
	 * then) and added per run of frames of one port, not per frame. */
	struct sn_pipeline_port_stats *sts[BATCH], *cur;
	uint32_t lens[BATCH];
	uint8_t cls[BATCH];
	uint16_t srcs[BATCH];
	uint64_t bytes = 0, rpk = 0, rby = 0;
	uint16_t k;
	/* s12-S2 (issue 6 throughput), PMD path: a PMD done with its mbufs
	 * when tx_burst returns (up->tx_sync: net_vhost, net_null) frees each
	 * frame it sent, one by one; for a deferred guest frame that free is
	 * the extbuf detach + completion callback + mempool put (~220
	 * instructions per frame). A one-segment frame that only we
	 * reference gets a second reference before tx_burst, so the PMD's
	 * free only drops that one, and the frame is freed here in bulk by
	 * sn_vqtx_free_bulk() (completes it and keeps its mbuf for the next
	 * sn_vqtx_recv(); any other mbuf: one bulk mempool put). Same
	 * completion, same thread: tx_sync is only used when the arbiter half
	 * runs on the worker (!remote, as for the zero-copy in sn_pl_uplink_tx).
	 * Not for a frame asking the PMD for VLAN insertion (it needs the mbuf
	 * unshared). took: bit i = pkts[i] got the extra reference. */
	const bool take = !remote && up->tx_sync;
	struct rte_mbuf *mine[BATCH];
	uint64_t took = 0;
	uint16_t nm = 0;

	static_assert(BATCH <= 64, "took is a 64-bit mask");
	SN_VERIFY(n <= BATCH);
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const struct meta *md = meta_of(pl, m);

		sts[i] = side_st(pl, m, arb);
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
			count_class_uplink(pl, srcs[i], cls[i], lens[i], arb);
	}
	if (k)
		count_run(cur, rpk, rby);
	count_port_tx(pl, up, remote, k, n, bytes);
	/* Not sent (the caller's again): one reference each, freed with the
	 * sent ones that kept our extra reference (s12-S2, above). */
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
 * the switch counts its own). Worker only (the hook is the switch's).
 * Takes ownership. */
static void tx_gso(struct sn_pipeline *pl, struct sn_port *up, struct rte_mbuf *m, bool arb)
{
	int rc = pl->gso ? pl->gso(pl->gso_arg, up, m) : -1;

	if (rc == 1) {
		count_uplink(pl, m, arb);
		sn_port_ctr_add(&up->st.tx_packets, 1);
		sn_port_ctr_add(&up->st.tx_bytes, m->pkt_len);
	} else {
		sn_port_ctr_add(&up->st.drop[rc == 0 ? SN_DROP_RING_FULL : SN_DROP_GSO_FAILED], 1);
	}
	rte_pktmbuf_free(m);
}

/* Transmit on the uplink now; takes ownership of every frame. `arb`: the
 * arbiter half calls (its TX queue, its counters; a remote arbiter returns
 * deferred originals and GSO frames to the worker). rr: arb_release()'s
 * runs of pkts[0 .. n) (arb only) or NULL; used for the burst hold check
 * (s21) and, if every frame goes to tx_plain() as it is, for the counters. */
void sn_pl_uplink_tx(struct sn_pipeline *pl, struct rte_mbuf **pkts, uint16_t n, bool arb,
		      const struct rel_runs *rr)
{
	struct sn_port *up = arb ? pl->a_uplink : pl->uplink;
	const bool remote = arb && pl->arb_remote;
	uint64_t flags = 0;       /* s11-S: OR of the frames' ol_flags */
	uint16_t kept;

	if (!up || !sn_port_is_up(up)) {
		for (uint16_t i = 0; i < n; i++) {
			if (arb)
				sn_pl_a_drop(pl, pkts[i], SN_PL_DROP_DST_GONE);
			else
				drop(pl, pkts[i], SN_PL_DROP_DST_GONE);
		}
		return;
	}
	/* Frames of deferred ports: guest memory must not outlive a device
	 * stop in the PMD, so the uplink gets a private copy; freeing the
	 * original completes its descriptor (sent = completed). A remote
	 * arbiter returns GSO frames (the switch segments them on the
	 * worker, which copies deferred ones there). */
	const bool sync = !remote && up->tx_sync;

	kept = 0;
	/* s15-P5: the hold check per burst: frames [0, ok) are known to be
	 * kept (sn_vqtx_keep_run); the frame at ok gets the per-frame check
	 * (drop or keep), then the run after it is found again. When every
	 * frame is kept and the PMD takes them as they are (sync: no copy,
	 * no remote GSO return), the loop below would only OR their flags
	 * (keep_run did) and keep them in place: skipped. */
	uint64_t ok_flags;
	uint16_t ok;

	/* s21: with one worker every deferred frame is of a queue of that
	 * worker; on its lcore (not a remote arbiter) its bound says at once
	 * whether keep_run would keep them all (elsewhere, e.g. MAIN at
	 * destroy, sn_vqtx_keep_all is false). Only for arb_release()'s
	 * batches, whose pass already gave the flags (rr). */
	if (rr && !remote && pl->n_wk == 1 && sn_vqtx_keep_all(pl->wk_id)) {
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
			if (!rgso && deferred_drop(pl, m, arb))
				continue;
		}
		if (rgso) {
			sn_pl_ret_push(pl, m, RET_GSO, 0);
			continue;
		}
		/* s10-P: a PMD done with its mbufs when tx_burst returns
		 * (sn_port_tx_sync) takes a deferred guest frame itself, from
		 * the worker (the free in the PMD completes it on this lcore). */
		if (sync || !sn_vqtx_of(m, &pop)) {
			pkts[kept++] = m;
			continue;
		}
		c = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX);   /* dynfields (meta) too */
		if (!c) {
			if (arb)
				sn_pl_a_drop(pl, m, SN_PL_DROP_NO_MBUF);
			else
				drop(pl, m, SN_PL_DROP_NO_MBUF);
			continue;
		}
		if (remote)
			sn_pl_ret_push(pl, m, RET_SENT, 0);
		else
			rte_pktmbuf_free(m);
		pkts[kept++] = c;
	}
	n = kept;
	if (!(flags & GSO_FLAGS)) {   /* s11-S: no GSO frame: one burst */
		if (n)
			tx_plain(pl, up, pkts, n, arb, flags & RTE_MBUF_F_TX_VLAN, rr);
		return;
	}
	/* Plain frames in bursts; guest GSO frames are segmented by the
	 * switch one at a time (main's fix O), in order. */
	for (uint16_t i = 0, run = 0; i <= n; i++) {
		struct rte_mbuf *m = i < n ? pkts[i] : NULL;

		if (m && !(m->ol_flags & GSO_FLAGS))
			continue;
		if (i > run)
			tx_plain(pl, up, &pkts[run], (uint16_t)(i - run), arb,
				 flags & RTE_MBUF_F_TX_VLAN, NULL);
		run = (uint16_t)(i + 1);
		if (m)
			tx_gso(pl, up, m, arb);
	}
}
