/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_ctl.c — JSON-RPC handlers of schednicd (method table: rpc_api.json).
 *
 * sn_rpc has already checked types, required and unknown params against
 * the schema; handlers check values (name syntax, enum values) and turn
 * registry errors into the API's error codes. Results follow the shared
 * daemon spec: rx = from the port into the switch, tx = delivered to it.
 */
#include "sn_ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>
#include <rte_version.h>

#include "sn_classify.h"
#include "sn_common.h"
#include "sn_config.h"
#include "sn_cpufair.h"
#include "sn_pipeline.h"
#include "sn_policy.h"
#include "sn_port.h"
#include "sn_rpc.h"
#include "sn_switch.h"
#include "sn_nba.h"
#include "sn_vqtx.h"

#ifndef SN_VERSION
#define SN_VERSION "0.0.0"
#endif
#define SN_API_VERSION 1

uint64_t sn_ctl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Optional string param with a default (types already checked by sn_rpc). */
static const char *param_str(json_t *params, const char *key, const char *def)
{
	json_t *v = json_object_get(params, key);

	return json_is_string(v) ? json_string_value(v) : def;
}

static json_t *h_version(json_t *params, void *arg, struct sn_rpc_error *err)
{
	(void)params, (void)arg, (void)err;
	return json_pack("{s:s, s:s, s:i}", "version", SN_VERSION, "dpdk", rte_version(),
			 "api", SN_API_VERSION);
}

