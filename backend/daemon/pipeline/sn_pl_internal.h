/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_internal.h — private to pipeline/: the pipeline's structures, who
 * owns each of them, and the hot static inline helpers its parts share
 * (design: sn_pipeline.c).
 *
 * Ownership. Each lcore is handed the structure it owns:
 *  - struct sn_pipeline: one WORKER lcore's half (wheel, port tstamps,
 *    flow classes, staging, its counters). sn_pipeline_worker(k) returns
 *    worker k's; the handle sn_pipeline_create() returns is worker 0's.
 *  - struct sn_pl_arb: the ARBITER half (arbiter sets, link emulation,
 *    scheduler classes, parked returns, the counters it keeps of every
 *    worker's frames). It runs on the arbiter lcore (layouts 2core and
 *    ncore: remote) or on worker 0 (layout 1core, and at shutdown).
 *  - struct sn_pl_shared: what create allocates once and owns: the
 *    workers, the arbiter half, the shutdown meeting.
 * The halves share only what the table below lists.
 *
 * Threading contract of the structures shared between threads (W = a
 * worker lcore, A = the arbiter half, R = any reader thread, M = main):
 *
 *  object                  | writer   | reader | synchronisation
 *  ------------------------+----------+--------+-------------------------------
 *  client mailboxes of an  | W k      | A      | sn_mbox SPSC (worker k's list
 *   arbset (mbox[k][s])    |          |        |  and mailboxes: one producer)
 *  w->ret (return mailbox) | A        | W      | sn_mbox SPSC
 *  a->aset_pub             | A        | W      | A release store after the set's
 *                          |          |        |  mailboxes are initialised;
 *                          |          |        |  W acquire load in run()
 *  w->w_ack                | W        | A      | W release store once it pushes
 *                          |          |        |  into the new set; A acquire
 *                          |          |        |  (all_acked) before freeing the
 *                          |          |        |  old one
 *  a->slot[s].ready        | A        | W      | relaxed: the class exists before
 *                          |          |        |  ready is set; a frame pushed
 *                          |          |        |  after a removal is a counted
 *                          |          |        |  policy / no_class drop
 *  a->ctr[k][s].st         | A        | W k, R | relaxed; qfq_backlog: A release
 *   .qfq_backlog,          |          |        |  store after the frame left,
 *   .returning             |          |        |  W acquire load in src_held()
 *                          |          |        |  (then sees returning's
 *                          |          |        |  increment of a returned frame)
 *  a->clup_map/clup_moved  | W 0      | A      | SPSC hand-over: W 0 writes only
 *                          |          |        |  while clup_ack == clup_seq,
 *                          |          |        |  then release-stores clup_seq;
 *                          |          |        |  A acquires clup_seq, reads,
 *                          |          |        |  release-stores clup_ack
 *  w->purge_req /          | W k / A  | A / W k| W release-stores a new request
 *   a->purge_ack[k]        |          |        |  after the stop_req it saw; A
 *                          |          |        |  acquires it, drops (returns)
 *                          |          |        |  every frame of a stopping queue
 *                          |          |        |  in its classes, release-stores
 *                          |          |        |  the ack; W acquires the ack
 *                          |          |        |  (sn_pl_purge.c)
 *  a->stop                 | M        | A      | release / acquire
 *  sh->drain_arrived,      | W        | W      | release add / acquire wait
 *   sh->drain_done         |          |        |  (sn_pipeline_drain)
 *  counters: w->ps[].st,   | owner    | R      | one writer each, relaxed
 *   w->fair_st, w->wts,    |          |        |  atomic stores and loads
 *   a->arb_st, a->up, ...  |          |        |
 *  w->run_seq, w->clock_ns | W        | R      | seqcount: see seq_counting()
 *                          |          |        |  and sn_pipeline_run_seq()
 *
 * Everything else in a struct is touched by its owner only (in layout
 * 1core the arbiter half's owner is worker 0's lcore); create, destroy and
 * a drain that runs after the other lcores returned own everything.
 */
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
/* Scheduler class lmax: a class starts at the largest untagged-MTU frame
 * plus one 802.1Q tag and grows on the first longer item (arb_oversize:
 * guest GSO frames, big-MTU guests) to the next power of two, up to
 * SN_SCHED_MAX_LMAX. QFQ's slot size, its sharing error and its T-WFI
 * (6 L_k / (phi_k B), PSPAT eq. 2) scale with lmax, so it starts small. */
