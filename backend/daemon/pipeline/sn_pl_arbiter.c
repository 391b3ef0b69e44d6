/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_arbiter.c — the arbiter half (PSPAT §3): arbiter sets, the
 * release and drop callbacks of sn_arbiter, one round, the arbiter lcore.
 *
 * An arbiter set is one sn_arbiter (scheduler, QFQ by default, and link
 * emulation at policy.uplink.rate_bps) with one client per (worker, port
 * slot), class = slot, and one client list per worker (PSPAT §3.4), so
 * every client mailbox keeps one producer. A round applies a new policy,
 * takes worker 0's class maps, retires a replaced set once every worker
 * acknowledged the new one, hands parked returns back and scans
 * (sn_arbiter_do_scan, PSPAT Fig. 5); released frames go to the uplink
 * (the arbiter is the dispatcher, PSPAT §3.3).
 */
#include "sn_pl_internal.h"

/* k frames of one (worker, slot) left the arbiter. Release: pairs with
 * the acquire load in sn_pipeline_src_held(), so a worker that sees the
 * decrement also sees the returning increment of a returned frame (and
 * never acknowledges a device stop while the arbiter still reads guest
 * memory of that port). */
static inline void backlog_sub(struct actr *c, uint64_t k)
{
	__atomic_store_n(&c->st.qfq_backlog, c->st.qfq_backlog - k, __ATOMIC_RELEASE);
}

/* The runs of one (worker, port) of a release batch (where each starts,
 * its counters, its byte total) are found once here, for the backlog
 * stores and for tx_direct()'s counters (struct rel_runs); a run is found
 * on the meta's (src, wk) bytes. The class backlog is read once per run
 * of one class (the whole batch was dequeued before this call). */
