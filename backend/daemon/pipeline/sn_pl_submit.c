/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_submit.c — the worker half: submit (Carousel timestamps, the
 * timing wheel and its fast path), dispatch of due frames to VM ports
 * (staged, then one vhost enqueue per port) and to the uplink (the port's
 * client mailbox, or the scheduler directly in layout 1core). */
#include "sn_pl_internal.h"

static void stage_vm(struct sn_pipeline *pl, struct sn_port *p, struct rte_mbuf *m);

/* Nodes a slot holding d nodes takes from the shared part. */
static inline uint64_t excess(const struct sn_pipeline *pl, uint64_t d)
{
	return d > pl->wheel_rsv ? d - pl->wheel_rsv : 0;
}

/* Wheel nodes port slot ps may hold now: its quota (a relaxed load,
 * sn_port_quota; 0 = no cap), and no more than its reserve plus its
 * excess plus the shared nodes nobody holds, so the other slots' reserves
 * stay free. Only this worker moves wheel_excess: the limit holds for a
 * whole submit burst of ps. */
static inline uint64_t wheel_limit(const struct sn_pipeline *pl, const struct wslot *ps,
				   const struct sn_port *in)
{
	const uint32_t q = __atomic_load_n(&in->quota.wheel, __ATOMIC_RELAXED);
	const uint64_t lim = pl->wheel_rsv + excess(pl, ps->st.wheel_depth) +
			     (pl->wheel_shared - pl->wheel_excess);

	return q ? RTE_MIN((uint64_t)q, lim) : lim;
}

/* Layout 1core: the worker is the arbiter thread, so its frames of
 * slot src enter the scheduler without the client-mailbox hop
 * (sn_arbiter_enqueue_local: same order, same drop causes and counters as
 * a scan of the mailbox). In this layout the mailboxes are never used, so
 * nothing can be overtaken. Counted held before the enqueue: a refused
 * frame leaves through arb_drop() at once. Takes ownership. */
static void arb_local(struct sn_pipeline *pl, uint16_t src, struct rte_mbuf **pkts, uint16_t n)
{
	struct arbset *as = pl->w_aset;

	ctr_add(&pl->ps[src].st.qfq_backlog, n);
	pl->held += n;
	(void)sn_arbiter_enqueue_local(as->arb, as->cl[pl->wk_id][src], (void *const *)pkts, n);
}

/* The uplink copy of a due frame: through the arbiter if its port has a
 * class there (aslot.ready, sn_pl_internal.h), else straight out on
 * the worker's queue. Takes ownership of m. */
static void to_uplink(struct sn_pipeline *pl, struct rte_mbuf *m)
{
	const uint16_t src = meta_of(pl, m)->src;
	struct wslot *ps = &pl->ps[src];
	const struct aslot *aps = &pl->arb->slot[src];   /* arbiter half's */

	/* Fair dropping (sn_fdrop.h, Algorithm 1): the uplink is the
	 * overloaded resource; a frame of a flow whose virtual queue is above
	 * θ is dropped here instead of by arrival order at a full queue. On
	 * the worker in every layout (its state is the worker's). */
	if (pl->fd && sn_fdrop_decide(pl->fd, sn_classify_flow_hash(m), m->pkt_len + pl->overhead,
				      pl->now) == SN_FDROP_DROP) {
		drop(pl, m, SN_PL_DROP_FAIR);
		return;
	}
	if (!ps->has_class || !__atomic_load_n(&aps->ready, __ATOMIC_RELAXED)) {
		sn_pl_uplink_tx(pl, NULL, &m, 1, NULL);
		return;
	}
	if (!pl->split) {
		arb_local(pl, src, &m, 1);
		return;
	}
	/* PSPAT immediate backpressure: a full mailbox is a counted drop
	 * (the wheel upstream keeps the rate; deferred sources are held
	 * back by their own ring). */
	if (sn_arbiter_submit(pl->w_aset->clist[pl->wk_id], pl->w_aset->mbox[pl->wk_id][src], m)) {
		drop(pl, m, SN_PL_DROP_MBOX_FULL);
		return;
	}
	ctr_add(&ps->st.qfq_backlog, 1);
}

/* The uplink copies of a burst of due frames of ONE port (submit's
 * fast path), in order: fair dropping per frame as in to_uplink(), then
 * one client-mailbox publication (sn_mbox_insert_burst + one client-list
 * append: the same items in the same order as per-frame
 * sn_arbiter_submit). Takes ownership. */