#define CLASS_LMAX_INIT (RTE_ETHER_MAX_VLAN_FRAME_LEN - RTE_ETHER_CRC_LEN)
#define STATS_EVERY_NS 1000000ull
/* Fair dropping threshold θ: 100 ms of the uplink rate (the lag the link
 * emulation also tolerates: a sender or worker descheduled that long on a
 * shared host catches up in one burst), at least 64 KiB. */
#define FAIR_THETA_MIN 65536u
#define FAIR_THETA_DIV 80u        /* rate_bps / 8 bits / 10 */
#define IN_FAIR_ROWS   64u        /* an inbound limit's flow table: 256 flows */
#define GSO_FLAGS      (RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_UDP_SEG)

#define RET_MBOX_SIZE 8192u       /* return mailbox (pow2) */
#define ARB_SPIN_NS      1000000ull  /* arbiter: idle spin before napping */
#define ARB_MIN_SLEEP_NS 100000ull   /* arbiter: shorter link waits are spun */

/* Per-frame metadata in an mbuf dynamic field, written at submit. */
struct meta {
	uint32_t src_gen, dst_gen;
	uint16_t src, dst;        /* port slots; dst DST_FLOOD = flood */
	uint8_t ret_kind, ret_cause; /* verdict of a returned frame (RET_*) */
	uint8_t cls;              /* flow class (sn_classify), or SN_CLASSIFY_NONE */
	uint8_t wk;               /* worker that submitted it */
	uint64_t ts;              /* release time in the wheel (restamp_wheel) */
};

/* What the worker does with a frame from the return mailbox. */
enum { RET_SENT = 0, RET_DROP, RET_GSO, RET_COPIED };
/* In ret_cause of a RET_DROP: the frame was purged from a scheduler class
 * at a device stop (sn_pl_purge.c; the cause is SN_PL_DROP_SRC_STOP). */
#define RET_PURGED 0x80u
/* Arbiter lcore: the longest nap while frames wait for the link, so that
 * a purge request (sn_pl_purge.c) is answered within it on a slow link. */
#define ARB_MAX_LINK_SLEEP_NS 1000000ull

/* The release time of a frame in the wheel is ts = max(O, A), A the stamp
 * of its aggregate share, O the max over its other policies (port limit,
 * class or flow pacing) and its arrival time. A new NBA grant rescales A
 * alone, so the frame keeps O - A (ns, saturated at +-INT32_MAX) in an
 * mbuf dynamic field of its own (agg_lag(), set at submit): 4 bytes,
 * 4-aligned, apart from struct meta so that meta stays 24 bytes and fits
 * beside a PMD's Rx timestamp field in the mbuf's dynamic area. */
#define AGG_NONE INT32_MIN        /* agg_lag(): the frame has no aggregate */

/* ---- Worker half -------------------------------------------------------- */