static void arb_release(void *const *items, uint32_t n, void *arg)
{
	struct arbset *as = arg;
	struct sn_pl_arb *a = as->a;
	const struct sn_sched *sch = sn_arbiter_sched(as->arb);
	struct actr *const *const ctr = a->ctr;
	const int moff = a->meta_off;
	struct rte_mbuf *pkts[BATCH];
	struct actr *rctr[BATCH];

	while (n) {
		uint16_t k = (uint16_t)RTE_MIN(n, (uint32_t)BATCH);
		uint32_t last = UINT32_MAX;
		uint64_t idle = 0, nidle = 0, bytes = 0, fl = 0, rby[BATCH + 1];
		uint16_t rstart[BATCH + 1], nr = 0;
		uint32_t cls = 0;   /* nonzero when some frame has a class */

		for (uint16_t i = 0; i < k; i++) {
			struct rte_mbuf *m = items[i];
			const struct meta *md = RTE_MBUF_DYNFIELD(m, moff, const struct meta *);
			const uint32_t key = (uint32_t)md->src | (uint32_t)md->wk << 16;

			pkts[i] = m;
			cls |= md->cls ^ SN_CLASSIFY_NONE;
			if (key != last) {
				if (nidle)
					ctr_add(&rctr[nr - 1]->st.qfq_idle, nidle);
				nidle = 0;
				if ((key & 0xffff) != (last & 0xffff))
					idle = sn_sched_class_backlog(sch, md->src) == 0;
				last = key;
				rctr[nr] = &ctr[md->wk][md->src];
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
			ctr_add(&rctr[nr - 1]->st.qfq_idle, nidle);
		if (!a->remote)
			a->local->held -= k;
		const struct rel_runs rr = {
			.nr = nr, .cls = cls != 0, .flags = fl, .start = rstart, .ctr = rctr,
			.bytes = rby,
		};

		sn_pl_uplink_tx(a->remote ? NULL : a->local, a, pkts, k, &rr);
		/* After the transmit: a frame counts as held (src_held) until it
		 * is sent, freed or counted as returning. */
		for (uint16_t r = 0; r < nr; r++)
			backlog_sub(rctr[r], (uint64_t)(rstart[r + 1] - rstart[r]));
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
	struct sn_pl_arb *a = as->a;
	struct rte_mbuf *m = item;
	struct actr *c = actr_of(a, m);

	if (!a->remote)
		a->local->held--;
	sn_pl_a_drop(a, m, map[cause]);
	backlog_sub(c, 1);
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

	if (class_id >= as->n_slots || !as->weight[class_id])
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

/* A set and its tables by slot, in one allocation: cl and mbox rows per
 * worker, weight, lmax. */
static struct arbset *aset_alloc(unsigned n_wk, unsigned n)
{
	const size_t row = n * sizeof(void *);
	struct arbset *as = rte_zmalloc("sn_arbset", sizeof(*as) + 2 * n_wk * row +
					2 * n * sizeof(uint32_t), RTE_CACHE_LINE_SIZE);
	char *mem;

	if (!as)
		return NULL;
	mem = (char *)(as + 1);
	as->n_slots = n;
	for (unsigned k = 0; k < n_wk; k++, mem += 2 * row) {
		as->cl[k] = (struct sn_arbiter_client **)mem;
		as->mbox[k] = (struct sn_mbox **)(mem + row);
	}
	as->weight = (uint32_t *)mem;
	as->lmax = as->weight + n;
	return as;
}

/* A new arbiter set: one client per port slot, class = slot. NULL + errno. */
struct arbset *sn_pl_aset_create(struct sn_pl_arb *a, enum sn_sched_algo algo)
{
	const unsigned n_slots = sn_config_port_slots;
	struct arbset *as = aset_alloc(a->n_wk, n_slots);
	struct sn_arbiter_params ap = {
		.sched = { .algo = algo, .max_classes = n_slots,
			   .queue_len = a->cfg.queue_len },
		/* PSPAT: one client per (worker, port), one list per worker. */
		.link_bps = SN_ARBITER_MAX_LINK_BPS,
		.overhead_bytes = SN_POLICY_OVERHEAD_DEF,
		.slack_ns = a->cfg.slack_ns,
		.idle_credit_ns = a->cfg.idle_credit_ns,
		.read_limit = RTE_MIN(a->cfg.mbox_size, SN_ARBITER_MAX_READ_LIMIT),
		.max_clients = a->n_wk * n_slots,
		.n_clists = a->n_wk,
		/* room for every client of the worker: no overflow scans */
		.clist_size = RTE_MAX(256u, rte_align32pow2(n_slots)),
		.release_burst = BATCH,
		/* the length read in place (rte_mbuf.pkt_len), not through
		 * a callback per item */
		.item_len = NULL,
		.len_offset = offsetof(struct rte_mbuf, pkt_len),
		.release = arb_release,
		.drop = arb_drop,
		.oversize = arb_oversize,
		.cb_arg = as,
		/* layout 1core: every frame through arb_local() */
		.local_only = !a->split,
	};
	int e;

	if (!as) {
		errno = ENOMEM;
		return NULL;
	}
	as->a = a;
	as->algo = algo;
	as->arb = sn_arbiter_create(&ap, now_ns());
	if (!as->arb) {
		e = errno;
		rte_free(as);
		errno = e;
		return NULL;
	}
	as->n_wk = a->n_wk;
	for (unsigned k = 0; k < as->n_wk; k++) {
		as->clist[k] = sn_arbiter_clist(as->arb, k);
		for (unsigned s = 0; s < n_slots; s++) {
			as->cl[k][s] = sn_arbiter_client_add(as->arb, s, a->cfg.mbox_size);
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
 * free it. Its producers (the workers) no longer use it. */
void sn_pl_aset_destroy(struct sn_pl_arb *a, struct arbset *as)
{
	struct sn_sched *s = sn_arbiter_sched(as->arb);
	void *item;

	(void)a;
	for (unsigned k = 0; k < as->n_wk; k++)
		for (unsigned i = 0; i < as->n_slots; i++)
			sn_arbiter_client_del(as->arb, as->cl[k][i]);
	while ((item = sn_sched_dequeue(s, NULL, NULL)) != NULL)
		arb_drop(item, SN_ARBITER_DROP_CLIENT_GONE, as);
	sn_arbiter_free(as->arb);
	rte_free(as);
}

/* Arbiter half: does t hold a port the last sn_pl_apply_arb() did not
 * see? The table pointer alone can be reused after a free (ABA); its
 * publication number cannot, and comparing it costs the same whatever
 * the number of ports (this runs every round). */
bool sn_pl_arb_table_stale(const struct sn_pl_arb *a, const struct sn_port_table *t)
{
	return t != a->t_seen || t->seq != a->t_seq;
}

/* Arbiter half: has every worker moved to the current set? */
static bool all_acked(const struct sn_pl_arb *a)
{
	for (unsigned k = 0; k < a->n_wk; k++)
		if (__atomic_load_n(&a->sh->wk[k]->w_ack, __ATOMIC_ACQUIRE) != a->aset)
			return false;
	return true;
}

/* Arbiter half, one round: policy, parked returns, scan, stats. Returns
 * frames released (0 and no backlog = idle). */
uint32_t sn_pl_arb_round(struct sn_pl_arb *a, const struct sn_policy *pol,
			 const struct sn_port_table *t, uint64_t now)
{
	uint32_t rel = 0;

	a->now = now;
	ctr_set(&a->clock_ns, now);
	if (pol->gen != a->pol_gen || sn_pl_arb_table_stale(a, t) ||
	    (a->algo_retry && !a->aset_old))
		sn_pl_apply_arb(a, pol, t);
	sn_pl_clup_take(a);         /* class maps of worker 0's applies */
	if (a->remote)
		sn_pl_purge_take(a);    /* stopping sources (sn_pl_purge.c) */
	if (a->aset_old && all_acked(a)) {
		/* Acquire (all_acked) pairs with each worker's release of
		 * w_ack: their last inserts into the old mailboxes are
		 * visible. */
		sn_pl_aset_destroy(a, a->aset_old);
		a->aset_old = NULL;
	}
	if (a->remote && sn_pl_ret_flush(a))
		return 0;    /* backpressure: a worker has not taken its returns */
	if (a->aset_old)
		rel += sn_arbiter_do_scan(a->aset_old->arb, now);
	rel += sn_arbiter_do_scan(a->aset->arb, now);
	if ((int64_t)(now - a->next_stats) >= 0) {
		sn_pl_publish_arb_stats(a);
		a->next_stats = now + STATS_EVERY_NS;
	}
	return rel;
}

/* The arbiter lcore is handed the pipeline's handle; it touches only the
 * arbiter half (and what the contract table lets it read). */
int sn_pipeline_arbiter_main(void *arg)
{
	struct sn_pl_arb *a = ((struct sn_pipeline *)arg)->arb;
	/* Spin-then-sleep (PSPAT §3.5, sn_arbiter_idle_ns): with a backlog
	 * waiting for the link, sleep until the link is free when that is
	 * at least ARB_MIN_SLEEP_NS away (the wake-up time is known); idle,
	 * spin ARB_SPIN_NS and then nap idle_sleep_us at a time. A thread
	 * that slept is scheduled again promptly when it shares its CPU with
	 * a worker; a spinning one waits its turn. */
	struct sn_arbiter_idle ip = {
		.spin_ns = ARB_SPIN_NS,
		.min_sleep_ns = ARB_MIN_SLEEP_NS,
		.max_sleep_ns = (uint64_t)a->idle_sleep_us * 1000,
	};

	rcu_register_thread();
	/* Acquire pairs with the release store in sn_pipeline_arbiter_stop(). */
	while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
		const struct sn_policy *pol = sn_policy_current(a->store);
		const struct sn_port_table *t = sn_ports_table_rcu(a->reg);
		uint64_t now = now_ns(), ns = 0;

		sn_pl_arb_round(a, pol, t, now);
		ctr_add(&a->ats.loops, 1);
		/* Ends the read-side use of pol, t and the uplink port: pairs
		 * with synchronize_rcu() in sn_policy.c / sn_port.c. */
		rcu_quiescent_state();
		if (a->idle_sleep_us && !a->n_pend && !a->aset_old)
			ns = sn_arbiter_idle_ns(a->aset->arb, &ip, now);
		if (ns > ARB_MAX_LINK_SLEEP_NS && sn_arbiter_backlog(a->aset->arb))
			ns = ARB_MAX_LINK_SLEEP_NS;
		if (ns) {
			struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
					       .tv_nsec = (long)(ns % 1000000000ull) };
			uint64_t t0 = now_ns();

			/* Offline: no grace period waits for a sleeping arbiter. */
			rcu_thread_offline();
			clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
			rcu_thread_online();
			ctr_add(&a->ats.sleeps, 1);
			ctr_add(&a->ats.sleep_ns, now_ns() - t0);
		}
	}
	rcu_unregister_thread();
	return 0;
}

void sn_pipeline_arbiter_stop(struct sn_pipeline *pl)
{
	__atomic_store_n(&pl->arb->stop, 1, __ATOMIC_RELEASE);
}
