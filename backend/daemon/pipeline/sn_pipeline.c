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
 * delivery, apply_worker: rates) and an ARBITER half (apply_arb: algorithm,
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
 *    re-configuration in apply() and its stats publication all stay on the
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
#include "sn_pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_vhost.h>

#include <urcu-qsbr.h>

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
/* Scheduler class lmax (s10-T, issue 6 sharing accuracy): a class starts
 * at the largest untagged-MTU frame plus one 802.1Q tag and grows on the
 * first longer item (arb_oversize: guest GSO frames, big-MTU guests) to
 * the next power of two, up to SN_SCHED_MAX_LMAX. QFQ's slot size, its
 * sharing error and its T-WFI (6 L_k / (phi_k B), PSPAT eq. 2) scale with
 * lmax: at a fixed 64 KiB the 1:2:5 shares of 1000 B frames drifted by
 * up to 3.7 % over 2 s windows (sn-trace, exact link), at 1518 B 0.3 %. */
#define CLASS_LMAX_INIT (RTE_ETHER_MAX_VLAN_FRAME_LEN - RTE_ETHER_CRC_LEN)
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
	uint8_t ret_kind, ret_cause; /* verdict of a returned frame (RET_*) */
	uint8_t cls;              /* flow class (sn_classify), or SN_CLASSIFY_NONE */
	uint8_t wk;               /* worker (instance) that submitted it */
	uint64_t ts;              /* release time in the wheel (restamp_wheel) */
};

/* s12-I2 (issue 6, restamp_aggs): the release time of a frame in the wheel
 * is ts = max(O, A), A the stamp of its aggregate share, O the max over its
 * other policies (port limit, class or flow pacing) and its arrival time.
 * A new NBA grant rescales A alone, so the frame keeps O - A (ns,
 * saturated at +-INT32_MAX: |O - A| stays below the 262 ms horizon except
 * for a "clamp" class's frames beyond it) in an mbuf dynamic field of its
 * own (agg_lag(), set at submit): 4 bytes, 4-aligned. In struct meta it
 * made meta 32 bytes, the whole 8-aligned part of the mbuf's dynamic area,
 * and a PMD registering the Rx timestamp field (net_pcap) then left no
 * room for meta (schednicd failed to start). */
#define AGG_NONE INT32_MIN        /* agg_lag(): the frame has no aggregate */

static inline int32_t lag_of(uint64_t o, uint64_t a)
{
	int64_t d = (int64_t)(o - a);

	return (int32_t)RTE_MAX(RTE_MIN(d, (int64_t)INT32_MAX), -(int64_t)INT32_MAX);
}

/* At submit: nx[0..n-1] the policies' next LTS, nx[n - 1] the aggregate
 * share's (sn_classify_res.agg); stamps as sn_tstamp_peek() returns them. */
static inline int32_t agg_lag_of(const struct sn_tstamp_next *nx, unsigned n, uint64_t now)
{
	uint64_t o = now, a = RTE_MAX(nx[n - 1].lts + (nx[n - 1].lts_rem != 0), now);

	for (unsigned i = 0; i + 1 < n; i++)
		o = RTE_MAX(o, nx[i].lts + (nx[i].lts_rem != 0));
	return lag_of(o, a);
}

/* O and A of a queued frame (*agg_lag() != AGG_NONE) from ts = max(O, A). */
static inline void split_ts(uint64_t ts, int32_t lag, uint64_t *o, uint64_t *a)
{
	*o = lag >= 0 ? ts : ts - (uint64_t)(-(int64_t)lag);
	*a = lag >= 0 ? ts - (uint64_t)lag : ts;
}

/* What the worker does with a frame from the return mailbox. */
enum { RET_SENT = 0, RET_DROP, RET_GSO };

#define RET_MBOX_SIZE 8192u       /* return mailbox (pow2) */
#define ARB_SPIN_NS      1000000ull  /* arbiter: idle spin before napping */
#define ARB_MIN_SLEEP_NS 100000ull   /* arbiter: shorter link waits are spun */

struct pstate {
	/* Worker only: shaping state of the port in this slot. */
	struct sn_tstamp ts;
	uint32_t gen;             /* port generation this state belongs to */
	bool shaped, has_rate, has_class;  /* has_class: policy wants a class */
	bool has_cls;             /* s11-S: the port has flow classes (sn_classify) */
	uint32_t room_lmax;       /* s11-V3: longest frame submitted (0: none yet) */
	uint64_t w_returned;      /* frames taken back from the return mailbox */
	/* Arbiter half only (the arbiter thread in 2core). */
	uint32_t a_gen;           /* port generation the arbiter counters belong to */
	bool a_has_class;
	uint32_t a_weight;        /* weight of the scheduler class */
	/* Arbiter writes (relaxed), worker reads: class exists, push allowed. */
	bool a_ready;
	uint64_t a_returning;     /* frames the arbiter put on the return mailbox */
	/* Arbiter half only: uplink counters per flow class (remote arbiter;
	 * the worker's sn_classify counts them in the 1-core layout). */
	uint64_t a_clup[SN_POLICY_CLASSES_MAX][2];
	/* Counters: worker is the sole writer of st, the arbiter half of ast. */
	struct sn_pipeline_port_stats st __rte_cache_aligned;
	struct sn_pipeline_port_stats ast __rte_cache_aligned;
} __rte_cache_aligned;

/* One arbiter with its clients (one per port slot, class = slot) and the
 * client list the worker appends to. Replaced as a whole when the policy
 * changes the algorithm. */
struct arbset {
	struct sn_pipeline *pl;
	struct sn_arbiter *arb;
	enum sn_sched_algo algo;
	unsigned n_wk;
	/* Per worker k: its client list and one client per port slot (PSPAT
	 * "each client": worker k's frames of port s; class = s for all k). */
	struct sn_mbox *clist[SN_PIPELINE_WORKERS_MAX];
	struct sn_arbiter_client *cl[SN_PIPELINE_WORKERS_MAX][SN_PORT_MAX];
	struct sn_mbox *mbox[SN_PIPELINE_WORKERS_MAX][SN_PORT_MAX];
	/* Arbiter half: weight and lmax of this set's scheduler classes
	 * (weight 0 = no class; class = port slot for every worker), for
	 * arb_oversize. */
	uint32_t weight[SN_PORT_MAX];
	uint32_t lmax[SN_PORT_MAX];
};

struct stage {
	struct sn_port *port;
	uint16_t n;
	struct rte_mbuf *pkts[BATCH];
};

