/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pipeline_rpc.c — stats.get's view of the scheduled pipeline: a shaped
 * port's "policy" member (its shaper, classes and the run-sequence
 * consistency check), the top-level "aggregates" and "arbiter" objects.
 *
 * Built on the public API only (sn_pipeline.h, sn_classify.h, sn_nba.h,
 * sn_policy.h): every counter is a relaxed load by the writer's contract,
 * and the snapshots are checked with sn_pipeline_run_seq() where the
 * answer says it is consistent. Main thread only (sn_ctl.h).
 */
#include "sn_pipeline_rpc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <rte_common.h>

#include "sn_classify.h"
#include "sn_common.h"
#include "sn_ctl.h"
#include "sn_nba.h"
#include "sn_pipeline.h"
#include "sn_policy.h"
#include "sn_port.h"

/* {horizon, wheel_pool, quota_wheel} of a class or aggregate. */
static json_t *cl_drops_json(const uint64_t *drop)
{
	return json_pack("{s:I, s:I, s:I}", "horizon", (json_int_t)drop[SN_CL_DROP_HORIZON],
			 "wheel_pool", (json_int_t)drop[SN_CL_DROP_POOL],
			 "quota_wheel", (json_int_t)drop[SN_CL_DROP_QUOTA_WHEEL]);
}

/* Sum of the class's counters over the workers (layout ncore: a port's
 * queues may be on several workers; flows_active is the sum too). -ENOENT
 * when no worker has applied the class yet. */
static int class_stats_sum(const struct sn_ctl *ctl, uint16_t slot, unsigned cls,
			   struct sn_classify_class_stats *out)
{
	const unsigned nw = sn_pipeline_workers(ctl->pipeline);
	int found = -ENOENT;

	memset(out, 0, sizeof(*out));
	for (unsigned k = 0; k < nw; k++) {
		struct sn_classify_class_stats cs;
		const uint64_t *src = (const uint64_t *)&cs;
		uint64_t *dst = (uint64_t *)out;

		if (sn_classify_class_stats(sn_pipeline_classify_of(ctl->pipeline, k), slot, cls, &cs))
			continue;
		found = 0;
		for (size_t i = 0; i < sizeof(cs) / sizeof(uint64_t); i++)
			dst[i] += src[i];
	}
	return found;
}

/* Per-class counters of port p (summed over the workers), NULL
 * if none. */