/* Shaping state of the port in one slot, for one worker. */
struct wslot {
	/* Worker only. */
	struct sn_tstamp ts;
	struct sn_tstamp peak;    /* peak_bps, no burst (has_peak) */
	/* The inbound limit of the port: frames to it from any source
	 * switched by this worker cross in_ts (and in_peak). */
	struct sn_tstamp in_ts, in_peak;
	bool has_in, has_in_peak;
	/* Fair dropping per flow of the frames the uplink sends it (no one
	 * to push back on): virtual queues served max-min at in_ts's rate. */
	struct sn_fdrop *in_fd;
	uint32_t gen;             /* port generation this state belongs to (R: relaxed) */
	bool shaped;              /* policy entry applied (R: relaxed) */
	bool has_rate, has_class; /* has_class: policy wants a scheduler class */
	bool has_peak;            /* has_rate and a peak_bps: a second policy */
	bool has_cls;             /* the port has flow classes (sn_classify) */
	uint32_t room_lmax;       /* longest frame submitted (0: none yet) */
	bool room_gated;          /* the frames the port submits next were let
	                           * through by a room function (room_clamp()) */
	uint64_t returned;        /* frames taken back from the return mailbox */
	uint64_t purge_ns;        /* last wheel purge of a stop (0: none pending) */
	/* Worker writes (relaxed), any thread reads. */
	struct sn_pipeline_port_stats st __rte_cache_aligned;
} __rte_cache_aligned;

/* VM frames staged for one destination port until flush_vm(). */
struct stage {
	struct sn_port *port;
	uint16_t n;
	struct rte_mbuf *pkts[BATCH];
};

struct sn_pl_arb;
struct sn_pl_shared;
struct actr;

/* One worker lcore's half (one Carousel silo). */
struct sn_pipeline {
	/* Read-mostly: set at create. */
	unsigned wk_id;           /* worker index, stamped in every frame's meta */
	unsigned n_wk;            /* workers */
	uint16_t txq;             /* uplink TX queue of this worker (= wk_id) */
	bool split;               /* the arbiter half runs on its own lcore */
	int meta_off;             /* meta_of() dynamic field */
	int lag_off;              /* agg_lag() dynamic field */
	uint32_t pool_nodes;      /* wheel node pool (cfg) */
	/* Wheel node reserves: each slot's first wheel_rsv nodes are its
	 * own, min(2 bursts, pool / slots); the others, wheel_shared =
	 * pool_nodes - slots * wheel_rsv, go to slots above their reserve
	 * (wheel_excess, worker only). */
	uint32_t wheel_rsv;
	uint64_t wheel_shared;
	struct sn_policy_store *store;
	struct sn_pl_shared *sh;
	/* The arbiter half: this worker reads only its aset_pub and slot
	 * readiness (contract table); in layout 1core worker 0 runs it. */
	struct sn_pl_arb *arb;
	const struct actr *actr;  /* arb's counters of this worker's frames, by slot */
	sn_pipeline_gso_fn gso;   /* set before the worker starts */
	void *gso_arg;

	/* Worker only. */
	struct sn_twheel *wheel;
	struct sn_classify *cls;  /* flow classes + aggregates */
	struct sn_fdrop *fd;      /* uplink.overload "fair", else NULL */
	uint64_t fd_rate;         /* its capacity: uplink rate_bps */
	uint32_t overhead;        /* uplink overhead_bytes per frame */
	void **restamp_buf;       /* restamp_wheel(): room for pool_nodes frames */
	struct arbset *w_aset;    /* the set this worker pushes into */
	uint64_t pol_gen;         /* generation applied, 0 = none yet */
	unsigned n_in;            /* slots with an inbound limit (has_in) */
	bool dirty;               /* port table changed under a shaped slot */
	bool seq_staged;          /* run_seq odd for a submit's VM frames
	                           * staged until sn_pipeline_flush() */
	bool drained;             /* sn_pipeline_drain() done */
	const struct sn_port_table *t_seen;
	uint64_t t_seq;           /* t_seen's publication number (sn_port_table.seq):
	                           * a new table may reuse a freed one's address */
	struct sn_port_table *t;  /* current iteration's snapshot */
	struct sn_port *uplink;
	uint64_t now;
	uint64_t next_stats;
	uint64_t held;            /* frames in wheel + arbiter */
	uint64_t wheel_n;         /* of which in the wheel (sn_twheel_count is O(slots)) */
	/* Sum over the slots of max(0, wheel_depth - wheel_rsv), <=
	 * wheel_shared: nodes taken from the shared part. Only this worker
	 * takes (submit) and gives (release, drop_taken): a plain count. */
	uint64_t wheel_excess;
	unsigned n_touched;
	/* Per port slot, sn_config_port_slots entries each (worker_create). */
	uint16_t *touched;
	struct stage *stage;
	struct wslot *ps;
	/* Worker 0 only: class index maps composed by apply(), not yet
	 * handed to the arbiter half (clup_publish()). */
	bool clup_pending;
	bool *clup_pend_moved;
	uint8_t (*clup_pend)[SN_POLICY_CLASSES_MAX];

