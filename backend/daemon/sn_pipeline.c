/* sn_pipeline.c — scheduled datapath, 1-core layout (worker + arbiter +
 * dispatcher run to completion in one loop; DESIGN.md "The pipeline").
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
 * Every frame is freed exactly once on every path; each drop has a cause.
 */
#include "sn_pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_vhost.h>

#include "sn_classify.h"
#include "sn_fdrop.h"
#include "sn_log.h"
#include "sn_policy.h"
#include "sn_port.h"
#include "sn_tstamp.h"
#include "sn_twheel.h"
#include "sn_vqtx.h"

#define DST_FLOOD      UINT16_MAX
#define BATCH          64
#define MAX_BATCHES    16         /* wheel batches per run(): bounds one iteration */
#define CLASS_LMAX     SN_SCHED_MAX_LMAX
#define STATS_EVERY_NS 1000000ull
/* Fair dropping threshold θ: 100 ms of the uplink rate (the lag the link
 * emulation also tolerates: a sender or worker descheduled that long on a
 * shared host catches up in one burst), at least 64 KiB. */
#define FAIR_THETA_MIN 65536u
#define FAIR_THETA_DIV 80u        /* rate_bps / 8 bits / 10 */
#define GSO_FLAGS      (RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_UDP_SEG)

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

/* Per-frame metadata in an mbuf dynamic field, written at submit. */
struct meta {
	uint32_t src_gen, dst_gen;
	uint16_t src, dst;        /* port slots; dst DST_FLOOD = flood */
	uint8_t cls;              /* flow class (sn_classify), or SN_CLASSIFY_NONE */
	uint64_t ts;              /* release time in the wheel (restamp_wheel) */
};

struct pstate {
	/* Worker only: shaping state of the port in this slot. */
	struct sn_tstamp ts;
	uint32_t gen;             /* port generation this state belongs to */
	bool shaped, has_rate, has_class;
	uint32_t weight;          /* weight of the scheduler class */
	struct sn_arbiter_client *cl;
	struct sn_mbox *mbox;
	/* Counters: worker is the sole writer. */
	struct sn_pipeline_port_stats st __rte_cache_aligned;
} __rte_cache_aligned;

struct stage {
	struct sn_port *port;
	uint16_t n;
	struct rte_mbuf *pkts[BATCH];
};

struct sn_pipeline {
	/* Read-mostly. */
	struct sn_policy_store *store;
	struct sn_pipeline_config cfg;
	int meta_off;
	/* Worker only. */
	struct sn_twheel *wheel;
	struct sn_arbiter *arb;
	struct sn_classify *cls;  /* issue 6: flow classes + aggregates */
	struct sn_fdrop *fd;      /* issue 6: uplink.overload "fair", else NULL */
	uint64_t fd_rate;         /* its capacity: uplink rate_bps */
	uint32_t overhead;        /* uplink overhead_bytes per frame */
	struct sn_mbox *clist;
	enum sn_sched_algo algo;
	uint64_t pol_gen;         /* generation applied, 0 = none yet */
	bool dirty;               /* port table changed under a shaped slot */
	const struct sn_port_table *t_seen;
	struct sn_port_table *t;  /* current iteration's snapshot */
	struct sn_port *uplink;
	sn_pipeline_gso_fn gso;   /* set before the worker starts */
	void *gso_arg;
	uint64_t now;
	uint64_t next_stats;
	uint64_t held;            /* frames in wheel + arbiter */
	void **restamp_buf;       /* restamp_wheel(): room for cfg.pool_nodes frames */
	unsigned n_touched;
	uint16_t touched[SN_PORT_MAX];
	struct stage stage[SN_PORT_MAX];
	struct pstate ps[SN_PORT_MAX];
	/* Worker writes, anyone reads (relaxed). */
	struct sn_arbiter_stats arb_st __rte_cache_aligned;
	uint64_t arb_backlog;
	uint64_t clock_ns __rte_cache_aligned;   /* now of the latest run() */
	struct sn_pipeline_fair_stats fair_st;
	/* issue 6 (measurement): odd while run() releases frames or while it
	 * lags (an iteration ended by MAX_BATCHES left due frames in the
	 * wheel), even between runs that released everything due. Worker: odd
	 * store + release fence at run() start (pairs with the reader's
	 * acquire fence before its second load), release store of the even
	 * value at the end (pairs with the reader's acquire load of its first
	 * value). See sn_pipeline_run_seq(). */
	uint64_t run_seq;
};

static inline void ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, *c + v, __ATOMIC_RELAXED);
}

static inline void ctr_set(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, v, __ATOMIC_RELAXED);
}

