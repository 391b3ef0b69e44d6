/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pipeline.c — the scheduled datapath: per-port rate limits and
 * weighted sharing of the uplink for the frames of ports with a policy.
 *
 * A frame of a shaped port is stamped with its release time and held in a
 * timing wheel until then (Carousel, Saeed et al., SIGCOMM 2017: §5.1.1
 * timestamps, §5.1.2 the wheel); frames due for a VM port are delivered at
 * once, frames due for the uplink go through the port's client mailbox to
 * an arbiter that schedules them with QFQ (Checconi, Rizzo, Valente,
 * IEEE/ACM ToN 2013; DRR or FIFO by policy) at the emulated link rate and
 * transmits what it releases (PSPAT, Rizzo et al., ACM SIGCOMM CCR 2018:
 * §3.1 client mailboxes, §3.3 the arbiter as dispatcher, §3.4 one client
 * list per core, Fig. 5 the scan).
 *
 *  - Timestamps: each shaped port with rate_bps > 0 owns a sn_tstamp; a
 *    frame's release time is max(LTS + len / rate, now), with its flow
 *    class or flow pacing and aggregate share (sn_classify) the max over
 *    every policy it crosses. The LTS is committed only when the wheel
 *    accepts the frame, so an overloaded port keeps exactly its rate.
 *  - Wheel: one per worker; a port rate is a hard limit (a frame beyond
 *    the horizon is a counted drop; a deferred-completion guest is
 *    backpressured before that, sn_pipeline_src_room()). A frame whose
 *    stamp is not in the future while its port has nothing in the wheel
 *    skips it (Carousel's fast path; sn_pl_submit.c).
 *  - Arbiter: class = port slot, weight from the policy; in layout 1core
 *    worker 0 runs it after every wheel batch and enqueues into the
 *    scheduler directly; in layouts 2core and ncore it runs on its own
 *    lcore (sn_pipeline_arbiter_main) and transmits on its own TX queue.
 *  - Live policy: a new generation of the RCU-published policy is applied
 *    in place (sn_pl_apply.c): rates keep their LTS, queued frames are
 *    restamped when a rate changes, weights decrease before they increase,
 *    a removed class's frames are counted policy drops; the arbiter set is
 *    rebuilt only when the algorithm changes.
 *  - Return path: what a remote arbiter must not free goes back to its
 *    worker (sn_pl_ret.c).
 *
 * Threads and ownership: sn_pl_internal.h (the worker half struct
 * sn_pipeline, one per worker lcore; the arbiter half struct sn_pl_arb;
 * the contract of everything they share). Layout ncore: each worker is a
 * Carousel silo (its wheel, tstamps, classes, fair dropper, return
 * mailbox) that transmits on uplink TX queue k; the arbiter uses queue W.
 * A port's rate_bps is enforced by each worker on the frames of the
 * queues it owns; a limit shared exactly across workers is an aggregate
 * (NBA). Every frame is freed exactly once on every path; each drop has a
 * cause.
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
	[SN_PL_DROP_QUOTA_WHEEL] = "quota_wheel",
};

void sn_pipeline_set_gso(struct sn_pipeline *pl, sn_pipeline_gso_fn fn, void *arg)
{
	pl->gso = fn;
	pl->gso_arg = arg;
}

/* Layout 1core: will sn_pl_arb_round() at now
 * change a port counter? Only if items wait in the client mailboxes
 * (held counts wheel + mailboxes + scheduler; a mailbox item may be
 * dropped or released) or the scheduler has a backlog the emulated link
 * may send now (sn_arbiter_do_scan dequeues while link_idle <= now; an
 * idle or reset link restarts at now). Conservative: any mismatch in the
 * count says yes. */
static bool arb_will_count(const struct sn_pipeline *pl)
{
	const struct sn_pl_arb *a = pl->arb;
	uint64_t in_arb;
	const struct sn_arbiter *arb;

	if (pl->split)   /* its own lcore (and clock), and no aset of its own */
		return false;
	/* wheel_n, not sn_twheel_count(): that walks every occupied slot,
	 * and this runs in every iteration that releases nothing. */
	in_arb = pl->held - pl->wheel_n;
	if (!in_arb)
		return false;
	if (a->aset_old || !a->aset)
		return true;
	arb = a->aset->arb;
	return in_arb != sn_arbiter_backlog(arb) ||
	       (int64_t)(sn_arbiter_link_idle(arb) - pl->now) <= 0;
}