struct sn_pipeline {
	/* Read-mostly. */
	unsigned wk_id;           /* worker index of this instance */
	unsigned n_wk;            /* workers (instances) */
	struct sn_pipeline *arbp; /* instance 0: owns the arbiter half */
	struct sn_pipeline *wk[SN_PIPELINE_WORKERS_MAX]; /* arbp only: instances */
	uint16_t txq;             /* uplink TX queue of this worker (= wk_id) */
	struct sn_policy_store *store;
	struct sn_pipeline_config cfg;
	int meta_off;
	int lag_off;              /* s12-I2: agg_lag() dynamic field */
	bool split;               /* 2-core layout: arbiter half on its own lcore */
	uint16_t arb_txq;         /* uplink TX queue of the arbiter half */
	struct sn_ports *reg;     /* port registry (arbiter thread's snapshots) */
	struct sn_mbox *ret;      /* return mailbox, arbiter -> worker (split) */
	/* Worker only. */
	struct sn_twheel *wheel;
	struct sn_classify *cls;  /* issue 6: flow classes + aggregates */
	struct sn_fdrop *fd;      /* issue 6: uplink.overload "fair", else NULL */
	uint64_t fd_rate;         /* its capacity: uplink rate_bps */
	uint32_t overhead;        /* uplink overhead_bytes per frame */
	void **restamp_buf;       /* restamp_wheel(): room for cfg.pool_nodes frames */
	struct arbset *w_aset;    /* the set the worker pushes into */
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
	uint64_t wheel_n;         /* s12-R: of which in the wheel (sn_twheel_count is O(slots)) */
	bool seq_staged;          /* s12-R: run_seq odd for a submit's VM frames
	                           * staged until sn_pipeline_flush() */
	unsigned n_touched;
	uint16_t touched[SN_PORT_MAX];
	struct stage stage[SN_PORT_MAX];
	struct pstate ps[SN_PORT_MAX];
	/* Worker writes, anyone reads (relaxed). */
	struct sn_arbiter_stats arb_st __rte_cache_aligned;
	uint64_t arb_backlog;
	uint64_t clock_ns __rte_cache_aligned;   /* now of the latest run() */
	uint64_t arb_clock_ns;    /* arbiter half's now at its latest round */
	struct sn_pipeline_fair_stats fair_st;    /* worker writes (fair dropping) */
	/* issue 6 (measurement): odd while run() changes counters (policy
	 * apply, returns, releases, the 1-core arbiter's sends) or while it
	 * lags (an iteration ended by MAX_BATCHES left due frames in the
	 * wheel), even between runs that released everything due. Worker: odd
	 * store + release fence (seq_counting()) before the first counter
	 * store of a run, and only then (pairs with the reader's acquire fence
	 * before its second load); release store of the even value at the end
	 * (pairs with the reader's acquire load of its first value). A run
	 * that changes no counter moves only clock_ns (s11-L: before, every
	 * run() went odd, so a reader raced the busy-polling worker's every
	 * iteration, and a worker descheduled inside any run() hid all pairs
	 * for its whole time off the CPU: ~50 % of reads inconsistent under
	 * load, gaps up to 1.6 s). See sn_pipeline_run_seq(). Covers the
	 * worker half's counters; a remote arbiter's have their own clock
	 * (arb_clock_ns). */
	uint64_t run_seq;
	/* Worker -> arbiter: the set the worker uses (release/acquire). */
	struct arbset *w_ack __rte_cache_aligned;
	/* Arbiter half only. */
	struct arbset *aset __rte_cache_aligned;  /* current */
	struct arbset *aset_old;  /* replaced, until the worker acknowledges */
	struct arbset *aset_pub;  /* arbiter -> worker (release/acquire) */
	bool arb_remote;          /* arbiter half runs off the worker (split, not draining) */
	bool a_algo_retry;        /* algorithm change waits for aset_old to go */
	uint64_t a_pol_gen;
	const struct sn_port_table *a_t_seen;
	struct sn_port *a_uplink;
	uint64_t a_now, a_next_stats;
	uint32_t n_pend;          /* parked returns (return mailbox full) */
	struct rte_mbuf **pend;   /* capacity: every frame the arbiter can hold */
	uint32_t pend_cap;
	uint8_t stop;             /* main -> arbiter thread (release/acquire) */
	/* Shutdown with several workers (sn_pipeline_drain): arbp only. */
	uint32_t drain_arrived;   /* workers done with their own half (release) */
	uint32_t drain_done;      /* arbp drained the arbiter sets (release) */
	bool drained;             /* this instance: drain() done */
	/* s15-R5: worker 0 -> arbiter half (instance 0 = arbp): the old ->
	 * new class index map of each slot whose classes moved
	 * (sn_classify_renumber, composed over the applies the arbiter has
	 * not taken yet), so a_clup follows its class as the worker's
	 * counters do (clup_publish / clup_take). SPSC hand-over: worker 0
	 * writes clup_map/clup_moved only while clup_ack == clup_seq. */
	uint32_t clup_seq __rte_cache_aligned;  /* worker 0: maps published (release) */
	uint32_t clup_ack;        /* arbiter half: maps taken (release) */
	bool clup_moved[SN_PORT_MAX];
	uint8_t clup_map[SN_PORT_MAX][SN_POLICY_CLASSES_MAX];
	/* Worker 0 only: composed, not yet published. */
	bool clup_pending;
	bool clup_pend_moved[SN_PORT_MAX];
	uint8_t clup_pend[SN_PORT_MAX][SN_POLICY_CLASSES_MAX];
	/* Arbiter thread writes (relaxed), anyone reads. */
	struct sn_pipeline_uplink_tx up __rte_cache_aligned;
	struct sn_pipeline_thread_stats wts, ats;
	unsigned idle_sleep_us;
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

/* s12-I2: O - A of a wheel frame's ts, or AGG_NONE (see agg_lag_of). */
static inline int32_t *agg_lag(const struct sn_pipeline *pl, struct rte_mbuf *m)
{
	return RTE_MBUF_DYNFIELD(m, pl->lag_off, int32_t *);
}

/* The instance (worker) that submitted m: the arbiter half counts m in its
 * pstate (ast, a_returning) and returns m through its return mailbox. */
static inline struct sn_pipeline *owner_of(const struct sn_pipeline *pl, struct rte_mbuf *m)
{
	return pl->arbp->wk[meta_of(pl, m)->wk];
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Worker half: count and free. */
static void drop(struct sn_pipeline *pl, struct rte_mbuf *m, enum sn_pipeline_drop cause)
{
	struct meta *md = meta_of(pl, m);

	ctr_add(&pl->ps[md->src].st.drop[cause], 1);
	rte_pktmbuf_free(m);
}

/* Drops a frame taken out of the wheel (restamps, device-stop drain): it
 * leaves the port's wheel depth and the worker's held / wheel_n counts. */
static void drop_taken(struct sn_pipeline *pl, struct rte_mbuf *m, enum sn_pipeline_drop cause)
{
	ctr_add(&pl->ps[meta_of(pl, m)->src].st.wheel_depth, -1ull);
	pl->held--;
	pl->wheel_n--;
	drop(pl, m, cause);
}

/* Arbiter half: hand m back to the worker with a verdict. The return
 * mailbox is SPSC (this thread -> worker); when it is full the frame is
 * parked (pend has room for every frame the arbiter can hold) and the
 * arbiter stops scanning until ret_flush() emptied the park. */
static void ret_push(struct sn_pipeline *pl, struct rte_mbuf *m, uint8_t kind, uint8_t cause)
{
	struct meta *md = meta_of(pl, m);

	md->ret_kind = kind;
	md->ret_cause = cause;
	ctr_add(&owner_of(pl, m)->ps[md->src].a_returning, 1);
	if (pl->n_pend || sn_mbox_insert(owner_of(pl, m)->ret, m)) {
		SN_VERIFY(pl->n_pend < pl->pend_cap);
		pl->pend[pl->n_pend++] = m;
	}
}

/* Arbiter half: 1 while frames stay parked. */
static int ret_flush(struct sn_pipeline *pl)
{
	uint32_t i = 0;

	while (i < pl->n_pend && sn_mbox_insert(owner_of(pl, pl->pend[i])->ret, pl->pend[i]) == 0)
		i++;
	memmove(pl->pend, pl->pend + i, (pl->n_pend - i) * sizeof(pl->pend[0]));
	pl->n_pend -= i;
	return pl->n_pend != 0;
}

/* Arbiter half: count and free, or return a frame the worker must free. */
static void a_drop(struct sn_pipeline *pl, struct rte_mbuf *m, enum sn_pipeline_drop cause)
{
	struct meta *md = meta_of(pl, m);
	uint64_t pop;

	if (pl->arb_remote && sn_vqtx_of(m, &pop)) {
		ret_push(pl, m, RET_DROP, (uint8_t)cause);
		return;
	}
	ctr_add(&owner_of(pl, m)->ps[md->src].ast.drop[cause], 1);
	rte_pktmbuf_free(m);
}

/* A frame of a deferred-completion port (sn_vqtx) that must not go on:
 * its device is stopping, or it was held past max_hold_us. Drops it
 * (freeing completes it) and returns true; false for any other frame.
 * `arb`: called by the arbiter half (a remote arbiter only reads the
 * queue's stop flag (acquire) and its immutable hold limit, and returns
 * the frame: the vqtx counters are the worker's). */
static __rte_noinline void deferred_drop_slow(struct sn_pipeline *pl, struct rte_mbuf *m,
					      bool arb, struct sn_vqtx *q,
					      enum sn_vqtx_verdict v);

/* s12-S2: the per-frame check inline (one sn_vqtx_verdict call), the
 * rare drop out of line. */
static inline bool deferred_drop(struct sn_pipeline *pl, struct rte_mbuf *m, bool arb)
{
	struct sn_vqtx *q;
	/* s10-P: one call, and the worker's iteration clock, per frame. */
	enum sn_vqtx_verdict v = sn_vqtx_verdict(m, &q);

	if (likely(v == SN_VQTX_KEEP))
		return false;
	deferred_drop_slow(pl, m, arb, q, v);
	return true;
}

static __rte_noinline void deferred_drop_slow(struct sn_pipeline *pl, struct rte_mbuf *m,
					      bool arb, struct sn_vqtx *q,
					      enum sn_vqtx_verdict v)
{
	const enum sn_pipeline_drop cause = v == SN_VQTX_STOPPING ? SN_PL_DROP_SRC_STOP
								  : SN_PL_DROP_HOLD;

	if (arb && pl->arb_remote) {
		ret_push(pl, m, RET_DROP, (uint8_t)cause);
		return;
	}
	if (cause == SN_PL_DROP_SRC_STOP)
		sn_vqtx_count_forced(q);
	else
		sn_vqtx_count_timeout(q);
	if (arb)
		a_drop(pl, m, cause);
	else
		drop(pl, m, cause);
}

static inline struct sn_pipeline_port_stats *side_st(struct sn_pipeline *pl,
						     struct rte_mbuf *m, bool arb)
{
	if (arb)
		return &owner_of(pl, m)->ps[meta_of(pl, m)->src].ast;
	return &pl->ps[meta_of(pl, m)->src].st;
}

static void count_sent(struct sn_pipeline *pl, struct rte_mbuf *m, bool arb)
{
	struct sn_pipeline_port_stats *st = side_st(pl, m, arb);

	ctr_add(&st->sent_packets, 1);
	ctr_add(&st->sent_bytes, m->pkt_len);
}

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

/* s20 (issue 6 throughput): what arb_release() found in its pass over a
 * release batch, for tx_direct()'s counters: the runs of frames of one
 * (worker, port), run r = frames [start[r], start[r + 1]) of port slot
 * src[r] owned by own[r], with byte totals bytes[r + 1] - bytes[r]; cls:
 * some frame has a class. Valid for the batch as arb_release() passed it
 * to uplink_tx() (used only when uplink_tx() sends it unchanged). */
struct rel_runs {
	uint16_t nr;
	bool cls;
	uint64_t flags;           /* s21: OR of the batch's ol_flags */
	const uint16_t *start;
	const uint16_t *src;
	struct sn_pipeline *const *own;
	const uint64_t *bytes;
};

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
	 * holds no deferred originals (uplink_tx copied them) and may not
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
	 * runs on the worker (!remote, as for the zero-copy in uplink_tx).
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
static void uplink_tx(struct sn_pipeline *pl, struct rte_mbuf **pkts, uint16_t n, bool arb,
		      const struct rel_runs *rr)
{
	struct sn_port *up = arb ? pl->a_uplink : pl->uplink;
	const bool remote = arb && pl->arb_remote;
	uint64_t flags = 0;       /* s11-S: OR of the frames' ol_flags */
	uint16_t kept;

	if (!up || !sn_port_is_up(up)) {
		for (uint16_t i = 0; i < n; i++) {
			if (arb)
				a_drop(pl, pkts[i], SN_PL_DROP_DST_GONE);
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
			ret_push(pl, m, RET_GSO, 0);
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
				a_drop(pl, m, SN_PL_DROP_NO_MBUF);
			else
				drop(pl, m, SN_PL_DROP_NO_MBUF);
			continue;
		}
		if (remote)
			ret_push(pl, m, RET_SENT, 0);
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

		uplink_tx(pl, pkts, k, true, &rr);
		/* After uplink_tx: a frame counts as held (src_held) until it
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
	a_drop(pl, m, map[cause]);
	backlog_dec(owner, src);
}

static void class_drop(void *item, uint32_t len, void *arg)
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

static void stage_vm(struct sn_pipeline *pl, struct sn_port *p, struct rte_mbuf *m);

/* s11-S, 1-core layout: the worker is the arbiter thread, so its frames of
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
 * class there (a_ready, see "Two halves"), else straight out on the
 * worker's queue. Takes ownership of m. */
static void to_uplink(struct sn_pipeline *pl, struct rte_mbuf *m)
{
	const uint16_t src = meta_of(pl, m)->src;
	struct pstate *ps = &pl->ps[src];
	const struct pstate *aps = &pl->arbp->ps[src];   /* arbiter half's view */

	/* Fair dropping (seed 003 Algorithm 1): the uplink is the overloaded
	 * resource; a frame of a flow whose virtual queue is above θ is
	 * dropped here instead of by arrival order at a full queue. Worker
	 * half in both layouts (see "Integration"). */
	if (pl->fd && sn_fdrop_decide(pl->fd, sn_classify_flow_hash(m), m->pkt_len + pl->overhead,
				      pl->now) == SN_FDROP_DROP) {
		drop(pl, m, SN_PL_DROP_FAIR);
		return;
	}
	if (!ps->has_class || !__atomic_load_n(&aps->a_ready, __ATOMIC_RELAXED)) {
		uplink_tx(pl, &m, 1, false, NULL);
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
	if (!pl->split)
		pl->held++;
}

/* s11-S: the uplink copies of a burst of due frames of ONE port (submit's
 * fast path), in order: fair dropping per frame as in to_uplink(), then
 * one client-mailbox publication (sn_mbox_insert_burst + one client-list
 * append: the same items in the same order as per-frame
 * sn_arbiter_submit). Takes ownership. */
static void to_uplink_burst(struct sn_pipeline *pl, struct rte_mbuf **pkts, uint16_t n)
{
	const uint16_t src = meta_of(pl, pkts[0])->src;
	struct pstate *ps = &pl->ps[src];
	const struct pstate *aps = &pl->arbp->ps[src];   /* arbiter half's view */
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
	if (!ps->has_class || !__atomic_load_n(&aps->a_ready, __ATOMIC_RELAXED)) {
		uplink_tx(pl, pkts, n, false, NULL);
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
		if (!pl->split)
			pl->held += k;
	}
	/* PSPAT immediate backpressure, as in to_uplink(). */
	for (uint32_t i = k; i < n; i++)
		drop(pl, pkts[i], SN_PL_DROP_MBOX_FULL);
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
			count_sent(pl, s->pkts[j], false);
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

	if (deferred_drop(pl, m, false))
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
			sn_port_ctr_add(&in->st.drop[SN_DROP_UNKNOWN_DST], 1);
	}
	rte_pktmbuf_free(m);
}

/* ---- s11-S (issue 6 throughput): per-burst submit -------------------------
 * A burst of shaped frames from one port is classified, stamped and counted
 * as a burst (one store per counter per burst, not per frame), and the
 * frames that need no wheel round-trip leave at the end of the burst in
 * order, their uplink copies with one client-mailbox publication.
 *
 * Carousel fast path (Carousel §5.1.2: the wheel holds a packet until its
 * timestamp; one whose timestamp is not in the future is sent at once). A
 * frame whose consolidated timestamp ts is not in the future (ts <= the
 * iteration clock, else <= a clock read once per burst) while its port has
 * no frame in the wheel goes straight to dispatch: the wheel would release
 * it at its first extract at or after ts (sn_twheel.h "never released
 * before ts"), ahead of nothing of its port (wheel_depth 0, and every
 * earlier frame of this burst is ahead of it in due[]), so the port's FIFO
 * order, its timestamps (the LTS is committed exactly as on insert) and
 * hence its rate limit, class/flow pacing and aggregate share are the
 * same; it only leaves up to one slot + one iteration earlier, never
 * before ts. Frames with ts in the future, or whose port has frames
 * queued, take the wheel as before. The released_* counters then include
 * frames released up to one burst after clock_ns (the exact-pair contract
 * of sn_pipeline_run_seq() is about frames due at clock_ns). */
static void due_flush(struct sn_pipeline *pl, struct rte_mbuf **due, uint16_t n);
static inline void seq_counting(struct sn_pipeline *pl);
static void due_flush_one(struct sn_pipeline *pl, struct rte_mbuf **due, uint16_t n,
			  const struct sn_port *d);

/* ---- s15-P5 (issue 6 throughput): submit's fast prefix --------------------
 * The leading frames of a burst of a port without flow classes whose
 * wheel is empty, in a loop of their own: the steps of submit_chunk's
 * general loop for such a frame (underrun count, room_lmax, peek, the fast
 * path's clock, commit, meta, release), with
 *  - the port's tstamp in a local copy (no store to an mbuf can alias it:
 *    rate and LTS stay in registers, the LTS is stored back once) and its
 *    floor at `now` computed once (sn_tstamp_floor_at: sn_tstamp_peek() is
 *    exactly floor + peek_at);
 *  - the meta as three 8-byte words, rebuilt only when the destination
 *    changes (the same bytes as the struct store);
 *  - the loop compiled once with and once without a port rate.
 * The first frame whose timestamp is in the future stops it uncounted and
 * uncommitted: the general loop takes it and the rest exactly as before
 * (a frame goes to the wheel, and with it every later one of the port).
 * Returns the frames it released (due[0 .. i)). */
struct fast_acc {
	uint64_t tnow;            /* in/out: submit's fast path clock */
	bool fresh;               /* in/out */
	uint64_t under, bytes;    /* out (bytes: 0 without sum_bytes) */
	const struct sn_port *d0; /* out: destination of due[0] */
	bool same;                /* out: all released frames have d0 */
};

static inline __attribute__((always_inline)) uint16_t
fast_prefix(struct sn_pipeline *pl, struct pstate *ps, struct rte_mbuf **pkts,
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
		if (sum_bytes)   /* s20: else the caller has the burst's sum */
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

/* s18 (issue 6 throughput): fast_prefix's stamps of a whole burst at once.
 * fast_prefix's per-frame stamps form one chain of dependent 64-bit divides
 * (each frame's LTS is the previous one's plus its length at the rate):
 * ~20 % of submit_chunk's time in perf. When every frame of the burst
 * turns out due, the port's LTS after it and the last (largest) timestamp
 * come from sn_tstamp_peek_run() instead, bit for bit the same values, and
 * fast_prefix only writes the metas. Per frame, fast_prefix counts an
 * underrun when the port's LTS is behind `now` before the frame; the LTS
 * only grows along a burst and is at least the floor after the first
 * frame, so with no burst allowance (floor = now) the first frame alone
 * can count, and with one the count is 0 when the LTS starts at or after
 * now; other cases, a burst over SN_TSTAMP_FAST_LEN bytes, and a last
 * timestamp still in the future after the clock read that fast_prefix
 * would also make (at most one per burst: fresh) return false with the
 * port unchanged, for the per-frame loop (acc's clock kept). Returns true
 * with the LTS and room_lmax committed, *under set and *sum = the burst's
 * bytes. */
static inline bool stamp_run(struct sn_pipeline *pl, struct pstate *ps,
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
		if (acc->fresh)     /* not so from submit_chunk today: fast_prefix's rule */
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

static void submit_chunk(struct sn_pipeline *pl, struct sn_port *in, struct rte_mbuf **pkts,
			 struct sn_port *const *dst, uint16_t n)
{
	struct pstate *ps = &pl->ps[in->slot];
	struct rte_mbuf *due[BATCH];
	const uint64_t now = pl->now;
	const bool has_cls = ps->has_cls, has_rate = ps->has_rate;
	uint64_t obytes = 0, rpk = 0, rbytes = 0, under = 0, wd = ps->st.wheel_depth, wd0 = wd;
	uint64_t tnow = now;      /* fast path clock: now, or read once (fresh) */
	bool fresh = false;
	uint16_t nd = 0;
	/* s12-R: a submit changes counters the stats reader pairs with
	 * clock_ns (offered, released, drops, qfq_backlog through
	 * sn_arbiter_enqueue_local): run_seq odd across the burst, as in a
	 * run() that counts, and even again at its end if it was even before
	 * (a lagging run's odd value stays for the next run() to clear); with
	 * frames for VM ports staged (counted sent by flush_vm), at the end
	 * of sn_pipeline_flush() instead. Before, a read inside a submit was
	 * reported exact with frames offered and released but nowhere
	 * downstream yet (tests/policy/test_stats_seq.py). One load, two
	 * stores per burst. */
	const uint64_t seq0 = __atomic_load_n(&pl->run_seq, __ATOMIC_RELAXED);
	/* s12-S2: the meta fields common to the burst are set once; each
	 * frame's meta is then one struct store (ts is written on the wheel
	 * path, ret_* when the arbiter returns the frame). */
	struct meta mk = { .src = in->slot, .src_gen = in->gen, .wk = (uint8_t)pl->wk_id };
	uint16_t i = 0;
	/* s15-P5: every frame of due[] has destination d0 (then due_flush_one) */
	const struct sn_port *d0 = NULL;
	bool same = true;

	seq_counting(pl);
	if (!has_cls && wd == 0) {
		struct fast_acc acc = { .tnow = tnow, .fresh = fresh, .d0 = NULL, .same = true };
		uint64_t run_under = 0, run_bytes = 0;
		bool run = false;

		mk.cls = SN_CLASSIFY_NONE;
		if (has_rate && stamp_run(pl, ps, pkts, n, &acc, &run_under, &run_bytes)) {
			/* s18: stamped and committed; every frame is due */
			i = fast_prefix(pl, ps, pkts, dst, n, mk, due, &acc, false, false);
			acc.bytes = run_bytes;   /* every frame: stamp_run's sum */
			run = true;
		} else {
			i = has_rate ? fast_prefix(pl, ps, pkts, dst, n, mk, due, &acc, true, true)
				     : fast_prefix(pl, ps, pkts, dst, n, mk, due, &acc, false, true);
		}
		tnow = acc.tnow;
		fresh = acc.fresh;
		under = run ? run_under : acc.under;
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
		uint64_t ts;
		int rc;

		cr.n = 0;
		cr.cls = SN_CLASSIFY_NONE;
		cr.clamp = false;
		cr.agg = false;    /* s12-I2: set by sn_classify_frame() */
		mk.dst = dst[i] ? dst[i]->slot : DST_FLOOD;
		mk.dst_gen = dst[i] ? dst[i]->gen : 0;
		obytes += len;
		/* The policies the frame crosses: port limit, then (issue 6
		 * classes) its class or flow pacing and its aggregate share;
		 * the release time is the max of theirs (Carousel §5.1.1). */
		if (has_rate) {
			cr.pol[cr.n++] = &ps->ts;
			under += ps->ts.lts < now;
		}
		if (has_cls)
			sn_classify_frame(pl->cls, in->slot, m, now, &cr);
		mk.cls = cr.cls;
		*meta_of(pl, m) = mk;
		if (cr.n) {
			if (unlikely(len > ps->room_lmax))
				ps->room_lmax = len;   /* s11-V3: sn_pipeline_src_room() */
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
				meta_of(pl, m)->ts = ts;
				/* s12-I2: the aggregate's part of ts, for restamp_aggs() */
				*agg_lag(pl, m) = cr.agg ? agg_lag_of(nx, cr.n, now) : AGG_NONE;
				rc = sn_twheel_insert(pl->wheel, m, ts,
						      cr.clamp ? SN_TWHEEL_CLAMP : SN_TWHEEL_REJECT);
				if (rc) {
					sn_classify_dropped(pl->cls, &cr, len,
							    rc == -ERANGE ? SN_CL_DROP_HORIZON
									  : SN_CL_DROP_POOL);
					drop(pl, m, rc == -ERANGE ? SN_PL_DROP_HORIZON : SN_PL_DROP_POOL);
					continue;
				}
				sn_tstamp_consolidate_commit(cr.pol, cr.n, nx);
				if (cr.cls != SN_CLASSIFY_NONE)
					sn_classify_accepted(pl->cls, &cr,
							     cr.clamp && ts >= now + sn_twheel_horizon_ns(pl->wheel));
				wd++;
				continue;
			}
			/* Carousel fast path (see above): ts is not in the
			 * future and the port has nothing in the wheel. */
			if (cr.n == 1)
				sn_tstamp_commit(cr.pol[0], &nx[0]);
			else
				sn_tstamp_consolidate_commit(cr.pol, cr.n, nx);
		}
		/* s12-S2 (review D1): released now, in one place for both
		 * cases: a frame with no policy to cross (cr.n == 0) and one
		 * on the Carousel fast path. */
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
	/* s12-R: release: the counter stores above happen before the even
	 * value; pairs with the reader's acquire load of its first value
	 * (sn_pipeline_run_seq()), as run()'s final store does. */
	if (seq0 & 1)
		return;
	if (pl->n_touched)
		pl->seq_staged = true;
	else
		__atomic_store_n(&pl->run_seq, seq0 + 2, __ATOMIC_RELEASE);
}

void sn_pipeline_submit_burst(struct sn_pipeline *pl, struct sn_port *in, struct rte_mbuf **pkts,
			      struct sn_port *const *dst, uint16_t n)
{
	for (uint16_t i = 0; i < n; i += BATCH)
		submit_chunk(pl, in, pkts + i, dst + i, (uint16_t)RTE_MIN(n - i, BATCH));
}

void sn_pipeline_submit(struct sn_pipeline *pl, struct sn_port *in, struct rte_mbuf *m,
			struct sn_port *dst)
{
	submit_chunk(pl, in, &m, &dst, 1);
}
/* ---- end s11-S per-burst submit ---------------------------------------- */

/* s11-S: deliver the frames submit released (all of one port, in order).
 * They were taken from their ring in this iteration, so the hold check of
 * dispatch() cannot fire for them (the hold clock is the iteration's); the
 * uplink path checks again when the arbiter releases them (uplink_tx). */
static void due_flush(struct sn_pipeline *pl, struct rte_mbuf **due, uint16_t n)
{
	const struct sn_port_table *t = pl->t;
	struct rte_mbuf *up[BATCH];
	uint16_t nu = 0;
	/* s15-P5: the destination checks once per run of frames with the same
	 * (dst, dst_gen): one snapshot of the port's state for the run, as if
	 * the frames had been delivered at one instant (a port going down
	 * meanwhile is seen by the next run or burst, as before by the next
	 * frame). kind: 0 drop, 1 uplink, 2 VM port lp. */
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
			dispatch(pl, m);
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

/* s15-P5: due_flush() of frames that all have destination d (their meta's
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
	if (pl->seq_staged) {
		/* s12-R: the odd value of the submit that staged them (see
		 * submit_chunk); release pairs with the reader's acquire load
		 * of its first value (sn_pipeline_run_seq()). */
		pl->seq_staged = false;
		__atomic_store_n(&pl->run_seq, __atomic_load_n(&pl->run_seq, __ATOMIC_RELAXED) + 1,
				 __ATOMIC_RELEASE);
	}
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

/* s11-V3 (issue 7): see sn_pipeline.h. The port limit's next release
 * time is max(LTS, now) + len / rate; a frame is stamped beyond the horizon
 * when that passes now + horizon (less 1/64 of it: the wheel's front may
 * trail pl->now by the slots not yet swept). Per frame at most the longest
 * frame the port submitted so far (at least SN_PIPELINE_ROOM_FRAME_MIN; a
 * longer one than ever before may still land beyond the horizon, once) at
 * ns_byte + 1 ns per byte (an upper bound of 8e9 / rate). */
uint16_t sn_pipeline_src_room(const struct sn_pipeline *pl, const struct sn_port *in,
			      uint16_t max)
{
	const struct pstate *ps = &pl->ps[in->slot];
	uint64_t h, end, start, k;

	if (ps->gen != in->gen || !ps->shaped || !ps->has_rate)
		return max;
	h = sn_twheel_horizon_ns(pl->wheel);
	end = pl->now + h - h / 64;
	start = RTE_MAX(ps->ts.lts, pl->now);
	k = start < end ? (end - start) / ((uint64_t)RTE_MAX(ps->room_lmax,
							       SN_PIPELINE_ROOM_FRAME_MIN) *
					   (ps->ts.ns_byte + 1)) : 0;
	if (k == 0 && ps->ts.lts <= pl->now)
		k = 1;
	return (uint16_t)RTE_MIN(k, (uint64_t)max);
}

uint64_t sn_pipeline_src_held(const struct sn_pipeline *pl, const struct sn_port *in)
{
	const struct pstate *ps = &pl->ps[in->slot];

	int64_t h;

	if (ps->gen != in->gen)
		return 0;
	/* Signed: apply() zeroes the counters of a slot that got a new port
	 * while frames of the old one were still held; those drive it below
	 * zero as they leave, and are no frames of `in`. Frames on their way
	 * back from a remote arbiter are still held (returning - returned). */
	h = (int64_t)(ps->st.wheel_depth + ps->st.qfq_backlog +
		      __atomic_load_n(&ps->ast.qfq_backlog, __ATOMIC_ACQUIRE) +
		      __atomic_load_n(&ps->a_returning, __ATOMIC_RELAXED) - ps->w_returned);
	return h > 0 ? (uint64_t)h : 0;
}

static_assert(sizeof(((struct rte_mbuf *)0)->pkt_len) == sizeof(uint32_t),
	      "sn_arbiter_params.len_offset reads a uint32_t");

/* A new arbiter set: one client per port slot, class = slot. NULL + errno. */
static struct arbset *aset_create(struct sn_pipeline *pl, enum sn_sched_algo algo)
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
static void aset_destroy(struct sn_pipeline *pl, struct arbset *as)
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

static void publish_arb_stats(struct sn_pipeline *pl)
{
	struct sn_arbiter_stats a;
	const uint64_t *src = (const uint64_t *)&a;
	uint64_t *dst = (uint64_t *)&pl->arb_st;

	static_assert(sizeof(a) % sizeof(uint64_t) == 0, "stats are u64 fields");
	sn_arbiter_get_stats(pl->aset->arb, &a);
	for (size_t i = 0; i < sizeof(a) / sizeof(uint64_t); i++)
		ctr_set(&dst[i], src[i]);
	ctr_set(&pl->arb_backlog, sn_arbiter_backlog(pl->aset->arb));
}

/* Worker half: fair dropping stats (its state is the worker's). */
static void publish_fair_stats(struct sn_pipeline *pl)
{
	struct sn_fdrop_stats f;

	if (!pl->fd)
		return;
	sn_fdrop_stats(pl->fd, &f);
	ctr_set(&pl->fair_st.kept, f.kept);
	ctr_set(&pl->fair_st.dropped, f.dropped[SN_FDROP_C_FAIR]);
	ctr_set(&pl->fair_st.table_full, f.dropped[SN_FDROP_C_TABLE_FULL] +
		f.dropped[SN_FDROP_C_INVALID]);
	ctr_set(&pl->fair_st.active, f.active);
	ctr_set(&pl->fair_st.theta, f.theta);
}

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
		sn_log("policy: fair dropping: %s", strerror(errno));
		return;
	}
	sn_fdrop_free(pl->fd);
	pl->fd = n;
	pl->fd_rate = pol->uplink.rate_bps;
	ctr_set(&pl->fair_st.on, 1);
}

/* Every frame of the wheel into pl->restamp_buf, in release order, and
 * the wheel rewound to now, for restamp_wheel() and restamp_aggs() to
 * insert them again; returns how many (0: empty, or more frames than the
 * buffer holds, which the pool size rules out: logged, nothing taken). */
static uint64_t wheel_take_all(struct sn_pipeline *pl)
{
	uint64_t n = sn_twheel_count(pl->wheel), k = 0;
	unsigned got;

	SN_VERIFY(n == pl->wheel_n);   /* s12-R: the O(1) count arb_will_count() uses */

	if (n == 0 || n > pl->cfg.pool_nodes) {
		if (n)
			sn_log("policy: %" PRIu64 " frames in the wheel, not restamped", n);
		return 0;
	}
	while (k < n && (got = sn_twheel_extract(pl->wheel, UINT64_MAX >> 2, pl->restamp_buf + k,
						 (unsigned)RTE_MIN(n - k, (uint64_t)BATCH))) > 0)
		k += got;
	SN_VERIFY(sn_twheel_rewind(pl->wheel, pl->now) == 0);
	return k;
}

/* Worker half. issue 6 (live change <= 100 ms): a port whose rate changed
 * gets every frame it has in the wheel stamped again at the new rate, from
 * now on (Carousel §5.1.1: a frame's release time is a function of the
 * rate; the old stamps would keep the old rate for up to the 262 ms
 * horizon). The wheel has no per-port removal, so all its frames are taken
 * out in release order (the far-future extract keeps each port's order),
 * the empty wheel is rewound to now, and every frame goes back: changed
 * ports' frames on a fresh timestamp chain starting now, consolidated with
 * their aggregate share's stamp (s12-I2) and (s13-P4, below) their class
 * / flow pacing re-laid from now, the others at their own stamp (meta.ts; same slot
 * order, so FIFO within a slot is kept). New arrivals chain after the
 * restamped backlog. A restamped frame that lands beyond the horizon (a
 * big rate cut with a full wheel) is what the shaper drops at the new rate
 * anyway: counted as "horizon" (in its class too); one of a "clamp" class
 * is queued at the horizon (s12-I2: it was dropped too). O(frames in the
 * wheel), once per rate change, on the worker.
 *
 * s13-P3: the same for a flow class whose pacing rate changed
 * (cls_changed[slot], bit = class, from sn_classify_apply_port(), which
 * restarted the class's chain at now): its frames are laid again on the
 * class's chain, or their flow's (scope "flow", sn_classify_restamp_ts),
 * in release order, so each flow stays FIFO. Never earlier than their
 * other policies: the aggregate share's stamp (agg_lag()), and for a port
 * with a limit of its own (whose stamp is not kept apart from the
 * class's) that limit's chain, which is then laid again from now over
 * all the port's queued frames (relay[]; frames of its unchanged classes
 * keep their stamp, or wait for the re-laid limit if it is later), so the
 * port limit holds from now. Before, a class rate change kept the stamps
 * of its queued frames and its (saturated) chain a horizon ahead: the old
 * rate went on for up to 262 ms (tests/policy/test_live_change.py).
 *
 * s13-P4: a port whose limit changed has every paced class in
 * cls_changed[] too (sn_classify_restart_port(), chains restarted at now),
 * so its frames go back at max(new port chain, their class / flow chain
 * re-laid from now, their aggregate stamp, now) in release order. Before,
 * they were laid on the new port chain alone: after a raise 20 -> 40
 * Mbit/s a class paced at 5 sent its ~160 queued frames at 10 Mbit/s in
 * 130 ms, then nothing until its chain, still a horizon ahead, came due
 * (test_port_rate_change_keeps_class_pacing).
 *
 * s14-R4: a frame's class index is renumbered first when its port's
 * classes moved in the list (sn_classify_renumber): cls_changed[] and the
 * counters use the classes' new indices. Every restamp_wheel() follows
 * the apply_port() whose map it uses (a moved class makes apply() call it). */
static void restamp_wheel(struct sn_pipeline *pl, const bool *changed, const uint32_t *cls_changed)
{
	const uint64_t hz = pl->now + sn_twheel_horizon_ns(pl->wheel);
	bool relay[SN_PORT_MAX];
	uint64_t k;

	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
		struct pstate *ps = &pl->ps[s];

		relay[s] = changed[s];
		if (!changed[s] && cls_changed[s] && ps->has_rate) {
			SN_VERIFY(sn_tstamp_init(&ps->ts, ps->ts.rate, ps->ts.burst, pl->now) == 0);
			relay[s] = true;
		}
	}
	k = wheel_take_all(pl);
	for (uint64_t i = 0; i < k; i++) {
		struct rte_mbuf *m = pl->restamp_buf[i];
		struct meta *md = meta_of(pl, m);
		/* s14-R4: first its class's new index (a class kept by name
		 * that moved in the list; NONE if it went away), so the
		 * counters and the restamp below are the class's own */
		const uint8_t cls = md->cls = sn_classify_moved(pl->cls, md->src)
			? sn_classify_renumber(pl->cls, md->src, md->cls) : md->cls;
		struct pstate *ps = &pl->ps[md->src];
		struct sn_classify_res r = { .slot = md->src, .cls = cls };
		struct sn_tstamp_next nx, cnx;
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
			 * paced class of a changed port, s13-P4) its class's or
			 * flow's */
			if (changed[md->src] || cch)
				o = pl->now;
			if (relay[md->src])
				o = RTE_MAX(o, sn_tstamp_peek(&ps->ts, pl->now, m->pkt_len, &nx));
			if (cch && (cts = sn_classify_restamp_ts(pl->cls, md->src, cls, m,
								 pl->now)) != NULL)
				o = RTE_MAX(o, sn_tstamp_peek(cts, pl->now, m->pkt_len, &cnx));
			ts = o;
			if (*lag != AGG_NONE) {
				*lag = lag_of(o, a);
				ts = RTE_MAX(o, a);
			}
		}
		rc = sn_twheel_insert(pl->wheel, m, ts, clamp ? SN_TWHEEL_CLAMP : SN_TWHEEL_REJECT);
		if (rc) {
			sn_classify_dropped(pl->cls, &r, m->pkt_len,
					    rc == -ERANGE ? SN_CL_DROP_HORIZON : SN_CL_DROP_POOL);
			drop_taken(pl, m, rc == -ERANGE ? SN_PL_DROP_HORIZON : SN_PL_DROP_POOL);
			continue;
		}
		if (clamp && ts >= hz && md->ts < hz)
			sn_classify_accepted(pl->cls, &r, true);
		md->ts = ts;
		if (relay[md->src])
			sn_tstamp_commit(&ps->ts, &nx);
		if (cts) {
			/* s13-P4: the class's (flow's) chain goes on from the
			 * frame's release time, not from its own stamp alone:
			 * re-laid behind a slower port limit (halving: the
			 * class's part of the port's FIFO backlog goes out
			 * below the class's rate), a chain left behind would
			 * let the class's next frames out above its rate until
			 * it caught up (7.5 Mbit/s in 100 ms for a class at 5,
			 * test_port_rate_change_keeps_class_pacing). */
			if (ts > cnx.lts + (cnx.lts_rem != 0)) {
				cnx.lts = ts;
				cnx.lts_rem = 0;
			}
			sn_tstamp_commit(cts, &cnx);
		}
	}
}

/* Worker half. s11-B2 (issue 6, NBA): a new grant of an aggregate applies
 * to the frames its share already queued: sn_classify_tick() rescaled the
 * share's LTS and returned the aggregates in `changed`; their frames in
 * the wheel get the same rescaling of their aggregate stamp A
 * (sn_classify_agg_restamp), and (s12-I2) their release time is the max
 * over every policy they cross again: ts = max(O, A', now), O the stamp of
 * their port limit and class / flow pacing (agg_lag()), so frames of a
 * class with its own pacing and of ports with a limit follow the grant too
 * (s11-B2 restamped only classes paced by the aggregate alone, on ports
 * without a limit: the others kept the old grant for up to the 262 ms
 * horizon). Per flow the order stays FIFO: A' and O are nondecreasing in
 * a flow's arrival order, and the frames go back in release order. Same
 * extract / rewind / reinsert as restamp_wheel(); a frame that lands beyond
 * the horizon (a grant cut with a full wheel; the share's LTS is capped
 * there) is what the share drops at the new grant anyway: counted as
 * "horizon", or queued at the horizon for a "clamp" class (counted
 * "clamped" if the restamp put it there). O(frames in the wheel), at most
 * once per NBA period, only when the grant changed while the share owed
 * bytes. */
static void restamp_aggs(struct sn_pipeline *pl, uint32_t changed)
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
		if (sn_twheel_insert(pl->wheel, m, ts, clamp ? SN_TWHEEL_CLAMP : SN_TWHEEL_REJECT)) {
			sn_classify_dropped(pl->cls, &r, m->pkt_len, SN_CL_DROP_HORIZON);
			drop_taken(pl, m, SN_PL_DROP_HORIZON);
			continue;
		}
		if (clamp && ts >= hz && md->ts < hz)
			sn_classify_accepted(pl->cls, &r, true);
		md->ts = ts;
	}
}

