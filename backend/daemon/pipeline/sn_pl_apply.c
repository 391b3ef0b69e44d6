/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_apply.c — live policy apply. The worker compares the generation
 * of the RCU-published policy with the one it applied; on a change it
 * updates rates in place (sn_tstamp_set keeps the LTS, so a rate change
 * never resets pacing) and restamps the queued frames of changed rates.
 * The arbiter half changes scheduler weights (decreases before increases,
 * so the weight sum never exceeds the limit mid-update), removes classes
 * of ports that lost their entry (their queued frames: "policy" drops)
 * and builds a new arbiter set only when the algorithm changes. */
#include "sn_pl_internal.h"

/* Worker half: fair dropping on/off/re-rated by policy.uplink. A new
 * instance starts with empty virtual queues; on ENOMEM the old one stays
 * (logged). */
static void apply_fair(struct sn_pipeline *pl, const struct sn_policy *pol)
{
	struct sn_fdrop *n;

	pl->overhead = pol->uplink.overhead_bytes;
	if (!pol->uplink.fair_drop) {
		sn_fdrop_free(pl->fd);
		pl->fd = NULL;
		ctr_set(&pl->fair_st.on, 0);
		return;
	}
	if (pl->fd && pl->fd_rate == pol->uplink.rate_bps)
		return;
	n = sn_fdrop_create(&(struct sn_fdrop_cfg){
		.capacity = pol->uplink.rate_bps / 8,
		.theta = RTE_MIN(RTE_MAX(pol->uplink.rate_bps / FAIR_THETA_DIV, FAIR_THETA_MIN),
				 SN_FDROP_MAX_THETA) });
	if (!n) {
		sn_log_err("policy: fair dropping: %s", strerror(errno));
		return;
	}
	sn_fdrop_free(pl->fd);
	pl->fd = n;
	pl->fd_rate = pol->uplink.rate_bps;
	ctr_set(&pl->fair_st.on, 1);
}

/* Every frame of the wheel into pl->restamp_buf, in release order, and
 * the wheel rewound to now, for restamp_wheel() and sn_pl_restamp_aggs() to
 * insert them again; returns how many (0: empty, or more frames than the
 * buffer holds, which the pool size rules out: logged, nothing taken). */
static uint64_t wheel_take_all(struct sn_pipeline *pl)
{
	uint64_t n = sn_twheel_count(pl->wheel), k = 0;
	unsigned got;

	SN_VERIFY(n == pl->wheel_n);   /* the O(1) count arb_will_count() uses */

	if (n == 0 || n > pl->pool_nodes) {
		if (n)
			sn_log_warn("policy: %" PRIu64 " frames in the wheel, not restamped", n);
		return 0;
	}
	while (k < n && (got = sn_twheel_extract(pl->wheel, UINT64_MAX >> 2, pl->restamp_buf + k,
						 (unsigned)RTE_MIN(n - k, (uint64_t)BATCH))) > 0)
		k += got;
	SN_VERIFY(sn_twheel_rewind(pl->wheel, pl->now) == 0);
	return k;
}

/* Worker half: after a rate change, every queued frame of the policies
 * that changed is stamped again at the new rates from now on, and never
 * earlier than any other policy it crosses (Carousel §5.1.1: a frame's
 * release time is a function of the rates).
 *  - changed[s]: port s's limit changed (its chain restarted at now);
 *    cls_changed[s], bit c: class c's pacing changed (its chain, or its
 *    flows', restarted at now by sn_classify_apply_port() or
 *    sn_classify_restart_port(): a port whose limit changed has every
 *    paced class here too).
 *  - A changed frame goes back at max(port chain re-laid from now, its
 *    class / flow chain re-laid from now, its aggregate stamp A, now); a
 *    port with a limit of its own whose class changed has its limit
 *    re-laid over all its queued frames too (relay[]), so the limit holds
 *    from now. A frame to a port with an inbound limit goes back no
 *    earlier than its old stamp (the destination's part of it is not
 *    laid again). Other frames keep their stamp (meta.ts).
 *  - Order: the wheel has no per-port removal, so every frame is taken out
 *    in release order and reinserted in that order (wheel_take_all), so
 *    each port and each flow stays FIFO.
 *  - A frame restamped beyond the horizon is what the shaper drops at the
 *    new rate anyway: counted "horizon" (in its class too); a "clamp"
 *    class's frame is queued at the horizon. A frame whose stamp did not
 *    move later keeps its place: it was taken once (one a room call let
 *    through may sit at the horizon with a stamp beyond it,
 *    sn_pipeline_src_room).
 *  - A frame's class index is renumbered first when its port's classes
 *    moved in the list (sn_classify_renumber); this runs right after the
 *    sn_classify_apply_port() whose map it uses.
 * O(frames in the wheel), once per change, on the worker. */