static json_t *classes_stats_json(const struct sn_ctl *ctl, const struct sn_port *p)
{
	const struct sn_policy_port *pp = sn_policy_port_find(sn_policy_main(ctl->policy), p->name);
	json_t *a = json_array();

	if (!a || !pp)
		return a;
	for (unsigned i = 0; i < pp->n_classes; i++) {
		struct sn_classify_class_stats cs;

		if (class_stats_sum(ctl, p->slot, i, &cs))
			break;     /* no worker has applied this table yet */
		{
			/* 2-core: the arbiter's own count of this class's uplink frames */
			uint64_t up_p, up_b;

			sn_pipeline_class_uplink(ctl->pipeline, p->slot, i, &up_p, &up_b);
			cs.uplink_packets += up_p;
			cs.uplink_bytes += up_b;
		}
		if (json_array_append_new(a, json_pack(
			"{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
			"name", pp->classes[i].name,
			"offered_packets", (json_int_t)cs.offered_packets,
			"offered_bytes", (json_int_t)cs.offered_bytes,
			"sent_packets", (json_int_t)cs.sent_packets,
			"sent_bytes", (json_int_t)cs.sent_bytes,
			"uplink_packets", (json_int_t)cs.uplink_packets,
			"uplink_bytes", (json_int_t)cs.uplink_bytes,
			"clamped", (json_int_t)cs.clamped,
			"flows_active", (json_int_t)cs.flows_active,
			"flows_created", (json_int_t)cs.flows_created,
			"flows_aged", (json_int_t)cs.flows_aged,
			"flow_table_full", (json_int_t)cs.flow_table_full,
			"drops", cl_drops_json(cs.drop)))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* Top-level "aggregates": name -> counters + NBA view per worker.
 * The NBA's core stats are control-thread state: main runs sn_nba_update
 * too (sn_policy_tick), so reading them here is single-threaded. */
json_t *sn_pipeline_rpc_aggregates_json(const struct sn_ctl *ctl)
{
	const struct sn_policy *pol = sn_policy_main(ctl->policy);
	const unsigned nw = sn_pipeline_workers(ctl->pipeline);
	static const char *const state[] = { "idle", "active", "saturated" };
	json_t *o = json_object();

	for (unsigned i = 0; o && i < pol->n_aggs; i++) {
		const struct sn_policy_aggregate *pa = &pol->aggs[i];
		struct sn_classify_agg_stats as;
		json_t *w = json_array();

		/* Offered / sent / drops: summed over the workers; the grant
		 * fields are worker 0's (every worker's grant is in "nba"). */
		memset(&as, 0, sizeof(as));
		for (unsigned k = 0; k < nw; k++) {
			struct sn_classify_agg_stats ws;

			if (sn_classify_agg_stats(sn_pipeline_classify_of(ctl->pipeline, k), i, &ws))
				continue;
			as.offered_packets += ws.offered_packets;
			as.offered_bytes += ws.offered_bytes;
			as.sent_packets += ws.sent_packets;
			as.sent_bytes += ws.sent_bytes;
			for (unsigned d = 0; d < SN_CL_DROP_MAX; d++)
				as.drop[d] += ws.drop[d];
			if (k == 0) {
				as.grant_bps = ws.grant_bps;
				as.grant_updates = ws.grant_updates;
			}
		}
		for (unsigned k = 0; w && k < sn_policy_store_workers(ctl->policy); k++) {
			struct sn_nba_core_stats ns;

			if (sn_nba_core_stats(pa->nba, k, &ns))
				continue;
			if (json_array_append_new(w, json_pack("{s:I, s:I, s:I, s:I, s:s}", "worker",
					(json_int_t)k, "grant_bps", (json_int_t)(ns.grant_bps * 8),
					"demand_bps", (json_int_t)(ns.demand_bps * 8),
					"backlog_bytes", (json_int_t)ns.backlog_bytes,
					"state", state[ns.state]))) {
				json_decref(w);
				w = NULL;
			}
		}
		if (!w || json_object_set_new(o, pa->name, json_pack(
			"{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}",
			"rate_bps", (json_int_t)pa->rate_bps,
			"update_ms", (json_int_t)pa->update_ms,
			"offered_packets", (json_int_t)as.offered_packets,
			"offered_bytes", (json_int_t)as.offered_bytes,
			"sent_packets", (json_int_t)as.sent_packets,
			"sent_bytes", (json_int_t)as.sent_bytes,
			"worker0_grant_bps", (json_int_t)as.grant_bps,
			"worker0_grant_updates", (json_int_t)as.grant_updates,
			"drops", cl_drops_json(as.drop), "nba", w))) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* See sn_pipeline_rpc.h. */
json_t *sn_pipeline_rpc_port_json(const struct sn_ctl *ctl, const struct sn_port *p)
{
	struct sn_pipeline_port_stats ps;
	uint64_t c0, s0[SN_PIPELINE_WORKERS_MAX];
	bool s1 = true;           /* consistent */
	json_t *drops, *o, *cls;
	/* The workers owning the port's TX queues (layout ncore: each has its
	 * own sequence and clock; the others never touch its counters). */
	const struct sn_pipeline *wpl[SN_PIPELINE_WORKERS_MAX];
	unsigned nw = 0;
	uint32_t owners = 0;

	if (!ctl->pipeline)
		return NULL;
	for (unsigned i = 0; i < SN_MAX(p->nq, (uint16_t)1) && i < SN_PORT_QMAX; i++) {
		unsigned k = p->q[i].owner;
		const struct sn_pipeline *w = sn_pipeline_worker(ctl->pipeline, k);

		if (k >= SN_PIPELINE_WORKERS_MAX || (owners & (1u << k)))
			continue;
		owners |= 1u << k;
		wpl[nw++] = w ? w : ctl->pipeline;
	}
	if (!nw)
		wpl[nw++] = ctl->pipeline;
	/* clock_ns with the counters, and whether the pair is consistent: no
	 * run() (or counting submit) of any owning worker began or was in
	 * progress while they were read (sn_pipeline_run_seq(): every owner's
	 * first value before the counters, every second one after; the
	 * acquire fence pairs with each worker's release fence after its odd
	 * store). Every owner is checked: a read inside any owner's run is
	 * not exact (tests/policy/test_stats_seq.py). clock_ns is queue 0's
	 * owner's; each owner's counters are exact at its own clock. */
	for (unsigned j = 0; j < nw; j++)
		s0[j] = sn_pipeline_run_seq(wpl[j]);
	c0 = sn_pipeline_clock_ns(wpl[0]);
	if (sn_pipeline_port_stats(ctl->pipeline, p, &ps))
		return NULL;
	/* The class counters inside the same window, so clock_consistent
	 * covers them too (a horizon drop is counted in its class just before
	 * its port: read after the check, a class could be one run ahead). */
	cls = classes_stats_json(ctl, p);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	for (unsigned j = 0; j < nw; j++)
		s1 = s1 && s0[j] == sn_pipeline_run_seq(wpl[j]) && !(s0[j] & 1);
	drops = json_object();
	if (!drops) {
		json_decref(cls);
		return NULL;
	}
	for (unsigned i = 0; i < SN_PL_DROP_MAX; i++)
		if (json_object_set_new(drops, sn_pipeline_drop_names[i],
					json_integer((json_int_t)ps.drop[i]))) {
			json_decref(drops);
			json_decref(cls);
			return NULL;
		}
	o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}",
			 "offered_packets", (json_int_t)ps.offered_packets,
			 "offered_bytes", (json_int_t)ps.offered_bytes,
			 "released_packets", (json_int_t)ps.released_packets,
			 "released_bytes", (json_int_t)ps.released_bytes,
			 "underruns", (json_int_t)ps.underruns,
			 "sent_packets", (json_int_t)ps.sent_packets,
			 "sent_bytes", (json_int_t)ps.sent_bytes,
			 "uplink_packets", (json_int_t)ps.uplink_packets,
			 "uplink_bytes", (json_int_t)ps.uplink_bytes,
			 "wheel_depth", (json_int_t)ps.wheel_depth,
			 "qfq_backlog", (json_int_t)ps.qfq_backlog,
			 "qfq_idle", (json_int_t)ps.qfq_idle,
			 "rate_bps", (json_int_t)ps.rate_bps,
			 "weight", (json_int_t)ps.weight,
			 "drops", drops, "classes", cls);
	if (o && (json_object_set_new(o, "clock_ns", json_integer((json_int_t)c0)) ||
		  json_object_set_new(o, "clock_consistent", json_boolean(s1)) ||
		  json_object_set_new(o, "flow_entries", json_integer((json_int_t)ps.flow_entries)) ||
		  json_object_set_new(o, "quota_flows", json_integer((json_int_t)ps.quota_flows)) ||
		  json_object_set_new(o, "room_clamped", json_integer((json_int_t)ps.room_clamped)))) {
		json_decref(o);
		o = NULL;
	}
	/* "inbound" only for a port with an inbound limit */
	if (o && ps.in_rate_bps &&
	    json_object_set_new(o, "inbound", json_pack("{s:I, s:I, s:I, s:I, s:{s:I, s:I}}",
				"rate_bps", (json_int_t)ps.in_rate_bps,
				"peak_bps", (json_int_t)ps.in_peak_bps,
				"offered_packets", (json_int_t)ps.in_offered_packets,
				"offered_bytes", (json_int_t)ps.in_offered_bytes,
				"drops", "horizon", (json_int_t)ps.in_horizon,
				"fair", (json_int_t)ps.in_fair))) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* Layout ncore: per worker lcore, its loop counters (one entry in the
 * other layouts). */
static json_t *workers_json(const struct sn_ctl *ctl)
{
	json_t *a = json_array();

	for (unsigned k = 0; a && k < sn_pipeline_workers(ctl->pipeline); k++) {
		struct sn_pipeline_thread_stats t;

		sn_pipeline_worker_thread_stats(ctl->pipeline, k, &t);
		json_t *w = json_pack("{s:i, s:I, s:I, s:I}", "worker", (int)k,
				      "loops", (json_int_t)t.loops, "sleeps", (json_int_t)t.sleeps,
				      "sleep_ns", (json_int_t)t.sleep_ns);

		if (!w || json_array_append_new(a, w)) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

/* See sn_pipeline_rpc.h. */
json_t *sn_pipeline_rpc_arbiter_json(const struct sn_ctl *ctl)
{
	struct sn_pipeline_thread_stats wt, at;
	struct sn_arbiter_stats a;
	uint64_t backlog;
	json_t *drops;

	struct sn_pipeline_fair_stats fs;

	sn_pipeline_arbiter_stats(ctl->pipeline, &a, &backlog);
	sn_pipeline_fair_stats(ctl->pipeline, &fs);
	sn_pipeline_thread_stats(ctl->pipeline, &wt, &at);
	drops = json_object();
	if (!drops)
		return NULL;
	for (unsigned i = 0; i < SN_ARBITER_DROP_NCAUSES; i++)
		if (json_object_set_new(drops, sn_arbiter_drop_name(i),
					json_integer((json_int_t)a.dropped[i]))) {
			json_decref(drops);
			return NULL;
		}
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:s, "
			 "s:{s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I}, s:o}",
			 "algorithm", sn_sched_algo_name(sn_policy_main(ctl->policy)->uplink.algo),
			 "link_bps", (json_int_t)sn_policy_main(ctl->policy)->uplink.rate_bps,
			 "scans", (json_int_t)a.scans, "items_in", (json_int_t)a.items_in,
			 "released", (json_int_t)a.released,
			 "released_bytes", (json_int_t)a.released_bytes,
			 "link_resets", (json_int_t)a.link_resets,
			 "read_limit_hits", (json_int_t)a.read_limit_hits,
			 "lmax_raises", (json_int_t)a.lmax_raises,
			 "passed", (json_int_t)a.passed,
			 "backlog", (json_int_t)backlog,
			 "clock_ns", (json_int_t)sn_pipeline_clock_ns(ctl->pipeline),
			 "arbiter_clock_ns", (json_int_t)sn_pipeline_arbiter_clock_ns(ctl->pipeline),
			 "drops", drops,
			 "overload", fs.on ? "fair" : "tail",
			 "fair", "kept", (json_int_t)fs.kept, "dropped", (json_int_t)fs.dropped,
			 "table_full", (json_int_t)fs.table_full, "active", (json_int_t)fs.active,
			 "theta", (json_int_t)fs.theta,
			 "worker_thread", "loops", (json_int_t)wt.loops, "sleeps", (json_int_t)wt.sleeps,
			 "sleep_ns", (json_int_t)wt.sleep_ns,
			 "arbiter_thread", "loops", (json_int_t)at.loops, "sleeps", (json_int_t)at.sleeps,
			 "sleep_ns", (json_int_t)at.sleep_ns, "workers", workers_json(ctl));
}