/* Arbiter half (s14-R4): the remote arbiter's per-class uplink counters
 * follow their class (policy.set's identity: its name) when classes move
 * in the list or go away, as the worker's sn_classify counters do. s15-R5:
 * by the map sn_classify_apply_port() built for worker 0 (old index ->
 * new, SN_CLASSIFY_NONE: gone), handed over by clup_publish(), instead of
 * a second match by name here. Frames in flight between the wheel and the
 * uplink at the change (the mailbox and the scheduler's queues) carry
 * their class's old index and count there. */
static void clup_follow(struct pstate *ps, const uint8_t *map)
{
	uint64_t nw[SN_POLICY_CLASSES_MAX][2] = { { 0 } };

	for (unsigned j = 0; j < SN_POLICY_CLASSES_MAX; j++) {
		if (map[j] == SN_CLASSIFY_NONE)
			continue;
		SN_VERIFY(map[j] < SN_POLICY_CLASSES_MAX);
		nw[map[j]][0] = ps->a_clup[j][0];
		nw[map[j]][1] = ps->a_clup[j][1];
	}
	for (unsigned i = 0; i < SN_POLICY_CLASSES_MAX; i++) {
		ctr_set(&ps->a_clup[i][0], nw[i][0]);
		ctr_set(&ps->a_clup[i][1], nw[i][1]);
	}
}