static json_t *h_port_add(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	const char *name = param_str(params, "name", NULL);
	const char *path = param_str(params, "path", NULL);
	const char *mode = param_str(params, "mode", "server");
	const char *type = param_str(params, "type", "vhost-user");
	const char *completion = param_str(params, "completion", "immediate");
	json_t *hold = json_object_get(params, "max_hold_us");
	json_t *uhold = json_object_get(params, "unmarked_max_hold_us");
	json_t *queues = json_object_get(params, "queues");
	json_t *workers = json_object_get(params, "workers");
	const struct sn_port_table *t = sn_ports_table_main(ctl->reg);
	struct sn_vhost_opts opts = { 0 };
	uint8_t wmap[SN_CONFIG_QUEUES_MAX];
	int rc;

	if (!name)
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "name: required");
	if (!path)
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "path: required");
	if (!sn_config_port_name_ok(name))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "name: must match [A-Za-z0-9_.-]{1,32}");
	if (!strcmp(name, "uplink"))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "name: \"uplink\" is reserved");
	if (!sn_config_socket_path_ok(path))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
				   "path: must be a socket path of 1..%d bytes", SN_CONFIG_PATH_MAX);
	if (strcmp(mode, "server") && strcmp(mode, "client"))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "mode: must be \"server\" or \"client\"");
	if (strcmp(type, "vhost-user"))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "type: must be \"vhost-user\"");
	if (strcmp(completion, "immediate") && strcmp(completion, "deferred"))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
				   "completion: must be \"immediate\" or \"deferred\"");
	opts.client = !strcmp(mode, "client");
	opts.deferred = !strcmp(completion, "deferred");
	if (hold) {
		if (!json_is_integer(hold) || json_integer_value(hold) < 0 ||
		    json_integer_value(hold) > SN_CONFIG_MAX_HOLD_US_MAX)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "max_hold_us: must be an integer 0..%u", SN_CONFIG_MAX_HOLD_US_MAX);
		if (json_integer_value(hold) && !opts.deferred)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "max_hold_us: only with completion \"deferred\"");
		opts.max_hold_us = (uint32_t)json_integer_value(hold);
	}
	if (uhold) {
		if (!json_is_integer(uhold) || json_integer_value(uhold) < 1 ||
		    json_integer_value(uhold) > SN_CONFIG_MAX_HOLD_US_MAX)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "unmarked_max_hold_us: must be an integer 1..%u",
					   SN_CONFIG_MAX_HOLD_US_MAX);
		/* The schema default is accepted (and ignored) on immediate
		 * ports, as max_hold_us 0 is. */
		if (!opts.deferred && json_integer_value(uhold) != SN_CONFIG_UNMARKED_HOLD_US_DEF)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "unmarked_max_hold_us: only with completion \"deferred\"");
		opts.unmarked_max_hold_us = (uint32_t)json_integer_value(uhold);
	}
	opts.queues = 1;
	if (queues) {
		if (!json_is_integer(queues) || json_integer_value(queues) < 1 ||
		    json_integer_value(queues) > SN_CONFIG_QUEUES_MAX)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "queues: must be an integer 1..%u", SN_CONFIG_QUEUES_MAX);
		opts.queues = (uint16_t)json_integer_value(queues);
	}
	if (workers) {   /* queue -> worker map (layout ncore); else balanced */
		const unsigned nw = sn_ports_workers(ctl->reg);
		json_t *w;
		size_t k;

		if (!json_is_array(workers) || json_array_size(workers) != opts.queues)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "workers: must be an array of %u worker indexes, one per queue",
					   opts.queues);
		json_array_foreach(workers, k, w) {
			if (!json_is_integer(w) || json_integer_value(w) < 0 ||
			    json_integer_value(w) >= nw)
				return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
						   "workers[%zu]: must be an integer 0..%u (worker lcores)",
						   k, nw - 1);
			wmap[k] = (uint8_t)json_integer_value(w);
		}
		opts.workers = wmap;
	}
	/* s13-R3: a client port on it would talk vhost-user to our own RPC
	 * server, reconnecting forever (the config refuses it too). */
	if (ctl->control_socket && !strcmp(path, ctl->control_socket))
		return sn_rpc_fail(err, SN_RPC_ERR_EXISTS, "path %s is the control socket", path);
	for (unsigned i = 0; i < t->n; i++) {
		if (!strcmp(t->list[i]->name, name))
			return sn_rpc_fail(err, SN_RPC_ERR_EXISTS, "port %s already exists", name);
		if (t->list[i]->type == SN_PORT_VHOST && !strcmp(t->list[i]->path, path))
			return sn_rpc_fail(err, SN_RPC_ERR_EXISTS, "path %s already used by port %s",
					   path, t->list[i]->name);
	}
	rc = sn_ports_add_vhost(ctl->reg, name, path, &opts);
	switch (rc) {
	case 0:
		return json_pack("{s:s}", "name", name);
	case -EEXIST:
		return sn_rpc_fail(err, SN_RPC_ERR_EXISTS, "port %s or path %s already in use", name, path);
	case -ENOSPC:
		return sn_rpc_fail(err, SN_RPC_ERR_RESOURCE, "port limit (%d) reached", SN_PORT_MAX);
	case -ENOTSOCK:
		return sn_rpc_fail(err, SN_RPC_ERR_EXISTS,
				   "path %s: exists and is not a socket (left alone)", path);
	case -EADDRINUSE:
		return sn_rpc_fail(err, SN_RPC_ERR_EXISTS,
				   "path %s: another process listens on this socket", path);
	default:
		return sn_rpc_fail(err, SN_RPC_ERR_RESOURCE, "port %s: vhost-user socket %s: %s",
				   name, path, strerror(-rc));
	}
}

static json_t *h_port_del(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	const char *name = param_str(params, "name", NULL);
	int rc;

	if (!name)
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "name: required");
	rc = sn_ports_del(ctl->reg, name, false);
	if (rc == -ENOENT)
		return sn_rpc_fail(err, SN_RPC_ERR_NOT_FOUND, "no port named %s", name);
	if (rc == -EBUSY)
		return sn_rpc_fail(err, SN_RPC_ERR_BUSY, "port %s is the uplink and cannot be deleted", name);
	if (rc)
		return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "port %s: %s", name, strerror(-rc));
	return json_object();
}

static const char *type_str(const struct sn_port *p)
{
	return p->type == SN_PORT_VHOST ? "vhost-user" : "uplink";
}

static const char *state_str(const struct sn_port *p)
{
	return sn_port_is_up(p) ? "up" : "down";
}

