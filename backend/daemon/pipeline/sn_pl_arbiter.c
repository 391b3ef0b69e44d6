/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_arbiter.c — the arbiter half: arbiter sets, release and drop callbacks, rounds, the arbiter lcore. */
#include "sn_pl_internal.h"

/* Arbiter half: one frame of slot src left the arbiter. Release: pairs
 * with the acquire load in sn_pipeline_src_held(), so a worker that sees
 * the decrement also sees the a_returning increment of a returned frame
 * (and never acknowledges a device stop while the arbiter still reads
 * guest memory of that port). */
static inline void backlog_sub(struct sn_pipeline *owner, uint16_t src, uint64_t k)
{
	uint64_t *c = &owner->ps[src].ast.qfq_backlog;

	__atomic_store_n(c, *c - k, __ATOMIC_RELEASE);
}

static inline void backlog_dec(struct sn_pipeline *owner, uint16_t src)
{
	backlog_sub(owner, src, 1);
}

static void arb_release(void *const *items, uint32_t n, void *arg)
{
	struct arbset *as = arg;
	struct sn_pipeline *pl = as->pl;
	const struct sn_sched *sch = sn_arbiter_sched(as->arb);
	struct sn_pipeline *const *wk = pl->arbp->wk;
	const int moff = pl->meta_off;
	struct rte_mbuf *pkts[BATCH];
	/* s12-S2: the runs of one (worker, port): where each starts, its
	 * port slot and its owner, for the backlog stores below (found here
	 * once, not again). s15-P5: kept per run, not per frame, and a run is
	 * found on the meta's (src, wk) bytes; the owner is looked up once
	 * per run. s20: with their byte totals they also give tx_direct()'s
	 * counters (struct rel_runs). */
	struct sn_pipeline *rown[BATCH];
	uint16_t rsrc[BATCH];

	while (n) {
		uint16_t k = (uint16_t)RTE_MIN(n, (uint32_t)BATCH);

		/* s11-S: the class backlog is read once per run of frames of
		 * one class (the whole batch was dequeued before this call, so
		 * it is the same for each of them), counters per run. */
		uint32_t last = UINT32_MAX;
		uint64_t idle = 0, nidle = 0, bytes = 0, fl = 0, rby[BATCH + 1];
		uint16_t rstart[BATCH + 1], nr = 0;
		uint32_t cls = 0;   /* s20: nonzero when some frame has a class */

		for (uint16_t i = 0; i < k; i++) {
			struct rte_mbuf *m = items[i];
			const struct meta *md = RTE_MBUF_DYNFIELD(m, moff, const struct meta *);
			const uint32_t key = (uint32_t)md->src | (uint32_t)md->wk << 16;

			pkts[i] = m;
			cls |= md->cls ^ SN_CLASSIFY_NONE;
			if (key != last) {
				if (nidle)
					ctr_add(&rown[nr - 1]->ps[rsrc[nr - 1]].ast.qfq_idle, nidle);
				nidle = 0;
				if ((key & 0xffff) != (last & 0xffff))
					idle = sn_sched_class_backlog(sch, md->src) == 0;
				last = key;
				rsrc[nr] = md->src;
				rown[nr] = wk[md->wk];
				rby[nr] = bytes;
				rstart[nr++] = i;
			}
			nidle += idle;
			bytes += m->pkt_len;
			fl |= m->ol_flags;
		}
		rstart[nr] = k;
		rby[nr] = bytes;
		if (nidle)
			ctr_add(&rown[nr - 1]->ps[rsrc[nr - 1]].ast.qfq_idle, nidle);
		if (!pl->arb_remote)
			pl->held -= k;
		const struct rel_runs rr = {
			.nr = nr, .cls = cls != 0, .flags = fl, .start = rstart, .src = rsrc,
			.own = rown, .bytes = rby,
		};

		sn_pl_uplink_tx(pl, pkts, k, true, &rr);
		/* After sn_pl_uplink_tx: a frame counts as held (src_held) until it
		 * is sent, freed or counted as returning. One release store
		 * per run of frames of one (worker, port). */
		for (uint16_t r = 0; r < nr; r++)
			backlog_sub(rown[r], rsrc[r], (uint64_t)(rstart[r + 1] - rstart[r]));
		items += k;
		n -= k;
	}
}

static void arb_drop(void *item, enum sn_arbiter_drop cause, void *arg)
{
	static const enum sn_pipeline_drop map[SN_ARBITER_DROP_NCAUSES] = {
		[SN_ARBITER_DROP_QFULL] = SN_PL_DROP_QFQ_FULL,
		[SN_ARBITER_DROP_NOCLASS] = SN_PL_DROP_NO_CLASS,
		[SN_ARBITER_DROP_BADLEN] = SN_PL_DROP_BAD_LEN,
		[SN_ARBITER_DROP_CLIENT_GONE] = SN_PL_DROP_POLICY,
	};
	struct arbset *as = arg;
	struct sn_pipeline *pl = as->pl;
	struct rte_mbuf *m = item;
	const uint16_t src = meta_of(pl, m)->src;
	struct sn_pipeline *owner = owner_of(pl, m);

	if (!pl->arb_remote)
		pl->held--;
	sn_pl_a_drop(pl, m, map[cause]);
	backlog_dec(owner, src);
}