/* Worker 0, after sn_classify_apply_port() of every slot: compose this
 * apply's renumbering onto the maps not yet published. */
static void clup_compose(struct sn_pipeline *pl)
{
	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
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
static void clup_publish(struct sn_pipeline *pl)
{
	const uint32_t seq = __atomic_load_n(&pl->clup_seq, __ATOMIC_RELAXED);

	/* Acquire pairs with the release of clup_ack in clup_take(): the
	 * arbiter half has read the maps about to be overwritten. */
	if (!pl->clup_pending || __atomic_load_n(&pl->clup_ack, __ATOMIC_ACQUIRE) != seq)
		return;
	memcpy(pl->clup_map, pl->clup_pend, sizeof(pl->clup_map));
	memcpy(pl->clup_moved, pl->clup_pend_moved, sizeof(pl->clup_moved));
	memset(pl->clup_pend_moved, 0, sizeof(pl->clup_pend_moved));
	pl->clup_pending = false;
	/* Release: pairs with the acquire in clup_take(): the maps are written. */
	__atomic_store_n(&pl->clup_seq, seq + 1, __ATOMIC_RELEASE);
}

/* Arbiter half (instance 0): apply maps worker 0 published, if any. */
static void clup_take(struct sn_pipeline *pl)
{
	/* Acquire pairs with the release in clup_publish(). */
	const uint32_t seq = __atomic_load_n(&pl->clup_seq, __ATOMIC_ACQUIRE);

	if (seq == __atomic_load_n(&pl->clup_ack, __ATOMIC_RELAXED))
		return;
	for (unsigned s = 0; s < SN_PORT_MAX; s++)
		if (pl->clup_moved[s])
			clup_follow(&pl->ps[s], pl->clup_map[s]);
	/* Release: pairs with the acquire in clup_publish(): the maps were read. */
	__atomic_store_n(&pl->clup_ack, seq, __ATOMIC_RELEASE);
}

/* Arbiter half: the policy's algorithm, link and per-port classes. */
static void apply_arb(struct sn_pipeline *pl, const struct sn_policy *pol,
		      const struct sn_port_table *t)
{
	const struct sn_policy_port *want[SN_PORT_MAX];
	struct sn_sched *sch;

	pl->a_algo_retry = pol->uplink.algo != pl->aset->algo && pl->aset_old;
	if (pol->uplink.algo != pl->aset->algo && !pl->aset_old) {
		struct arbset *n = aset_create(pl, pol->uplink.algo);

		/* On ENOMEM keep the old algorithm (and say so). */
		if (!n) {
			sn_log("policy: cannot switch the scheduler to %s: %s",
			       sn_sched_algo_name(pol->uplink.algo), strerror(errno));
		} else if (pl->arb_remote) {
			/* The worker still pushes into the old set: scan it
			 * until it acknowledges the new one (run()). */
			pl->aset_old = pl->aset;
			pl->aset = n;
		} else {
			aset_destroy(pl, pl->aset);
			pl->aset = n;
		}
		if (n) {
			for (unsigned s = 0; s < SN_PORT_MAX; s++) {
				pl->ps[s].a_has_class = false;
				pl->ps[s].a_weight = 0;
			}
		}
	}
	sch = sn_arbiter_sched(pl->aset->arb);
	SN_VERIFY(sn_arbiter_set_link(pl->aset->arb, pol->uplink.rate_bps ? pol->uplink.rate_bps
				      : SN_ARBITER_MAX_LINK_BPS, pol->uplink.overhead_bytes) == 0);
	pl->a_uplink = NULL;
	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
		struct sn_port *p = t->by_slot[s];
		struct pstate *ps = &pl->ps[s];

		if (p && p->type == SN_PORT_UPLINK)
			pl->a_uplink = p;
		want[s] = p && p->type == SN_PORT_VHOST ? sn_policy_port_find(pol, p->name) : NULL;
		if (!p || ps->a_gen != p->gen) {
			/* Another port (or none) in this slot: fresh counters. */
			ps->a_gen = p ? p->gen : 0;
			for (unsigned k = 0; k < pl->n_wk; k++) {
				struct pstate *wps = &pl->wk[k]->ps[s];

				for (size_t i = 0; i < sizeof(wps->ast) / sizeof(uint64_t); i++)
					ctr_set((uint64_t *)&wps->ast + i, 0);
			}
			for (size_t i = 0; i < SN_POLICY_CLASSES_MAX; i++) {
				ctr_set(&ps->a_clup[i][0], 0);
				ctr_set(&ps->a_clup[i][1], 0);
			}
		}
	}
	/* Pass 1: removals and weight decreases, so pass 2 never exceeds
	 * the scheduler's weight sum (the policy's sum is validated). */
	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
		struct pstate *ps = &pl->ps[s];

		if (!ps->a_has_class)
			continue;
		if (!want[s]) {
			__atomic_store_n(&ps->a_ready, false, __ATOMIC_RELAXED);
			SN_VERIFY(sn_sched_class_del(sch, s, class_drop, pl->aset) == 0);
			pl->aset->weight[s] = 0;
			ps->a_has_class = false;
		} else if (want[s]->weight < ps->a_weight) {
			SN_VERIFY(sn_sched_class_change(sch, s, want[s]->weight,
							pl->aset->lmax[s]) == 0);
			ps->a_weight = want[s]->weight;
			pl->aset->weight[s] = ps->a_weight;
		}
	}
	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
		struct pstate *ps = &pl->ps[s];
		const struct sn_policy_port *w = want[s];

		if (!w)
			continue;
		if (!ps->a_has_class) {
			SN_VERIFY(sn_sched_class_add(sch, s, w->weight, CLASS_LMAX_INIT) == 0);
			ps->a_has_class = true;
			ps->a_weight = w->weight;
			pl->aset->weight[s] = w->weight;
			pl->aset->lmax[s] = CLASS_LMAX_INIT;
		} else if (w->weight > ps->a_weight) {
			SN_VERIFY(sn_sched_class_change(sch, s, w->weight, pl->aset->lmax[s]) == 0);
			ps->a_weight = w->weight;
			pl->aset->weight[s] = w->weight;
		}
		__atomic_store_n(&ps->a_ready, true, __ATOMIC_RELAXED);
	}
	pl->a_pol_gen = pol->gen;
	pl->a_t_seen = t;
	/* Release: pairs with the worker's acquire in run() (the new set's
	 * mailboxes are initialised before the worker may push into them). */
	__atomic_store_n(&pl->aset_pub, pl->aset, __ATOMIC_RELEASE);
}