void sn_pipeline_run(struct sn_pipeline *pl, struct sn_port_table *t)
{
	const struct sn_policy *pol = sn_policy_current(pl->store);
	struct sn_pl_arb *a = pl->arb;
	void *items[BATCH];
	unsigned got, batches = 0;
	uint64_t seq;

	pl->now = now_ns();
	ctr_add(&pl->wts.loops, 1);
	pl->t = t;
	if (pl->split) {
		/* Acquire pairs with the release in sn_pl_apply_arb(). */
		struct arbset *as = __atomic_load_n(&a->aset_pub, __ATOMIC_ACQUIRE);

		if (as != pl->w_aset) {
			pl->w_aset = as;
			/* Release: pairs with the acquire in sn_pl_arb_round(). */
			__atomic_store_n(&pl->w_ack, as, __ATOMIC_RELEASE);
		}
		sn_pl_ret_service(pl);
	}
	if (pol->gen != pl->pol_gen || t != pl->t_seen || t->seq != pl->t_seq || pl->dirty) {
		seq_counting(pl);
		sn_pl_apply(pl, pol, t);
	}
	if (!pl->split && (pol->gen != a->pol_gen || sn_pl_arb_table_stale(a, t))) {
		seq_counting(pl);
		sn_pl_apply_arb(a, pol, t);
		pl->w_aset = a->aset;
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

			struct wslot *ps = &pl->ps[meta_of(pl, m)->src];

			wheel_left(pl, ps);
			ctr_add(&ps->st.released_packets, 1);
			ctr_add(&ps->st.released_bytes, m->pkt_len);
			sn_classify_released(pl->cls, meta_of(pl, m)->src, meta_of(pl, m)->cls,
					     m->pkt_len);
			pl->held--;
			sn_pl_dispatch(pl, m);
		}
		pl->wheel_n -= got;
		sn_pl_flush_vm(pl);
		/* Layout 1core: scan after every batch, not once per
		 * iteration: after a worker stall the wheel releases up to
		 * MAX_BATCHES * BATCH due frames at once, more than the
		 * scheduler's queues take in one go. (split: the arbiter
		 * scans on its own.) */
		if (!pl->split && pl->held)
			sn_pl_arb_round(a, pol, t, pl->now);
		if (got < BATCH || ++batches >= MAX_BATCHES)
			break;
		got = sn_twheel_extract(pl->wheel, pl->now, items, BATCH);
	}
	if (!pl->split && !pl->held) {
		ctr_set(&a->clock_ns, pl->now);
		if ((int64_t)(pl->now - a->next_stats) >= 0) {
			sn_pl_publish_arb_stats(a);
			a->next_stats = pl->now + STATS_EVERY_NS;
		}
	}
	/* Worker-half periodic work (its own timer in both layouts). */
	if ((int64_t)(pl->now - pl->next_stats) >= 0) {
		sn_pl_publish_fair_stats(pl);
		sn_pl_clup_publish(pl);     /* maps the arbiter had not taken at apply */
		/* NBA, flow ageing */
		uint32_t agg_changed = sn_classify_tick(pl->cls, pl->now,
							sn_twheel_horizon_ns(pl->wheel));

		if (agg_changed) {     /* new NBA grants apply to queued frames */
			seq_counting(pl);   /* its horizon drops move wheel_depth, drops */
			sn_pl_restamp_aggs(pl, agg_changed);
		}
		pl->next_stats = pl->now + STATS_EVERY_NS;
	}
	/* Caught up (got < BATCH): everything due at clock_ns is released;
	 * an odd run_seq (this run counted, or an earlier one lagged) becomes
	 * even. Release: pairs with the reader's acquire load of its first
	 * value (sn_pipeline_run_seq()). Lagging: stays odd. */
	seq = __atomic_load_n(&pl->run_seq, __ATOMIC_RELAXED);
	pl->seq_staged = false;   /* sn_pl_flush_vm() above sent them; lagging: odd stays */
	if (got < BATCH && (seq & 1))
		__atomic_store_n(&pl->run_seq, seq + 1, __ATOMIC_RELEASE);
}