/* The completion mode in force on a vhost-user port's connection
 * (sn_vqtx.h; the opt-in is per TX queue): "deferred" once at least one TX
 * queue opted in and no TX queue saw an unmarked frame on this connection
 * (a queue that carried no frames, or fewer than SN_VQTX_OPTIN_AFTER marked
 * ones, does not count against it); else "immediate". */
static const char *completion_mode_str(const struct sn_port *p)
{
	bool in = false;

	for (unsigned qi = 0; qi < p->nq; qi++) {
		struct sn_vqtx_stats vs;

		if (!p->q[qi].vq)
			return "immediate";
		sn_vqtx_stats_read(p->q[qi].vq, &vs);
		if (vs.opted_out)
			return "immediate";
		in |= vs.opted_in != 0;
	}
	return in ? "deferred" : "immediate";
}

static json_t *h_port_list(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	const struct sn_port_table *t = sn_ports_table_main(ctl->reg);
	json_t *ports = json_array();

	(void)params;
	if (!ports)
		return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "out of memory");
	for (unsigned i = 0; i < t->n; i++) {
		const struct sn_port *p = t->list[i];
		json_t *o;

		if (p->type == SN_PORT_VHOST) {
			/* Queue -> worker map (issue 5/6, layout ncore). */
			json_t *q = json_array();

			for (unsigned qi = 0; q && qi < p->nq; qi++)
				if (json_array_append_new(q, json_pack("{s:i, s:i}", "queue", (int)qi,
								       "worker", (int)p->q[qi].owner))) {
					json_decref(q);
					q = NULL;
				}
			o = !q ? NULL : json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o}", "name", p->name,
				      "type", type_str(p), "path", p->path,
				      "mode", p->client ? "client" : "server", "state", state_str(p),
				      "completion_mode", completion_mode_str(p), "queues", q);
		} else
			o = json_pack("{s:s, s:s, s:s, s:s}", "name", p->name, "type", type_str(p),
				      "mode", "ethdev", "state", state_str(p));
		if (!o || json_array_append_new(ports, o)) {
			json_decref(ports);
			return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "out of memory");
		}
	}
	return json_pack("{s:o}", "ports", ports);
}

/* Sum of the deferred counters of every TX queue of p (zeros in immediate
 * mode): the port's totals. held_max sums the queues' maxima. */
static void completion_sum(const struct sn_port *p, struct sn_vqtx_stats *vs)
{
	memset(vs, 0, sizeof(*vs));
	for (unsigned qi = 0; qi < p->nq; qi++) {
		struct sn_vqtx_stats q;
		const uint64_t *src = (const uint64_t *)&q;
		uint64_t *dst = (uint64_t *)vs;

		if (!p->q[qi].vq)
			continue;
		sn_vqtx_stats_read(p->q[qi].vq, &q);
		for (size_t i = 0; i < sizeof(q) / sizeof(uint64_t); i++)
			dst[i] += src[i];
		vs->hold_max = qi ? RTE_MAX(vs->hold_max - q.hold_max, q.hold_max) : q.hold_max;
	}
}

/* issue 7: "held_occupancy" of a deferred TX queue (or the sum of a port's
 * queues): time-weighted percentiles of the held count, the sampled time
 * (sum of the buckets) and the raw histogram, non-empty buckets only, as
 * [lo, hi, ns] (cumulative: a client
 * measures an interval by subtracting two snapshots bucket by bucket). */
static json_t *occ_json(const struct sn_vqtx_stats *vs)
{
	const double ns_per_cycle = 1e9 / (double)rte_get_tsc_hz();
	json_t *hist = json_array();
	uint64_t total = 0;

	for (unsigned b = 0; hist && b < SN_VQTX_OCC_BUCKETS; b++) {
		uint64_t ns;
		uint32_t lo, hi;

		if (!vs->occ_cycles[b])
			continue;
		ns = (uint64_t)((double)vs->occ_cycles[b] * ns_per_cycle);
		total += ns;
		sn_vqtx_occ_range(b, &lo, &hi);
		if (json_array_append_new(hist, json_pack("[I, I, I]", (json_int_t)lo,
							  (json_int_t)hi, (json_int_t)ns))) {
			json_decref(hist);
			hist = NULL;
		}
	}
	if (!hist)
		return NULL;
	return json_pack("{s:I, s:I, s:I, s:I, s:o}",
			 "p50", (json_int_t)sn_vqtx_occ_pct(vs, 50),
			 "p99", (json_int_t)sn_vqtx_occ_pct(vs, 99),
			 "max", (json_int_t)sn_vqtx_occ_pct(vs, 100),
			 "sampled_ns", (json_int_t)total,
			 "hist", hist);
}