/* The port's peak policy: a new chain from now when its limit's chain was
 * re-laid or the port had no peak, else the new rate on the running one. */
static void apply_peak(struct sn_pipeline *pl, struct wslot *ps, uint64_t peak_bps, bool relaid)
{
	if (!peak_bps)
		ps->has_peak = false;
	else if (relaid || !ps->has_peak)
		SN_VERIFY(sn_tstamp_init(&ps->peak, peak_bps, 0, pl->now) == 0);
	else
		SN_VERIFY(sn_tstamp_set(&ps->peak, peak_bps, 0) == 0);
	ps->has_peak = peak_bps != 0;
}

/* The port's inbound limit: a new chain from now when it had none, else
 * the new rate, burst and peak on the running one. Frames to the port
 * already in the wheel keep their stamps. Its fair dropper (frames from
 * the uplink) is made again at a new rate. */
static void apply_inbound(struct sn_pipeline *pl, struct wslot *ps, const struct sn_policy_port *w)
{
	const uint64_t r = w ? w->in_rate_bps : 0, pk = r ? w->in_peak_bps : 0;

	ctr_set(&ps->st.in_rate_bps, r);
	ctr_set(&ps->st.in_peak_bps, pk);
	if (!r) {
		ps->has_in = ps->has_in_peak = false;
		sn_fdrop_free(ps->in_fd);
		ps->in_fd = NULL;
		return;
	}
	if (!ps->has_in || ps->in_ts.rate != r || !ps->in_fd) {
		/* fair dropping at the new rate, empty virtual queues; on
		 * ENOMEM the frames from the uplink only meet the horizon */
		struct sn_fdrop *fd = sn_fdrop_create(&(struct sn_fdrop_cfg){
			.capacity = r / 8, .n_rows = IN_FAIR_ROWS,
			.theta = RTE_MIN(RTE_MAX(r / FAIR_THETA_DIV, FAIR_THETA_MIN),
					 SN_FDROP_MAX_THETA) });

		if (!fd)
			sn_log_err("policy: inbound fair dropping: %s", strerror(errno));
		sn_fdrop_free(ps->in_fd);
		ps->in_fd = fd;
	}
	/* a new rate goes on from the chain's last stamp, after every frame
	 * queued on it: the port's flows stay FIFO */
	if (!ps->has_in)
		SN_VERIFY(sn_tstamp_init(&ps->in_ts, r, w->in_burst_bytes, pl->now) == 0);
	else
		SN_VERIFY(sn_tstamp_set(&ps->in_ts, r, w->in_burst_bytes) == 0);
	if (pk && (!ps->has_in_peak || !ps->has_in))
		SN_VERIFY(sn_tstamp_init(&ps->in_peak, pk, 0, pl->now) == 0);
	else if (pk)
		SN_VERIFY(sn_tstamp_set(&ps->in_peak, pk, 0) == 0);
	ps->has_in = true;
	ps->has_in_peak = pk != 0;
}

/* The frame's destination has an inbound limit (its stamp has a part
 * restamp_wheel() cannot lay again from the source's policies). */
static bool to_in_limited(const struct sn_pipeline *pl, const struct meta *md)
{
	const struct wslot *d = md->dst != DST_FLOOD ? &pl->ps[md->dst] : NULL;

	return d && d->has_in && d->gen == md->dst_gen;
}