	/* Worker writes (relaxed), any thread reads. */
	uint64_t clock_ns __rte_cache_aligned;   /* now of the latest run() */
	/* Odd while run() or a submit changes counters or lags, even between
	 * runs that released everything due at clock_ns: seq_counting(). */
	uint64_t run_seq;
	struct sn_pipeline_fair_stats fair_st;
	struct sn_pipeline_thread_stats wts;

	/* Worker -> arbiter: the set this worker uses (release/acquire). */
	struct arbset *w_ack __rte_cache_aligned;
	/* Arbiter -> this worker: return mailbox (SPSC; split only, else NULL). */
	struct sn_mbox *ret;
	/* Worker -> arbiter: purge requests of stopping sources (release /
	 * acquire, answered in a->purge_ack[wk_id]; sn_pl_purge.c). */
	uint32_t purge_req;
};

/* ---- Arbiter half ------------------------------------------------------- */

/* One arbiter with its clients and client lists: per worker k one client
 * per port slot (PSPAT "each client": worker k's frames of port s; class
 * = s for all k) and one client list. Replaced as a whole when the policy
 * changes the algorithm. */
struct arbset {
	struct sn_pl_arb *a;
	struct sn_arbiter *arb;
	enum sn_sched_algo algo;
	unsigned n_wk;
	unsigned n_slots;         /* sn_config_port_slots at create */
	struct sn_mbox *clist[SN_PIPELINE_WORKERS_MAX];
	/* [k][slot], the rows in the set's own allocation. */
	struct sn_arbiter_client **cl[SN_PIPELINE_WORKERS_MAX];
	struct sn_mbox **mbox[SN_PIPELINE_WORKERS_MAX];
	/* Arbiter half: weight and lmax of this set's scheduler classes
	 * (weight 0 = no class), for arb_oversize; [slot]. */
	uint32_t *weight;
	uint32_t *lmax;
};

/* The arbiter half's state of one port slot. */
struct aslot {
	/* Arbiter half only. */
	uint32_t gen;             /* port generation its counters belong to */
	bool has_class;
	uint32_t weight;          /* weight of the scheduler class */
	/* Arbiter writes (relaxed), workers read: class exists, push allowed. */
	bool ready;
	/* Arbiter writes (relaxed), any thread reads: uplink counters per
	 * flow class of a remote arbiter (in layout 1core the worker's
	 * sn_classify counts them). */
	uint64_t clup[SN_POLICY_CLASSES_MAX][2];
};

/* What the arbiter half counts of worker k's frames of one slot (the
 * worker's own copy is its wslot.st; readers sum both). */
struct actr {
	/* Arbiter writes, any thread reads (relaxed; qfq_backlog: release). */
	struct sn_pipeline_port_stats st;
	uint64_t returning;       /* frames put on worker k's return mailbox */
} __rte_cache_aligned;

struct sn_pl_arb {
	/* Read-mostly: set at create. */
	unsigned n_wk;
	uint16_t txq;             /* uplink TX queue: W when remote, else 0 */
	bool split;
	int meta_off;
	unsigned idle_sleep_us;   /* arbiter lcore: spin-then-sleep nap */
	struct sn_pipeline_config cfg;
	struct sn_policy_store *store;
	struct sn_ports *reg;     /* port registry (the arbiter lcore's snapshots) */
	struct sn_pl_shared *sh;
	/* Not remote: the worker the arbiter half runs on (worker 0), whose
	 * held count, classify and GSO hook it uses. */
	struct sn_pipeline *local;
	struct sn_mbox *ret[SN_PIPELINE_WORKERS_MAX];   /* producer side of w->ret */
	struct actr **ctr;        /* [n_wk][slot], rows in one allocation (ctr_mem) */
	struct actr *ctr_mem;

