/* sn_pipeline.h — the scheduled datapath stage of one worker (1-core
 * layout): Carousel timestamping + timing wheel per port, PSPAT client
 * mailboxes, arbiter (QFQ/DRR/FIFO) with link emulation, dispatch.
 *
 * Frames from a port that has a policy entry leave the L2 switch here:
 *   sn_pipeline_submit: stamp with the port's rate (sn_tstamp) and insert
 *     into the wheel (hard limit: beyond the horizon is a drop);
 *   sn_pipeline_run (once per poll-loop iteration): apply a newly published
 *     policy, extract due frames; VM destinations get them at once (VM->VM
 *     keeps its rate limit but never waits behind the uplink), the uplink
 *     copy goes through the port's client mailbox to the arbiter, whose
 *     released frames go to rte_eth_tx_burst on the uplink.
 * Ports without a policy entry never reach this module (unshaped, as the
 * issue-2 switch). Design and paper references: sn_pipeline.c.
 *
 * Threads:
 *  - create / destroy: MAIN thread, before the worker starts / after it
 *    returned (destroy frees every frame still held).
 *  - run / shaped / submit / flush: the WORKER lcore only, between its own
 *    quiescent states (the port table and the policy are RCU snapshots).
 *    All scheduling state (wheel, tstamps, arbiter, scheduler) is owned by
 *    the worker: no locks, no barriers inside.
 *  - *_stats: any thread. Counters have the worker as sole writer (relaxed
 *    atomic stores); readers use relaxed loads and may see a set torn
 *    between fields, never a torn field.
 */
#ifndef SN_PIPELINE_H
#define SN_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "sn_arbiter.h"

struct rte_mbuf;
struct sn_policy_store;
struct sn_port;
struct sn_port_table;
struct sn_pipeline;

enum sn_pipeline_drop {
	SN_PL_DROP_HORIZON = 0,   /* timestamp beyond the wheel horizon (rate exceeded) */
	SN_PL_DROP_POOL,          /* wheel node pool exhausted */
	SN_PL_DROP_MBOX_FULL,     /* client mailbox to the arbiter full */
	SN_PL_DROP_QFQ_FULL,      /* scheduler class queue full */
	SN_PL_DROP_NO_CLASS,      /* scheduler class gone (policy changed) */
	SN_PL_DROP_BAD_LEN,       /* frame length refused by the scheduler */
	SN_PL_DROP_DST_GONE,      /* destination deleted or down while held */
	SN_PL_DROP_POLICY,        /* queued in a class the new policy removed */
	SN_PL_DROP_MAX
};

extern const char *const sn_pipeline_drop_names[SN_PL_DROP_MAX];

struct sn_pipeline_port_stats {
	uint64_t offered_packets, offered_bytes;   /* entered the shaper */
	uint64_t released_packets, released_bytes; /* left the rate limit (wheel) */
	uint64_t underruns;    /* a frame found the limit idle (LTS < now): the
	                        * shaper was starved, by its input or by a stall
	                        * of the worker longer than the wheel horizon */
	uint64_t sent_packets, sent_bytes;         /* handed to a destination */
	uint64_t uplink_packets, uplink_bytes;     /* of which: sent on the uplink */
	uint64_t qfq_idle;     /* its scheduler class ran empty on a release: the
	                        * port was not backlogged at the arbiter */
	uint64_t wheel_depth;                      /* frames in the timing wheel */
	uint64_t qfq_backlog;                      /* frames in mailbox + scheduler */
	uint64_t rate_bps;                         /* current limit, 0 = none */
	uint64_t weight;
	uint64_t drop[SN_PL_DROP_MAX];
};

struct sn_pipeline_config {
	uint64_t granularity_ns;   /* wheel slot width */
	uint32_t slots;            /* wheel slots (pow2); horizon = slots * granularity */
	uint32_t pool_nodes;       /* wheel node pool */
	uint32_t mbox_size;        /* per-port client mailbox (pow2) */
	uint32_t queue_len;        /* per-class scheduler queue */
	uint64_t slack_ns;         /* link emulation: lag allowed before a reset */
};

/* Main thread, after EAL init. NULL + errno. */
struct sn_pipeline *sn_pipeline_create(const struct sn_pipeline_config *cfg,
				       struct sn_policy_store *pol);
/* Main thread, worker stopped: free every held frame, then everything. */
void sn_pipeline_destroy(struct sn_pipeline *pl);

/* Worker, once per loop iteration before polling ports: apply policy
 * changes, release due frames, run one arbiter scan, transmit. */
void sn_pipeline_run(struct sn_pipeline *pl, struct sn_port_table *t);
/* Worker: does frames from `in` go through the shaper? */
bool sn_pipeline_shaped(struct sn_pipeline *pl, const struct sn_port *in);
/* Worker: take ownership of m (from shaped port `in`) destined to `dst`
 * (NULL = flood to every other up port). Never fails: drops are counted. */
void sn_pipeline_submit(struct sn_pipeline *pl, struct sn_port *in, struct rte_mbuf *m,
			struct sn_port *dst);
/* Worker, after polling and before its quiescent state: deliver the VM
 * copies submit() staged (staging holds port pointers of this iteration's
 * snapshot, which must not outlive the quiescent state). */
void sn_pipeline_flush(struct sn_pipeline *pl);
/* Worker: frames held (wheel + arbiter); > 0 means run() has work later. */
uint64_t sn_pipeline_held(const struct sn_pipeline *pl);

/* Any thread: counters of port p; -ENOENT if p has no policy applied. */
int sn_pipeline_port_stats(const struct sn_pipeline *pl, const struct sn_port *p,
			   struct sn_pipeline_port_stats *out);
/* Any thread: the arbiter's counters (refreshed by the worker each ms). */
void sn_pipeline_arbiter_stats(const struct sn_pipeline *pl, struct sn_arbiter_stats *out,
			       uint64_t *backlog);
/* Any thread: the worker's clock (CLOCK_MONOTONIC ns) at its latest loop
 * iteration: the time base of the policy counters. A worker descheduled
 * freezes both, so rates computed against it are what the shaper did,
 * independent of when the control thread sampled them. */
uint64_t sn_pipeline_clock_ns(const struct sn_pipeline *pl);

#endif /* SN_PIPELINE_H */