static inline struct meta *meta_of(const struct sn_pipeline *pl, struct rte_mbuf *m)
{
	return RTE_MBUF_DYNFIELD(m, pl->meta_off, struct meta *);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void drop(struct sn_pipeline *pl, struct rte_mbuf *m, enum sn_pipeline_drop cause)
{
	struct meta *md = meta_of(pl, m);

	ctr_add(&pl->ps[md->src].st.drop[cause], 1);
	rte_pktmbuf_free(m);
}

/* A frame of a deferred-completion port (sn_vqtx) that must not go on:
 * its device is stopping, or it was held past max_hold_us. Drops it
 * (freeing completes it) and returns true; false for any other frame. */
static bool deferred_drop(struct sn_pipeline *pl, struct rte_mbuf *m)
{
	uint64_t pop;
	struct sn_vqtx *q = sn_vqtx_of(m, &pop);

	if (!q)
		return false;
	if (sn_vqtx_stop_pending(q)) {
		sn_vqtx_count_forced(q);
		drop(pl, m, SN_PL_DROP_SRC_STOP);
		return true;
	}
	if (sn_vqtx_deadline(q, pop) <= rte_rdtsc()) {
		sn_vqtx_count_timeout(q);
		drop(pl, m, SN_PL_DROP_HOLD);
		return true;
	}
	return false;
}

static void count_sent(struct sn_pipeline *pl, struct rte_mbuf *m)
{
	struct pstate *ps = &pl->ps[meta_of(pl, m)->src];

	ctr_add(&ps->st.sent_packets, 1);
	ctr_add(&ps->st.sent_bytes, m->pkt_len);
}

/* Frames without GSO to the uplink (up): one burst; takes ownership. */
static void tx_plain(struct sn_pipeline *pl, struct sn_port *up, struct rte_mbuf **pkts,
		     uint16_t n)
{
	struct pstate *ps;
	uint64_t bytes = 0;
	uint16_t k;

	k = rte_eth_tx_prepare(up->eth_port, 0, pkts, n);
	k = rte_eth_tx_burst(up->eth_port, 0, pkts, k);
	for (uint16_t i = 0; i < k; i++) {
		bytes += pkts[i]->pkt_len;
		/* After tx_burst the PMD owns the mbuf, but its fields stay
		 * readable until it is freed by a later tx_burst on this
		 * queue, which only this thread calls. */
		count_sent(pl, pkts[i]);
		ps = &pl->ps[meta_of(pl, pkts[i])->src];
		ctr_add(&ps->st.uplink_packets, 1);
		ctr_add(&ps->st.uplink_bytes, pkts[i]->pkt_len);
		sn_classify_uplinked(pl->cls, meta_of(pl, pkts[i])->src, meta_of(pl, pkts[i])->cls,
				     pkts[i]->pkt_len);
	}
	ctr_add(&up->st.tx_packets, k);
	ctr_add(&up->st.tx_bytes, bytes);
	if (k < n)
		ctr_add(&up->st.drop[SN_DROP_RING_FULL], n - k);
	for (uint16_t i = k; i < n; i++)
		rte_pktmbuf_free(pkts[i]);
}

/* One guest GSO frame to the uplink: segmented by the switch's hook.
 * Counted as one frame (sent, or ring_full / gso_failed on the uplink, as
 * the switch counts its own). Takes ownership. */
static void tx_gso(struct sn_pipeline *pl, struct sn_port *up, struct rte_mbuf *m)
{
	int rc = pl->gso ? pl->gso(pl->gso_arg, up, m) : -1;

	if (rc == 1) {
		struct pstate *ps = &pl->ps[meta_of(pl, m)->src];

		count_sent(pl, m);
		ctr_add(&ps->st.uplink_packets, 1);
		ctr_add(&ps->st.uplink_bytes, m->pkt_len);
		sn_classify_uplinked(pl->cls, meta_of(pl, m)->src, meta_of(pl, m)->cls, m->pkt_len);
		ctr_add(&up->st.tx_packets, 1);
		ctr_add(&up->st.tx_bytes, m->pkt_len);
	} else {
		ctr_add(&up->st.drop[rc == 0 ? SN_DROP_RING_FULL : SN_DROP_GSO_FAILED], 1);
	}
	rte_pktmbuf_free(m);
}

/* Transmit on the uplink now; takes ownership of every frame. */
static void uplink_tx(struct sn_pipeline *pl, struct rte_mbuf **pkts, uint16_t n)
{
	struct sn_port *up = pl->uplink;
	uint16_t kept;

	if (!up || !sn_port_is_up(up)) {
		for (uint16_t i = 0; i < n; i++)
			drop(pl, pkts[i], SN_PL_DROP_DST_GONE);
		return;
	}
	/* Frames of deferred ports: guest memory must not outlive a device
	 * stop in the PMD, so the uplink gets a private copy; freeing the
	 * original completes its descriptor (sent = completed). */
	kept = 0;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i], *c;
		uint64_t pop;

		if (!sn_vqtx_of(m, &pop)) {
			pkts[kept++] = m;
			continue;
		}
		if (deferred_drop(pl, m))
			continue;
		c = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX);   /* dynfields (meta) too */
		if (!c) {
			drop(pl, m, SN_PL_DROP_NO_MBUF);
			continue;
		}
		rte_pktmbuf_free(m);
		pkts[kept++] = c;
	}
	n = kept;
	/* Plain frames in bursts; guest GSO frames are segmented by the
	 * switch one at a time (main's fix O), in order. */
	for (uint16_t i = 0, run = 0; i <= n; i++) {
		struct rte_mbuf *m = i < n ? pkts[i] : NULL;

		if (m && !(m->ol_flags & GSO_FLAGS))
			continue;
		if (i > run)
			tx_plain(pl, up, &pkts[run], (uint16_t)(i - run));
		run = (uint16_t)(i + 1);
		if (m)
			tx_gso(pl, up, m);
	}
}