	/* Arbiter half only. */
	struct arbset *aset;      /* current */
	struct arbset *aset_old;  /* replaced, until every worker acknowledges */
	bool remote;              /* runs off the workers (split, not draining) */
	bool algo_retry;          /* algorithm change waits for aset_old to go */
	uint64_t pol_gen;
	const struct sn_port_table *t_seen;
	uint64_t t_seq;           /* t_seen's publication number (sn_port_table.seq) */
	struct sn_port *uplink;
	uint64_t now, next_stats;
	uint32_t n_pend;          /* parked returns (return mailbox full) */
	uint32_t pend_cap;
	struct rte_mbuf **pend;   /* capacity: every frame the arbiter can hold */
	struct aslot *slot;       /* [sn_config_port_slots] */

	/* Arbiter writes (relaxed), any thread reads. */
	struct sn_arbiter_stats arb_st __rte_cache_aligned;
	uint64_t arb_backlog;
	uint64_t clock_ns;        /* now at its latest round */
	struct sn_pipeline_uplink_tx up;   /* remote: the uplink's TX counters */
	struct sn_pipeline_thread_stats ats;

	/* Arbiter -> workers: the set to push into (release/acquire). */
	struct arbset *aset_pub __rte_cache_aligned;
	/* Main -> arbiter lcore: return (release/acquire). */
	uint8_t stop;

	/* Worker 0 -> arbiter half: the old -> new class index map of each
	 * slot whose classes moved (sn_classify_renumber), so that clup
	 * follows its class as the worker's counters do. */
	uint32_t clup_seq __rte_cache_aligned;  /* worker 0: maps published */
	uint32_t clup_ack;        /* arbiter half: maps taken */
	bool *clup_moved;         /* [sn_config_port_slots] */
	uint8_t (*clup_map)[SN_POLICY_CLASSES_MAX];

	/* Arbiter half -> worker k: the purge request it answered (release
	 * after its drops and returns; sn_pl_purge.c). */
	uint32_t purge_ack[SN_PIPELINE_WORKERS_MAX] __rte_cache_aligned;
};

/* ---- The whole pipeline -------------------------------------------------- */

struct sn_pl_shared {
	unsigned n_wk;
	struct sn_pipeline *wk[SN_PIPELINE_WORKERS_MAX];
	struct sn_pl_arb arb;
	/* Shutdown with several workers (sn_pipeline_drain). */
	uint32_t drain_arrived __rte_cache_aligned;   /* workers done with their half */
	uint32_t drain_done;      /* worker 0 drained the arbiter sets */
};

/* ---- Helpers -------------------------------------------------------------- */

static inline void ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, *c + v, __ATOMIC_RELAXED);
}

static inline void ctr_set(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, v, __ATOMIC_RELAXED);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline struct meta *meta_at(int off, struct rte_mbuf *m)
{
	return RTE_MBUF_DYNFIELD(m, off, struct meta *);
}

static inline struct meta *meta_of(const struct sn_pipeline *pl, struct rte_mbuf *m)
{
	return meta_at(pl->meta_off, m);
}

/* O - A of a wheel frame's ts, or AGG_NONE (see agg_lag_of). */
static inline int32_t *agg_lag(const struct sn_pipeline *pl, struct rte_mbuf *m)
{
	return RTE_MBUF_DYNFIELD(m, pl->lag_off, int32_t *);
}

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

