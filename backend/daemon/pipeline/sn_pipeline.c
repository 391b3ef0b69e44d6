/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pipeline.c — scheduled datapath (DESIGN.md "The pipeline"), in the
 * 1-core layout (worker + arbiter + dispatcher run to completion in one
 * loop) or the 2-core layout (worker | arbiter + dispatcher, PSPAT §3-4).
 *
 * Design.
 *  - Timestamping (Carousel §5.1.1): each shaped port with rate_bps > 0
 *    owns a sn_tstamp; a frame's Earliest Release Time is
 *    max(LTS + len/rate, now). The LTS is committed only when the frame is
 *    accepted by the wheel, so an overloaded port keeps exactly its rate.
 *  - Timing wheel (Carousel §5.1.2, Eiffel cFFS): one per worker, global
 *    node pool. A port rate is a hard limit, so the insert uses REJECT:
 *    a frame beyond the horizon is dropped and counted (the horizon bounds
 *    the queueing delay the shaper may add; backpressure into the guest's
 *    ring comes with deferred completions, issue 5).
 *  - Due frames: VM destinations are staged and enqueued at once (VM->VM
 *    keeps its limit, never waits behind the uplink). The uplink copy goes
 *    into the port's private client mailbox (PSPAT §3.1); the arbiter's
 *    do_scan (PSPAT Fig. 5) moves mailboxes into the scheduler (class =
 *    port slot, weight from policy; QFQ by default) and emulates the link
 *    at policy.uplink.rate_bps (+overhead_bytes per frame); released frames
 *    go to rte_eth_tx_burst on the uplink (arbiter = dispatcher, §3.3).
 *  - Live policy: the worker compares the generation of the RCU-published
 *    table with the one it applied; on change it updates rates in place
 *    (sn_tstamp_set keeps LTS, so a rate change never resets pacing),
 *    changes QFQ weights (decreases before increases, so the weight sum
 *    never exceeds the limit mid-update), removes classes of ports that lost
 *    their entry (their queued frames are counted as "policy" drops) and
 *    rebuilds the arbiter only when the algorithm changes.
 *  - Per burst (s11-S, issue 6 throughput): the switch submits a port's
 *    shaped frames as one burst (submit_chunk: counters once per burst;
 *    Carousel's fast path for a frame whose timestamp is not in the future
 *    while its port has nothing in the wheel; one mailbox publication per
 *    burst); in the 1-core layout the worker, being the arbiter thread,
 *    enqueues into the scheduler directly (arb_local).
 * Every frame is freed exactly once on every path; each drop has a cause.
 *
 * Two halves. The code is split into a WORKER half (submit, wheel, VM
 * delivery, apply_worker: rates) and an ARBITER half (sn_pl_apply_arb: algorithm,
 * link, classes and weights; do_scan; release to the uplink). In the 1-core
 * layout the worker calls both. In the 2-core layout (PSPAT §3, "the
 * arbiter runs on a dedicated core") sn_pipeline_arbiter_main() runs the
 * arbiter half on its own lcore; the halves then talk only through:
 *  - the client mailboxes (sn_mbox SPSC, worker -> arbiter) and the client
 *    list of the arbiter set the worker uses (PSPAT §3.4);
 *  - the return mailbox (sn_mbox SPSC, arbiter -> worker): frames the
 *    arbiter must not free (deferred-completion frames: their free writes
 *    the worker-owned used ring, sn_vqtx.h) and guest GSO frames (segmented
 *    by the switch on the worker) go back with a verdict in their meta
 *    (sent / drop cause / transmit-GSO); the worker frees or sends them.
 *    If the return mailbox is full the arbiter parks them and stops
 *    scanning until they are returned (backpressure, nothing lost);
 *  - per-slot a_ready flags (relaxed: the class exists in the arbiter's
 *    scheduler before the worker may push into that slot's mailbox; the
 *    arbiter applies the policy before each scan, so an item pushed after
 *    the flag was seen finds its class unless a newer policy removed it,
 *    then it is a "policy"/"no_class" drop as in the 1-core layout). A
 *    port whose class is not ready yet goes straight to the uplink on the
 *    worker's own TX queue (still rate-limited by its wheel);
 *  - arbiter-set publication on an algorithm change: the arbiter builds a
 *    new set (arbiter + mailboxes), publishes it (release; the worker's
 *    acquire in run()), keeps scanning the old one until the worker
 *    acknowledges (w_ack release -> arbiter acquire: every insert into the
 *    old mailboxes happened before) and only then drains and frees it.
 * Integration (s9): which half owns which feature.
 *  - Worker half: flow classification, class/flow/aggregate pacing and the
 *    NBA (sn_classify, issue 6: one sn_classify per worker, worker-owned),
 *    fair dropping in front of the arbiter (sn_fdrop: decided in
 *    to_uplink() before the client mailbox, so its state, its
 *    re-configuration in sn_pl_apply() and its stats publication all stay on the
 *    worker in both layouts), the restamp of the wheel on a rate change
 *    (restamp_wheel), the run() sequence counter (clock_consistent), VM
 *    delivery through the per-queue flow hash (multiqueue ports,
 *    sn_port_vhost_enqueue) and the deferred-completion hold classes
 *    (sn_vqtx_deadline: marked / unmarked frames).
 *  - Arbiter half: scheduler, link emulation, uplink transmit, arbiter
 *    stats. Per-class uplink counters are the only sn_classify counters
 *    of the arbiter half: the worker's sn_classify is not touched by a
 *    remote arbiter, which counts them in its own a_clup[][] (summed by
 *    sn_pipeline_class_uplink()). In the 1-core layout the worker scans
 *    after every wheel batch (issue 6: a stall releases up to
 *    MAX_BATCHES * BATCH frames, one scan at the end overflowed the
 *    mailboxes); in the 2-core layout the arbiter scans continuously.
 * Counters: each half writes its own copy (st: worker, ast: arbiter);
 * readers sum both, so every counter keeps one writer. The uplink's TX
 * counters written by a remote arbiter live in pl->up (sn_pipeline_uplink_tx).
 * Uplink TX queues: queue 0 belongs to the worker (unshaped traffic and
 * its fallbacks), queue 1 to the remote arbiter (sn_uplink_open with 2
 * TX queues in the 2-core layout).
 *
 * N-core layout (s10, DESIGN.md "WORKER lcore c (owns a set of VM
 * queues; one Carousel silo)"; PSPAT §3.4 one client list per core).
 * W worker lcores, each with its own instance of this struct (one
 * Carousel silo each: wheel, port tstamps, sn_classify with its NBA
 * worker index, fair dropper, staging, return mailbox; the instance's
 * wk_id is stamped in every frame's meta) and one arbiter lcore running
 * the arbiter half of instance 0 (arbp). The arbiter set has one client
 * per (worker, port slot), all clients of a slot feeding the slot's
 * scheduler class, and one client list per worker, so every mailbox
 * keeps one producer. What the arbiter half writes per frame (ast,
 * a_returning, the return mailbox) belongs to the frame's own instance
 * (owner_of()), so each worker's src_held() and return path stay its
 * own; what it keeps per slot (a_ready, classes, weights, a_clup) lives
 * in instance 0. Worker k transmits on uplink TX queue k, the arbiter on
 * queue W. A port's rate_bps is enforced by each worker on the frames of
 * the queues it owns (per-silo state, as Carousel's per-core policies);
 * a limit shared exactly across workers is an aggregate (NBA). Shutdown:
 * see sn_pipeline_drain(). The 1- and 2-core layouts are this with W = 1.
 */
#include "sn_pl_internal.h"

const char *const sn_pipeline_drop_names[SN_PL_DROP_MAX] = {
	[SN_PL_DROP_HORIZON] = "horizon",
	[SN_PL_DROP_POOL] = "wheel_pool",
	[SN_PL_DROP_MBOX_FULL] = "mailbox_full",
	[SN_PL_DROP_QFQ_FULL] = "qfq_full",
	[SN_PL_DROP_NO_CLASS] = "no_class",
	[SN_PL_DROP_BAD_LEN] = "bad_len",
	[SN_PL_DROP_DST_GONE] = "dst_gone",
	[SN_PL_DROP_POLICY] = "policy_removed",
	[SN_PL_DROP_HOLD] = "hold_timeout",
	[SN_PL_DROP_SRC_STOP] = "src_stopped",
	[SN_PL_DROP_NO_MBUF] = "no_mbuf",
	[SN_PL_DROP_FAIR] = "fair",
};

void sn_pipeline_set_gso(struct sn_pipeline *pl, sn_pipeline_gso_fn fn, void *arg)
{
	pl->gso = fn;
	pl->gso_arg = arg;
}

/* 1-core layout (s11-L, issue 6 measurement): will sn_pl_arb_round() at now
 * change a port counter? Only if items wait in the client mailboxes
 * (held counts wheel + mailboxes + scheduler; a mailbox item may be
 * dropped or released) or the scheduler has a backlog the emulated link
 * may send now (sn_arbiter_do_scan dequeues while link_idle <= now; an
 * idle or reset link restarts at now). Conservative: any mismatch in the
 * count says yes. */
static bool arb_will_count(const struct sn_pipeline *pl)
{
	uint64_t in_arb;
	const struct sn_arbiter *arb;

	if (pl->split)   /* its own lcore (and clock), and no aset of its own */
		return false;
	/* s12-R: wheel_n, not sn_twheel_count(): that walks every occupied
	 * slot (~60 instructions each: 39.5k per call with 655, a 20 Mbit/s
	 * port's full horizon of 1000 B frames), and this runs in every
	 * iteration that releases nothing. */
	in_arb = pl->held - pl->wheel_n;
	if (!in_arb)
		return false;
	if (pl->aset_old || !pl->aset)
		return true;
	arb = pl->aset->arb;
	return in_arb != sn_arbiter_backlog(arb) ||
	       (int64_t)(sn_arbiter_link_idle(arb) - pl->now) <= 0;
}

void sn_pipeline_run(struct sn_pipeline *pl, struct sn_port_table *t)
{
	const struct sn_policy *pol = sn_policy_current(pl->store);
	void *items[BATCH];
	unsigned got, batches = 0;
	uint64_t seq;

	pl->now = now_ns();
	ctr_add(&pl->wts.loops, 1);
	pl->t = t;
	if (pl->split) {
		/* Acquire pairs with the release in sn_pl_apply_arb(). */
		struct arbset *a = __atomic_load_n(&pl->arbp->aset_pub, __ATOMIC_ACQUIRE);

		if (a != pl->w_aset) {
			pl->w_aset = a;
			/* Release: pairs with the acquire in sn_pl_arb_round(). */
			__atomic_store_n(&pl->w_ack, a, __ATOMIC_RELEASE);
		}
		sn_pl_ret_service(pl);
	}
	if (pol->gen != pl->pol_gen || t != pl->t_seen || pl->dirty) {
		seq_counting(pl);
		sn_pl_apply(pl, pol, t);
	}
	if (!pl->split && (pol->gen != pl->a_pol_gen || sn_pl_arb_table_stale(pl, t))) {
		seq_counting(pl);
		sn_pl_apply_arb(pl, pol, t);
		pl->w_aset = pl->aset;
	}
	/* The first batch before the clock: a run that releases nothing and
	 * whose arbiter sends nothing leaves the counters as they are, so its
	 * clock is published without moving run_seq (the pair stays exact:
	 * nothing was due up to it). Otherwise odd first, then the clock. */
	got = sn_twheel_extract(pl->wheel, pl->now, items, BATCH);
	if (got || arb_will_count(pl))
		seq_counting(pl);
	ctr_set(&pl->clock_ns, pl->now);
	for (;;) {
		for (unsigned i = 0; i < got; i++) {
			struct rte_mbuf *m = items[i];

			struct pstate *ps = &pl->ps[meta_of(pl, m)->src];

			ctr_add(&ps->st.wheel_depth, -1ull);
			ctr_add(&ps->st.released_packets, 1);
			ctr_add(&ps->st.released_bytes, m->pkt_len);
			sn_classify_released(pl->cls, meta_of(pl, m)->src, meta_of(pl, m)->cls,
					     m->pkt_len);
			pl->held--;
			sn_pl_dispatch(pl, m);
		}
		pl->wheel_n -= got;   /* s12-R */
		sn_pl_flush_vm(pl);
		/* issue 6 (conformance), 1-core layout: scan after every
		 * batch, not once per iteration. After a worker stall the
		 * wheel releases up to MAX_BATCHES * BATCH due frames at once;
		 * one scan at the end let them overflow the client mailbox
		 * (mbox_size 512) and they were lost as mailbox_full although
		 * the link had room. (2-core: the arbiter scans on its own.) */
		if (!pl->split && pl->held)
			sn_pl_arb_round(pl, pol, t, pl->now);
		if (got < BATCH || ++batches >= MAX_BATCHES)
			break;
		got = sn_twheel_extract(pl->wheel, pl->now, items, BATCH);
	}
	if (!pl->split && !pl->held) {
		ctr_set(&pl->arb_clock_ns, pl->now);
		if ((int64_t)(pl->now - pl->a_next_stats) >= 0) {
			sn_pl_publish_arb_stats(pl);
			pl->a_next_stats = pl->now + STATS_EVERY_NS;
		}
	}
	/* Worker-half periodic work (its own timer in both layouts). */
	if ((int64_t)(pl->now - pl->next_stats) >= 0) {
		sn_pl_publish_fair_stats(pl);
		sn_pl_clup_publish(pl);     /* s15-R5: maps the arbiter had not taken at sn_pl_apply() */
		/* issue 6: NBA, flow ageing */
		uint32_t agg_changed = sn_classify_tick(pl->cls, pl->now,
							sn_twheel_horizon_ns(pl->wheel));

		if (agg_changed) {     /* s11-B2: new NBA grants apply to queued frames */
			seq_counting(pl);   /* s12-R: its horizon drops move wheel_depth, drops */
			sn_pl_restamp_aggs(pl, agg_changed);
		}
		pl->next_stats = pl->now + STATS_EVERY_NS;
	}
	/* Caught up (got < BATCH): everything due at clock_ns is released;
	 * an odd run_seq (this run counted, or an earlier one lagged) becomes
	 * even. Release: pairs with the reader's acquire load of its first
	 * value (sn_pipeline_run_seq()). Lagging: stays odd. */
	seq = __atomic_load_n(&pl->run_seq, __ATOMIC_RELAXED);
	pl->seq_staged = false;   /* s12-R: sn_pl_flush_vm() above sent them; lagging: odd stays */
	if (got < BATCH && (seq & 1))
		__atomic_store_n(&pl->run_seq, seq + 1, __ATOMIC_RELEASE);
}

void sn_pipeline_count_sleep(struct sn_pipeline *pl, uint64_t ns)
{
	ctr_add(&pl->wts.sleeps, 1);
	ctr_add(&pl->wts.sleep_ns, ns);
}

/* Worker k's instance: its worker half (wheel, classes, return mailbox;
 * instance 0 also carries the arbiter half). NULL + errno. */
static struct sn_pipeline *instance_create(const struct sn_pipeline_config *cfg,
					   struct sn_policy_store *pol, unsigned k,
					   struct sn_pipeline *arbp)
{
	static const struct rte_mbuf_dynfield desc = {
		.name = "sn_pipeline_meta",
		.size = sizeof(struct meta),
		.align = __alignof__(struct meta),
	};
	static const struct rte_mbuf_dynfield lag_desc = {   /* s12-I2 */
		.name = "sn_pipeline_agg_lag",
		.size = sizeof(int32_t),
		.align = __alignof__(int32_t),
	};
	struct sn_pipeline *pl;
	int e;

	pl = rte_zmalloc("sn_pipeline", sizeof(*pl), RTE_CACHE_LINE_SIZE);
	if (!pl) {
		errno = ENOMEM;
		return NULL;
	}
	pl->wk_id = k;
	pl->n_wk = cfg->workers ? cfg->workers : 1;
	pl->arbp = arbp ? arbp : pl;
	pl->txq = (uint16_t)k;
	pl->store = pol;
	pl->cfg = *cfg;
	pl->split = cfg->split;
	pl->arb_remote = cfg->split;
	pl->arb_txq = cfg->split ? (uint16_t)pl->n_wk : 0;
	pl->reg = cfg->reg;
	pl->idle_sleep_us = cfg->idle_sleep_us;
	pl->meta_off = rte_mbuf_dynfield_register(&desc);
	pl->lag_off = rte_mbuf_dynfield_register(&lag_desc);
	if (pl->meta_off < 0 || pl->lag_off < 0) {
		e = rte_errno;
		goto free_pl;
	}
	if (cfg->split) {
		pl->ret = sn_mbox_create(RET_MBOX_SIZE, NULL);
		if (!pl->ret || !cfg->reg) {
			e = !cfg->reg ? EINVAL : ENOMEM;
			goto free_ret;
		}
	}
	if (cfg->split && !arbp) {
		/* Park room for every frame the arbiter can hold: all
		 * mailboxes and class queues of two sets (during a switch). */
		pl->pend_cap = 2u * SN_PORT_MAX * (pl->n_wk * cfg->mbox_size + cfg->queue_len);
		pl->pend = rte_malloc("sn_pipeline_pend", pl->pend_cap * sizeof(pl->pend[0]), 0);
		if (!pl->pend) {
			e = ENOMEM;
			goto free_ret;
		}
	}
	pl->now = now_ns();
	pl->restamp_buf = rte_malloc("sn_pipeline_restamp",
				     (size_t)cfg->pool_nodes * sizeof(void *), 0);
	if (!pl->restamp_buf) {
		e = ENOMEM;
		goto free_ret;
	}
	pl->wheel = sn_twheel_create(&(struct sn_twheel_params){
		.granularity_ns = cfg->granularity_ns, .slots = cfg->slots,
		.pool_nodes = cfg->pool_nodes, .start_ns = pl->now,
		/* Sparse wheel (65536 x 4 us slots): 64 B nodes, so a pool of
		 * one node per mbuf still covers one frame per slot. */
		.node_items = SN_TWHEEL_NODE_ITEMS_MIN });
	if (!pl->wheel) {
		e = errno;
		goto free_ret;
	}
	/* issue 6: worker k of the NBA. */
	pl->cls = sn_classify_create(k, cfg->max_flows, SOCKET_ID_ANY);
	if (!pl->cls) {
		e = errno;
		goto free_wheel;
	}
	return pl;
free_wheel:
	sn_twheel_free(pl->wheel);
free_ret:
	rte_free(pl->restamp_buf);
	sn_mbox_free(pl->ret);
	rte_free(pl->pend);
free_pl:
	rte_free(pl);
	errno = e;
	return NULL;
}

static void instance_free(struct sn_pipeline *pl)
{
	sn_fdrop_free(pl->fd);
	sn_classify_free(pl->cls);
	sn_twheel_free(pl->wheel);
	rte_free(pl->restamp_buf);
	sn_mbox_free(pl->ret);
	rte_free(pl->pend);
	rte_free(pl);
}

struct sn_pipeline *sn_pipeline_create(const struct sn_pipeline_config *cfg,
				       struct sn_policy_store *pol)
{
	const unsigned n = cfg->workers ? cfg->workers : 1;
	struct sn_pipeline *pl;
	int e;

	if (n > SN_PIPELINE_WORKERS_MAX || (n > 1 && !cfg->split)) {
		errno = EINVAL;
		return NULL;
	}
	pl = instance_create(cfg, pol, 0, NULL);
	if (!pl)
		return NULL;
	pl->wk[0] = pl;
	for (unsigned k = 1; k < n; k++) {
		pl->wk[k] = instance_create(cfg, pol, k, pl);
		if (!pl->wk[k]) {
			e = errno;
			goto free_wk;
		}
	}
	pl->aset = sn_pl_aset_create(pl, SN_SCHED_QFQ);
	if (!pl->aset) {
		e = errno;
		goto free_wk;
	}
	pl->aset_pub = pl->aset;
	for (unsigned k = 0; k < n; k++) {
		pl->wk[k]->w_aset = pl->aset;
		pl->wk[k]->w_ack = pl->aset;
	}
	return pl;
free_wk:
	for (unsigned k = 1; k < n; k++)
		if (pl->wk[k])
			instance_free(pl->wk[k]);
	instance_free(pl);
	errno = e;
	return NULL;
}

struct sn_pipeline *sn_pipeline_worker(const struct sn_pipeline *pl, unsigned k)
{
	return k < pl->arbp->n_wk ? pl->arbp->wk[k] : NULL;
}

unsigned sn_pipeline_workers(const struct sn_pipeline *pl)
{
	return pl->n_wk;
}

/* Worker half of pl: every frame in its wheel is dropped (src_stopped). */
static void drain_wheel(struct sn_pipeline *pl)
{
	void *items[BATCH];
	unsigned got;

	/* Far future: every held frame is due. */
	while ((got = sn_twheel_extract(pl->wheel, UINT64_MAX >> 2, items, BATCH)) > 0)
		for (unsigned i = 0; i < got; i++) {
			struct rte_mbuf *m = items[i];

			drop_taken(pl, m, SN_PL_DROP_SRC_STOP);
		}
}

/* Arbiter half: drop whatever the arbiter sets still hold. */
static void drain_asets(struct sn_pipeline *a)
{
	if (a->aset_old) {
		sn_pl_aset_destroy(a, a->aset_old);
		a->aset_old = NULL;
	}
	if (a->aset) {
		sn_pl_aset_destroy(a, a->aset);
		a->aset = NULL;
	}
}

/* Worker half of pl: its return mailbox and its parked returns. */
static void drain_returns(struct sn_pipeline *pl)
{
	struct sn_pipeline *a = pl->arbp;

	if (pl->ret)
		sn_pl_ret_service(pl);
	for (uint32_t i = 0; i < a->n_pend; i++)
		if (meta_of(a, a->pend[i])->wk == pl->wk_id)
			sn_pl_ret_handle(pl, a->pend[i]);
}

static void wait_flag(const uint32_t *f, uint32_t v)
{
	/* Acquire pairs with the release in sn_pipeline_drain(). */
	while (__atomic_load_n(f, __ATOMIC_ACQUIRE) < v)
		rte_delay_us_sleep(100);
}

void sn_pipeline_drain(struct sn_pipeline *pl)
{
	struct sn_pipeline *a = pl->arbp;

	if (pl->drained)
		return;
	if (a->n_wk == 1) {
		/* The arbiter lcore (if any) has returned: from here on the
		 * arbiter half runs on this thread (the worker) and frees
		 * what it holds. */
		pl->arb_remote = false;
		drain_returns(pl);
		pl->n_pend = 0;
		drain_wheel(pl);
		drain_asets(pl);
		pl->drained = true;
		return;
	}
	/* Layout ncore (arbiter lcore returned, every worker calls this when
	 * its loop ends). 1: each worker empties its wheel and takes what
	 * the arbiter returned, then arrives; 2: once all arrived (nobody
	 * pushes into a client mailbox any more), worker 0 drops what the
	 * arbiter sets hold, returning other workers' deferred frames
	 * through their return mailboxes (arb_remote: sn_pl_a_drop returns every
	 * deferred frame, worker 0's own included), and says done; 3: each
	 * worker takes its returns and its parked frames (pend is read-only
	 * from here on). */
	drain_wheel(pl);
	if (pl->ret)
		sn_pl_ret_service(pl);
	__atomic_fetch_add(&a->drain_arrived, 1, __ATOMIC_RELEASE);
	if (pl == a) {
		wait_flag(&a->drain_arrived, a->n_wk);
		a->arb_remote = true;
		drain_asets(a);
		__atomic_store_n(&a->drain_done, 1, __ATOMIC_RELEASE);
	} else {
		wait_flag(&a->drain_done, 1);
	}
	drain_returns(pl);
	pl->drained = true;
}

void sn_pipeline_destroy(struct sn_pipeline *pl)
{
	if (!pl)
		return;
	/* Workers never ran or all returned: nothing runs concurrently. A
	 * worker that never ran held no frame of a deferred port. */
	for (unsigned k = 0; k < pl->n_wk; k++) {
		struct sn_pipeline *w = pl->wk[k];

		if (!w->drained) {
			drain_wheel(w);
			if (w->ret)
				sn_pl_ret_service(w);
		}
	}
	if (!pl->drained) {
		pl->arb_remote = false;
		drain_asets(pl);
		for (uint32_t i = 0; i < pl->n_pend; i++)
			sn_pl_ret_handle(owner_of(pl, pl->pend[i]), pl->pend[i]);
	}
	pl->n_pend = 0;
	for (unsigned k = 1; k < pl->n_wk; k++)
		instance_free(pl->wk[k]);
	instance_free(pl);
}