static void restamp_wheel(struct sn_pipeline *pl, const bool *changed, const uint32_t *cls_changed)
{
	const uint64_t hz = pl->now + sn_twheel_horizon_ns(pl->wheel);
	bool relay[SN_PORT_SLOTS_MAX];
	uint64_t k;

	for (unsigned s = 0; s < sn_config_port_slots; s++) {
		struct wslot *ps = &pl->ps[s];

		relay[s] = changed[s];
		if (!changed[s] && cls_changed[s] && ps->has_rate) {
			SN_VERIFY(sn_tstamp_init(&ps->ts, ps->ts.rate, ps->ts.burst, pl->now) == 0);
			if (ps->has_peak)
				SN_VERIFY(sn_tstamp_init(&ps->peak, ps->peak.rate, 0, pl->now) == 0);
			relay[s] = true;
		}
	}
	k = wheel_take_all(pl);
	for (uint64_t i = 0; i < k; i++) {
		struct rte_mbuf *m = pl->restamp_buf[i];
		struct meta *md = meta_of(pl, m);
		/* First its class's new index (a class kept by name that
		 * moved in the list; NONE if it went away), so the counters
		 * and the restamp below are the class's own */
		const uint8_t cls = md->cls = sn_classify_moved(pl->cls, md->src)
			? sn_classify_renumber(pl->cls, md->src, md->cls) : md->cls;
		struct wslot *ps = &pl->ps[md->src];
		struct sn_classify_res r = { .slot = md->src, .cls = cls };
		struct sn_tstamp_next nx, pnx, cnx;
		struct sn_tstamp *cts = NULL;
		uint64_t ts = md->ts, o, a = 0;
		int32_t *lag = agg_lag(pl, m);
		bool clamp = sn_classify_clamps(pl->cls, md->src, cls);
		const bool cch = cls < 32 && ((cls_changed[md->src] >> cls) & 1);
		int rc;

		if (relay[md->src] || cch) {
			if (*lag != AGG_NONE)
				split_ts(md->ts, *lag, &o, &a);
			else
				o = md->ts;
			/* O: from now for a changed port or a changed class,
			 * else the old one; then the max over the re-laid
			 * chains: the port limit's and (changed class, or any
			 * paced class of a changed port) its class's or flow's */
			/* a frame that crossed its destination's inbound limit
			 * keeps that part of its stamp: never earlier than it was */
			if (changed[md->src] || cch)
				o = to_in_limited(pl, md) ? RTE_MAX(o, pl->now) : pl->now;
			if (relay[md->src]) {
				o = RTE_MAX(o, sn_tstamp_peek(&ps->ts, pl->now, m->pkt_len, &nx));
				if (ps->has_peak)
					o = RTE_MAX(o, sn_tstamp_peek(&ps->peak, pl->now,
								      m->pkt_len, &pnx));
			}
			if (cch && (cts = sn_classify_restamp_ts(pl->cls, md->src, cls, m,
								 pl->now)) != NULL)
				o = RTE_MAX(o, sn_tstamp_peek(cts, pl->now, m->pkt_len, &cnx));
			ts = o;
			if (*lag != AGG_NONE) {
				*lag = lag_of(o, a);
				ts = RTE_MAX(o, a);
			}
		}
		/* a frame whose stamp did not move later keeps its place */
		rc = sn_twheel_insert(pl->wheel, m, ts,
				      clamp || ts <= md->ts ? SN_TWHEEL_CLAMP : SN_TWHEEL_REJECT);
		if (rc) {
			sn_classify_dropped(pl->cls, &r, m->pkt_len,
					    rc == -ERANGE ? SN_CL_DROP_HORIZON : SN_CL_DROP_POOL);
			drop_taken(pl, m, rc == -ERANGE ? SN_PL_DROP_HORIZON : SN_PL_DROP_POOL);
			continue;
		}
		if (clamp && ts >= hz && md->ts < hz)
			sn_classify_accepted(pl->cls, &r, true);
		md->ts = ts;
		if (relay[md->src]) {
			sn_tstamp_commit(&ps->ts, &nx);
			if (ps->has_peak)
				sn_tstamp_commit(&ps->peak, &pnx);
		}
		if (cts) {
			/* The class's (flow's) chain goes on from the frame's
			 * release time, not from its own stamp alone: behind
			 * a slower port limit a chain left behind would let
			 * the class's next frames out above its rate until it
			 * caught up. */
			if (ts > cnx.lts + (cnx.lts_rem != 0)) {
				cnx.lts = ts;
				cnx.lts_rem = 0;
			}
			sn_tstamp_commit(cts, &cnx);
		}
	}
}

