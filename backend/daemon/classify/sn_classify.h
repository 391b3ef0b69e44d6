/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_classify.h — flow classes and aggregates of one worker: 5-tuple
 * classification, per-flow / per-class pacing state, the worker's share of
 * every aggregate (Carousel §4, §5.3 NBA). Design: sn_classify.c.
 *
 * For each frame of a shaped port the pipeline asks sn_classify_frame()
 * which timestamp policies (sn_tstamp) the frame crosses besides its
 * port's limit: the matching class's pacing (one state per distinct
 * 5-tuple, or one for the class) and the worker's share of the class's
 * aggregate. The pipeline consolidates them (max, sn_tstamp.h) and reports
 * the outcome back (accepted / dropped / released) for the counters.
 *
 * Threads:
 *  - create / free: MAIN thread, worker not running.
 *  - apply_port / frame / accepted / dropped / released / tick: the owning
 *    WORKER only, between its quiescent states (apply copies what it needs
 *    out of the RCU-published policy: nothing here points into it, except
 *    the NBA instances, which live one grace period past the last table
 *    naming them, sn_policy.h; tick() is the only user and runs right
 *    after apply has seen the current table).
 *  - NBA: the worker is the single writer of its report slot
 *    (sn_nba_report) and reads its grant with sn_nba_grant (one atomic
 *    load); the main thread runs sn_nba_update (sn_policy_tick). No other
 *    synchronization.
 *  - *_stats: any thread. Counters have the worker as sole writer (relaxed
 *    atomic stores); readers use relaxed loads: a set may be torn between
 *    fields, never a field.
 */
#ifndef SN_CLASSIFY_H
#define SN_CLASSIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "sn_policy.h"
#include "sn_tstamp.h"

struct rte_mbuf;
struct sn_classify;

#define SN_CLASSIFY_NONE      0xffu   /* class id of a frame that matched none */
#define SN_CLASSIFY_MAX_POL   6       /* port, its peak, the destination's inbound
				       * limit and its peak, class/flow, aggregate */
#define SN_CLASSIFY_FLOWS_DEF 16384u  /* flows tracked per worker */
#define SN_CLASSIFY_AGE_NS    2000000000ull  /* idle flow state freed after 2 s */

enum sn_classify_drop {
	SN_CL_DROP_HORIZON = 0,   /* release time beyond the wheel horizon */
	SN_CL_DROP_POOL,          /* wheel node pool exhausted */
	SN_CL_DROP_QUOTA_WHEEL,   /* its port holds its quota of wheel nodes */
	SN_CL_DROP_MAX
};

struct sn_classify_class_stats {
	uint64_t offered_packets, offered_bytes;   /* matched this class */
	uint64_t sent_packets, sent_bytes;         /* released by the shaper */
	uint64_t uplink_packets, uplink_bytes;     /* of which sent on the uplink */
	uint64_t clamped;          /* horizon "clamp": queued at the horizon */
	uint64_t flows_active;     /* flow states held (scope "flow") */
	uint64_t flows_created, flows_aged;
	uint64_t flow_table_full;  /* new flow, no free entry: paced by the class's
	                            * shared state instead (documented fallback) */
	uint64_t drop[SN_CL_DROP_MAX];
};

struct sn_classify_agg_stats {
	uint64_t offered_packets, offered_bytes;   /* this worker, to the aggregate */
	uint64_t sent_packets, sent_bytes;
	uint64_t grant_bps;        /* this worker's NBA share, bit/s */
	uint64_t grant_updates;    /* times the worker took a new grant */
	uint64_t drop[SN_CL_DROP_MAX];
};

/* The policies one frame crosses, filled by sn_classify_frame. */
struct sn_classify_res {
	struct sn_tstamp *pol[SN_CLASSIFY_MAX_POL];
	unsigned n;
	uint16_t slot;
	uint8_t cls;               /* SN_CLASSIFY_NONE = no class */
	bool clamp;                /* the class says horizon "clamp" */
	bool agg;                  /* pol[n - 1] is the aggregate share */
};