void sn_pipeline_count_sleep(struct sn_pipeline *pl, uint64_t ns)
{
	ctr_add(&pl->wts.sleeps, 1);
	ctr_add(&pl->wts.sleep_ns, ns);
}

/* Worker k's tables by port slot (sizes: sn_config_port_slots). 0 or
 * ENOMEM; worker_free() releases them. */
static int worker_tables(struct sn_pipeline *pl)
{
	const unsigned n = sn_config_port_slots;

	pl->touched = rte_zmalloc("sn_pl_touched", n * sizeof(pl->touched[0]), 0);
	pl->stage = rte_zmalloc("sn_pl_stage", n * sizeof(pl->stage[0]), RTE_CACHE_LINE_SIZE);
	pl->ps = rte_zmalloc("sn_pl_wslot", n * sizeof(pl->ps[0]), RTE_CACHE_LINE_SIZE);
	pl->clup_pend_moved = rte_zmalloc("sn_pl_clup", n * sizeof(pl->clup_pend_moved[0]), 0);
	pl->clup_pend = rte_zmalloc("sn_pl_clup", n * sizeof(pl->clup_pend[0]), 0);
	return pl->touched && pl->stage && pl->ps && pl->clup_pend_moved && pl->clup_pend ?
	       0 : ENOMEM;
}

static void worker_tables_free(struct sn_pipeline *pl)
{
	rte_free(pl->touched);
	rte_free(pl->stage);
	rte_free(pl->ps);
	rte_free(pl->clup_pend_moved);
	rte_free(pl->clup_pend);
}

/* Worker k's half: wheel, flow classes, return mailbox (split). NULL +
 * errno. */
static struct sn_pipeline *worker_create(const struct sn_pipeline_config *cfg,
					 struct sn_policy_store *pol, unsigned k,
					 struct sn_pl_shared *sh, int meta_off, int lag_off)
{
	struct sn_pl_arb *a = &sh->arb;
	const unsigned burst = cfg->burst ? cfg->burst : SN_CONFIG_BURST_MAX;
	struct sn_pipeline *pl;
	int e;