/* Worker half: rates, shaping flags, uplink pointer. */
static void apply(struct sn_pipeline *pl, const struct sn_policy *pol, struct sn_port_table *t)
{
	bool changed[SN_PORT_MAX] = { false }, any_change = false;
	uint32_t cls_changed[SN_PORT_MAX] = { 0 };   /* s13-P3: classes with a new rate */

	pl->uplink = NULL;
	sn_classify_apply_aggs(pl->cls, pol, pl->now);   /* issue 6 */
	apply_fair(pl, pol);
	for (unsigned s = 0; s < SN_PORT_MAX; s++) {
		struct sn_port *p = t->by_slot[s];
		struct pstate *ps = &pl->ps[s];
		const struct sn_policy_port *w;

		if (p && p->type == SN_PORT_UPLINK)
			pl->uplink = p;
		w = p && p->type == SN_PORT_VHOST ? sn_policy_port_find(pol, p->name) : NULL;
		/* issue 6: the slot's flow classes (fresh if another port). */
		cls_changed[s] = sn_classify_apply_port(pl->cls, (uint16_t)s, w,
							!p || ps->gen != p->gen, pl->now);
		/* s14-R4: classes moved: restamp_wheel() renumbers the frames */
		any_change = any_change || cls_changed[s] || sn_classify_moved(pl->cls, (uint16_t)s);
		if (!p || ps->gen != p->gen) {
			/* Another port (or none) in this slot: fresh state and
			 * counters; its scheduler class, if any, carries on. */
			__atomic_store_n(&ps->gen, p ? p->gen : 0, __ATOMIC_RELAXED);
			pl->clup_pend_moved[s] = false;   /* s15-R5: no map of its old port */
			ps->has_rate = false;
			ps->room_lmax = 0;    /* s11-V3 */
			for (size_t i = 0; i < sizeof(ps->st) / sizeof(uint64_t); i++)
				ctr_set((uint64_t *)&ps->st + i, 0);
		}
		__atomic_store_n(&ps->shaped, w != NULL, __ATOMIC_RELAXED);
		ctr_set(&ps->st.rate_bps, w ? w->rate_bps : 0);
		ctr_set(&ps->st.weight, w ? w->weight : 0);
		ps->has_class = w != NULL;
		ps->has_cls = w && w->n_classes;   /* s11-S */
		if (!w || !w->rate_bps)
			ps->has_rate = false;
		else if (ps->has_rate && ps->ts.rate != w->rate_bps) {
			/* fresh chain from now: restamp_wheel() lays the queued
			 * frames on it */
			SN_VERIFY(sn_tstamp_init(&ps->ts, w->rate_bps, w->burst_bytes, pl->now) == 0);
			changed[s] = any_change = true;
			/* s13-P4: ... and on its paced classes' chains, restarted
			 * from now too (ts = max over every policy). */
			cls_changed[s] |= sn_classify_restart_port(pl->cls, (uint16_t)s, pl->now);
		} else if (ps->has_rate)
			SN_VERIFY(sn_tstamp_set(&ps->ts, w->rate_bps, w->burst_bytes) == 0);
		else
			SN_VERIFY(sn_tstamp_init(&ps->ts, w->rate_bps, w->burst_bytes, pl->now) == 0);
		ps->has_rate = w && w->rate_bps != 0;
	}
	if (any_change)
		restamp_wheel(pl, changed, cls_changed);
	if (pl->wk_id == 0) {
		/* s15-R5: a_clup follows this renumbering (1-core: at once) */
		clup_compose(pl);
		clup_publish(pl);
		if (!pl->split)
			clup_take(pl);
	}
	pl->pol_gen = pol->gen;
	pl->t_seen = t;
	pl->dirty = false;
}