void sn_pl_class_drop(void *item, uint32_t len, void *arg)
{
	(void)len;
	arb_drop(item, SN_ARBITER_DROP_CLIENT_GONE, arg);
}

/* Arbiter half: an item longer than its class's lmax raises the lmax to
 * the next power of two >= its length (see CLASS_LMAX_INIT). */
static int arb_oversize(uint32_t class_id, uint32_t len, void *arg)
{
	struct arbset *as = arg;
	uint32_t lmax;
	int rc;

	if (class_id >= SN_PORT_MAX || !as->weight[class_id])
		return -ENOENT;
	if (len > SN_SCHED_MAX_LMAX)
		return -EMSGSIZE;
	lmax = RTE_MIN(rte_align32pow2(len), SN_SCHED_MAX_LMAX);
	rc = sn_sched_class_change(sn_arbiter_sched(as->arb), class_id, as->weight[class_id], lmax);
	if (rc)
		return rc;
	as->lmax[class_id] = lmax;
	return 0;
}

static_assert(sizeof(((struct rte_mbuf *)0)->pkt_len) == sizeof(uint32_t),
	      "sn_arbiter_params.len_offset reads a uint32_t");

/* A new arbiter set: one client per port slot, class = slot. NULL + errno. */
struct arbset *sn_pl_aset_create(struct sn_pipeline *pl, enum sn_sched_algo algo)
{
	struct arbset *as = rte_zmalloc("sn_arbset", sizeof(*as), RTE_CACHE_LINE_SIZE);
	struct sn_arbiter_params ap = {
		.sched = { .algo = algo, .max_classes = SN_PORT_MAX,
			   .queue_len = pl->cfg.queue_len },
		/* PSPAT: one client per (worker, port), one list per worker. */
		.link_bps = SN_ARBITER_MAX_LINK_BPS,
		.overhead_bytes = SN_POLICY_OVERHEAD_DEF,
		.slack_ns = pl->cfg.slack_ns,
		.idle_credit_ns = pl->cfg.idle_credit_ns,
		.read_limit = RTE_MIN(pl->cfg.mbox_size, SN_ARBITER_MAX_READ_LIMIT),
		.max_clients = pl->n_wk * SN_PORT_MAX,
		.n_clists = pl->n_wk,
		.clist_size = 256,
		.release_burst = BATCH,
		/* s11-S: the length read in place (rte_mbuf.pkt_len), not
		 * through a callback per item */
		.item_len = NULL,
		.len_offset = offsetof(struct rte_mbuf, pkt_len),
		.release = arb_release,
		.drop = arb_drop,
		.oversize = arb_oversize,
		.cb_arg = as,
		/* s19: 1-core layout, every frame through arb_local() */
		.local_only = !pl->split,
	};
	int e;

	if (!as) {
		errno = ENOMEM;
		return NULL;
	}
	as->pl = pl;
	as->algo = algo;
	as->arb = sn_arbiter_create(&ap, now_ns());
	if (!as->arb) {
		e = errno;
		rte_free(as);
		errno = e;
		return NULL;
	}
	as->n_wk = pl->n_wk;
	for (unsigned k = 0; k < as->n_wk; k++) {
		as->clist[k] = sn_arbiter_clist(as->arb, k);
		for (unsigned s = 0; s < SN_PORT_MAX; s++) {
			as->cl[k][s] = sn_arbiter_client_add(as->arb, s, pl->cfg.mbox_size);
			if (!as->cl[k][s]) {
				e = errno;
				sn_arbiter_free(as->arb);
				rte_free(as);
				errno = e;
				return NULL;
			}
			as->mbox[k][s] = sn_arbiter_client_mbox(as->cl[k][s]);
		}
	}
	return as;
}

/* Arbiter half: drop everything the set holds (mailboxes and scheduler),
 * free it. Its producer (the worker) no longer uses it. */
void sn_pl_aset_destroy(struct sn_pipeline *pl, struct arbset *as)
{
	struct sn_sched *s = sn_arbiter_sched(as->arb);
	void *item;

	(void)pl;
	for (unsigned k = 0; k < as->n_wk; k++)
		for (unsigned i = 0; i < SN_PORT_MAX; i++)
			sn_arbiter_client_del(as->arb, as->cl[k][i]);
	while ((item = sn_sched_dequeue(s, NULL, NULL)) != NULL)
		arb_drop(item, SN_ARBITER_DROP_CLIENT_GONE, as);
	sn_arbiter_free(as->arb);
	rte_free(as);
}