static void to_uplink_burst(struct sn_pipeline *pl, struct rte_mbuf **pkts, uint16_t n)
{
	const uint16_t src = meta_of(pl, pkts[0])->src;
	struct wslot *ps = &pl->ps[src];
	const struct aslot *aps = &pl->arb->slot[src];   /* arbiter half's */
	struct sn_mbox *mb;
	uint32_t k;

	if (pl->fd) {
		uint16_t kept = 0;

		for (uint16_t i = 0; i < n; i++) {
			struct rte_mbuf *m = pkts[i];

			if (sn_fdrop_decide(pl->fd, sn_classify_flow_hash(m),
					    m->pkt_len + pl->overhead, pl->now) == SN_FDROP_DROP)
				drop(pl, m, SN_PL_DROP_FAIR);
			else
				pkts[kept++] = m;
		}
		n = kept;
		if (!n)
			return;
	}
	if (!ps->has_class || !__atomic_load_n(&aps->ready, __ATOMIC_RELAXED)) {
		sn_pl_uplink_tx(pl, NULL, pkts, n, NULL);
		return;
	}
	if (!pl->split) {
		arb_local(pl, src, pkts, n);
		return;
	}
	mb = pl->w_aset->mbox[pl->wk_id][src];
	k = sn_mbox_insert_burst(mb, (void *const *)pkts, n);
	if (k) {
		(void)sn_mbox_cl_append(pl->w_aset->clist[pl->wk_id], mb);
		ctr_add(&ps->st.qfq_backlog, k);
	}
	/* PSPAT immediate backpressure, as in to_uplink(). */
	for (uint32_t i = k; i < n; i++)
		drop(pl, pkts[i], SN_PL_DROP_MBOX_FULL);
}

void sn_pl_flush_vm(struct sn_pipeline *pl)
{
	for (unsigned i = 0; i < pl->n_touched; i++) {
		struct stage *s = &pl->stage[pl->touched[i]];
		struct sn_port *p = s->port;
		uint64_t bytes = 0;
		uint16_t k = 0;

		if (sn_port_is_up(p))
			k = sn_port_vhost_enqueue(p, s->pkts, s->n); /* MQ: flow hash */
		for (uint16_t j = 0; j < k; j++) {
			bytes += s->pkts[j]->pkt_len;
			count_sent(pl, NULL, s->pkts[j]);
		}
		sn_port_ctr_add(&p->st.tx_packets, k);
		sn_port_ctr_add(&p->st.tx_bytes, bytes);
		if (k < s->n)
			sn_port_ctr_add(&p->st.drop[SN_DROP_RING_FULL], s->n - k);
		for (uint16_t j = k; j < s->n; j++)
			sn_port_count_rxq_full(p, s->pkts[j]);
		/* vhost enqueue copies: every staged reference is ours. */
		rte_pktmbuf_free_bulk(s->pkts, s->n);
		s->n = 0;
	}
	pl->n_touched = 0;
}

/* Stage one reference of m (the caller's) for VM port p. */
static void stage_vm(struct sn_pipeline *pl, struct sn_port *p, struct rte_mbuf *m)
{
	struct stage *s = &pl->stage[p->slot];

	if (s->n == BATCH)
		sn_pl_flush_vm(pl);
	if (s->n == 0) {
		s->port = p;
		pl->touched[pl->n_touched++] = p->slot;
	}
	s->pkts[s->n++] = m;
}

/* A frame left the wheel (or had no rate): deliver to its destination(s). */
void sn_pl_dispatch(struct sn_pipeline *pl, struct rte_mbuf *m)
{
	const struct meta *md;
	const struct sn_port_table *t = pl->t;
	unsigned ndst = 0;

	if (deferred_drop(pl, NULL, &m))
		return;
	md = meta_of(pl, m);

	if (md->dst != DST_FLOOD) {
		struct sn_port *p = t->by_slot[md->dst];

		if (!p || p->gen != md->dst_gen || !sn_port_is_up(p)) {
			drop(pl, m, SN_PL_DROP_DST_GONE);
			return;
		}
		if (p->type == SN_PORT_UPLINK)
			to_uplink(pl, m);
		else
			stage_vm(pl, p, m);
		return;
	}
	for (unsigned j = 0; j < t->n; j++) {
		struct sn_port *p = t->list[j];

		if (p->slot == md->src || !sn_port_is_up(p))
			continue;
		/* Every segment: the PMD frees a chain segment by segment. */
		rte_pktmbuf_refcnt_update(m, 1);
		ndst++;
		if (p->type == SN_PORT_UPLINK)
			to_uplink(pl, m);
		else
			stage_vm(pl, p, m);
	}
	if (ndst == 0) {
		/* No port up to take the flood: unknown_dst on the ingress
		 * port, as the switch counts it (sn_switch.c). */
		struct sn_port *in = t->by_slot[md->src];

		if (in && in->gen == md->src_gen)
			sn_port_ctr_add(&in->st.drop[SN_DROP_UNKNOWN_DST], 1);
	}
	rte_pktmbuf_free(m);
}

/* ---- Submit ------------------------------------------------------------------
 * A burst of shaped frames from one port is classified, stamped and counted
 * as a burst (one store per counter per burst), and the frames that need no
 * wheel round-trip leave at the end of the burst in order, their uplink
 * copies with one client-mailbox publication.
 *
 * Carousel fast path (§5.1.2: a packet whose timestamp is not in the future
 * is sent at once). A frame whose consolidated timestamp ts is not in the
 * future (ts <= the iteration clock, else <= a clock read once per burst)
 * while its port has no frame in the wheel goes straight to dispatch: the
 * wheel would release it at its first extract at or after ts, ahead of
 * nothing of its port (wheel_depth 0, and every earlier frame of this burst
 * is ahead of it in due[]), so the port's FIFO order, its timestamps (the
 * LTS is committed exactly as on insert) and hence every limit it crosses
 * are the same; it only leaves up to one slot + one iteration earlier,
 * never before ts. The released_* counters may then include frames
 * released up to one burst after clock_ns (the exact-pair contract of
 * sn_pipeline_run_seq() is about frames due at clock_ns). */