/* Worker half (issue 6 measurement, s11-L): about to change counters the
 * stats reader pairs with clock_ns: make run_seq odd, unless it already
 * is (this run counted before, or an earlier run lagged). Only the worker
 * writes run_seq. The release fence orders the odd store before every
 * counter store and the clock_ns store that follow: pairs with the
 * reader's acquire fence before its second load of run_seq (sn_ctl.c). */
static inline void seq_counting(struct sn_pipeline *pl)
{
	uint64_t seq = __atomic_load_n(&pl->run_seq, __ATOMIC_RELAXED);

	if (seq & 1)
		return;
	__atomic_store_n(&pl->run_seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Worker half: one frame a remote arbiter handed back ("Two halves"). */
static void ret_handle(struct sn_pipeline *pl, struct rte_mbuf *m)
{
	struct meta *md = meta_of(pl, m);
	struct pstate *ps = &pl->ps[md->src];
	struct sn_vqtx *q;
	uint64_t pop;

	switch (md->ret_kind) {
	case RET_GSO:
		uplink_tx(pl, &m, 1, false, NULL);
		break;
	case RET_DROP:
		q = sn_vqtx_of(m, &pop);
		if (q && md->ret_cause == SN_PL_DROP_SRC_STOP)
			sn_vqtx_count_forced(q);
		else if (q && md->ret_cause == SN_PL_DROP_HOLD)
			sn_vqtx_count_timeout(q);
		drop(pl, m, (enum sn_pipeline_drop)md->ret_cause);
		break;
	default:   /* RET_SENT: its copy went out; complete it */
		rte_pktmbuf_free(m);
		break;
	}
	/* After the free: src_held() keeps the port held until the
	 * descriptor is completed. */
	ctr_add(&ps->w_returned, 1);
}

static void ret_service(struct sn_pipeline *pl)
{
	void *items[BATCH];
	uint32_t got;

	do {
		got = sn_mbox_extract_burst(pl->ret, items, BATCH);
		if (got)
			seq_counting(pl);   /* drops, GSO uplink copies */
		for (uint32_t i = 0; i < got; i++)
			ret_handle(pl, items[i]);
	} while (got == BATCH);
}

/* Arbiter half: does t hold a port the last apply_arb() did not see? The
 * table pointer alone can be reused after a free (ABA); the generations
 * of its ports cannot. */
static bool arb_table_stale(const struct sn_pipeline *pl, const struct sn_port_table *t)
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
static uint32_t arb_round(struct sn_pipeline *pl, const struct sn_policy *pol,
			  const struct sn_port_table *t, uint64_t now)
{
	uint32_t rel = 0;

	pl->a_now = now;
	ctr_set(&pl->arb_clock_ns, now);
	if (pol->gen != pl->a_pol_gen || arb_table_stale(pl, t) || (pl->a_algo_retry && !pl->aset_old))
		apply_arb(pl, pol, t);
	clup_take(pl);         /* s15-R5: class maps of worker 0's applies */
	if (pl->aset_old && all_acked(pl)) {
		/* Acquire (all_acked) pairs with each worker's release of
		 * w_ack: their last inserts into the old mailboxes are
		 * visible. */
		aset_destroy(pl, pl->aset_old);
		pl->aset_old = NULL;
	}
	if (pl->arb_remote && ret_flush(pl))
		return 0;    /* backpressure: the worker has not taken returns */
	if (pl->aset_old)
		rel += sn_arbiter_do_scan(pl->aset_old->arb, now);
	rel += sn_arbiter_do_scan(pl->aset->arb, now);
	if ((int64_t)(now - pl->a_next_stats) >= 0) {
		publish_arb_stats(pl);
		pl->a_next_stats = now + STATS_EVERY_NS;
	}
	return rel;
}

/* 1-core layout (s11-L, issue 6 measurement): will arb_round() at now
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
		/* Acquire pairs with the release in apply_arb(). */
		struct arbset *a = __atomic_load_n(&pl->arbp->aset_pub, __ATOMIC_ACQUIRE);

		if (a != pl->w_aset) {
			pl->w_aset = a;
			/* Release: pairs with the acquire in arb_round(). */
			__atomic_store_n(&pl->w_ack, a, __ATOMIC_RELEASE);
		}
		ret_service(pl);
	}
	if (pol->gen != pl->pol_gen || t != pl->t_seen || pl->dirty) {
		seq_counting(pl);
		apply(pl, pol, t);
	}
	if (!pl->split && (pol->gen != pl->a_pol_gen || arb_table_stale(pl, t))) {
		seq_counting(pl);
		apply_arb(pl, pol, t);
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
			dispatch(pl, m);
		}
		pl->wheel_n -= got;   /* s12-R */
		flush_vm(pl);
		/* issue 6 (conformance), 1-core layout: scan after every
		 * batch, not once per iteration. After a worker stall the
		 * wheel releases up to MAX_BATCHES * BATCH due frames at once;
		 * one scan at the end let them overflow the client mailbox
		 * (mbox_size 512) and they were lost as mailbox_full although
		 * the link had room. (2-core: the arbiter scans on its own.) */
		if (!pl->split && pl->held)
			arb_round(pl, pol, t, pl->now);
		if (got < BATCH || ++batches >= MAX_BATCHES)
			break;
		got = sn_twheel_extract(pl->wheel, pl->now, items, BATCH);
	}
	if (!pl->split && !pl->held) {
		ctr_set(&pl->arb_clock_ns, pl->now);
		if ((int64_t)(pl->now - pl->a_next_stats) >= 0) {
			publish_arb_stats(pl);
			pl->a_next_stats = pl->now + STATS_EVERY_NS;
		}
	}
	/* Worker-half periodic work (its own timer in both layouts). */
	if ((int64_t)(pl->now - pl->next_stats) >= 0) {
		publish_fair_stats(pl);
		clup_publish(pl);     /* s15-R5: maps the arbiter had not taken at apply() */
		/* issue 6: NBA, flow ageing */
		uint32_t agg_changed = sn_classify_tick(pl->cls, pl->now,
							sn_twheel_horizon_ns(pl->wheel));

		if (agg_changed) {     /* s11-B2: new NBA grants apply to queued frames */
			seq_counting(pl);   /* s12-R: its horizon drops move wheel_depth, drops */
			restamp_aggs(pl, agg_changed);
		}
		pl->next_stats = pl->now + STATS_EVERY_NS;
	}
	/* Caught up (got < BATCH): everything due at clock_ns is released;
	 * an odd run_seq (this run counted, or an earlier one lagged) becomes
	 * even. Release: pairs with the reader's acquire load of its first
	 * value (sn_pipeline_run_seq()). Lagging: stays odd. */
	seq = __atomic_load_n(&pl->run_seq, __ATOMIC_RELAXED);
	pl->seq_staged = false;   /* s12-R: flush_vm() above sent them; lagging: odd stays */
	if (got < BATCH && (seq & 1))
		__atomic_store_n(&pl->run_seq, seq + 1, __ATOMIC_RELEASE);
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

		arb_round(pl, pol, t, now);
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
	pl->aset = aset_create(pl, SN_SCHED_QFQ);
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
		aset_destroy(a, a->aset_old);
		a->aset_old = NULL;
	}
	if (a->aset) {
		aset_destroy(a, a->aset);
		a->aset = NULL;
	}
}