static void arb_release(void *const *items, uint32_t n, void *arg)
{
	struct sn_pipeline *pl = arg;
	const struct sn_sched *sch = sn_arbiter_sched(pl->arb);
	struct rte_mbuf *pkts[BATCH];

	while (n) {
		uint16_t k = (uint16_t)RTE_MIN(n, (uint32_t)BATCH);

		for (uint16_t i = 0; i < k; i++) {
			uint16_t src;

			pkts[i] = items[i];
			src = meta_of(pl, pkts[i])->src;
			ctr_add(&pl->ps[src].st.qfq_backlog, -1ull);
			if (sn_sched_class_backlog(sch, src) == 0)
				ctr_add(&pl->ps[src].st.qfq_idle, 1);
		}
		pl->held -= k;
		uplink_tx(pl, pkts, k);
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
	struct sn_pipeline *pl = arg;
	struct rte_mbuf *m = item;

	ctr_add(&pl->ps[meta_of(pl, m)->src].st.qfq_backlog, -1ull);
	pl->held--;
	drop(pl, m, map[cause]);
}

static void class_drop(void *item, uint32_t len, void *arg)
{
	(void)len;
	arb_drop(item, SN_ARBITER_DROP_CLIENT_GONE, arg);
}

static uint32_t arb_item_len(const void *item, void *arg)
{
	(void)arg;
	return ((const struct rte_mbuf *)item)->pkt_len;
}

static void stage_vm(struct sn_pipeline *pl, struct sn_port *p, struct rte_mbuf *m);

/* The uplink copy of a due frame: through the arbiter if its port has a
 * class, else straight out. Takes ownership of m. */
static void to_uplink(struct sn_pipeline *pl, struct rte_mbuf *m)
{
	struct pstate *ps = &pl->ps[meta_of(pl, m)->src];

	/* Fair dropping (seed 003 Algorithm 1): the uplink is the overloaded
	 * resource; a frame of a flow whose virtual queue is above θ is
	 * dropped here instead of by arrival order at a full queue. */
	if (pl->fd && sn_fdrop_decide(pl->fd, sn_classify_flow_hash(m), m->pkt_len + pl->overhead,
				      pl->now) == SN_FDROP_DROP) {
		drop(pl, m, SN_PL_DROP_FAIR);
		return;
	}
	if (!ps->has_class) {
		uplink_tx(pl, &m, 1);
		return;
	}
	if (sn_arbiter_submit(pl->clist, ps->mbox, m)) {
		drop(pl, m, SN_PL_DROP_MBOX_FULL);
		return;
	}
	ctr_add(&ps->st.qfq_backlog, 1);
	pl->held++;
}

static void flush_vm(struct sn_pipeline *pl)
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
			count_sent(pl, s->pkts[j]);
		}
		ctr_add(&p->st.tx_packets, k);
		ctr_add(&p->st.tx_bytes, bytes);
		if (k < s->n)
			ctr_add(&p->st.drop[SN_DROP_RING_FULL], s->n - k);
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
		flush_vm(pl);
	if (s->n == 0) {
		s->port = p;
		pl->touched[pl->n_touched++] = p->slot;
	}
	s->pkts[s->n++] = m;
}