static void due_flush(struct sn_pipeline *pl, struct rte_mbuf **due, uint16_t n);
static void due_flush_one(struct sn_pipeline *pl, struct rte_mbuf **due, uint16_t n,
			  const struct sn_port *d);

/* Submit's fast prefix: the leading frames of a burst of a port without
 * flow classes whose wheel is empty, in a loop of their own, doing what
 * submit_chunk's general loop does for such a frame (underrun count,
 * room_lmax, peek, the fast path's clock, commit, meta, release), with
 *  - the port's tstamp in a local copy (no store to an mbuf can alias it:
 *    rate and LTS stay in registers, the LTS is stored back once) and its
 *    floor at `now` computed once (sn_tstamp_peek() is exactly floor +
 *    peek_at);
 *  - the meta as three 8-byte words, rebuilt only when the destination
 *    changes (the same bytes as the struct store);
 *  - the loop compiled once with and once without a port rate.
 * The first frame whose timestamp is in the future stops it uncounted and
 * uncommitted: the general loop takes it and the rest (a frame goes to the
 * wheel, and with it every later one of the port). Returns the frames it
 * released (due[0 .. i)). */
struct fast_acc {
	uint64_t tnow;            /* in/out: submit's fast path clock */
	bool fresh;               /* in/out */
	uint64_t under, bytes;    /* out (bytes: 0 without sum_bytes) */
	const struct sn_port *d0; /* out: destination of due[0] */
	bool same;                /* out: all released frames have d0 */
};

static inline __attribute__((always_inline)) uint16_t
fast_prefix(struct sn_pipeline *pl, struct wslot *ps, struct rte_mbuf **pkts,
	    struct sn_port *const *dst, uint16_t n, struct meta mk, struct rte_mbuf **due,
	    struct fast_acc *acc, const bool has_rate, const bool sum_bytes)
{
	const uint64_t now = pl->now;
	const int moff = pl->meta_off;
	struct sn_tstamp lt = ps->ts;
	struct sn_tstamp_floor fl;
	const struct sn_port *ld = NULL;
	uint64_t tnow = acc->tnow, under = 0, bytes = 0, w[3];
	uint32_t lmax = ps->room_lmax;
	bool fresh = acc->fresh, same = true;
	uint16_t i;

	static_assert(sizeof(struct meta) == sizeof(w), "meta is three words");
	mk.dst = DST_FLOOD;
	mk.dst_gen = 0;
	memcpy(w, &mk, sizeof(w));
	if (has_rate)
		sn_tstamp_floor_at(&lt, now, &fl);
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const uint32_t len = m->pkt_len;
		char *md;

		if (has_rate) {
			struct sn_tstamp_next nx;
			const bool u = lt.lts < now;
			const uint64_t ts = sn_tstamp_peek_at(&lt, now, &fl, len, &nx);

			if (unlikely(ts > tnow)) {
				if (fresh)
					break;
				tnow = now_ns();
				fresh = true;
				if (ts > tnow)
					break;
			}
			if (unlikely(len > lmax))
				lmax = len;
			under += u;
			sn_tstamp_commit(&lt, &nx);
		}
		if (dst[i] != ld) {
			if (i)
				same = false;
			ld = dst[i];
			mk.dst = ld ? ld->slot : DST_FLOOD;
			mk.dst_gen = ld ? ld->gen : 0;
			memcpy(w, &mk, sizeof(w));
		}
		md = RTE_MBUF_DYNFIELD(m, moff, char *);
		memcpy(md, &w[0], 8);
		memcpy(md + 8, &w[1], 8);
		memcpy(md + 16, &w[2], 8);
		if (sum_bytes)   /* else the caller has the burst's sum */
			bytes += len;
		due[i] = m;
	}
	if (has_rate) {
		sn_tstamp_commit(&ps->ts, &(struct sn_tstamp_next){ lt.lts, lt.lts_rem });
		ps->room_lmax = lmax;
	}
	acc->tnow = tnow;
	acc->fresh = fresh;
	acc->under = under;
	acc->bytes = bytes;
	acc->d0 = i ? dst[0] : NULL;
	acc->same = same;
	return i;
}

/* fast_prefix's stamps of a whole burst at once: per frame they form one
 * chain of dependent 64-bit divides. When every frame of the burst turns
 * out due, the port's LTS after it and the last (largest) timestamp come
 * from sn_tstamp_peek_run() instead, bit for bit the same values, and
 * fast_prefix only writes the metas. fast_prefix counts an underrun when
 * the port's LTS is behind `now` before a frame; the LTS only grows along
 * a burst and is at least the floor after the first frame, so with no
 * burst allowance (floor = now) the first frame alone can count, and with
 * one the count is 0 when the LTS starts at or after now. Other cases, a
 * burst over SN_TSTAMP_FAST_LEN bytes, and a last timestamp still in the
 * future after the clock read fast_prefix would also make return false
 * with the port unchanged (acc's clock kept). Returns true with the LTS
 * and room_lmax committed, *under set and *sum = the burst's bytes. */