	pl = rte_zmalloc("sn_pipeline", sizeof(*pl), RTE_CACHE_LINE_SIZE);
	if (!pl) {
		errno = ENOMEM;
		return NULL;
	}
	pl->wk_id = k;
	pl->n_wk = sh->n_wk;
	pl->txq = (uint16_t)k;
	pl->split = cfg->split;
	pl->meta_off = meta_off;
	pl->lag_off = lag_off;
	pl->pool_nodes = cfg->pool_nodes;
	pl->wheel_rsv = sn_pipeline_wheel_reserve(cfg->pool_nodes, sn_config_port_slots, burst);
	pl->wheel_shared = cfg->pool_nodes - (uint64_t)sn_config_port_slots * pl->wheel_rsv;
	pl->store = pol;
	pl->sh = sh;
	pl->arb = a;
	pl->actr = a->ctr[k];
	if ((e = worker_tables(pl)))
		goto free_pl;
	if (cfg->split) {
		pl->ret = sn_mbox_create(RET_MBOX_SIZE, NULL);
		if (!pl->ret) {
			e = ENOMEM;
			goto free_pl;
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
	pl->cls = sn_classify_create(k, cfg->max_flows, sn_config_port_slots, burst,
				     SOCKET_ID_ANY);   /* NBA worker k */
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
free_pl:
	worker_tables_free(pl);
	rte_free(pl);
	errno = e;
	return NULL;
}

static void worker_free(struct sn_pipeline *pl)
{
	sn_fdrop_free(pl->fd);
	for (unsigned s = 0; pl->ps && s < sn_config_port_slots; s++)
		sn_fdrop_free(pl->ps[s].in_fd);
	sn_classify_free(pl->cls);
	sn_twheel_free(pl->wheel);
	rte_free(pl->restamp_buf);
	sn_mbox_free(pl->ret);
	worker_tables_free(pl);
	rte_free(pl);
}

/* The arbiter half's read-mostly part and its allocations (its sets
 * follow once the workers exist). */
static int arb_init(struct sn_pl_arb *a, const struct sn_pipeline_config *cfg,
		    struct sn_policy_store *pol, struct sn_pl_shared *sh, int meta_off)
{
	const unsigned n = sn_config_port_slots;

	a->n_wk = sh->n_wk;
	a->txq = cfg->split ? (uint16_t)a->n_wk : 0;
	a->split = cfg->split;
	a->remote = cfg->split;
	a->meta_off = meta_off;
	a->idle_sleep_us = cfg->idle_sleep_us;
	a->cfg = *cfg;
	a->store = pol;
	a->reg = cfg->reg;
	a->sh = sh;
	a->ctr = rte_zmalloc("sn_pipeline_actr", a->n_wk * sizeof(a->ctr[0]), 0);
	a->ctr_mem = rte_zmalloc("sn_pipeline_actr", (size_t)a->n_wk * n * sizeof(a->ctr_mem[0]),
				 RTE_CACHE_LINE_SIZE);
	a->slot = rte_zmalloc("sn_pipeline_aslot", n * sizeof(a->slot[0]), RTE_CACHE_LINE_SIZE);
	a->clup_moved = rte_zmalloc("sn_pipeline_clup", n * sizeof(a->clup_moved[0]), 0);
	a->clup_map = rte_zmalloc("sn_pipeline_clup", n * sizeof(a->clup_map[0]), 0);
	if (!a->ctr || !a->ctr_mem || !a->slot || !a->clup_moved || !a->clup_map)
		return ENOMEM;
	for (unsigned k = 0; k < a->n_wk; k++)
		a->ctr[k] = a->ctr_mem + (size_t)k * n;
	if (cfg->split) {
		/* Park room for every frame the arbiter can hold: all
		 * mailboxes and class queues of two sets (during a switch). */
		a->pend_cap = 2u * n * (a->n_wk * cfg->mbox_size + cfg->queue_len);
		a->pend = rte_malloc("sn_pipeline_pend", a->pend_cap * sizeof(a->pend[0]), 0);
		if (!a->pend)
			return ENOMEM;
	}
	return 0;
}

static void shared_free(struct sn_pl_shared *sh)
{
	for (unsigned k = 0; k < sh->n_wk; k++)
		if (sh->wk[k])
			worker_free(sh->wk[k]);
	rte_free(sh->arb.pend);
	rte_free(sh->arb.ctr);
	rte_free(sh->arb.ctr_mem);
	rte_free(sh->arb.slot);
	rte_free(sh->arb.clup_moved);
	rte_free(sh->arb.clup_map);
	rte_free(sh);
}

struct sn_pipeline *sn_pipeline_create(const struct sn_pipeline_config *cfg,
				       struct sn_policy_store *pol)
{
	static const struct rte_mbuf_dynfield desc = {
		.name = "sn_pipeline_meta",
		.size = sizeof(struct meta),
		.align = __alignof__(struct meta),
	};
	static const struct rte_mbuf_dynfield lag_desc = {
		.name = "sn_pipeline_agg_lag",
		.size = sizeof(int32_t),
		.align = __alignof__(int32_t),
	};
	const unsigned n = cfg->workers ? cfg->workers : 1;
	struct sn_pl_shared *sh;
	struct sn_pl_arb *a;
	int meta_off, lag_off, e;

	if (n > SN_PIPELINE_WORKERS_MAX || (n > 1 && !cfg->split) || (cfg->split && !cfg->reg)) {
		errno = EINVAL;
		return NULL;
	}
	meta_off = rte_mbuf_dynfield_register(&desc);
	lag_off = rte_mbuf_dynfield_register(&lag_desc);
	if (meta_off < 0 || lag_off < 0) {
		errno = rte_errno;
		return NULL;
	}
	sh = rte_zmalloc("sn_pipeline_shared", sizeof(*sh), RTE_CACHE_LINE_SIZE);
	if (!sh) {
		errno = ENOMEM;
		return NULL;
	}
	sh->n_wk = n;
	a = &sh->arb;
	e = arb_init(a, cfg, pol, sh, meta_off);
	if (e)
		goto free_sh;
	for (unsigned k = 0; k < n; k++) {
		sh->wk[k] = worker_create(cfg, pol, k, sh, meta_off, lag_off);
		if (!sh->wk[k]) {
			e = errno;
			goto free_sh;
		}
		a->ret[k] = sh->wk[k]->ret;
	}
	a->local = sh->wk[0];
	a->aset = sn_pl_aset_create(a, SN_SCHED_QFQ);
	if (!a->aset) {
		e = errno;
		goto free_sh;
	}
	a->aset_pub = a->aset;
	for (unsigned k = 0; k < n; k++) {
		sh->wk[k]->w_aset = a->aset;
		sh->wk[k]->w_ack = a->aset;
	}
	return sh->wk[0];
free_sh:
	shared_free(sh);
	errno = e;
	return NULL;
}

struct sn_pipeline *sn_pipeline_worker(const struct sn_pipeline *pl, unsigned k)
{
	return k < pl->n_wk ? pl->sh->wk[k] : NULL;
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
static void drain_asets(struct sn_pl_arb *a)
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
	const struct sn_pl_arb *a = pl->arb;

	if (pl->ret)
		sn_pl_ret_service(pl);
	for (uint32_t i = 0; i < a->n_pend; i++)
		if (meta_of(pl, a->pend[i])->wk == pl->wk_id)
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
	struct sn_pl_shared *sh = pl->sh;
	struct sn_pl_arb *a = pl->arb;

	if (pl->drained)
		return;
	if (sh->n_wk == 1) {
		/* The arbiter lcore (if any) has returned: from here on the
		 * arbiter half runs on this thread (the worker) and frees
		 * what it holds. */
		a->remote = false;
		drain_returns(pl);
		a->n_pend = 0;
		drain_wheel(pl);
		drain_asets(a);
		pl->drained = true;
		return;
	}
	/* Layout ncore (arbiter lcore returned, every worker calls this when
	 * its loop ends). 1: each worker empties its wheel and takes what
	 * the arbiter returned, then arrives; 2: once all arrived (nobody
	 * pushes into a client mailbox any more), worker 0 drops what the
	 * arbiter sets hold, returning other workers' deferred frames
	 * through their return mailboxes (remote: sn_pl_a_drop returns every
	 * deferred frame, worker 0's own included), and says done; 3: each
	 * worker takes its returns and its parked frames (pend is read-only
	 * from here on). */
	drain_wheel(pl);
	if (pl->ret)
		sn_pl_ret_service(pl);
	__atomic_fetch_add(&sh->drain_arrived, 1, __ATOMIC_RELEASE);
	if (pl->wk_id == 0) {
		wait_flag(&sh->drain_arrived, sh->n_wk);
		a->remote = true;
		drain_asets(a);
		__atomic_store_n(&sh->drain_done, 1, __ATOMIC_RELEASE);
	} else {
		wait_flag(&sh->drain_done, 1);
	}
	drain_returns(pl);
	pl->drained = true;
}

void sn_pipeline_destroy(struct sn_pipeline *pl)
{
	struct sn_pl_shared *sh;
	struct sn_pl_arb *a;

	if (!pl)
		return;
	sh = pl->sh;
	a = &sh->arb;
	/* Workers never ran or all returned: nothing runs concurrently. A
	 * worker that never ran held no frame of a deferred port. */
	for (unsigned k = 0; k < sh->n_wk; k++) {
		struct sn_pipeline *w = sh->wk[k];

		if (!w->drained) {
			drain_wheel(w);
			if (w->ret)
				sn_pl_ret_service(w);
		}
	}
	if (!sh->wk[0]->drained) {   /* worker 0's drain drains the arbiter sets */
		a->remote = false;
		drain_asets(a);
		for (uint32_t i = 0; i < a->n_pend; i++)
			sn_pl_ret_handle(sh->wk[meta_at(a->meta_off, a->pend[i])->wk], a->pend[i]);
	}
	a->n_pend = 0;
	shared_free(sh);
}