/* The "completion" object of a vhost-user port (zeros in immediate mode). */
static json_t *completion_json(const struct sn_port *p)
{
	struct sn_vqtx_stats vs;
	json_t *errs = json_object();

	if (!errs)
		return NULL;
	completion_sum(p, &vs);
	for (unsigned i = 1; i < SN_VRING_E__MAX; i++)
		if (json_object_set_new(errs, sn_vring_err_name((enum sn_vring_err)i),
					json_integer((json_int_t)vs.err[i]))) {
			json_decref(errs);
			return NULL;
		}
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
			 "s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:{s:f, s:f, s:f}, s:o}",
			 "mode", p->vq ? "deferred" : "immediate",
			 "max_hold_us", (json_int_t)p->max_hold_us,
			 "unmarked_max_hold_us", (json_int_t)p->unmarked_max_hold_us,
			 "marked", (json_int_t)vs.marked, "unmarked", (json_int_t)vs.unmarked,
			 "held_now", (json_int_t)vs.held_now, "held_max", (json_int_t)vs.held_max,
			 "out_of_order", (json_int_t)vs.out_of_order,
			 "hold_timeouts", (json_int_t)vs.hold_timeouts,
			 "popped", (json_int_t)vs.popped, "completed", (json_int_t)vs.completed,
			 "no_mbuf", (json_int_t)vs.no_mbuf, "offload", (json_int_t)vs.offload,
			 "csum_requests", (json_int_t)vs.csum_requests,
			 "gso_requests", (json_int_t)vs.gso_requests,
			 "forced", (json_int_t)vs.forced, "late_free", (json_int_t)vs.late_free,
			 "dest_deleted", (json_int_t)vs.dest_deleted,
			 "mem_remaps", (json_int_t)vs.mem_remaps,   /* s15-L */
			 "mem_maps", (json_int_t)vs.mem_maps,
			 "extbuf_in_use", (json_int_t)vs.extbuf_in_use,
			 "slots_leaked", (json_int_t)vs.slots_leaked,
			 "horizon_waits", (json_int_t)vs.horizon_waits,   /* s11-V3 */
			 "waiting_now", (json_int_t)vs.waiting_now,
			 "vring_errors", errs,
			 "hold_us", "p50", sn_vqtx_hold_pct_us(&vs, 50), "p99",
			 sn_vqtx_hold_pct_us(&vs, 99), "max", sn_vqtx_hold_max_us(&vs),
			 "held_occupancy", occ_json(&vs));
}