static inline bool stamp_run(struct sn_pipeline *pl, struct wslot *ps,
			     struct rte_mbuf *const *pkts, uint16_t n, struct fast_acc *acc,
			     uint64_t *under, uint64_t *sum)
{
	const uint64_t now = pl->now;
	const bool behind = ps->ts.lts < now;
	uint32_t lmax = ps->room_lmax;
	struct sn_tstamp_floor fl;
	struct sn_tstamp_next nx;
	uint64_t bytes = 0, ts;

	if (n == 0 || (behind && (ps->ts.burst_ns | ps->ts.burst_rem) != 0))
		return false;
	for (uint16_t i = 0; i < n; i++) {
		const uint32_t len = pkts[i]->pkt_len;

		bytes += len;
		lmax = len > lmax ? len : lmax;
	}
	if (bytes > SN_TSTAMP_FAST_LEN)
		return false;
	sn_tstamp_floor_at(&ps->ts, now, &fl);
	ts = sn_tstamp_peek_run(&ps->ts, now, &fl, pkts[0]->pkt_len, (uint32_t)bytes, &nx);
	if (ts > acc->tnow) {
		if (acc->fresh)     /* fast_prefix's rule */
			return false;
		acc->tnow = now_ns();
		acc->fresh = true;
		if (ts > acc->tnow)
			return false;
	}
	sn_tstamp_commit(&ps->ts, &nx);
	ps->room_lmax = lmax;
	*under = behind;
	*sum = bytes;
	return true;
}

/* The fast prefix of a burst (see fast_prefix): in closed form when the
 * whole burst is due (stamp_run), else frame by frame. acc->under and
 * acc->bytes: its underruns and bytes. */
static inline __attribute__((always_inline)) uint16_t
submit_prefix(struct sn_pipeline *pl, struct wslot *ps, struct rte_mbuf **pkts,
	      struct sn_port *const *dst, uint16_t n, struct meta mk, struct rte_mbuf **due,
	      struct fast_acc *acc)
{
	uint64_t run_under = 0, run_bytes = 0;
	uint16_t i;

	mk.cls = SN_CLASSIFY_NONE;
	if (ps->has_rate && stamp_run(pl, ps, pkts, n, acc, &run_under, &run_bytes)) {
		/* stamped and committed; every frame is due */
		i = fast_prefix(pl, ps, pkts, dst, n, mk, due, acc, false, false);
		acc->under = run_under;
		acc->bytes = run_bytes;
		return i;
	}
	return ps->has_rate ? fast_prefix(pl, ps, pkts, dst, n, mk, due, acc, true, true)
			    : fast_prefix(pl, ps, pkts, dst, n, mk, due, acc, false, true);
}

/* The stock-guest fallback at submit (sn_vqtx_hold.c): a frame of a guest
 * that did not opt in whose release time ts is past its copy-by time
 * leaves its descriptor now and enters the wheel as a copy, in its place.
 * Without an mbuf for the copy the frame is dropped before its stamps are
 * committed: a drop keeps no rate-limit budget. NULL: dropped (counted). */
static __rte_noinline struct rte_mbuf *copy_at_submit(struct sn_pipeline *pl, struct rte_mbuf *m,
						      struct sn_classify_res *cr)
{
	const uint16_t src = meta_of(pl, m)->src;
	const uint32_t len = m->pkt_len;
	struct rte_mbuf *c = sn_vqtx_copy_out(m);

	if (!c) {
		sn_classify_dropped(pl->cls, cr, len, SN_CL_DROP_POOL);
		ctr_add(&pl->ps[src].st.drop[SN_PL_DROP_NO_MBUF], 1);
	}
	return c;
}

/* A frame whose release time ts is in the future, or whose port has
 * frames in the wheel, goes into the wheel; the stamps of the policies it
 * crosses are committed only if the wheel takes it (a drop is counted).
 * Returns 1 if queued. */
/* A frame of port slot ps stamped ts that may be put at the horizon
 * rather than dropped there (sn_pipeline_src_room in sn_pipeline.h): a
 * room call let the port's frames through, its port limit (and peak)
 * start it within the horizon h and they are what stamps it (ts at most
 * the frame's length at the policy's rate, rounded up, after its start). */
static inline bool limit_stamps(const struct sn_tstamp *t, uint64_t now, uint64_t h,
				uint32_t len, uint64_t ts)
{
	const uint64_t start = RTE_MAX(t->lts, now);

	return start < now + h && ts <= start + (uint64_t)len * (t->ns_byte + 1);
}

static inline bool room_clamp(const struct wslot *ps, uint64_t now, uint64_t h, uint32_t len,
			      uint64_t ts)
{
	if (!ps->room_gated || !ps->has_rate)
		return false;
	if (!ps->has_peak)
		return limit_stamps(&ps->ts, now, h, len, ts);
	return RTE_MAX(ps->ts.lts, ps->peak.lts) < now + h &&
	       (limit_stamps(&ps->ts, now, h, len, ts) || limit_stamps(&ps->peak, now, h, len, ts));
}

static inline __attribute__((always_inline)) unsigned
wheel_insert(struct sn_pipeline *pl, struct wslot *ps, struct rte_mbuf *m,
	     struct sn_classify_res *cr, struct sn_tstamp_next *nx, uint64_t ts, uint64_t now,
	     struct wslot *dw)
{
	const uint32_t len = m->pkt_len;
	const uint64_t h = sn_twheel_horizon_ns(pl->wheel);
	bool clamp = cr->clamp, rclamp = false;
	int rc;

