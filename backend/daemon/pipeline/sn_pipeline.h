/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pipeline.h — the scheduled datapath stage: Carousel timestamping +
 * timing wheel per port, PSPAT client mailboxes, arbiter (QFQ/DRR/FIFO)
 * with link emulation, dispatch; in the 1-core layout (the worker runs it
 * all), the 2-core layout (worker | arbiter lcore, cfg.split) or the
 * N-core layout (cfg.workers W > 1: one worker half per worker lcore,
 * see sn_pipeline_worker(), | one arbiter lcore; design in sn_pipeline.c).
 *
 * Frames from a port that has a policy entry leave the L2 switch here:
 *   sn_pipeline_submit: stamp with the port's rate (sn_tstamp) and insert
 *     into the wheel (hard limit: beyond the horizon is a drop);
 *   sn_pipeline_run (once per poll-loop iteration): apply a newly published
 *     policy, extract due frames; VM destinations get them at once (VM->VM
 *     keeps its rate limit but never waits behind the uplink), the uplink
 *     copy goes through the port's client mailbox to the arbiter, whose
 *     released frames go to rte_eth_tx_burst on the uplink.
 * Ports without a policy entry never reach this module (the switch
 * forwards them unshaped). Design and paper references: sn_pipeline.c.
 *
 * Deferred-completion sources (sn_vqtx.h): their frames are guest
 * buffers whose descriptor completes when the mbuf is freed, so a shaped
 * deferred port is backpressured by the shaper itself (Carousel §5.2). The
 * pipeline frees each exactly once like any frame; in addition it copies
 * one into a plain mbuf just before rte_eth_tx_burst (the original is
 * freed, completing it: a PMD may keep an mbuf past a device stop), drops
 * one that surfaces (from the wheel, or released by the arbiter) after its
 * port's max_hold_us (hold_timeout) or while its device is stopping
 * (src_stopped). At a device stop the switch purges the stopping queue's
 * frames from the wheel and the arbiter's classes at once
 * (sn_pipeline_src_purge, sn_pl_purge.c) and acknowledges the stop once
 * sn_pipeline_src_held() of that port is 0.
 *
 * 2-core layout: the arbiter lcore never frees a deferred-completion frame
 * (its free callback writes the worker-owned used ring, sn_vqtx.h): it
 * copies it for the uplink and hands the original back through the SPSC
 * return mailbox (arbiter -> worker), as it does with every such frame it
 * drops and with guest GSO frames (segmented on the worker); the worker
 * frees or transmits them in run(). A returned frame stays counted in
 * src_held() until the worker freed it (release/acquire on the arbiter's
 * backlog counter), so a device stop never completes under the arbiter.
 *
 * Threads:
 *  - create / destroy: MAIN thread, before the datapath lcores start /
 *    after they returned (destroy frees every frame still held).
 *  - run / shaped / submit / flush / drain: the WORKER lcore only (N-core:
 *    worker k on its own handle), between its own quiescent states (the
 *    port table and the policy are RCU snapshots). The worker half (wheel,
 *    tstamps) is worker-owned.
 *  - arbiter half (scheduler, link emulation, uplink TX queue of the
 *    arbiter): the worker in the 1-core layout; the ARBITER lcore
 *    (sn_pipeline_arbiter_main, a registered QSBR reader) in the 2-core
 *    layout. The halves share only SPSC mailboxes and the flags and
 *    pointers whose barriers the contract table of sn_pl_internal.h
 *    names.
 *  - *_stats: any thread. Each counter has one writer (the worker's copy
 *    and the arbiter's copy are summed by the reader; relaxed atomic
 *    stores and loads): a set may be torn between fields, never a field.
 */
#ifndef SN_PIPELINE_H
#define SN_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "sn_arbiter.h"

#define SN_PIPELINE_WORKERS_MAX 8   /* layout ncore: W <= this */

struct rte_mbuf;
struct sn_policy_store;
struct sn_port;
struct sn_port_table;
struct sn_ports;
struct sn_pipeline;
struct sn_classify;