/* issue 6: {horizon, wheel_pool} of a class or aggregate. */
static json_t *cl_drops_json(const uint64_t *drop)
{
	return json_pack("{s:I, s:I}", "horizon", (json_int_t)drop[SN_CL_DROP_HORIZON],
			 "wheel_pool", (json_int_t)drop[SN_CL_DROP_POOL]);
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

/* issue 6: per-class counters of port p (summed over the workers), NULL
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

/* The "queues" array of a vhost-user port: one object per queue pair. */
static json_t *queues_json(const struct sn_port *p)
{
	uint32_t on = __atomic_load_n(&p->vring_on, __ATOMIC_RELAXED);
	json_t *a = json_array();

	for (unsigned qi = 0; a && qi < p->nq; qi++) {
		struct sn_vqtx_stats vs = { 0 };
		struct sn_portq_stats qs;
		json_t *o;

		sn_portq_stats_read(p, qi, &qs);
		if (p->q[qi].vq)
			sn_vqtx_stats_read(p->q[qi].vq, &vs);
		o = json_pack("{s:i, s:i, s:i, s:b, s:b, s:I, s:I, s:I, s:I, s:I, s:I, "
			      "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
			      "s:b, s:b, s:I, s:I, s:o}}",
			      "queue", (int)qi, "owner", (int)p->q[qi].owner,
			      "worker", (int)p->q[qi].owner,
			      "tx_enabled", (on >> (2 * qi + 1)) & 1, "rx_enabled", (on >> (2 * qi)) & 1,
			      "rx_packets", (json_int_t)qs.rx_packets, "rx_bytes", (json_int_t)qs.rx_bytes,
			      "rx_bursts", (json_int_t)qs.rx_bursts,
			      "tx_packets", (json_int_t)qs.tx_packets, "tx_bytes", (json_int_t)qs.tx_bytes,
			      "ring_full", (json_int_t)qs.ring_full,
			      "completion",
			      "held_now", (json_int_t)vs.held_now, "held_max", (json_int_t)vs.held_max,
			      "out_of_order", (json_int_t)vs.out_of_order,
			      "hold_timeouts", (json_int_t)vs.hold_timeouts,
			      "popped", (json_int_t)vs.popped, "completed", (json_int_t)vs.completed,
			      "no_mbuf", (json_int_t)vs.no_mbuf, "offload", (json_int_t)vs.offload,
			      "forced", (json_int_t)vs.forced, "late_free", (json_int_t)vs.late_free,
			      "dest_deleted", (json_int_t)vs.dest_deleted,
			      "marked", (json_int_t)vs.marked, "unmarked", (json_int_t)vs.unmarked,
			      "opted_in", vs.opted_in != 0, "opted_out", vs.opted_out != 0,
			      "csum_requests", (json_int_t)vs.csum_requests,
			      "gso_requests", (json_int_t)vs.gso_requests,
			      "held_occupancy", occ_json(&vs));
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* issue 6: top-level "aggregates": name -> counters + NBA view per worker.
 * The NBA's core stats are control-thread state: main runs sn_nba_update
 * too (sn_policy_tick), so reading them here is single-threaded. */
static json_t *aggregates_stats_json(const struct sn_ctl *ctl)
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

/* issue 6: the "policy" member of a shaped port's stats, NULL if none. */
static json_t *policy_stats_json(const struct sn_ctl *ctl, const struct sn_port *p)
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
	/* issue 6 (measurement): clock_ns with the counters, and whether the
	 * pair is consistent: no run() (or counting submit) of any owning
	 * worker began or was in progress while they were read
	 * (sn_pipeline_run_seq(): every owner's first value before the
	 * counters, every second one after; the acquire fence pairs with each
	 * worker's release fence after its odd store). s13-P3: before, only
	 * queue 0's owner was checked, so a read inside another owner's run
	 * passed as exact (tests/policy/test_stats_seq.py). clock_ns is queue
	 * 0's owner's; each owner's counters are exact at its own clock. */
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
		  json_object_set_new(o, "clock_consistent", json_boolean(s1)))) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* issue 6: CPU fair dropping, every worker's instance read once per
 * stats.get, so the totals are exactly the sum of the per-worker objects
 * of the same answer. Each instance's fields are relaxed loads (a set may
 * be torn between fields, sn_cpufair.h). Main thread. */
struct cf_snap {
	unsigned n;                                      /* workers; 0 = off */
	struct sn_cpufair_stats w[SN_CONFIG_WORKERS_MAX];
	/* Counters summed over the workers (active_max: the sum of their
	 * maxima); budget_pct, capacity, theta_ns, ns_per_kweight are
	 * worker 0's (capacity: per worker thread). */
	struct sn_cpufair_stats sum;
};

static void cf_snap_read(const struct sn_ctl *ctl, struct cf_snap *s)
{
	memset(s, 0, sizeof(*s));
	s->n = SN_MIN(ctl->n_cpufair, SN_CONFIG_WORKERS_MAX);
	for (unsigned k = 0; k < s->n; k++) {
		struct sn_cpufair_stats *w = &s->w[k], *t = &s->sum;

		sn_cpufair_stats(ctl->cpufair[k], w);
		if (k == 0) {
			*t = *w;
			continue;
		}
		t->kept += w->kept;
		t->dropped_fair += w->dropped_fair;
		t->dropped_table_full += w->dropped_table_full;
		t->dropped_invalid += w->dropped_invalid;
		t->bursts += w->bursts;
		t->active += w->active;
		t->active_max += w->active_max;
		for (unsigned i = 0; i < SN_CPUFAIR_PORTS; i++) {
			t->port_cpu_ns[i] += w->port_cpu_ns[i];
			t->port_kept[i] += w->port_kept[i];
			t->port_dropped[i] += w->port_dropped[i];
		}
	}
}