/* Arbiter half: does t hold a port the last sn_pl_apply_arb() did not see? The
 * table pointer alone can be reused after a free (ABA); the generations
 * of its ports cannot. */
bool sn_pl_arb_table_stale(const struct sn_pipeline *pl, const struct sn_port_table *t)
{
	if (t != pl->a_t_seen)
		return true;
	for (unsigned i = 0; i < t->n; i++)
		if (pl->ps[t->list[i]->slot].a_gen != t->list[i]->gen)
			return true;
	return false;
}

/* Arbiter half: has every worker moved to the current set? */
static bool all_acked(const struct sn_pipeline *pl)
{
	for (unsigned k = 0; k < pl->n_wk; k++)
		if (__atomic_load_n(&pl->wk[k]->w_ack, __ATOMIC_ACQUIRE) != pl->aset)
			return false;
	return true;
}

/* Arbiter half, one round: policy, parked returns, scan, stats. Returns
 * frames released (0 and no backlog = idle). */
uint32_t sn_pl_arb_round(struct sn_pipeline *pl, const struct sn_policy *pol,
			  const struct sn_port_table *t, uint64_t now)
{
	uint32_t rel = 0;

	pl->a_now = now;
	ctr_set(&pl->arb_clock_ns, now);
	if (pol->gen != pl->a_pol_gen || sn_pl_arb_table_stale(pl, t) || (pl->a_algo_retry && !pl->aset_old))
		sn_pl_apply_arb(pl, pol, t);
	sn_pl_clup_take(pl);         /* s15-R5: class maps of worker 0's applies */
	if (pl->aset_old && all_acked(pl)) {
		/* Acquire (all_acked) pairs with each worker's release of
		 * w_ack: their last inserts into the old mailboxes are
		 * visible. */
		sn_pl_aset_destroy(pl, pl->aset_old);
		pl->aset_old = NULL;
	}
	if (pl->arb_remote && sn_pl_ret_flush(pl))
		return 0;    /* backpressure: the worker has not taken returns */
	if (pl->aset_old)
		rel += sn_arbiter_do_scan(pl->aset_old->arb, now);
	rel += sn_arbiter_do_scan(pl->aset->arb, now);
	if ((int64_t)(now - pl->a_next_stats) >= 0) {
		sn_pl_publish_arb_stats(pl);
		pl->a_next_stats = now + STATS_EVERY_NS;
	}
	return rel;
}

int sn_pipeline_arbiter_main(void *arg)
{
	struct sn_pipeline *pl = arg;
	/* Spin-then-sleep (PSPAT §3.5, sn_arbiter_idle_ns): with a backlog
	 * waiting for the link, sleep until the link is free when that is
	 * at least ARB_MIN_SLEEP_NS away (case (i): the wake-up time is
	 * known); idle, spin ARB_SPIN_NS and then nap idle_sleep_us at a
	 * time. Sleeping instead of spinning also matters when the arbiter
	 * shares its CPU with the worker: a thread that slept is scheduled
	 * again promptly, a spinning one waits its turn. */
	struct sn_arbiter_idle ip = {
		.spin_ns = ARB_SPIN_NS,
		.min_sleep_ns = ARB_MIN_SLEEP_NS,
		.max_sleep_ns = (uint64_t)pl->idle_sleep_us * 1000,
	};

	rcu_register_thread();
	/* Acquire pairs with the release store in sn_pipeline_arbiter_stop(). */
	while (!__atomic_load_n(&pl->stop, __ATOMIC_ACQUIRE)) {
		const struct sn_policy *pol = sn_policy_current(pl->store);
		const struct sn_port_table *t = sn_ports_table_rcu(pl->reg);
		uint64_t now = now_ns(), ns = 0;

		sn_pl_arb_round(pl, pol, t, now);
		ctr_add(&pl->ats.loops, 1);
		/* Ends the read-side use of pol, t and the uplink port: pairs
		 * with synchronize_rcu() in sn_policy.c / sn_port.c. */
		rcu_quiescent_state();
		if (pl->idle_sleep_us && !pl->n_pend && !pl->aset_old)
			ns = sn_arbiter_idle_ns(pl->aset->arb, &ip, now);
		if (ns) {
			struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
					       .tv_nsec = (long)(ns % 1000000000ull) };
			uint64_t t0 = now_ns();

			/* Offline: no grace period waits for a sleeping arbiter. */
			rcu_thread_offline();
			clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
			rcu_thread_online();
			ctr_add(&pl->ats.sleeps, 1);
			ctr_add(&pl->ats.sleep_ns, now_ns() - t0);
		}
	}
	rcu_unregister_thread();
	return 0;
}

void sn_pipeline_arbiter_stop(struct sn_pipeline *pl)
{
	__atomic_store_n(&pl->stop, 1, __ATOMIC_RELEASE);
}