/* A frame left the wheel (or had no rate): deliver to its destination(s). */
static void dispatch(struct sn_pipeline *pl, struct rte_mbuf *m)
{
	const struct meta *md = meta_of(pl, m);
	const struct sn_port_table *t = pl->t;
	unsigned ndst = 0;

	if (deferred_drop(pl, m))
		return;

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
			ctr_add(&in->st.drop[SN_DROP_UNKNOWN_DST], 1);
	}
	rte_pktmbuf_free(m);
}

void sn_pipeline_submit(struct sn_pipeline *pl, struct sn_port *in, struct rte_mbuf *m,
			struct sn_port *dst)
{
	struct pstate *ps = &pl->ps[in->slot];
	struct meta *md = meta_of(pl, m);
	struct sn_tstamp_next nx[SN_CLASSIFY_MAX_POL];
	struct sn_classify_res cr = { .n = 0 };
	uint64_t ts;
	int rc;

	md->src = in->slot;
	md->src_gen = in->gen;
	md->dst = dst ? dst->slot : DST_FLOOD;
	md->dst_gen = dst ? dst->gen : 0;
	ctr_add(&ps->st.offered_packets, 1);
	ctr_add(&ps->st.offered_bytes, m->pkt_len);
	/* The policies the frame crosses: port limit, then (issue 6 classes)
	 * its class or flow pacing and its aggregate share; the release time
	 * is the max of theirs (Carousel §5.1.1 consolidation). */
	if (ps->has_rate) {
		cr.pol[cr.n++] = &ps->ts;
		if (ps->ts.lts < pl->now)
			ctr_add(&ps->st.underruns, 1);
	}
	sn_classify_frame(pl->cls, in->slot, m, pl->now, &cr);
	md->cls = cr.cls;
	if (cr.n == 0) {
		ctr_add(&ps->st.released_packets, 1);
		ctr_add(&ps->st.released_bytes, m->pkt_len);
		sn_classify_released(pl->cls, in->slot, cr.cls, m->pkt_len);
		dispatch(pl, m);
		return;
	}
	ts = sn_tstamp_consolidate_peek(cr.pol, cr.n, pl->now, m->pkt_len, nx);
	md->ts = ts;
	rc = sn_twheel_insert(pl->wheel, m, ts, cr.clamp ? SN_TWHEEL_CLAMP : SN_TWHEEL_REJECT);
	if (rc) {
		sn_classify_dropped(pl->cls, &cr, m->pkt_len,
				    rc == -ERANGE ? SN_CL_DROP_HORIZON : SN_CL_DROP_POOL);
		drop(pl, m, rc == -ERANGE ? SN_PL_DROP_HORIZON : SN_PL_DROP_POOL);
		return;
	}
	sn_tstamp_consolidate_commit(cr.pol, cr.n, nx);
	sn_classify_accepted(pl->cls, &cr, cr.clamp && ts >= pl->now + sn_twheel_horizon_ns(pl->wheel));
	ctr_add(&ps->st.wheel_depth, 1);
	pl->held++;
}

bool sn_pipeline_shaped(struct sn_pipeline *pl, const struct sn_port *in)
{
	const struct pstate *ps = &pl->ps[in->slot];

	if (ps->gen != in->gen) {
		/* A new port in this slot the last apply did not see. */
		pl->dirty = true;
		return false;
	}
	return ps->shaped;
}

void sn_pipeline_flush(struct sn_pipeline *pl)
{
	flush_vm(pl);
}

void sn_pipeline_set_gso(struct sn_pipeline *pl, sn_pipeline_gso_fn fn, void *arg)
{
	pl->gso = fn;
	pl->gso_arg = arg;
}

uint64_t sn_pipeline_held(const struct sn_pipeline *pl)
{
	return pl->held;
}

uint64_t sn_pipeline_src_held(const struct sn_pipeline *pl, const struct sn_port *in)
{
	const struct pstate *ps = &pl->ps[in->slot];

	int64_t h;

	if (ps->gen != in->gen)
		return 0;
	/* Signed: apply() zeroes the counters of a slot that got a new port
	 * while frames of the old one were still held; those drive it below
	 * zero as they leave, and are no frames of `in`. */
	h = (int64_t)(ps->st.wheel_depth + ps->st.qfq_backlog);
	return h > 0 ? (uint64_t)h : 0;
}