/* Main thread. max_flows 0 = SN_CLASSIFY_FLOWS_DEF; n_slots: port slots
 * (1..65535, a slot index is below it); burst: frames per burst, sizing
 * each slot's reserve of flow entries (sn_classify_flows_reserve). NULL +
 * errno. */
struct sn_classify *sn_classify_create(unsigned worker, uint32_t max_flows, unsigned n_slots,
				       unsigned burst, int socket);
void sn_classify_free(struct sn_classify *c);

/* Worker: (re)configure the classes of port slot `slot` from its policy
 * entry (NULL = none), and the aggregates from pol. A class whose name is
 * unchanged keeps its pacing state and counters; its flows adopt a new
 * rate on their next frame (a burst change keeps LTS). `fresh` = another
 * port took the slot: all state and counters restart. Returns the classes
 * (bit i: class i, new index) whose pacing rate changed (from one
 * non-zero rate to another, from 0 to a rate or from a rate to 0, for a
 * class that stayed in place or moved, see sn_classify_renumber): their
 * pacing chain restarts at now (none if their rate is 0 now), and the
 * caller must lay their frames queued in the wheel on it again, in release
 * order (sn_classify_restamp_ts), before any new frame of the slot is
 * classified. */
uint32_t sn_classify_apply_port(struct sn_classify *c, uint16_t slot,
				const struct sn_policy_port *pp, bool fresh, uint64_t now);
/* Worker, after apply_port(slot): whether a class kept by name
 * moved to another index or a class went away (its old index now names
 * another class or none), and the new index of a queued frame's old class
 * index (SN_CLASSIFY_NONE: its class went away). The caller renumbers
 * the frames it holds in the wheel before any of them is counted again
 * (released, dropped), so counters and restamps follow the class, not
 * its place. Valid until the next apply_port of the slot. */
bool sn_classify_moved(const struct sn_classify *c, uint16_t slot);
uint8_t sn_classify_renumber(const struct sn_classify *c, uint16_t slot, uint8_t cls);
/* Worker, after apply_port(slot): whether it made a class
 * (new name): its index may have counted another class's frames before. */
bool sn_classify_created(const struct sn_classify *c, uint16_t slot);
/* Worker, when the port limit of slot got a new rate (its queued
 * frames are laid again from now): every paced class of the slot restarts
 * its chain at now (its flows on their first re-laid frame), as for a
 * class rate change; returns those classes (bit i: class i), whose frames
 * the caller lays again with sn_classify_restamp_ts, in release order,
 * before any new frame of the slot is classified. */
uint32_t sn_classify_restart_port(struct sn_classify *c, uint16_t slot, uint64_t now);
/* Worker, after apply_port returned class cls of slot in its
 * mask: the pacing state a queued frame m of that class crosses (its
 * flow's for scope "flow", else the class's; NULL: the class has no
 * pacing), to peek / commit its new stamp. A flow's state restarts at
 * now on its first frame re-laid after the change; a flow not in the
 * table (pacing just added) is added from now, or paced by the
 * class's state if the table is full (flow_table_full), as at submit. */
struct sn_tstamp *sn_classify_restamp_ts(struct sn_classify *c, uint16_t slot, uint8_t cls,
					 const struct rte_mbuf *m, uint64_t now);
void sn_classify_apply_aggs(struct sn_classify *c, const struct sn_policy *pol, uint64_t now);

/* Worker: classify m (from port slot `slot`) and append the class/flow
 * and aggregate policies it crosses to r->pol (r->n counts those already
 * there, e.g. the port limit). */
void sn_classify_frame(struct sn_classify *c, uint16_t slot, const struct rte_mbuf *m,
		       uint64_t now, struct sn_classify_res *r);