	if (RTE_MBUF_HAS_EXTBUF(m) && ts > now && ts - now > sn_vqtx_copy_by_ns(m)) {
		m = copy_at_submit(pl, m, cr);
		if (!m)
			return 0;
	}
	meta_of(pl, m)->ts = ts;
	/* the aggregate's part of ts, for sn_pl_restamp_aggs() */
	*agg_lag(pl, m) = cr->agg ? agg_lag_of(nx, cr->n, now) : AGG_NONE;
	/* (also when ts is just short of the horizon: the wheel's front
	 * may trail now by a slot) */
	if (!clamp && room_clamp(ps, now, h, len, ts)) {
		clamp = true;
		rclamp = ts >= now + h;
	}
	rc = sn_twheel_insert(pl->wheel, m, ts, clamp ? SN_TWHEEL_CLAMP : SN_TWHEEL_REJECT);
	if (rc) {
		sn_classify_dropped(pl->cls, cr, len,
				    rc == -ERANGE ? SN_CL_DROP_HORIZON : SN_CL_DROP_POOL);
		if (dw && rc == -ERANGE)
			ctr_add(&dw->st.in_horizon, 1);
		drop(pl, m, rc == -ERANGE ? SN_PL_DROP_HORIZON : SN_PL_DROP_POOL);
		return 0;
	}
	sn_tstamp_consolidate_commit(cr->pol, cr->n, nx);
	if (rclamp)
		ctr_add(&ps->st.room_clamped, 1);
	if (cr->cls != SN_CLASSIFY_NONE)
		sn_classify_accepted(pl->cls, cr, cr->clamp && ts >= now + h);
	return 1;
}

/* The end of a submit: run_seq even again if it was even before it, or
 * at the end of sn_pipeline_flush() if VM frames are staged. Release: the
 * counter stores happen before the even value; pairs with the reader's
 * acquire load of its first value (sn_pipeline_run_seq()), as run()'s
 * final store does. */
static inline void submit_seq_end(struct sn_pipeline *pl, uint64_t seq0)
{
	if (seq0 & 1)
		return;
	if (pl->n_touched)
		pl->seq_staged = true;
	else
		__atomic_store_n(&pl->run_seq, seq0 + 2, __ATOMIC_RELEASE);
}

/* Some frame of the burst goes to a port with an inbound limit. */
static inline bool any_in_limited(const struct sn_pipeline *pl, struct sn_port *const *dst,
				  uint16_t n)
{
	for (uint16_t i = 0; pl->n_in && i < n; i++)
		if (dst[i] && sn_pipeline_in_limited(pl, dst[i]))
			return true;
	return false;
}

/* A submit changes counters the stats reader pairs with clock_ns
 * (offered, released, drops, qfq_backlog through sn_arbiter_enqueue_local):
 * run_seq is odd across the burst, as in a run() that counts, and even
 * again at its end if it was even before (a lagging run's odd value stays
 * for the next run() to clear); with frames for VM ports staged (counted
 * sent by sn_pl_flush_vm), at the end of sn_pipeline_flush() instead. */
static void submit_chunk(struct sn_pipeline *pl, struct sn_port *in, struct rte_mbuf **pkts,
			 struct sn_port *const *dst, uint16_t n)
{
	struct wslot *ps = &pl->ps[in->slot];
	struct rte_mbuf *due[BATCH];
	const uint64_t now = pl->now;
	const bool has_cls = ps->has_cls, has_rate = ps->has_rate, has_peak = ps->has_peak;
	const bool has_in = any_in_limited(pl, dst, n);
	const bool from_uplink = in->type == SN_PORT_UPLINK;
	uint64_t obytes = 0, rpk = 0, rbytes = 0, under = 0, wd = ps->st.wheel_depth, wd0 = wd;
	uint64_t tnow = now;      /* fast path clock: now, or read once (fresh) */
	bool fresh = false;
	uint16_t nd = 0;
	const uint64_t seq0 = __atomic_load_n(&pl->run_seq, __ATOMIC_RELAXED);
	/* The meta fields common to the burst are set once; each frame's meta
	 * is then one struct store (ts is written on the wheel path, ret_*
	 * when the arbiter returns the frame). */
	struct meta mk = { .src = in->slot, .src_gen = in->gen, .wk = (uint8_t)pl->wk_id };
	uint16_t i = 0;
	const struct sn_port *d0 = NULL;   /* same: every frame of due[] goes to d0 */
	bool same = true;
	/* Quotas: one relaxed load per burst (sn_port_quota); 0 = no cap. */
	const uint64_t wcap = wheel_limit(pl, ps, in);