/* A new arbiter with one client per port slot (handles into cl[]). */
static struct sn_arbiter *arb_create(struct sn_pipeline *pl, enum sn_sched_algo algo,
				     struct sn_arbiter_client *cl[SN_PORT_MAX])
{
	struct sn_arbiter_params ap = {
		.sched = { .algo = algo, .max_classes = SN_PORT_MAX,
			   .queue_len = pl->cfg.queue_len },
		.link_bps = SN_ARBITER_MAX_LINK_BPS,
		.overhead_bytes = SN_POLICY_OVERHEAD_DEF,
		.slack_ns = pl->cfg.slack_ns,
		.read_limit = RTE_MIN(pl->cfg.mbox_size, SN_ARBITER_MAX_READ_LIMIT),
		.max_clients = SN_PORT_MAX,
		.n_clists = 1,
		.clist_size = 256,
		.release_burst = BATCH,
		.item_len = arb_item_len,
		.release = arb_release,
		.drop = arb_drop,
		.cb_arg = pl,
	};
	struct sn_arbiter *arb = sn_arbiter_create(&ap, now_ns());

	if (!arb)
		return NULL;
	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
		cl[s] = sn_arbiter_client_add(arb, s, pl->cfg.mbox_size);
		if (!cl[s]) {
			int e = errno;

			sn_arbiter_free(arb);
			errno = e;
			return NULL;
		}
	}
	return arb;
}

static void arb_install(struct sn_pipeline *pl, struct sn_arbiter *arb, enum sn_sched_algo algo,
			struct sn_arbiter_client *const cl[SN_PORT_MAX])
{
	pl->arb = arb;
	pl->algo = algo;
	pl->clist = sn_arbiter_clist(arb, 0);
	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
		pl->ps[s].cl = cl[s];
		pl->ps[s].mbox = sn_arbiter_client_mbox(cl[s]);
		pl->ps[s].has_class = false;
		pl->ps[s].weight = 0;
	}
}

/* Drop everything the arbiter holds (mailboxes and scheduler), free it. */
static void arb_destroy(struct sn_pipeline *pl)
{
	struct sn_sched *s = sn_arbiter_sched(pl->arb);
	void *item;

	for (unsigned i = 0; i < SN_PORT_MAX; i++)
		sn_arbiter_client_del(pl->arb, pl->ps[i].cl);
	while ((item = sn_sched_dequeue(s, NULL, NULL)) != NULL)
		arb_drop(item, SN_ARBITER_DROP_CLIENT_GONE, pl);
	sn_arbiter_free(pl->arb);
	pl->arb = NULL;
}

static void publish_arb_stats(struct sn_pipeline *pl)
{
	struct sn_arbiter_stats a;
	const uint64_t *src = (const uint64_t *)&a;
	uint64_t *dst = (uint64_t *)&pl->arb_st;

	static_assert(sizeof(a) % sizeof(uint64_t) == 0, "stats are u64 fields");
	sn_arbiter_get_stats(pl->arb, &a);
	for (size_t i = 0; i < sizeof(a) / sizeof(uint64_t); i++)
		ctr_set(&dst[i], src[i]);
	ctr_set(&pl->arb_backlog, sn_arbiter_backlog(pl->arb));
	if (pl->fd) {
		struct sn_fdrop_stats f;

		sn_fdrop_stats(pl->fd, &f);
		ctr_set(&pl->fair_st.kept, f.kept);
		ctr_set(&pl->fair_st.dropped, f.dropped[SN_FDROP_C_FAIR]);
		ctr_set(&pl->fair_st.table_full, f.dropped[SN_FDROP_C_TABLE_FULL] +
			f.dropped[SN_FDROP_C_INVALID]);
		ctr_set(&pl->fair_st.active, f.active);
		ctr_set(&pl->fair_st.theta, f.theta);
	}
}

/* Fair dropping on/off/re-rated by policy.uplink. A new instance starts
 * with empty virtual queues; on ENOMEM the old one stays (logged). */
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
		sn_log("policy: fair dropping: %s", strerror(errno));
		return;
	}
	sn_fdrop_free(pl->fd);
	pl->fd = n;
	pl->fd_rate = pol->uplink.rate_bps;
	ctr_set(&pl->fair_st.on, 1);
}

/* issue 6 (live change <= 100 ms): a port whose rate changed gets every
 * frame it has in the wheel stamped again at the new rate, from now on
 * (Carousel §5.1.1: a frame's release time is a function of the rate; the
 * old stamps would keep the old rate for up to the 262 ms horizon). The
 * wheel has no per-port removal, so all its frames are taken out in
 * release order (the far-future extract keeps each port's order), the
 * empty wheel is rewound to now, and every frame goes back: changed ports'
 * frames on a fresh timestamp chain starting now, the others at their own
 * stamp (meta.ts; same slot order, so FIFO within a slot is kept). New
 * arrivals chain after the restamped backlog. A restamped frame that lands
 * beyond the horizon (a big rate cut with a full wheel) is what the
 * shaper drops at the new rate anyway: counted as "horizon". O(frames in
 * the wheel), once per rate change, on the worker. */