enum sn_pipeline_drop {
	SN_PL_DROP_HORIZON = 0,   /* timestamp beyond the wheel horizon (rate exceeded) */
	SN_PL_DROP_POOL,          /* wheel node pool exhausted */
	SN_PL_DROP_MBOX_FULL,     /* client mailbox to the arbiter full */
	SN_PL_DROP_QFQ_FULL,      /* scheduler class queue full */
	SN_PL_DROP_NO_CLASS,      /* scheduler class gone (policy changed) */
	SN_PL_DROP_BAD_LEN,       /* frame length refused by the scheduler */
	SN_PL_DROP_DST_GONE,      /* destination deleted or down while held */
	SN_PL_DROP_POLICY,        /* queued in a class the new policy removed */
	SN_PL_DROP_HOLD,          /* deferred source: held past its max_hold_us */
	SN_PL_DROP_SRC_STOP,      /* deferred source: its device is stopping */
	SN_PL_DROP_NO_MBUF,       /* deferred source: no mbuf for the uplink copy */
	SN_PL_DROP_FAIR,          /* uplink.overload "fair": flow above its fair share */
	SN_PL_DROP_QUOTA_WHEEL,   /* the source port holds its quota of wheel nodes */
	SN_PL_DROP_MAX
};

extern const char *const sn_pipeline_drop_names[SN_PL_DROP_MAX];

struct sn_pipeline_port_stats {
	uint64_t offered_packets, offered_bytes;   /* entered the shaper */
	uint64_t released_packets, released_bytes; /* left the rate limit (wheel) */
	uint64_t underruns;    /* a frame found the limit idle (LTS < now): the
	                        * shaper was starved, by its input or by a stall
	                        * of the worker longer than the wheel horizon */
	uint64_t room_clamped; /* a frame a room function let through ended
	                        * beyond the wheel horizon and was put at the
	                        * horizon instead of dropped (sn_pipeline_src_room) */
	uint64_t sent_packets, sent_bytes;         /* handed to a destination */
	uint64_t uplink_packets, uplink_bytes;     /* of which: sent on the uplink */
	uint64_t qfq_idle;     /* its scheduler class ran empty on a release: the
	                        * port was not backlogged at the arbiter */
	uint64_t wheel_depth;                      /* frames in the timing wheel */
	uint64_t qfq_backlog;                      /* frames in mailbox + scheduler */
	uint64_t rate_bps;                         /* current limit, 0 = none */
	uint64_t weight;
	/* Flow-table entries the port holds and its new flows refused at its
	 * flow quota, over the workers (sn_classify_port_flows /
	 * sn_classify_quota_flows; the reader fills them, not the worker). */
	uint64_t flow_entries, quota_flows;
	uint64_t drop[SN_PL_DROP_MAX];
	/* The port's inbound limit (traffic to it): rate, frames that
	 * crossed it (offered) and those dropped at the wheel horizon. */
	uint64_t in_rate_bps, in_peak_bps;
	uint64_t in_offered_packets, in_offered_bytes, in_horizon;
	uint64_t in_fair;      /* frames from the uplink its fair dropping dropped */
};

struct sn_pipeline_config {
	uint64_t granularity_ns;   /* wheel slot width */
	uint32_t slots;            /* wheel slots (pow2); horizon = slots * granularity */
	uint32_t pool_nodes;       /* wheel node pool */
	uint32_t mbox_size;        /* per-port client mailbox (pow2) */
	uint32_t queue_len;        /* per-class scheduler queue */
	uint64_t slack_ns;         /* link emulation: lag allowed before a reset */
	uint64_t idle_credit_ns;   /* link emulation: credit after an idle link (sn_arbiter_params) */
	uint32_t max_flows;        /* flow states of the worker (sn_classify), 0 = default */
	/* Frames per burst (datapath.burst): each slot's reserve of wheel
	 * nodes and flow states is two bursts. 0 = SN_CONFIG_BURST_MAX. */
	unsigned burst;
	/* Lcore layout. false: 1-core (the worker runs the arbiter half in
	 * sn_pipeline_run). true: 2-core, sn_pipeline_arbiter_main() runs
	 * it on its own lcore and transmits on uplink TX queue 1 (the
	 * uplink must have 2 TX queues; the worker keeps queue 0). */
	bool split;
	/* Layout ncore (requires split): W worker lcores, each with its own
	 * worker half (sn_pipeline_worker(): wheel, classes, tstamps, client
	 * mailboxes, return mailbox), transmitting on uplink TX queue k; the
	 * arbiter lcore uses TX queue W. 0 = 1. */
	unsigned workers;
	struct sn_ports *reg;      /* split: the port registry (required) */
	unsigned idle_sleep_us;    /* split: arbiter spin-then-sleep nap, 0 = busy poll */
};