/* Worker half of pl: its return mailbox and its parked returns. */
static void drain_returns(struct sn_pipeline *pl)
{
	struct sn_pipeline *a = pl->arbp;

	if (pl->ret)
		ret_service(pl);
	for (uint32_t i = 0; i < a->n_pend; i++)
		if (meta_of(a, a->pend[i])->wk == pl->wk_id)
			ret_handle(pl, a->pend[i]);
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
	 * through their return mailboxes (arb_remote: a_drop returns every
	 * deferred frame, worker 0's own included), and says done; 3: each
	 * worker takes its returns and its parked frames (pend is read-only
	 * from here on). */
	drain_wheel(pl);
	if (pl->ret)
		ret_service(pl);
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
				ret_service(w);
		}
	}
	if (!pl->drained) {
		pl->arb_remote = false;
		drain_asets(pl);
		for (uint32_t i = 0; i < pl->n_pend; i++)
			ret_handle(owner_of(pl, pl->pend[i]), pl->pend[i]);
	}
	pl->n_pend = 0;
	for (unsigned k = 1; k < pl->n_wk; k++)
		instance_free(pl->wk[k]);
	instance_free(pl);
}

int sn_pipeline_port_stats(const struct sn_pipeline *pl, const struct sn_port *p,
			   struct sn_pipeline_port_stats *out)
{
	uint64_t *dst = (uint64_t *)out;
	bool found = false;