/* issue 6: CPU fair dropping (datapath.cpu_fair_pct): one instance's
 * counters (a worker's, or the totals over the workers). */
static json_t *cpufair_stats_json(const struct sn_cpufair_stats *cs)
{
	return json_pack("{s:I, s:I, s:I, s:{s:I, s:I, s:I}, s:I, s:I, s:I, s:I, s:I}",
			 "budget_pct", (json_int_t)cs->budget_pct,
			 "capacity_ns_per_s", (json_int_t)cs->capacity, "kept", (json_int_t)cs->kept,
			 "drops", "fair", (json_int_t)cs->dropped_fair,
			 "table_full", (json_int_t)cs->dropped_table_full,
			 "invalid", (json_int_t)cs->dropped_invalid,
			 "bursts", (json_int_t)cs->bursts,
			 "theta_ns", (json_int_t)cs->theta_ns, "active", (json_int_t)cs->active,
			 "active_max", (json_int_t)cs->active_max,
			 "ns_per_kweight", (json_int_t)cs->ns_per_kweight);
}

/* Layout ncore: per worker lcore, its loop counters and (cpu_fair_pct > 0)
 * its CPU fair dropping instance's counters (one entry in the other
 * layouts). */
static json_t *workers_json(const struct sn_ctl *ctl, const struct cf_snap *cf)
{
	json_t *a = json_array();

	for (unsigned k = 0; a && k < sn_pipeline_workers(ctl->pipeline); k++) {
		struct sn_pipeline_thread_stats t;

		sn_pipeline_worker_thread_stats(ctl->pipeline, k, &t);
		json_t *w = json_pack("{s:i, s:I, s:I, s:I}", "worker", (int)k,
				      "loops", (json_int_t)t.loops, "sleeps", (json_int_t)t.sleeps,
				      "sleep_ns", (json_int_t)t.sleep_ns);

		if (w && cf && k < cf->n &&
		    json_object_set_new(w, "cpu_fair", cpufair_stats_json(&cf->w[k]))) {
			json_decref(w);
			w = NULL;
		}
		if (!w || json_array_append_new(a, w)) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

static json_t *arbiter_stats_json(const struct sn_ctl *ctl, const struct cf_snap *cf)
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
			 "sleep_ns", (json_int_t)at.sleep_ns, "workers", workers_json(ctl, cf));
}