/* The uplink TX counters of a remote arbiter (split layout): the worker
 * writes the uplink port's own counters, so these are kept here and the
 * reader adds them (sn_pipeline_rpc.c). Zero in the 1-core layout. */
struct sn_pipeline_uplink_tx {
	uint64_t tx_packets, tx_bytes, ring_full;
};

/* Per-thread loop counters. */
struct sn_pipeline_thread_stats {
	uint64_t loops;    /* poll-loop iterations */
	uint64_t sleeps;   /* idle naps (spin-then-sleep) */
	uint64_t sleep_ns; /* time spent in them (CLOCK_MONOTONIC): the mean
	                    * nap is the wake-up delay idle mode adds */
};

/* Main thread, after EAL init. NULL + errno. */
struct sn_pipeline *sn_pipeline_create(const struct sn_pipeline_config *cfg,
				       struct sn_policy_store *pol);
/* Main thread, worker stopped: free every held frame, then everything. */
void sn_pipeline_destroy(struct sn_pipeline *pl);
/* Any thread: worker k's handle (k < workers; worker 0's is the one
 * create returned, and any worker's handle reaches the whole pipeline:
 * the *_stats calls sum over the workers), or NULL. Worker k passes it to
 * run / shaped / submit / flush / held / src_held / drain / count_sleep;
 * clock_ns, run_seq and classify are worker k's own. */
struct sn_pipeline *sn_pipeline_worker(const struct sn_pipeline *pl, unsigned k);
unsigned sn_pipeline_workers(const struct sn_pipeline *pl);

/* Software segmentation of a guest GSO (TSO) frame for the uplink, done by
 * the switch (sn_switch.c, "GSO frames"): returns 1 = every segment sent,
 * 0 = not all sent (ring full), -1 = cannot segment. Never takes m's
 * reference. Worker only. */
typedef int (*sn_pipeline_gso_fn)(void *arg, const struct sn_port *eth, struct rte_mbuf *m);
/* Main thread, before the worker starts. Without it a GSO frame for the
 * uplink is dropped (gso_failed). */
void sn_pipeline_set_gso(struct sn_pipeline *pl, sn_pipeline_gso_fn fn, void *arg);

/* Worker, once per loop iteration before polling ports: apply policy
 * changes, release due frames; 1-core: run one arbiter scan, transmit;
 * 2-core: take back the frames the arbiter returned. */
void sn_pipeline_run(struct sn_pipeline *pl, struct sn_port_table *t);
/* Worker: does frames from `in` go through the shaper? */
bool sn_pipeline_shaped(struct sn_pipeline *pl, const struct sn_port *in);
/* Worker: port dst has an inbound limit (policy ports.<name>.inbound):
 * frames to it from any port, shaped or not, and from the uplink go
 * through sn_pipeline_submit*. */
bool sn_pipeline_in_limited(const struct sn_pipeline *pl, const struct sn_port *dst);
/* Worker: take ownership of m (from shaped port `in`) destined to `dst`
 * (NULL = flood to every other up port). Never fails: drops are counted. */
void sn_pipeline_submit(struct sn_pipeline *pl, struct sn_port *in, struct rte_mbuf *m,
			struct sn_port *dst);
/* Worker: the same for a burst of n frames from `in`, frame i to dst[i]
 * (counted per burst; frames that need no wheel round-trip are
 * delivered, or pushed to the arbiter, before it returns, in order). */
void sn_pipeline_submit_burst(struct sn_pipeline *pl, struct sn_port *in, struct rte_mbuf **pkts,
			      struct sn_port *const *dst, uint16_t n);
/* Worker, after polling and before its quiescent state: deliver the VM
 * copies submit() staged (staging holds port pointers of this iteration's
 * snapshot, which must not outlive the quiescent state). */