	seq_counting(pl);
	if (has_cls)
		sn_classify_set_flow_quota(pl->cls, in->slot,
					   __atomic_load_n(&in->quota.flows, __ATOMIC_RELAXED));
	if (!has_cls && !has_peak && !has_in && wd == 0) {
		struct fast_acc acc = { .tnow = tnow, .fresh = fresh, .d0 = NULL, .same = true };

		i = submit_prefix(pl, ps, pkts, dst, n, mk, due, &acc);
		tnow = acc.tnow;
		fresh = acc.fresh;
		under = acc.under;
		obytes = rbytes = acc.bytes;
		rpk = nd = i;
		d0 = acc.d0;
		same = acc.same;
	}
	for (; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct sn_tstamp_next nx[SN_CLASSIFY_MAX_POL];
		struct sn_classify_res cr;
		const uint32_t len = m->pkt_len;
		struct wslot *dw;
		uint64_t ts;

		cr.n = 0;
		cr.cls = SN_CLASSIFY_NONE;
		cr.clamp = false;
		cr.agg = false;    /* set by sn_classify_frame() */
		mk.dst = dst[i] ? dst[i]->slot : DST_FLOOD;
		mk.dst_gen = dst[i] ? dst[i]->gen : 0;
		obytes += len;
		/* The policies the frame crosses: port limit, then its class
		 * or flow pacing and its aggregate share; the release time is
		 * the max of theirs (Carousel §5.1.1). */
		if (has_rate) {
			cr.pol[cr.n++] = &ps->ts;
			under += ps->ts.lts < now;
		}
		if (has_peak)
			cr.pol[cr.n++] = &ps->peak;
		/* the destination's inbound limit (before the class's
		 * aggregate, which sn_classify_frame() puts last) */
		dw = has_in && dst[i] && sn_pipeline_in_limited(pl, dst[i]) ? &pl->ps[dst[i]->slot]
									   : NULL;
		if (dw) {
			cr.pol[cr.n++] = &dw->in_ts;
			if (dw->has_in_peak)
				cr.pol[cr.n++] = &dw->in_peak;
			ctr_add(&dw->st.in_offered_packets, 1);
			ctr_add(&dw->st.in_offered_bytes, len);
		}
		if (has_cls)
			sn_classify_frame(pl->cls, in->slot, m, now, &cr);
		mk.cls = cr.cls;
		*meta_of(pl, m) = mk;
		/* From the uplink no one can be pushed back: a flow above its
		 * fair share of the inbound limit is dropped (seed 003), before
		 * any stamp is committed. */
		if (dw && from_uplink && dw->in_fd &&
		    sn_fdrop_decide(dw->in_fd, sn_classify_flow_hash(m), len, now) == SN_FDROP_DROP) {
			ctr_add(&dw->st.in_fair, 1);
			drop(pl, m, SN_PL_DROP_FAIR);
			continue;
		}
		if (cr.n) {
			if (unlikely(len > ps->room_lmax))
				ps->room_lmax = len;   /* sn_pipeline_src_room() */
			ts = cr.n == 1 ? sn_tstamp_peek(cr.pol[0], now, len, &nx[0])
				       : sn_tstamp_consolidate_peek(cr.pol, cr.n, now, len, nx);
			/* A timestamp is the end of the frame's transmission at
			 * its rates (> now by len/rate): compared with a clock
			 * read once per burst, when the iteration's is not late
			 * enough. */
			if (wd == 0 && ts > tnow && !fresh) {
				tnow = now_ns();
				fresh = true;
			}
			if (wd != 0 || ts > tnow) {
				/* At its wheel quota: the frame is dropped
				 * before its stamps are committed (a drop
				 * keeps no budget), counted on its port and
				 * on the class it was offered to. */
				if (unlikely(wd >= wcap)) {
					sn_classify_dropped(pl->cls, &cr, len,
							    SN_CL_DROP_QUOTA_WHEEL);
					drop(pl, m, SN_PL_DROP_QUOTA_WHEEL);
					continue;
				}
				wd += wheel_insert(pl, ps, m, &cr, nx, ts, now, dw);
				continue;
			}
			/* Carousel fast path (see above): ts is not in the
			 * future and the port has nothing in the wheel. */
			if (cr.n == 1)
				sn_tstamp_commit(cr.pol[0], &nx[0]);
			else
				sn_tstamp_consolidate_commit(cr.pol, cr.n, nx);
		}
		/* Released now: a frame with no policy to cross (cr.n == 0)
		 * or one on the Carousel fast path. */
		rpk++;
		rbytes += len;
		if (cr.cls != SN_CLASSIFY_NONE)
			sn_classify_released(pl->cls, in->slot, cr.cls, len);
		if (!nd)
			d0 = dst[i];
		else if (dst[i] != d0)
			same = false;
		due[nd++] = m;
	}
	ctr_add(&ps->st.offered_packets, n);
	ctr_add(&ps->st.offered_bytes, obytes);
	if (under)
		ctr_add(&ps->st.underruns, under);
	if (wd != wd0) {
		pl->wheel_excess += excess(pl, wd) - excess(pl, wd0);
		ctr_set(&ps->st.wheel_depth, wd);
		pl->held += wd - wd0;
		pl->wheel_n += wd - wd0;
	}
	if (nd) {
		ctr_add(&ps->st.released_packets, rpk);
		ctr_add(&ps->st.released_bytes, rbytes);
		if (same && d0)
			due_flush_one(pl, due, nd, d0);
		else
			due_flush(pl, due, nd);
	}
	submit_seq_end(pl, seq0);
}

/* The room a room call gave (room_gated) is for the port's next submit. */
void sn_pipeline_submit_burst(struct sn_pipeline *pl, struct sn_port *in, struct rte_mbuf **pkts,
			      struct sn_port *const *dst, uint16_t n)
{
	for (uint16_t i = 0; i < n; i += BATCH)
		submit_chunk(pl, in, pkts + i, dst + i, (uint16_t)RTE_MIN(n - i, BATCH));
	pl->ps[in->slot].room_gated = false;
}

