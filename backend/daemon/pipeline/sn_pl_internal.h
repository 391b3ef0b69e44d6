/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_internal.h — private to pipeline/: the structures of the pipeline and the
 * hot static inline helpers every part shares (see sn_pipeline.c). */
#ifndef SN_PL_INTERNAL_H
#define SN_PL_INTERNAL_H

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

#include "sn_pipeline.h"
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

/* Per-frame metadata in an mbuf dynamic field, written at submit. */
struct meta {
	uint32_t src_gen, dst_gen;
	uint16_t src, dst;        /* port slots; dst DST_FLOOD = flood */
	uint8_t ret_kind, ret_cause; /* verdict of a returned frame (RET_*) */
	uint8_t cls;              /* flow class (sn_classify), or SN_CLASSIFY_NONE */
	uint8_t wk;               /* worker (instance) that submitted it */
	uint64_t ts;              /* release time in the wheel (restamp_wheel) */
};

/* s12-I2 (issue 6, sn_pl_restamp_aggs): the release time of a frame in the wheel
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
	 * counters do (sn_pl_clup_publish / sn_pl_clup_take). SPSC hand-over: worker 0
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

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Worker half: count and free. */
static inline void drop(struct sn_pipeline *pl, struct rte_mbuf *m, enum sn_pipeline_drop cause)
{
	struct meta *md = meta_of(pl, m);

	ctr_add(&pl->ps[md->src].st.drop[cause], 1);
	rte_pktmbuf_free(m);
}

/* Drops a frame taken out of the wheel (restamps, device-stop drain): it
 * leaves the port's wheel depth and the worker's held / wheel_n counts. */
static inline void drop_taken(struct sn_pipeline *pl, struct rte_mbuf *m, enum sn_pipeline_drop cause)
{
	ctr_add(&pl->ps[meta_of(pl, m)->src].st.wheel_depth, -1ull);
	pl->held--;
	pl->wheel_n--;
	drop(pl, m, cause);
}

/* A frame of a deferred-completion port (sn_vqtx) that must not go on:
 * its device is stopping, or it was held past max_hold_us. Drops it
 * (freeing completes it) and returns true; false for any other frame.
 * `arb`: called by the arbiter half (a remote arbiter only reads the
 * queue's stop flag (acquire) and its immutable hold limit, and returns
 * the frame: the vqtx counters are the worker's). */
void sn_pl_deferred_drop_slow(struct sn_pipeline *pl, struct rte_mbuf *m,
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
	sn_pl_deferred_drop_slow(pl, m, arb, q, v);
	return true;
}

static inline struct sn_pipeline_port_stats *side_st(struct sn_pipeline *pl,
						     struct rte_mbuf *m, bool arb)
{
	if (arb)
		return &owner_of(pl, m)->ps[meta_of(pl, m)->src].ast;
	return &pl->ps[meta_of(pl, m)->src].st;
}

static inline void count_sent(struct sn_pipeline *pl, struct rte_mbuf *m, bool arb)
{
	struct sn_pipeline_port_stats *st = side_st(pl, m, arb);

	ctr_add(&st->sent_packets, 1);
	ctr_add(&st->sent_bytes, m->pkt_len);
}

/* s20 (issue 6 throughput): what arb_release() found in its pass over a
 * release batch, for tx_direct()'s counters: the runs of frames of one
 * (worker, port), run r = frames [start[r], start[r + 1]) of port slot
 * src[r] owned by own[r], with byte totals bytes[r + 1] - bytes[r]; cls:
 * some frame has a class. Valid for the batch as arb_release() passed it
 * to sn_pl_uplink_tx() (used only when sn_pl_uplink_tx() sends it unchanged). */
struct rel_runs {
	uint16_t nr;
	bool cls;
	uint64_t flags;           /* s21: OR of the batch's ol_flags */
	const uint16_t *start;
	const uint16_t *src;
	struct sn_pipeline *const *own;
	const uint64_t *bytes;
};

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

/* ---- Cross-file entry points of the pipeline's parts --------------------- */

/* sn_pl_ret.c: the return mailbox (arbiter -> worker) and drops. */
void sn_pl_ret_push(struct sn_pipeline *pl, struct rte_mbuf *m, uint8_t kind, uint8_t cause);
int sn_pl_ret_flush(struct sn_pipeline *pl);
void sn_pl_a_drop(struct sn_pipeline *pl, struct rte_mbuf *m, enum sn_pipeline_drop cause);
void sn_pl_ret_handle(struct sn_pipeline *pl, struct rte_mbuf *m);
void sn_pl_ret_service(struct sn_pipeline *pl);

/* sn_pl_uplink.c: transmit on the uplink. */
void sn_pl_uplink_tx(struct sn_pipeline *pl, struct rte_mbuf **pkts, uint16_t n, bool arb,
		     const struct rel_runs *rr);

/* sn_pl_arbiter.c: arbiter sets and rounds. */
void sn_pl_class_drop(void *item, uint32_t len, void *arg);
struct arbset *sn_pl_aset_create(struct sn_pipeline *pl, enum sn_sched_algo algo);
void sn_pl_aset_destroy(struct sn_pipeline *pl, struct arbset *as);
bool sn_pl_arb_table_stale(const struct sn_pipeline *pl, const struct sn_port_table *t);
uint32_t sn_pl_arb_round(struct sn_pipeline *pl, const struct sn_policy *pol,
			 const struct sn_port_table *t, uint64_t now);

/* sn_pl_submit.c: delivery of due frames. */
void sn_pl_flush_vm(struct sn_pipeline *pl);
void sn_pl_dispatch(struct sn_pipeline *pl, struct rte_mbuf *m);

/* sn_pl_apply.c: live policy apply. */
void sn_pl_apply(struct sn_pipeline *pl, const struct sn_policy *pol, struct sn_port_table *t);
void sn_pl_apply_arb(struct sn_pipeline *pl, const struct sn_policy *pol,
		     const struct sn_port_table *t);
void sn_pl_restamp_aggs(struct sn_pipeline *pl, uint32_t changed);
void sn_pl_clup_publish(struct sn_pipeline *pl);
void sn_pl_clup_take(struct sn_pipeline *pl);

/* sn_pl_stats.c: counters published for readers. */
void sn_pl_publish_arb_stats(struct sn_pipeline *pl);
void sn_pl_publish_fair_stats(struct sn_pipeline *pl);

#endif /* SN_PL_INTERNAL_H */