void sn_pipeline_flush(struct sn_pipeline *pl);
/* Worker: how many frames (at most max, each as long
 * as the longest the port submitted so far, at least
 * SN_PIPELINE_ROOM_FRAME_MIN bytes) port `in` may hand to submit() now
 * without its port rate limit stamping one beyond the wheel horizon (0:
 * none; max when the port has no rate limit of its own). For a guest that
 * is backpressured by deferred completions the caller leaves the rest in
 * the guest's TX ring: it waits there instead of being dropped at the
 * horizon (a horizon drop only turns into a TCP retransmit), and the rate
 * stays a hard limit. When the port's limit is idle at least one frame is
 * allowed (progress even when one maximal frame spans the horizon).
 * The room is an estimate: a frame longer than any before it, or one that
 * alone spans the horizon, may end beyond it. A frame of the port's next
 * submit after a room call that allowed some, if its port limit starts it
 * within the horizon and that limit is what stamps it, is put at the
 * horizon instead of dropped (room_clamped): it leaves early by less than
 * its own length at the port's rate and its stamp is kept (the port's
 * next frames wait its full length, so at most one frame per submit is
 * clamped), and the rate holds over any window longer than the horizon.
 * Any other frame beyond the horizon is dropped. */
#define SN_PIPELINE_ROOM_FRAME_MIN 1518u
/* Both room functions also keep the port's frames in this worker's wheel
 * within its wheel quota (sn_port.quota.wheel, loaded relaxed): a port
 * at its quota waits in its ring instead of losing frames (quota_wheel). */
uint16_t sn_pipeline_src_room(struct sn_pipeline *pl, const struct sn_port *in, uint16_t max);
/* Worker: how many frames a deferred queue of a guest that did not opt in
 * may hand to submit() now (its frames are copied out rather than held
 * past its short hold limit, sn_vqtx_copy_out): as many as keep the frames
 * of port `in` in this worker's pipeline (descriptors held plus copies)
 * within budget (the caller passes the port's ring size: copies take no
 * more memory than a held ring) or its rate limit's stamps within
 * SN_PIPELINE_COPY_AHEAD_NS of now (a queue deep enough to ride out a
 * worker descheduled for a few ms on a shared host) as long as that keeps
 * them within 1/SN_PIPELINE_COPY_POOL_SHARE of the wheel's node pool (the
 * mbuf pool's size), and never beyond the wheel horizon
 * (sn_pipeline_src_room). The rest waits in the guest's ring. max when
 * the port is not shaped. */
#define SN_PIPELINE_COPY_AHEAD_NS 20000000ull
#define SN_PIPELINE_COPY_POOL_SHARE 8u
uint16_t sn_pipeline_src_copy_room(struct sn_pipeline *pl, const struct sn_port *in,
				   uint64_t budget, uint16_t max);
/* Worker: frames held (wheel + arbiter); > 0 means run() has work later. */
uint64_t sn_pipeline_held(const struct sn_pipeline *pl);
/* Worker: frames from port `in` held (wheel + mailbox + scheduler). */
uint64_t sn_pipeline_src_held(const struct sn_pipeline *pl, const struct sn_port *in);
/* Wheel-node quota. A port may hold at most sn_port.quota.wheel nodes of
 * each worker's wheel (0 = no cap; submit loads it relaxed once per
 * burst); a frame of a port at its quota that would enter the wheel is
 * dropped and counted (quota_wheel), its own, never another port's.
 * Pure: the default quota for a node pool of pool_nodes shared by
 * n_slots port slots, each keeping a reserve of two bursts: the pool less
 * the other slots' reserves, or pool_nodes / n_slots when they do not
 * fit. */
uint32_t sn_pipeline_wheel_quota_auto(uint32_t pool_nodes, unsigned n_slots, unsigned burst);
/* Pure: each slot's reserve of wheel nodes, min(2 * burst, pool_nodes /
 * n_slots). The nodes beyond every slot's reserve are shared by the
 * slots above theirs, each within its quota: whatever the other ports
 * hold, a port can put its reserve into the wheel (its frames wait in its
 * ring otherwise, or are quota_wheel drops). */
uint32_t sn_pipeline_wheel_reserve(uint32_t pool_nodes, unsigned n_slots, unsigned burst);
/* Worker, while a queue of port `in` has a stop pending (sn_vqtx.h): drop
 * every frame of its stopping queues from the wheel now and ask the
 * arbiter half to drop them from its mailboxes and scheduler classes
 * (sn_pl_purge.c); returns sn_pipeline_src_held() of `in` after the
 * purge. Call again each iteration until it returns 0. */