void sn_pipeline_submit(struct sn_pipeline *pl, struct sn_port *in, struct rte_mbuf *m,
			struct sn_port *dst)
{
	submit_chunk(pl, in, &m, &dst, 1);
	pl->ps[in->slot].room_gated = false;
}

/* Deliver the frames submit released (all of one port, in order).
 * They were taken from their ring in this iteration, so the hold check of
 * sn_pl_dispatch() cannot fire for them (the hold clock is the iteration's); the
 * uplink path checks again when the arbiter releases them (sn_pl_uplink_tx). */
static void due_flush(struct sn_pipeline *pl, struct rte_mbuf **due, uint16_t n)
{
	const struct sn_port_table *t = pl->t;
	struct rte_mbuf *up[BATCH];
	uint16_t nu = 0;
	/* The destination checks once per run of frames with the same
	 * (dst, dst_gen): one snapshot of the port's state for the run, as if
	 * the frames had been delivered at one instant (a port going down
	 * meanwhile is seen by the next run or burst). kind: 0 drop, 1
	 * uplink, 2 VM port lp. */
	uint32_t ldst = UINT32_MAX, lgen = 0;
	unsigned kind = 0;
	struct sn_port *lp = NULL;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = due[i];
		const struct meta *md = meta_of(pl, m);

		if (md->dst == DST_FLOOD) {
			/* rare: the general path, after the uplink copies
			 * before it (order on the uplink) */
			if (nu)
				to_uplink_burst(pl, up, nu);
			nu = 0;
			sn_pl_dispatch(pl, m);
			continue;
		}
		if (md->dst != ldst || md->dst_gen != lgen) {
			struct sn_port *p = t->by_slot[md->dst];

			ldst = md->dst;
			lgen = md->dst_gen;
			lp = p;
			if (!p || p->gen != md->dst_gen || !sn_port_is_up(p))
				kind = 0;
			else
				kind = p->type == SN_PORT_UPLINK ? 1 : 2;
		}
		if (kind == 1)
			up[nu++] = m;
		else if (kind == 2)
			stage_vm(pl, lp, m);
		else
			drop(pl, m, SN_PL_DROP_DST_GONE);
	}
	if (nu)
		to_uplink_burst(pl, up, nu);
}

/* due_flush() of frames that all have destination d (their meta's
 * dst / dst_gen are d's): the destination is checked once for the burst
 * (as due_flush() does per run of one destination) and the uplink's frames
 * go to to_uplink_burst() as they are. */
static void due_flush_one(struct sn_pipeline *pl, struct rte_mbuf **due, uint16_t n,
			  const struct sn_port *d)
{
	struct sn_port *p = pl->t->by_slot[d->slot];

	if (!p || p->gen != d->gen || !sn_port_is_up(p)) {
		for (uint16_t i = 0; i < n; i++)
			drop(pl, due[i], SN_PL_DROP_DST_GONE);
	} else if (p->type == SN_PORT_UPLINK) {
		to_uplink_burst(pl, due, n);
	} else {
		for (uint16_t i = 0; i < n; i++)
			stage_vm(pl, p, due[i]);
	}
}

bool sn_pipeline_in_limited(const struct sn_pipeline *pl, const struct sn_port *dst)
{
	const struct wslot *w = &pl->ps[dst->slot];

	/* without any inbound limit, no destination's slot is read */
	return pl->n_in && w->has_in && w->gen == dst->gen;
}

bool sn_pipeline_shaped(struct sn_pipeline *pl, const struct sn_port *in)
{
	const struct wslot *ps = &pl->ps[in->slot];

	if (ps->gen != in->gen) {
		/* A new port in this slot the last apply did not see. */
		pl->dirty = true;
		return false;
	}
	return ps->shaped;
}

void sn_pipeline_flush(struct sn_pipeline *pl)
{
	sn_pl_flush_vm(pl);
	if (pl->seq_staged) {
		/* The odd value of the submit that staged them (see
		 * submit_chunk); release pairs with the reader's acquire load
		 * of its first value (sn_pipeline_run_seq()). */
		pl->seq_staged = false;
		__atomic_store_n(&pl->run_seq, __atomic_load_n(&pl->run_seq, __ATOMIC_RELAXED) + 1,
				 __ATOMIC_RELEASE);
	}
}

uint64_t sn_pipeline_held(const struct sn_pipeline *pl)
{
	return pl->held;
}

/* How many frames port slot ps may submit with its port limit stamping
 * none beyond now + h (sn_pipeline_src_room: h = the wheel horizon; see
 * sn_pipeline.h). The port limit's next release
 * time is max(LTS, now) + len / rate; a frame is stamped beyond the horizon
 * when that passes now + horizon (less 1/64 of it: the wheel's front may
 * trail pl->now by the slots not yet swept). Per frame at most the longest
 * frame the port submitted so far (at least SN_PIPELINE_ROOM_FRAME_MIN; a
 * longer one than ever before may still end beyond the horizon: then
 * room_clamp()) at ns_byte + 1 ns per byte (an upper bound of 8e9 / rate). */