static void restamp_wheel(struct sn_pipeline *pl, const bool *changed)
{
	uint64_t n = sn_twheel_count(pl->wheel), k = 0;
	unsigned got;

	if (n == 0 || n > pl->cfg.pool_nodes) {
		if (n)
			sn_log("policy: %" PRIu64 " frames in the wheel, not restamped", n);
		return;
	}
	while (k < n && (got = sn_twheel_extract(pl->wheel, UINT64_MAX >> 2, pl->restamp_buf + k,
						 (unsigned)RTE_MIN(n - k, (uint64_t)BATCH))) > 0)
		k += got;
	SN_VERIFY(sn_twheel_rewind(pl->wheel, pl->now) == 0);
	for (uint64_t i = 0; i < k; i++) {
		struct rte_mbuf *m = pl->restamp_buf[i];
		struct meta *md = meta_of(pl, m);
		struct pstate *ps = &pl->ps[md->src];
		struct sn_tstamp_next nx;
		uint64_t ts = md->ts;
		int rc;

		if (changed[md->src])
			ts = sn_tstamp_peek(&ps->ts, pl->now, m->pkt_len, &nx);
		rc = sn_twheel_insert(pl->wheel, m, ts, SN_TWHEEL_REJECT);
		if (rc) {
			ctr_add(&ps->st.wheel_depth, -1ull);
			pl->held--;
			drop(pl, m, rc == -ERANGE ? SN_PL_DROP_HORIZON : SN_PL_DROP_POOL);
			continue;
		}
		md->ts = ts;
		if (changed[md->src])
			sn_tstamp_commit(&ps->ts, &nx);
	}
}

static void apply(struct sn_pipeline *pl, const struct sn_policy *pol, struct sn_port_table *t)
{
	bool changed[SN_PORT_MAX] = { false }, any_change = false;
	const struct sn_policy_port *want[SN_PORT_MAX];
	struct sn_sched *sch;

	if (pol->uplink.algo != pl->algo) {
		struct sn_arbiter_client *cl[SN_PORT_MAX];
		struct sn_arbiter *n = arb_create(pl, pol->uplink.algo, cl);

		/* On ENOMEM keep the old algorithm (and say so). */
		if (n) {
			arb_destroy(pl);
			arb_install(pl, n, pol->uplink.algo, cl);
		} else {
			sn_log("policy: cannot switch the scheduler to %s: %s",
			       sn_sched_algo_name(pol->uplink.algo), strerror(errno));
		}
	}
	sch = sn_arbiter_sched(pl->arb);
	SN_VERIFY(sn_arbiter_set_link(pl->arb, pol->uplink.rate_bps ? pol->uplink.rate_bps
				      : SN_ARBITER_MAX_LINK_BPS, pol->uplink.overhead_bytes) == 0);
	pl->uplink = NULL;
	sn_classify_apply_aggs(pl->cls, pol, pl->now);   /* issue 6 */
	apply_fair(pl, pol);
	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
		struct sn_port *p = t->by_slot[s];
		struct pstate *ps = &pl->ps[s];

		if (p && p->type == SN_PORT_UPLINK)
			pl->uplink = p;
		want[s] = p && p->type == SN_PORT_VHOST ? sn_policy_port_find(pol, p->name) : NULL;
		/* issue 6: the slot's flow classes (fresh if another port). */
		sn_classify_apply_port(pl->cls, (uint16_t)s, want[s], !p || ps->gen != p->gen, pl->now);
		if (!p || ps->gen != p->gen) {
			/* Another port (or none) in this slot: fresh state and
			 * counters; its scheduler class, if any, carries on. */
			__atomic_store_n(&ps->gen, p ? p->gen : 0, __ATOMIC_RELAXED);
			ps->has_rate = false;
			for (size_t i = 0; i < sizeof(ps->st) / sizeof(uint64_t); i++)
				ctr_set((uint64_t *)&ps->st + i, 0);
		}
	}
	/* Pass 1: removals and weight decreases, so pass 2 never exceeds
	 * the scheduler's weight sum (the policy's sum is validated). */
	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
		struct pstate *ps = &pl->ps[s];

		if (!ps->has_class)
			continue;
		if (!want[s]) {
			SN_VERIFY(sn_sched_class_del(sch, s, class_drop, pl) == 0);
			ps->has_class = false;
		} else if (want[s]->weight < ps->weight) {
			SN_VERIFY(sn_sched_class_change(sch, s, want[s]->weight, CLASS_LMAX) == 0);
			ps->weight = want[s]->weight;
		}
	}
	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
		struct pstate *ps = &pl->ps[s];
		const struct sn_policy_port *w = want[s];

		__atomic_store_n(&ps->shaped, w != NULL, __ATOMIC_RELAXED);
		ctr_set(&ps->st.rate_bps, w ? w->rate_bps : 0);
		ctr_set(&ps->st.weight, w ? w->weight : 0);
		if (!w) {
			ps->has_rate = false;
			continue;
		}
		if (!ps->has_class) {
			SN_VERIFY(sn_sched_class_add(sch, s, w->weight, CLASS_LMAX) == 0);
			ps->has_class = true;
			ps->weight = w->weight;
		} else if (w->weight > ps->weight) {
			SN_VERIFY(sn_sched_class_change(sch, s, w->weight, CLASS_LMAX) == 0);
			ps->weight = w->weight;
		}
		if (!w->rate_bps)
			ps->has_rate = false;
		else if (ps->has_rate && ps->ts.rate != w->rate_bps) {
			/* fresh chain from now: restamp_wheel() lays the queued
			 * frames on it */
			SN_VERIFY(sn_tstamp_init(&ps->ts, w->rate_bps, w->burst_bytes, pl->now) == 0);
			changed[s] = any_change = true;
		} else if (ps->has_rate)
			SN_VERIFY(sn_tstamp_set(&ps->ts, w->rate_bps, w->burst_bytes) == 0);
		else
			SN_VERIFY(sn_tstamp_init(&ps->ts, w->rate_bps, w->burst_bytes, pl->now) == 0);
		ps->has_rate = w->rate_bps != 0;
	}
	if (any_change)
		restamp_wheel(pl, changed);
	pl->pol_gen = pol->gen;
	pl->t_seen = t;
	pl->dirty = false;
}