static json_t *port_stats_json(const struct sn_ctl *ctl, const struct sn_port *p,
			       const struct cf_snap *cf)
{
	struct sn_port_stats st;
	json_t *drops, *o, *pol;

	sn_port_stats_read(p, &st);
	if (p->type == SN_PORT_UPLINK) {
		struct rte_eth_stats es;

		/* Layout 2core: the arbiter lcore's TX on its own queue. */
		if (ctl->pipeline) {
			struct sn_pipeline_uplink_tx ut;

			sn_pipeline_uplink_tx(ctl->pipeline, &ut);
			st.tx_packets += ut.tx_packets;
			st.tx_bytes += ut.tx_bytes;
			st.drop[SN_DROP_RING_FULL] += ut.ring_full;
		}

		/* The PMD drops a frame it has no mbuf for before we see it. */
		if (rte_eth_stats_get(p->eth_port, &es) == 0)
			st.drop[SN_DROP_NO_MBUF] += es.rx_nombuf;
	}
	drops = json_object();
	if (!drops)
		return NULL;
	for (unsigned i = 0; i < SN_DROP_MAX; i++)
		if (json_object_set_new(drops, sn_drop_names[i], json_integer((json_int_t)st.drop[i]))) {
			json_decref(drops);
			return NULL;
		}
	o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o}", "name", p->name,
		      "type", type_str(p), "state", state_str(p),
		      "rx_packets", (json_int_t)st.rx_packets, "rx_bytes", (json_int_t)st.rx_bytes,
		      "tx_packets", (json_int_t)st.tx_packets, "tx_bytes", (json_int_t)st.tx_bytes,
		      "drops", drops);
	if (o && p->type == SN_PORT_VHOST) {
		json_t *c = completion_json(p), *q = queues_json(p);

		if (!c || json_object_set_new(o, "completion", c) ||
		    json_object_set_new(o, "completion_mode", json_string(completion_mode_str(p))) ||
		    !q || json_object_set_new(o, "queues", q)) {
			json_decref(o);
			return NULL;
		}
	}
	pol = o ? policy_stats_json(ctl, p) : NULL;
	if (pol && json_object_set_new(o, "policy", pol)) {
		json_decref(o);
		return NULL;
	}
	if (o && cf && p->slot < SN_CPUFAIR_PORTS) {
		const struct sn_cpufair_stats *cs = &cf->sum;

		if (json_object_set_new(o, "cpu_fair", json_pack("{s:I, s:I, s:I}",
				"cpu_ns", (json_int_t)cs->port_cpu_ns[p->slot],
				"kept", (json_int_t)cs->port_kept[p->slot],
				"dropped", (json_int_t)cs->port_dropped[p->slot]))) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* s13-R3: the control plane's own counters (sn_rpc_stats, one per cause). */
static json_t *control_stats_json(const struct sn_ctl *ctl)
{
	struct sn_rpc_stats rs;

	sn_rpc_stats_read(ctl->rpc, &rs);
	return json_pack("{s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I}}",
			 "accepted", (json_int_t)rs.accepted, "refused", (json_int_t)rs.refused,
			 "requests", (json_int_t)rs.requests,
			 "errors", "parse_error", (json_int_t)rs.parse_errors,
			 "invalid_request", (json_int_t)rs.invalid_requests,
			 "oversize", (json_int_t)rs.oversize,
			 "method_not_found", (json_int_t)rs.method_not_found,
			 "invalid_params", (json_int_t)rs.invalid_params,
			 "failed", (json_int_t)rs.failed,
			 "dropped", "idle_timeout", (json_int_t)rs.idle_timeouts,
			 "output_overflow", (json_int_t)rs.output_overflow,
			 "partial_hangup", (json_int_t)rs.partial_hangups);
}

/* stats.get's answer; NULL (ports released) when out of memory or when
 * `only` names no port (*found false). */
static json_t *stats_get_json(const struct sn_ctl *ctl, const char *only, json_t *ports,
			      const struct cf_snap *cf, bool *found)
{
	const struct sn_port_table *t = sn_ports_table_main(ctl->reg);
	struct sn_mac_stats ms;
	json_t *o;

	for (unsigned i = 0; i < t->n; i++) {
		if (only && strcmp(only, t->list[i]->name))
			continue;
		*found = true;
		o = port_stats_json(ctl, t->list[i], cf);
		if (!o || json_array_append_new(ports, o)) {
			json_decref(ports);
			return NULL;
		}
	}
	if (only && !*found) {
		json_decref(ports);
		return NULL;
	}
	sn_switch_mac_stats(ctl->sw, &ms);
	o = json_pack("{s:o, s:{s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I}, s:f}",
			 "ports", ports,
			 "mempool", "size", (json_int_t)ctl->mp->size,
			 "in_use", (json_int_t)rte_mempool_in_use_count(ctl->mp),
			 "mac_table", "entries", (json_int_t)ms.entries, "learned", (json_int_t)ms.learned,
			 "aged", (json_int_t)ms.aged, "moves", (json_int_t)ms.moves,
			 "full", (json_int_t)ms.full,
			 "uptime_s", (double)(sn_ctl_now_ns() - ctl->start_ns) / 1e9);
	if (o && cf && json_object_set_new(o, "cpu_fair", cpufair_stats_json(&cf->sum))) {
		json_decref(o);
		return NULL;
	}
	if (o && ctl->rpc) {   /* s13-R3 */
		json_t *c = control_stats_json(ctl);

		if (!c || json_object_set_new(o, "control", c)) {
			json_decref(o);
			return NULL;
		}
	}
	if (o && ctl->pipeline) {
		json_t *a = arbiter_stats_json(ctl, cf);

		if (!a || json_object_set_new(o, "arbiter", a)) {
			json_decref(o);
			return NULL;
		}
		a = aggregates_stats_json(ctl);
		if (!a || json_object_set_new(o, "aggregates", a)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static json_t *h_stats_get(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	const char *only = param_str(params, "port", NULL);
	json_t *ports = json_array(), *o;
	bool found = false;
	struct cf_snap *cf = ctl->n_cpufair ? malloc(sizeof(*cf)) : NULL;

	if (!ports || (ctl->n_cpufair && !cf)) {
		json_decref(ports);
		free(cf);
		return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "out of memory");
	}
	if (cf)
		cf_snap_read(ctl, cf);
	o = stats_get_json(ctl, only, ports, cf, &found);
	free(cf);
	if (!o && only && !found)
		return sn_rpc_fail(err, SN_RPC_ERR_NOT_FOUND, "no port named %s", only);
	if (!o)
		return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "out of memory");
	return o;
}

/* ---- issue 6: policy.get / policy.set / policy.del ----------------------- */

static json_t *h_policy_get(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	const struct sn_policy *pol = sn_policy_main(ctl->policy);
	json_t *r = sn_policy_to_json(pol);

	(void)params;
	if (!r || json_object_set_new(r, "generation", json_integer((json_int_t)pol->gen))) {
		json_decref(r);
		return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "out of memory");
	}
	return r;
}

static json_t *publish(struct sn_ctl *ctl, const struct sn_policy *pol, struct sn_rpc_error *err)
{
	int rc = sn_policy_publish(ctl->policy, pol);

	if (rc)
		return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "policy: %s", strerror(-rc));
	return json_pack("{s:I}", "generation", (json_int_t)sn_policy_main(ctl->policy)->gen);
}