/* The arbiter half's counters of m (the worker that submitted it). */
static inline struct actr *actr_of(const struct sn_pl_arb *a, struct rte_mbuf *m)
{
	const struct meta *md = meta_at(a->meta_off, m);

	return &a->ctr[md->wk][md->src];
}

/* Worker half: count and free. */
static inline void drop(struct sn_pipeline *pl, struct rte_mbuf *m, enum sn_pipeline_drop cause)
{
	struct meta *md = meta_of(pl, m);

	ctr_add(&pl->ps[md->src].st.drop[cause], 1);
	rte_pktmbuf_free(m);
}

/* Worker: one frame of slot ps left the wheel; a node above the slot's
 * reserve goes back to the shared part. */
static inline void wheel_left(struct sn_pipeline *pl, struct wslot *ps)
{
	if (ps->st.wheel_depth > pl->wheel_rsv)
		pl->wheel_excess--;
	ctr_add(&ps->st.wheel_depth, -1ull);
}

/* Drops a frame taken out of the wheel (restamps, device-stop drain): it
 * leaves the port's wheel depth and the worker's held / wheel_n counts. */
static inline void drop_taken(struct sn_pipeline *pl, struct rte_mbuf *m,
			      enum sn_pipeline_drop cause)
{
	wheel_left(pl, &pl->ps[meta_of(pl, m)->src]);
	pl->held--;
	pl->wheel_n--;
	drop(pl, m, cause);
}

/* A frame of a deferred-completion port (sn_vqtx) that must not go on:
 * its device is stopping, or it was held past max_hold_us. Drops it
 * (freeing completes it) and returns true; false for any other frame.
 * A frame of a guest that did not opt in found past its deadline is
 * copied out instead (sn_vqtx_copy_out; a remote arbiter copies and
 * returns the original, RET_COPIED): *mp becomes the copy and the result
 * is false; without an mbuf for the copy it is dropped (no_mbuf).
 * Called by worker pl (a NULL) or by the arbiter half a (pl: the worker
 * it runs on, NULL when remote); a remote arbiter only reads the queue's
 * stop flag (acquire) and its immutable hold limit, and returns the frame:
 * the vqtx counters are the worker's. The per-frame check is inline (one
 * sn_vqtx_verdict call with the worker's iteration clock), the rare drop
 * out of line. */
bool sn_pl_deferred_drop_slow(struct sn_pipeline *pl, struct sn_pl_arb *a, struct rte_mbuf **mp,
			      struct sn_vqtx *q, enum sn_vqtx_verdict v);

static inline bool deferred_drop(struct sn_pipeline *pl, struct sn_pl_arb *a,
				 struct rte_mbuf **mp)
{
	struct sn_vqtx *q;
	enum sn_vqtx_verdict v = sn_vqtx_verdict(*mp, &q);

	if (likely(v == SN_VQTX_KEEP))
		return false;
	return sn_pl_deferred_drop_slow(pl, a, mp, q, v);
}

/* The counters of m of its sender: worker pl's own (a NULL), or the
 * arbiter half's copy for m's worker. */
static inline struct sn_pipeline_port_stats *side_st(struct sn_pipeline *pl,
						     const struct sn_pl_arb *a,
						     struct rte_mbuf *m)
{
	if (a)
		return &actr_of(a, m)->st;
	return &pl->ps[meta_of(pl, m)->src].st;
}

static inline void count_sent(struct sn_pipeline *pl, const struct sn_pl_arb *a,
			      struct rte_mbuf *m)
{
	struct sn_pipeline_port_stats *st = side_st(pl, a, m);

	ctr_add(&st->sent_packets, 1);
	ctr_add(&st->sent_bytes, m->pkt_len);
}

/* What arb_release() found in its pass over a release batch, for
 * tx_direct()'s counters: the runs of frames of one (worker, port), run r
 * = frames [start[r], start[r + 1]) counted in ctr[r], with byte totals
 * bytes[r + 1] - bytes[r]; cls: some frame has a class. Valid for the
 * batch as arb_release() passed it to sn_pl_uplink_tx() (used only when
 * sn_pl_uplink_tx() sends it unchanged). */