void sn_pipeline_run(struct sn_pipeline *pl, struct sn_port_table *t)
{
	const struct sn_policy *pol = sn_policy_current(pl->store);
	void *items[BATCH];
	unsigned got, batches = 0;
	bool caught_up;
	uint64_t seq = __atomic_load_n(&pl->run_seq, __ATOMIC_RELAXED);

	seq += (seq & 1) ? 2 : 1;     /* odd: stays odd while run() lags */
	__atomic_store_n(&pl->run_seq, seq, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	pl->now = now_ns();
	ctr_set(&pl->clock_ns, pl->now);
	pl->t = t;
	if (pol->gen != pl->pol_gen || t != pl->t_seen || pl->dirty)
		apply(pl, pol, t);
	do {
		got = sn_twheel_extract(pl->wheel, pl->now, items, BATCH);
		for (unsigned i = 0; i < got; i++) {
			struct rte_mbuf *m = items[i];

			struct pstate *ps = &pl->ps[meta_of(pl, m)->src];

			ctr_add(&ps->st.wheel_depth, -1ull);
			ctr_add(&ps->st.released_packets, 1);
			ctr_add(&ps->st.released_bytes, m->pkt_len);
			sn_classify_released(pl->cls, meta_of(pl, m)->src, meta_of(pl, m)->cls,
					     m->pkt_len);
			pl->held--;
			dispatch(pl, m);
		}
		flush_vm(pl);
		/* issue 6 (conformance): scan after every batch, not once per
		 * iteration. After a worker stall the wheel releases up to
		 * MAX_BATCHES * BATCH due frames at once; one scan at the end
		 * let them overflow the client mailbox (mbox_size 512) and
		 * they were lost as mailbox_full although the link had room. */
		if (pl->held)
			sn_arbiter_do_scan(pl->arb, pl->now);
	} while (got == BATCH && ++batches < MAX_BATCHES);
	caught_up = got < BATCH;
	if ((int64_t)(pl->now - pl->next_stats) >= 0) {
		publish_arb_stats(pl);
		sn_classify_tick(pl->cls, pl->now);   /* issue 6: NBA, flow ageing */
		pl->next_stats = pl->now + STATS_EVERY_NS;
	}
	if (caught_up)
		__atomic_store_n(&pl->run_seq, seq + 1, __ATOMIC_RELEASE);
}

struct sn_pipeline *sn_pipeline_create(const struct sn_pipeline_config *cfg,
				       struct sn_policy_store *pol)
{
	static const struct rte_mbuf_dynfield desc = {
		.name = "sn_pipeline_meta",
		.size = sizeof(struct meta),
		.align = __alignof__(struct meta),
	};
	struct sn_arbiter_client *cl[SN_PORT_MAX];
	struct sn_arbiter *arb;
	struct sn_pipeline *pl;
	int e;

	pl = rte_zmalloc("sn_pipeline", sizeof(*pl), RTE_CACHE_LINE_SIZE);
	if (!pl) {
		errno = ENOMEM;
		return NULL;
	}
	pl->store = pol;
	pl->cfg = *cfg;
	pl->meta_off = rte_mbuf_dynfield_register(&desc);
	if (pl->meta_off < 0) {
		e = rte_errno;
		goto free_pl;
	}
	pl->now = now_ns();
	pl->restamp_buf = rte_malloc("sn_pipeline_restamp",
				     (size_t)cfg->pool_nodes * sizeof(void *), 0);
	if (!pl->restamp_buf) {
		e = ENOMEM;
		goto free_pl;
	}
	pl->wheel = sn_twheel_create(&(struct sn_twheel_params){
		.granularity_ns = cfg->granularity_ns, .slots = cfg->slots,
		.pool_nodes = cfg->pool_nodes, .start_ns = pl->now });
	if (!pl->wheel) {
		e = errno;
		goto free_pl;
	}
	/* issue 6: worker 0 of the NBA (the 1-core layout has one worker). */
	pl->cls = sn_classify_create(0, cfg->max_flows, SOCKET_ID_ANY);
	if (!pl->cls) {
		e = errno;
		goto free_wheel;
	}
	arb = arb_create(pl, SN_SCHED_QFQ, cl);
	if (!arb) {
		e = errno;
		goto free_cls;
	}
	arb_install(pl, arb, SN_SCHED_QFQ, cl);
	return pl;
free_cls:
	sn_classify_free(pl->cls);
free_wheel:
	sn_twheel_free(pl->wheel);
free_pl:
	rte_free(pl->restamp_buf);
	rte_free(pl);
	errno = e;
	return NULL;
}

void sn_pipeline_drain(struct sn_pipeline *pl)
{
	void *items[BATCH];
	unsigned got;

	/* Far future: every held frame is due. */
	while ((got = sn_twheel_extract(pl->wheel, UINT64_MAX >> 2, items, BATCH)) > 0)
		for (unsigned i = 0; i < got; i++) {
			struct rte_mbuf *m = items[i];

			ctr_add(&pl->ps[meta_of(pl, m)->src].st.wheel_depth, -1ull);
			pl->held--;
			drop(pl, m, SN_PL_DROP_SRC_STOP);
		}
	if (pl->arb)
		arb_destroy(pl);
}

void sn_pipeline_destroy(struct sn_pipeline *pl)
{
	if (!pl)
		return;
	sn_pipeline_drain(pl);
	sn_fdrop_free(pl->fd);
	sn_classify_free(pl->cls);
	sn_twheel_free(pl->wheel);
	rte_free(pl->restamp_buf);
	rte_free(pl);
}

int sn_pipeline_port_stats(const struct sn_pipeline *pl, const struct sn_port *p,
			   struct sn_pipeline_port_stats *out)
{
	const struct pstate *ps = &pl->ps[p->slot];
	const uint64_t *src = (const uint64_t *)&ps->st;
	uint64_t *dst = (uint64_t *)out;

	static_assert(sizeof(*out) % sizeof(uint64_t) == 0, "stats are u64 fields");
	/* gen/shaped are worker-private; a relaxed read is enough for a
	 * report (a stale answer is as good as one a moment earlier). */
	if (__atomic_load_n(&ps->gen, __ATOMIC_RELAXED) != p->gen ||
	    !__atomic_load_n(&ps->shaped, __ATOMIC_RELAXED))
		return -ENOENT;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	return 0;
}

void sn_pipeline_arbiter_stats(const struct sn_pipeline *pl, struct sn_arbiter_stats *out,
			       uint64_t *backlog)
{
	const uint64_t *src = (const uint64_t *)&pl->arb_st;
	uint64_t *dst = (uint64_t *)out;

	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	*backlog = __atomic_load_n(&pl->arb_backlog, __ATOMIC_RELAXED);
}

uint64_t sn_pipeline_clock_ns(const struct sn_pipeline *pl)
{
	return __atomic_load_n(&pl->clock_ns, __ATOMIC_RELAXED);
}

const struct sn_classify *sn_pipeline_classify(const struct sn_pipeline *pl)
{
	return pl->cls;
}

void sn_pipeline_fair_stats(const struct sn_pipeline *pl, struct sn_pipeline_fair_stats *out)
{
	const uint64_t *src = (const uint64_t *)&pl->fair_st;
	uint64_t *dst = (uint64_t *)out;

	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

uint64_t sn_pipeline_run_seq(const struct sn_pipeline *pl)
{
	return __atomic_load_n(&pl->run_seq, __ATOMIC_ACQUIRE);
}