/* Flow-table quota. A port may hold at most `cap` entries of the
 * worker's flow table (0 = no cap); a new flow of a port at its cap is
 * paced by its class's shared state, like one finding the table full, and
 * counted in the port's quota_flows (not in flow_table_full), so the
 * table keeps entries for the other ports. Entries are released when the
 * flow ages out (SN_CLASSIFY_AGE_NS) or its class goes away.
 * set_flow_quota: WORKER, once per burst of the port before its frames
 * are classified (the caller loads sn_port.quota.flows relaxed).
 * port_flows (entries held) / quota_flows (refusals since the port took
 * the slot): any thread, relaxed reads (the worker is the only writer).
 * flows_quota_auto: pure; the default cap for a table of max_flows
 * entries (0: SN_CLASSIFY_FLOWS_DEF) shared by n_slots port slots, each
 * keeping a reserve of two bursts of new flows: max_flows less the other
 * slots' reserves, or max_flows / n_slots when the reserves do not fit.
 * flows_reserve: pure; each slot's reserve, min(2 * burst, max_flows /
 * n_slots). The entries beyond every slot's reserve are shared by the
 * slots above theirs, each within its cap: whatever the other ports
 * hold, a port gets its reserve of new flows (a new flow beyond it with
 * the shared part taken counts in quota_flows like one at the cap). */
void sn_classify_set_flow_quota(struct sn_classify *c, uint16_t slot, uint32_t cap);
uint32_t sn_classify_port_flows(const struct sn_classify *c, uint16_t slot);
uint64_t sn_classify_quota_flows(const struct sn_classify *c, uint16_t slot);
uint32_t sn_classify_flows_quota_auto(uint32_t max_flows, unsigned n_slots, unsigned burst);
uint32_t sn_classify_flows_reserve(uint32_t max_flows, unsigned n_slots, unsigned burst);

/* Any thread (pure): a hash of m's flow: its IPv4 or IPv6 5-tuple
 * (sn_flowkey.h), else its Ethernet addresses (fair dropping's flow id). */
uint32_t sn_classify_flow_hash(const struct rte_mbuf *m);

/* Worker: outcome of a classified frame of `len` bytes. */
void sn_classify_accepted(struct sn_classify *c, const struct sn_classify_res *r,
			  bool clamped);
void sn_classify_dropped(struct sn_classify *c, const struct sn_classify_res *r, uint32_t len,
			 enum sn_classify_drop cause);
void sn_classify_released(struct sn_classify *c, uint16_t slot, uint8_t cls, uint32_t len);
/* Worker: a frame of that class was handed to the uplink. */
void sn_classify_uplinked(struct sn_classify *c, uint16_t slot, uint8_t cls, uint32_t len);
/* Worker, about once per ms: NBA reports and grants, flow ageing.
 * Returns the aggregates (bit i: aggregate slot i) whose grant changed
 * while their share owed bytes (LTS > now): their LTS was rescaled to the
 * new grant (LTS' = min(now + (LTS - now) * old / new, now + horizon_ns):
 * the bytes owed are kept, but for those of frames the wheel's horizon
 * drops), and the frames they stamped are due for the same rescaling
 * (sn_classify_agg_restamp). 0: nothing to do. */
uint32_t sn_classify_tick(struct sn_classify *c, uint64_t now, uint64_t horizon_ns);
/* Worker: the aggregate share's part `a` of the release time of a queued
 * frame of class (slot, cls) (the stamp its aggregate gave it), after
 * sn_classify_tick() returned `changed` at `now`: rescaled like the
 * aggregate's LTS (now + (a - now) * old / new) if the class's aggregate
 * is in `changed` and a > now, else a. The caller consolidates it with the
 * frame's other policies (classes with their own pacing and ports with a
 * limit too; sn_pl_restamp_aggs in pipeline/sn_pl_apply.c). */
uint64_t sn_classify_agg_restamp(const struct sn_classify *c, uint16_t slot, uint8_t cls,
				 uint32_t changed, uint64_t now, uint64_t a);
/* Worker: the class (slot, cls) says horizon "clamp" (false: no such
 * class, or "drop"). */
bool sn_classify_clamps(const struct sn_classify *c, uint16_t slot, uint8_t cls);

/* Any thread. -ENOENT if the slot has no such class / aggregate. */
int sn_classify_class_stats(const struct sn_classify *c, uint16_t slot, unsigned cls,
			    struct sn_classify_class_stats *out);
int sn_classify_agg_stats(const struct sn_classify *c, unsigned agg,
			  struct sn_classify_agg_stats *out);

#endif /* SN_CLASSIFY_H */
