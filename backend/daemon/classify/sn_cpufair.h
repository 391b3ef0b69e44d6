/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_cpufair.h — fair dropping of the worker's CPU time (Addanki,
 * Linguaglossa, Roberts, Rossi, "Controlling software router resource
 * sharing by fair packet dropping", §III-E CPU sharing: Algorithm 1 on CPU
 * time + Algorithm 2's cost apportioning), config datapath.cpu_fair_pct.
 *
 * The worker polls each input queue in bursts. When the CPU time it gets
 * does not cover what the guests send, flows whose packets cost more
 * (bigger frames, classified and shaped frames, ...) would take more of
 * the CPU than cheap ones. With this module each polled burst first passes
 * sn_cpufair_filter(): every flow (ingress port slot + 5-tuple / MAC hash)
 * has a virtual queue of CPU time in an sn_fdrop shadow system whose
 * capacity is budget_pct % of the worker's CPU time; a frame of a flow
 * whose queue is above θ is dropped (freed and counted) right after the
 * dequeue, before the switch spends anything else on it (the paper's
 * "dropper after the input buffer"). Kept frames are charged an estimate
 * (weight x ns per weight unit); after the burst was processed,
 * sn_cpufair_account() apportions the burst's measured CPU time (dequeue,
 * filter, switch, shaper submit, drop overhead included) over its frames
 * by weight (Algorithm 2) and corrects the virtual queues, so they track
 * CPU time really spent; dropped frames carry a smaller weight, so a flow
 * also pays for what its drops cost (§III-E b). θ adapts (§III-E a): x0.5
 * after a full burst (the queue had a backlog: the CPU is the bottleneck),
 * x1.2 otherwise, between 1/32 ms and 1 ms of budget.
 *
 * Clock: the worker thread's CPU time (CLOCK_THREAD_CPUTIME_ID, ns), for
 * the shadow system's clock and for the burst costs alike, not the TSC: on
 * a shared host the OS preempts the worker, and wall-clock time would
 * count the time it did not run as capacity (no drop ever) and charge
 * preemptions to the bursts they hit (on a loaded 2-vCPU VM, TSC burst
 * costs come out 5x the CPU-clock ones; filtering out stalls does not
 * help). Busy-polling empty queues is CPU time too: spare capacity, so
 * with budget 100 % nothing is dropped until the worker has no idle polls
 * left. Cost: two clock reads per non-empty burst, only when enabled
 * (0.7 µs of CPU each on such a VM: ~45 ns per frame in the full bursts
 * of an overload, when it matters).
 *
 * Weights (relative cost of a frame type, Algorithm 2's w_k): 256 + length
 * for a kept frame (a fixed part: descriptor, lookup, wheel; plus the
 * copies, proportional to the length), 128 for a dropped one. They only
 * split one burst's measured time between its frames (a burst comes from
 * one queue, usually one or a few flows), so their exact values matter
 * little; the totals are measured. Time outside the bursts (the wheel
 * release and the arbiter in sn_pipeline_run, idle polls) is not charged
 * to flows.
 *
 * Limits (the paper's §III-E b): if merely dequeuing and dropping a flow's
 * frames costs more than its fair share, the flow keeps nothing (the
 * paper's "CPU entirely busy dropping packets"); a budget below 100 % makes
 * that happen sooner. Counters are by port slot: a port added to a freed
 * slot continues its predecessor's counts.
 *
 * Concurrency: an instance belongs to one worker lcore: filter/account
 * only there. Layout ncore has one instance per worker lcore (main.c),
 * never shared: each sees its own thread's CPU time and the frames of the
 * queues it polls (the flows competing for that CPU). sn_cpufair_stats()
 * may be called from any thread: the worker publishes every counter with
 * relaxed atomic stores after each burst, the reader uses relaxed loads
 * (counters only, no ordering needed).
 */
#ifndef SN_CPUFAIR_H
#define SN_CPUFAIR_H

#include <stdbool.h>
#include <stdint.h>

struct rte_mbuf;

#define SN_CPUFAIR_BURST_MAX 64u      /* == SN_CONFIG_BURST_MAX */

struct sn_cpufair_cfg {
	unsigned budget_pct;   /* 1..100 % of the worker's CPU time */
	unsigned max_flows;    /* active flows tracked (>= 8; rounded up to 4 x pow2) */
	unsigned n_slots;      /* port slots: counters by ingress slot, 1..65535 */
};

/* One ingress port slot's counters. */
struct sn_cpufair_port {
	uint64_t cpu_ns;       /* apportioned CPU ns */
	uint64_t kept;
	uint64_t dropped;      /* fair + table_full + invalid */
};

struct sn_cpufair_stats {
	unsigned budget_pct;
	uint64_t capacity;             /* budget: CPU ns per s of worker CPU time */
	uint64_t kept;
	uint64_t dropped_fair;         /* flow's cycle queue above θ */
	uint64_t dropped_table_full;   /* new flow, no free flow record */
	uint64_t dropped_invalid;      /* frame cost estimate out of range */
	uint64_t bursts;               /* bursts accounted */
	uint64_t theta_ns;
	uint64_t active, active_max;   /* flows with a cycle backlog */
	uint64_t ns_per_kweight;       /* estimate: CPU ns per 1000 weight units */
};

struct sn_cpufair;

/* Main thread, before the worker starts. NULL + errno (EINVAL, ENOMEM). */
struct sn_cpufair *sn_cpufair_create(const struct sn_cpufair_cfg *cfg);
/* Main thread, after the worker stopped. */
void sn_cpufair_free(struct sn_cpufair *cf);

/* Worker: its thread CPU time now, ns (the clock of filter/account). */
uint64_t sn_cpufair_clock(void);

/* Worker: Algorithm 1 on a burst of n (<= SN_CPUFAIR_BURST_MAX) frames
 * dequeued from port `slot`, whose dequeue started at CPU time `cpu_ns`
 * (sn_cpufair_clock; full: the dequeue returned the whole burst size).
 * Dropped frames are freed; the kept ones are moved to the front of pkts
 * in order; returns their number. Must be followed by
 * sn_cpufair_account() once the burst was processed. */
uint16_t sn_cpufair_filter(struct sn_cpufair *cf, uint16_t slot, struct rte_mbuf **pkts,
			   uint16_t n, bool full, uint64_t cpu_ns);

/* Worker: Algorithm 2 for the last filtered burst: it cost `cpu_ns` of
 * CPU time from before its dequeue to the end of its processing. */
void sn_cpufair_account(struct sn_cpufair *cf, uint64_t cpu_ns);

/* Any thread. */
void sn_cpufair_stats(const struct sn_cpufair *cf, struct sn_cpufair_stats *out);
/* Any thread: the counters of ingress slot `slot` (zero beyond n_slots). */
void sn_cpufair_port_stats(const struct sn_cpufair *cf, uint16_t slot,
			   struct sn_cpufair_port *out);

#endif /* SN_CPUFAIR_H */