/* Worker half: a new NBA grant of an aggregate applies to the frames its
 * share already queued. sn_classify_tick() rescaled the share's LTS and
 * returned the aggregates in `changed`; their frames get the same
 * rescaling of their aggregate stamp A (sn_classify_agg_restamp) and go
 * back at ts = max(O, A', now), O the stamp of their other policies
 * (agg_lag()). Per flow the order stays FIFO: A' and O are nondecreasing
 * in a flow's arrival order, and the frames go back in release order
 * (wheel_take_all). Beyond the horizon: counted "horizon", or queued at
 * the horizon for a "clamp" class or a frame whose stamp did not move
 * later (restamp_wheel). O(frames in the wheel), at most once
 * per NBA period, only when a grant changed while its share owed bytes. */
void sn_pl_restamp_aggs(struct sn_pipeline *pl, uint32_t changed)
{
	const uint64_t hz = pl->now + sn_twheel_horizon_ns(pl->wheel);
	uint64_t k = wheel_take_all(pl);

	for (uint64_t i = 0; i < k; i++) {
		struct rte_mbuf *m = pl->restamp_buf[i];
		struct meta *md = meta_of(pl, m);
		struct sn_classify_res r = { .slot = md->src, .cls = md->cls };
		uint64_t ts = md->ts, o, a;
		int32_t *lag = agg_lag(pl, m);
		bool clamp = sn_classify_clamps(pl->cls, md->src, md->cls);

		if (*lag != AGG_NONE) {
			split_ts(ts, *lag, &o, &a);
			a = sn_classify_agg_restamp(pl->cls, md->src, md->cls, changed, pl->now, a);
			*lag = lag_of(o, a);
			ts = RTE_MAX(RTE_MAX(o, a), pl->now);
		}
		if (sn_twheel_insert(pl->wheel, m, ts,
				     clamp || ts <= md->ts ? SN_TWHEEL_CLAMP : SN_TWHEEL_REJECT)) {
			sn_classify_dropped(pl->cls, &r, m->pkt_len, SN_CL_DROP_HORIZON);
			drop_taken(pl, m, SN_PL_DROP_HORIZON);
			continue;
		}
		if (clamp && ts >= hz && md->ts < hz)
			sn_classify_accepted(pl->cls, &r, true);
		md->ts = ts;
	}
}

/* Arbiter half: the remote arbiter's per-class uplink counters follow
 * their class (policy.set's identity: its name) when classes move in the
 * list or go away, as the worker's sn_classify counters do, by the map
 * sn_classify_apply_port() built for worker 0 (old index -> new,
 * SN_CLASSIFY_NONE: gone). Frames in flight between the wheel and the
 * uplink at the change carry their class's old index and count there. */
static void clup_follow(struct aslot *as, const uint8_t *map)
{
	uint64_t nw[SN_POLICY_CLASSES_MAX][2] = { { 0 } };

	for (unsigned j = 0; j < SN_POLICY_CLASSES_MAX; j++) {
		if (map[j] == SN_CLASSIFY_NONE)
			continue;
		SN_VERIFY(map[j] < SN_POLICY_CLASSES_MAX);
		nw[map[j]][0] = as->clup[j][0];
		nw[map[j]][1] = as->clup[j][1];
	}
	for (unsigned i = 0; i < SN_POLICY_CLASSES_MAX; i++) {
		ctr_set(&as->clup[i][0], nw[i][0]);
		ctr_set(&as->clup[i][1], nw[i][1]);
	}
}

/* Worker 0, after sn_classify_apply_port() of every slot: compose this
 * apply's renumbering onto the maps not yet published. */