static json_t *h_policy_set(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	struct sn_policy pol;
	char msg[sizeof(err->message)];

	const struct sn_port_table *t = sn_ports_table_main(ctl->reg);

	if (sn_policy_parse(json_object_get(params, "policy"), &pol, msg, sizeof(msg)))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "%s", msg);
	for (unsigned i = 0; i < t->n; i++)
		if (t->list[i]->type == SN_PORT_UPLINK && sn_policy_port_find(&pol, t->list[i]->name))
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "policy.ports.%s: the uplink is "
					   "shaped by policy.uplink, not by a port entry",
					   t->list[i]->name);
	return publish(ctl, &pol, err);
}

static json_t *h_policy_del(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	const char *name = param_str(params, "port", NULL);
	struct sn_policy pol = *sn_policy_main(ctl->policy);

	if (!name)
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "port: required");
	if (sn_policy_port_del(&pol, name))
		return sn_rpc_fail(err, SN_RPC_ERR_NOT_FOUND, "policy has no entry for port %s", name);
	return publish(ctl, &pol, err);
}

static json_t *h_shutdown(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;

	(void)params, (void)err;
	*ctl->stop = 1;
	return json_object();
}

int sn_ctl_register(struct sn_rpc_server *srv, struct sn_ctl *ctl)
{
	static const struct {
		const char *method;
		sn_rpc_handler_t fn;
	} table[] = {
		{ "version", h_version },
		{ "port.add", h_port_add },
		{ "port.del", h_port_del },
		{ "port.list", h_port_list },
		{ "stats.get", h_stats_get },
		{ "policy.get", h_policy_get },
		{ "policy.set", h_policy_set },
		{ "policy.del", h_policy_del },
		{ "shutdown", h_shutdown },
	};

	ctl->rpc = srv;   /* stats.get "control" */
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		int rc = sn_rpc_register(srv, table[i].method, table[i].fn, ctl);

		if (rc)
			return rc;
	}
	return 0;
}