uint64_t sn_pipeline_src_purge(struct sn_pipeline *pl, const struct sn_port *in);
/* Worker, when its loop ends: free every held frame here, on the worker
 * (frames of deferred-completion ports must be freed by the worker, see
 * sn_vqtx.h). Only destroy() may follow. Layout ncore: every worker calls
 * it on its own handle after the arbiter lcore returned; the calls
 * meet (worker 0 drains the arbiter sets once all arrived), so all
 * workers must be stopping. */
void sn_pipeline_drain(struct sn_pipeline *pl);

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
/* Any thread: a sequence that is odd while the worker's run() changes
 * counters (policy apply, releasing frames, the 1-core arbiter sending),
 * while a submit changes them (until sn_pipeline_flush() if it staged
 * frames for VM ports) or lags (its last run() hit the per-iteration
 * bound with frames still due, e.g. after a stall), and even between runs
 * that released everything due at clock_ns (acquire load); a run that
 * changes nothing moves clock_ns only. Counters read between two equal
 * even values, with an acquire fence before the second load, are exactly
 * the state at clock_ns: a worker preempted in the middle of a release
 * batch cannot tear them.
 * 2-core layout: this covers the worker half; the arbiter half's counters
 * move on their own clock (sn_pipeline_arbiter_clock_ns). Layout ncore:
 * each worker has its own; a reader of a port whose TX queues are on
 * several workers checks every owner's (sn_pipeline_rpc.c). */
uint64_t sn_pipeline_run_seq(const struct sn_pipeline *pl);
/* Any thread: fair dropping in front of the arbiter (policy.uplink.overload
 * "fair"), refreshed by the worker each ms (worker half in both layouts);
 * all 0 when off. */
struct sn_pipeline_fair_stats {
	uint64_t on, kept, dropped, table_full, active, theta;
};
void sn_pipeline_fair_stats(const struct sn_pipeline *pl, struct sn_pipeline_fair_stats *out);
/* Any thread: the worker's flow classes and aggregate shares, for their
 * *_stats readers (sn_classify.h). */
const struct sn_classify *sn_pipeline_classify(const struct sn_pipeline *pl);
/* Any thread: worker k's (NULL if k >= workers). */
const struct sn_classify *sn_pipeline_classify_of(const struct sn_pipeline *pl, unsigned k);
/* Any thread: uplink frames of class cls of slot counted by a remote
 * (2-core) arbiter, to be added to sn_classify's uplink_* (0 in the
 * 1-core layout, where the worker's sn_classify counts them). */
void sn_pipeline_class_uplink(const struct sn_pipeline *pl, uint16_t slot, unsigned cls,
			      uint64_t *packets, uint64_t *bytes);
/* Any thread: the same for the arbiter half (its latest round; in the
 * 1-core layout the worker's clock): the time base of the counters the
 * arbiter keeps (uplink_*, qfq_*, the arbiter's). */
uint64_t sn_pipeline_arbiter_clock_ns(const struct sn_pipeline *pl);

/* Split layout: lcore_function_t of the arbiter lcore (registered QSBR
 * reader of the policy and the port table, one quiescent state per
 * round). Launch after create, stop with sn_pipeline_arbiter_stop() +
 * rte_eal_wait_lcore() BEFORE stopping the worker: the worker's drain
 * then frees what the arbiter held, on the worker. */
int sn_pipeline_arbiter_main(void *pl);
/* Main thread: ask the arbiter lcore to return (release store). */
void sn_pipeline_arbiter_stop(struct sn_pipeline *pl);
/* Worker: count one idle nap of the worker loop, of ns nanoseconds. */
void sn_pipeline_count_sleep(struct sn_pipeline *pl, uint64_t ns);
/* Any thread: worker is summed over the workers. */
void sn_pipeline_thread_stats(const struct sn_pipeline *pl, struct sn_pipeline_thread_stats *worker,
			      struct sn_pipeline_thread_stats *arbiter);
/* Any thread: worker k's own loop counters (zeros if k >= workers). */
void sn_pipeline_worker_thread_stats(const struct sn_pipeline *pl, unsigned k,
				     struct sn_pipeline_thread_stats *out);
void sn_pipeline_uplink_tx(const struct sn_pipeline *pl, struct sn_pipeline_uplink_tx *out);

#endif /* SN_PIPELINE_H */