static void clup_compose(struct sn_pipeline *pl)
{
	for (unsigned s = 0; s < sn_config_port_slots; s++) {
		uint8_t *m = pl->clup_pend[s];

		/* Identity on every old index, and no new class whose index
		 * may hold a gone class's counts (a created class gets a map
		 * too: clup_follow zeroes every index nothing maps to). */
		if (!sn_classify_moved(pl->cls, (uint16_t)s) &&
		    !sn_classify_created(pl->cls, (uint16_t)s))
			continue;
		if (!pl->clup_pend_moved[s])
			for (unsigned j = 0; j < SN_POLICY_CLASSES_MAX; j++)
				m[j] = (uint8_t)j;
		for (unsigned j = 0; j < SN_POLICY_CLASSES_MAX; j++)
			m[j] = sn_classify_renumber(pl->cls, (uint16_t)s, m[j]);
		pl->clup_pend_moved[s] = true;
		pl->clup_pending = true;
	}
}

/* Worker 0: hand the composed maps to the arbiter half once it has taken
 * the previous ones (else later: apply() and run()'s periodic work). */
void sn_pl_clup_publish(struct sn_pipeline *pl)
{
	struct sn_pl_arb *a = pl->arb;
	const uint32_t seq = __atomic_load_n(&a->clup_seq, __ATOMIC_RELAXED);

	/* Acquire pairs with the release of clup_ack in sn_pl_clup_take():
	 * the arbiter half has read the maps about to be overwritten. */
	if (!pl->clup_pending || __atomic_load_n(&a->clup_ack, __ATOMIC_ACQUIRE) != seq)
		return;
	memcpy(a->clup_map, pl->clup_pend, sn_config_port_slots * sizeof(a->clup_map[0]));
	memcpy(a->clup_moved, pl->clup_pend_moved, sn_config_port_slots * sizeof(a->clup_moved[0]));
	memset(pl->clup_pend_moved, 0, sn_config_port_slots * sizeof(pl->clup_pend_moved[0]));
	pl->clup_pending = false;
	/* Release: pairs with the acquire in sn_pl_clup_take(): the maps are written. */
	__atomic_store_n(&a->clup_seq, seq + 1, __ATOMIC_RELEASE);
}

/* Arbiter half: apply the maps worker 0 published, if any. */
void sn_pl_clup_take(struct sn_pl_arb *a)
{
	/* Acquire pairs with the release in sn_pl_clup_publish(). */
	const uint32_t seq = __atomic_load_n(&a->clup_seq, __ATOMIC_ACQUIRE);

	if (seq == __atomic_load_n(&a->clup_ack, __ATOMIC_RELAXED))
		return;
	for (unsigned s = 0; s < sn_config_port_slots; s++)
		if (a->clup_moved[s])
			clup_follow(&a->slot[s], a->clup_map[s]);
	/* Release: pairs with the acquire in sn_pl_clup_publish(): the maps were read. */
	__atomic_store_n(&a->clup_ack, seq, __ATOMIC_RELEASE);
}

/* Arbiter half: a new scheduling algorithm means a new arbiter set. A
 * remote arbiter keeps scanning the old one until every worker pushes
 * into the new one (sn_pl_arb_round()); on ENOMEM the old algorithm
 * stays (logged). */
static void apply_algo(struct sn_pl_arb *a, const struct sn_policy *pol)
{
	struct arbset *n;

	a->algo_retry = pol->uplink.algo != a->aset->algo && a->aset_old;
	if (pol->uplink.algo == a->aset->algo || a->aset_old)
		return;
	n = sn_pl_aset_create(a, pol->uplink.algo);
	if (!n) {
		sn_log_err("policy: cannot switch the scheduler to %s: %s",
		       sn_sched_algo_name(pol->uplink.algo), strerror(errno));
		return;
	}
	if (a->remote) {
		a->aset_old = a->aset;
		a->aset = n;
	} else {
		sn_pl_aset_destroy(a, a->aset);
		a->aset = n;
	}
	for (unsigned s = 0; s < sn_config_port_slots; s++) {
		a->slot[s].has_class = false;
		a->slot[s].weight = 0;
	}
}