struct rel_runs {
	uint16_t nr;
	bool cls;
	uint64_t flags;           /* OR of the batch's ol_flags */
	const uint16_t *start;
	struct actr *const *ctr;
	const uint64_t *bytes;
};

/* Worker half: about to change counters the stats reader pairs with
 * clock_ns: make run_seq odd, unless it already is (this run counted
 * before, or an earlier run lagged). Only the worker writes run_seq. The
 * release fence orders the odd store before every counter store and the
 * clock_ns store that follow: pairs with the reader's acquire fence
 * before its second load of run_seq (sn_pipeline_run_seq()). The even
 * value is release-stored when the run (or submit) ends caught up. */
static inline void seq_counting(struct sn_pipeline *pl)
{
	uint64_t seq = __atomic_load_n(&pl->run_seq, __ATOMIC_RELAXED);

	if (seq & 1)
		return;
	__atomic_store_n(&pl->run_seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

/* ---- Cross-file entry points ---------------------------------------------- */

/* sn_pl_ret.c: the return mailbox (arbiter -> worker) and the arbiter
 * half's drops. */
void sn_pl_ret_push(struct sn_pl_arb *a, struct rte_mbuf *m, uint8_t kind, uint8_t cause);
int sn_pl_ret_flush(struct sn_pl_arb *a);
void sn_pl_a_drop(struct sn_pl_arb *a, struct rte_mbuf *m, enum sn_pipeline_drop cause);
void sn_pl_ret_handle(struct sn_pipeline *pl, struct rte_mbuf *m);
void sn_pl_ret_service(struct sn_pipeline *pl);

/* sn_pl_uplink.c: transmit on the uplink. The sender is worker pl (a
 * NULL) or the arbiter half a (pl: the worker it runs on, NULL when
 * remote). rr: arb_release()'s runs of pkts (arbiter only) or NULL. */
void sn_pl_uplink_tx(struct sn_pipeline *pl, struct sn_pl_arb *a, struct rte_mbuf **pkts,
		     uint16_t n, const struct rel_runs *rr);

/* sn_pl_arbiter.c: arbiter sets and rounds. */
void sn_pl_class_drop(void *item, uint32_t len, void *arg);
struct arbset *sn_pl_aset_create(struct sn_pl_arb *a, enum sn_sched_algo algo);
void sn_pl_aset_destroy(struct sn_pl_arb *a, struct arbset *as);
bool sn_pl_arb_table_stale(const struct sn_pl_arb *a, const struct sn_port_table *t);
uint32_t sn_pl_arb_round(struct sn_pl_arb *a, const struct sn_policy *pol,
			 const struct sn_port_table *t, uint64_t now);

/* sn_pl_submit.c: delivery of due frames. */
void sn_pl_flush_vm(struct sn_pipeline *pl);
void sn_pl_dispatch(struct sn_pipeline *pl, struct rte_mbuf *m);

/* sn_pl_apply.c: live policy apply. */
void sn_pl_apply(struct sn_pipeline *pl, const struct sn_policy *pol, struct sn_port_table *t);
void sn_pl_apply_arb(struct sn_pl_arb *a, const struct sn_policy *pol,
		     const struct sn_port_table *t);
void sn_pl_restamp_aggs(struct sn_pipeline *pl, uint32_t changed);
void sn_pl_clup_publish(struct sn_pipeline *pl);
void sn_pl_clup_take(struct sn_pl_arb *a);

/* sn_pl_purge.c: the arbiter half answers purge requests (each round). */
void sn_pl_purge_take(struct sn_pl_arb *a);

/* sn_pl_stats.c: counters published for readers. */
void sn_pl_publish_arb_stats(struct sn_pl_arb *a);
void sn_pl_publish_fair_stats(struct sn_pipeline *pl);

#endif /* SN_PL_INTERNAL_H */