	static_assert(sizeof(*out) % sizeof(uint64_t) == 0, "stats are u64 fields");
	memset(out, 0, sizeof(*out));
	pl = pl->arbp;
	for (unsigned k = 0; k < pl->n_wk; k++) {
		const struct pstate *ps = &pl->wk[k]->ps[p->slot];
		const uint64_t *w = (const uint64_t *)&ps->st, *a = (const uint64_t *)&ps->ast;

		/* gen/shaped are worker-private; a relaxed read is enough for
		 * a report (a stale answer is as good as one a moment
		 * earlier). A worker that has not applied the port yet adds
		 * nothing. */
		if (__atomic_load_n(&ps->gen, __ATOMIC_RELAXED) != p->gen ||
		    !__atomic_load_n(&ps->shaped, __ATOMIC_RELAXED))
			continue;
		found = true;
		/* Each counter is the sum over the workers of the worker's
		 * and the arbiter's copy (modulo 2^64: qfq_backlog is +1 on
		 * one side, -1 on the other); rate_bps and weight are the
		 * policy's, the same in every worker. */
		for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++) {
			uint64_t v = __atomic_load_n(&w[i], __ATOMIC_RELAXED) +
				     __atomic_load_n(&a[i], __ATOMIC_RELAXED);

			if (&dst[i] == &out->rate_bps || &dst[i] == &out->weight)
				dst[i] = v;
			else
				dst[i] += v;
		}
	}
	return found ? 0 : -ENOENT;
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

void sn_pipeline_thread_stats(const struct sn_pipeline *pl, struct sn_pipeline_thread_stats *worker,
			      struct sn_pipeline_thread_stats *arbiter)
{
	memset(worker, 0, sizeof(*worker));
	for (unsigned k = 0; k < pl->arbp->n_wk; k++) {   /* summed over the workers */
		const struct sn_pipeline *w = pl->arbp->wk[k];

		worker->loops += __atomic_load_n(&w->wts.loops, __ATOMIC_RELAXED);
		worker->sleeps += __atomic_load_n(&w->wts.sleeps, __ATOMIC_RELAXED);
		worker->sleep_ns += __atomic_load_n(&w->wts.sleep_ns, __ATOMIC_RELAXED);
	}
	arbiter->loops = __atomic_load_n(&pl->ats.loops, __ATOMIC_RELAXED);
	arbiter->sleeps = __atomic_load_n(&pl->ats.sleeps, __ATOMIC_RELAXED);
	arbiter->sleep_ns = __atomic_load_n(&pl->ats.sleep_ns, __ATOMIC_RELAXED);
}

void sn_pipeline_worker_thread_stats(const struct sn_pipeline *pl, unsigned k,
				     struct sn_pipeline_thread_stats *out)
{
	const struct sn_pipeline *w = sn_pipeline_worker(pl, k);

	memset(out, 0, sizeof(*out));
	if (!w)
		return;
	out->loops = __atomic_load_n(&w->wts.loops, __ATOMIC_RELAXED);
	out->sleeps = __atomic_load_n(&w->wts.sleeps, __ATOMIC_RELAXED);
	out->sleep_ns = __atomic_load_n(&w->wts.sleep_ns, __ATOMIC_RELAXED);
}

void sn_pipeline_uplink_tx(const struct sn_pipeline *pl, struct sn_pipeline_uplink_tx *out)
{
	out->tx_packets = __atomic_load_n(&pl->up.tx_packets, __ATOMIC_RELAXED);
	out->tx_bytes = __atomic_load_n(&pl->up.tx_bytes, __ATOMIC_RELAXED);
	out->ring_full = __atomic_load_n(&pl->up.ring_full, __ATOMIC_RELAXED);
}

uint64_t sn_pipeline_clock_ns(const struct sn_pipeline *pl)
{
	return __atomic_load_n(&pl->clock_ns, __ATOMIC_RELAXED);
}

uint64_t sn_pipeline_arbiter_clock_ns(const struct sn_pipeline *pl)
{
	return __atomic_load_n(&pl->arb_clock_ns, __ATOMIC_RELAXED);
}

const struct sn_classify *sn_pipeline_classify(const struct sn_pipeline *pl)
{
	return pl->cls;
}

const struct sn_classify *sn_pipeline_classify_of(const struct sn_pipeline *pl, unsigned k)
{
	return k < pl->arbp->n_wk ? pl->arbp->wk[k]->cls : NULL;
}

void sn_pipeline_class_uplink(const struct sn_pipeline *pl, uint16_t slot, unsigned cls,
			      uint64_t *packets, uint64_t *bytes)
{
	*packets = *bytes = 0;
	if (slot >= SN_PORT_MAX || cls >= SN_POLICY_CLASSES_MAX)
		return;
	*packets = __atomic_load_n(&pl->ps[slot].a_clup[cls][0], __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&pl->ps[slot].a_clup[cls][1], __ATOMIC_RELAXED);
}

void sn_pipeline_fair_stats(const struct sn_pipeline *pl, struct sn_pipeline_fair_stats *out)
{
	memset(out, 0, sizeof(*out));
	/* One fair dropper per worker: counters summed, on/theta the same. */
	for (unsigned k = 0; k < pl->arbp->n_wk; k++) {
		const struct sn_pipeline_fair_stats *f = &pl->arbp->wk[k]->fair_st;

		out->on = __atomic_load_n(&f->on, __ATOMIC_RELAXED);
		out->theta = __atomic_load_n(&f->theta, __ATOMIC_RELAXED);
		out->kept += __atomic_load_n(&f->kept, __ATOMIC_RELAXED);
		out->dropped += __atomic_load_n(&f->dropped, __ATOMIC_RELAXED);
		out->table_full += __atomic_load_n(&f->table_full, __ATOMIC_RELAXED);
		out->active += __atomic_load_n(&f->active, __ATOMIC_RELAXED);
	}
}

uint64_t sn_pipeline_run_seq(const struct sn_pipeline *pl)
{
	return __atomic_load_n(&pl->run_seq, __ATOMIC_ACQUIRE);
}