/* Arbiter half: the policy's algorithm, link and per-port classes. */
void sn_pl_apply_arb(struct sn_pl_arb *a, const struct sn_policy *pol,
		     const struct sn_port_table *t)
{
	const struct sn_policy_port *want[SN_PORT_SLOTS_MAX];
	struct sn_sched *sch;

	apply_algo(a, pol);
	sch = sn_arbiter_sched(a->aset->arb);
	SN_VERIFY(sn_arbiter_set_link(a->aset->arb, pol->uplink.rate_bps ? pol->uplink.rate_bps
				      : SN_ARBITER_MAX_LINK_BPS, pol->uplink.overhead_bytes) == 0);
	a->uplink = NULL;
	for (unsigned s = 0; s < sn_config_port_slots; s++) {
		struct sn_port *p = t->by_slot[s];
		struct aslot *as = &a->slot[s];

		if (p && p->type == SN_PORT_UPLINK)
			a->uplink = p;
		want[s] = p && p->type == SN_PORT_VHOST ? sn_policy_port_find(pol, p->name) : NULL;
		if (want[s] && want[s]->quota_only)
			want[s] = NULL;   /* budgets only: no scheduler class */
		if (!p || as->gen != p->gen) {
			/* Another port (or none) in this slot: fresh counters. */
			as->gen = p ? p->gen : 0;
			for (unsigned k = 0; k < a->n_wk; k++) {
				struct sn_pipeline_port_stats *st = &a->ctr[k][s].st;

				for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
					ctr_set((uint64_t *)st + i, 0);
			}
			for (size_t i = 0; i < SN_POLICY_CLASSES_MAX; i++) {
				ctr_set(&as->clup[i][0], 0);
				ctr_set(&as->clup[i][1], 0);
			}
		}
	}
	/* Pass 1: removals and weight decreases, so pass 2 never exceeds
	 * the scheduler's weight sum (the policy's sum is validated). */
	for (unsigned s = 0; s < sn_config_port_slots; s++) {
		struct aslot *as = &a->slot[s];

		if (!as->has_class)
			continue;
		if (!want[s]) {
			__atomic_store_n(&as->ready, false, __ATOMIC_RELAXED);
			SN_VERIFY(sn_sched_class_del(sch, s, sn_pl_class_drop, a->aset) == 0);
			a->aset->weight[s] = 0;
			as->has_class = false;
		} else if (want[s]->weight < as->weight) {
			SN_VERIFY(sn_sched_class_change(sch, s, want[s]->weight,
							a->aset->lmax[s]) == 0);
			as->weight = want[s]->weight;
			a->aset->weight[s] = as->weight;
		}
	}
	for (unsigned s = 0; s < sn_config_port_slots; s++) {
		struct aslot *as = &a->slot[s];
		const struct sn_policy_port *w = want[s];

		if (!w)
			continue;
		if (!as->has_class) {
			SN_VERIFY(sn_sched_class_add(sch, s, w->weight, CLASS_LMAX_INIT) == 0);
			as->has_class = true;
			as->weight = w->weight;
			a->aset->weight[s] = w->weight;
			a->aset->lmax[s] = CLASS_LMAX_INIT;
		} else if (w->weight > as->weight) {
			SN_VERIFY(sn_sched_class_change(sch, s, w->weight, a->aset->lmax[s]) == 0);
			as->weight = w->weight;
			a->aset->weight[s] = w->weight;
		}
		__atomic_store_n(&as->ready, true, __ATOMIC_RELAXED);
	}
	a->pol_gen = pol->gen;
	a->t_seen = t;
	a->t_seq = t->seq;
	/* Release: pairs with the worker's acquire in run() (the new set's
	 * mailboxes are initialised before the worker may push into them). */
	__atomic_store_n(&a->aset_pub, a->aset, __ATOMIC_RELEASE);
}