static uint64_t room_of(const struct sn_tstamp *t, uint64_t now, uint64_t end, uint32_t lmax)
{
	const uint64_t start = RTE_MAX(t->lts, now);
	uint64_t k;

	k = start < end ? (end - start) / ((uint64_t)RTE_MAX(lmax, SN_PIPELINE_ROOM_FRAME_MIN) *
					   (t->ns_byte + 1)) : 0;
	return k == 0 && t->lts <= now ? 1 : k;
}

/* The same for the port's peak policy too: the smaller of the two. */
static uint16_t room_within(const struct sn_pipeline *pl, const struct wslot *ps, uint64_t h,
			    uint16_t max)
{
	const uint64_t end = pl->now + h - h / 64;
	uint64_t k = room_of(&ps->ts, pl->now, end, ps->room_lmax);

	if (ps->has_peak)
		k = RTE_MIN(k, room_of(&ps->peak, pl->now, end, ps->room_lmax));
	return (uint16_t)RTE_MIN(k, (uint64_t)max);
}

/* Frames port slot ps may still put into this worker's wheel within the
 * port's wheel quota and the reserves of the others (max: no limit). */
static uint16_t wheel_room(const struct sn_pipeline *pl, const struct wslot *ps,
			   const struct sn_port *in, uint16_t max)
{
	const uint64_t lim = wheel_limit(pl, ps, in);
	const uint64_t d = ps->st.wheel_depth;

	return d < lim ? (uint16_t)RTE_MIN(lim - d, (uint64_t)max) : 0;
}

/* See sn_pipeline.h. */
uint16_t sn_pipeline_src_room(struct sn_pipeline *pl, const struct sn_port *in, uint16_t max)
{
	struct wslot *ps = &pl->ps[in->slot];
	uint16_t k;

	if (ps->gen != in->gen || !ps->shaped)
		return max;
	k = wheel_room(pl, ps, in, max);
	if (!ps->has_rate)
		return k;
	k = room_within(pl, ps, sn_twheel_horizon_ns(pl->wheel), k);
	ps->room_gated = k > 0;
	return k;
}

/* See sn_pipeline.h. */
uint32_t sn_pipeline_wheel_quota_auto(uint32_t pool_nodes, unsigned n_slots, unsigned burst)
{
	const uint64_t reserve = 2ull * (burst ? burst : 1), n = n_slots ? n_slots : 1;

	if (!pool_nodes)
		return 1;
	if (pool_nodes >= n * reserve)
		return (uint32_t)(pool_nodes - (n - 1) * reserve);
	return pool_nodes / n ? (uint32_t)(pool_nodes / n) : 1;
}

/* See sn_pipeline.h. */
uint32_t sn_pipeline_wheel_reserve(uint32_t pool_nodes, unsigned n_slots, unsigned burst)
{
	const uint64_t reserve = 2ull * (burst ? burst : 1), n = n_slots ? n_slots : 1;

	return (uint32_t)RTE_MIN(reserve, pool_nodes / n);
}

/* See sn_pipeline.h. */
uint16_t sn_pipeline_src_copy_room(struct sn_pipeline *pl, const struct sn_port *in,
				   uint64_t budget, uint16_t max)
{
	struct wslot *ps = &pl->ps[in->slot];
	const uint64_t held = sn_pipeline_src_held(pl, in);
	const uint64_t cap = pl->pool_nodes / SN_PIPELINE_COPY_POOL_SHARE;
	uint16_t k, ahead;

	if (ps->gen != in->gen || !ps->shaped)
		return max;
	k = held < budget ? (uint16_t)RTE_MIN(budget - held, (uint64_t)max) : 0;
	if (ps->has_rate) {
		/* The time allowance never holds more than the pool share: at
		 * 1 Gbit/s of 64 B frames, 20 ms is more frames than the pool. */
		ahead = room_within(pl, ps, SN_PIPELINE_COPY_AHEAD_NS, max);
		ahead = (uint16_t)RTE_MIN((uint64_t)ahead, held < cap ? cap - held : 0);
		k = RTE_MAX(k, ahead);
		k = RTE_MIN(k, room_within(pl, ps, sn_twheel_horizon_ns(pl->wheel), max));
	}
	k = RTE_MIN(k, wheel_room(pl, ps, in, max));
	ps->room_gated = ps->has_rate && k > 0;
	return k;
}

uint64_t sn_pipeline_src_held(const struct sn_pipeline *pl, const struct sn_port *in)
{
	const struct wslot *ps = &pl->ps[in->slot];
	const struct actr *ac = &pl->actr[in->slot];
	int64_t h;

	if (ps->gen != in->gen)
		return 0;
	/* Signed: sn_pl_apply() zeroes the counters of a slot that got a new port
	 * while frames of the old one were still held; those drive it below
	 * zero as they leave, and are no frames of `in`. Frames on their way
	 * back from a remote arbiter are still held (returning - returned). */
	h = (int64_t)(ps->st.wheel_depth + ps->st.qfq_backlog +
		      __atomic_load_n(&ac->st.qfq_backlog, __ATOMIC_ACQUIRE) +
		      __atomic_load_n(&ac->returning, __ATOMIC_RELAXED) - ps->returned);
	return h > 0 ? (uint64_t)h : 0;
}