/* Worker half: rates, shaping flags, uplink pointer. */
void sn_pl_apply(struct sn_pipeline *pl, const struct sn_policy *pol, struct sn_port_table *t)
{
	bool changed[SN_PORT_SLOTS_MAX] = { false }, any_change = false;
	unsigned n_in = 0;
	uint32_t cls_changed[SN_PORT_SLOTS_MAX] = { 0 };   /* classes with a new rate */

	pl->uplink = NULL;
	sn_classify_apply_aggs(pl->cls, pol, pl->now);
	apply_fair(pl, pol);
	for (unsigned s = 0; s < sn_config_port_slots; s++) {
		struct sn_port *p = t->by_slot[s];
		struct wslot *ps = &pl->ps[s];
		const struct sn_policy_port *w;

		if (p && p->type == SN_PORT_UPLINK)
			pl->uplink = p;
		w = p && p->type == SN_PORT_VHOST ? sn_policy_port_find(pol, p->name) : NULL;
		if (w && w->quota_only)
			w = NULL;   /* budgets only (sn_port_quota.c): not shaped */
		/* The slot's flow classes (fresh if another port). */
		cls_changed[s] = sn_classify_apply_port(pl->cls, (uint16_t)s, w,
							!p || ps->gen != p->gen, pl->now);
		/* classes moved: restamp_wheel() renumbers the frames */
		any_change = any_change || cls_changed[s] || sn_classify_moved(pl->cls, (uint16_t)s);
		if (!p || ps->gen != p->gen) {
			/* Another port (or none) in this slot: fresh state and
			 * counters; its scheduler class, if any, carries on. */
			__atomic_store_n(&ps->gen, p ? p->gen : 0, __ATOMIC_RELAXED);
			pl->clup_pend_moved[s] = false;   /* no map of its old port */
			ps->has_rate = false;
			ps->has_peak = false;
			ps->has_in = ps->has_in_peak = false;
			sn_fdrop_free(ps->in_fd);
			ps->in_fd = NULL;
			ps->room_lmax = 0;
			ps->room_gated = false;
			for (size_t i = 0; i < sizeof(ps->st) / sizeof(uint64_t); i++)
				ctr_set((uint64_t *)&ps->st + i, 0);
		}
		__atomic_store_n(&ps->shaped, w != NULL, __ATOMIC_RELAXED);
		ctr_set(&ps->st.rate_bps, w ? w->rate_bps : 0);
		ctr_set(&ps->st.weight, w ? w->weight : 0);
		ps->has_class = w != NULL;
		ps->has_cls = w && w->n_classes;
		if (!w || !w->rate_bps)
			ps->has_rate = false;
		else if (ps->has_rate && ps->ts.rate != w->rate_bps) {
			/* fresh chain from now: restamp_wheel() lays the queued
			 * frames on it */
			SN_VERIFY(sn_tstamp_init(&ps->ts, w->rate_bps, w->burst_bytes, pl->now) == 0);
			changed[s] = any_change = true;
			/* ... and on its paced classes' chains, restarted
			 * from now too (ts = max over every policy). */
			cls_changed[s] |= sn_classify_restart_port(pl->cls, (uint16_t)s, pl->now);
		} else if (ps->has_rate)
			SN_VERIFY(sn_tstamp_set(&ps->ts, w->rate_bps, w->burst_bytes) == 0);
		else
			SN_VERIFY(sn_tstamp_init(&ps->ts, w->rate_bps, w->burst_bytes, pl->now) == 0);
		ps->has_rate = w && w->rate_bps != 0;
		apply_peak(pl, ps, ps->has_rate ? w->peak_bps : 0, changed[s]);
		apply_inbound(pl, ps, w);
		n_in += ps->has_in;
	}
	pl->n_in = n_in;
	if (any_change)
		restamp_wheel(pl, changed, cls_changed);
	if (pl->wk_id == 0) {
		/* the arbiter's clup follows this renumbering (1core: at once) */
		clup_compose(pl);
		sn_pl_clup_publish(pl);
		if (!pl->split)
			sn_pl_clup_take(pl->arb);
	}
	pl->pol_gen = pol->gen;
	pl->t_seen = t;
	pl->t_seq = t->seq;
	pl->dirty = false;
}
