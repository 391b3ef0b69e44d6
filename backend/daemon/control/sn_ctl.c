/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_ctl.c — schednicd's JSON-RPC methods: version, shutdown and the
 * assembly of stats.get; registration of every method (table:
 * control/rpc_api.json).
 *
 * The methods of a module are beside it: port.* in port/sn_port_rpc.c,
 * policy.* in control/sn_policy_rpc.c. stats.get is one answer built from
 * several modules: each port's object (port/sn_port_rpc.c) with its
 * "policy" member (pipeline/sn_pipeline_rpc.c) and CPU fair counters
 * (here), the mempool, the MAC table, the control plane's own counters,
 * and the pipeline's "arbiter" and "aggregates" (pipeline/sn_pipeline_rpc.c).
 */
#include "sn_ctl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <rte_mempool.h>
#include <rte_version.h>

#include "sn_common.h"
#include "sn_config.h"
#include "sn_cpufair.h"
#include "sn_pipeline_rpc.h"
#include "sn_policy_rpc.h"
#include "sn_port.h"
#include "sn_port_rpc.h"
#include "sn_rpc.h"
#include "sn_switch.h"

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

static json_t *h_version(json_t *params, void *arg, struct sn_rpc_error *err)
{
	(void)params, (void)arg, (void)err;
	return json_pack("{s:s, s:s, s:i}", "version", SN_VERSION, "dpdk", rte_version(),
			 "api", SN_API_VERSION);
}

static json_t *h_shutdown(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;

	(void)params, (void)err;
	*ctl->stop = 1;
	return json_object();
}

/* CPU fair dropping: every worker's instance read once per
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
	}
}

/* CPU fair dropping (datapath.cpu_fair_pct): one instance's
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

/* Port p's object of stats.get: its own (sn_port_rpc.c), then its
 * "policy" (shaped ports) and "cpu_fair" members. */
static json_t *port_json(const struct sn_ctl *ctl, const struct sn_port *p,
			 const struct cf_snap *cf)
{
	json_t *o = sn_port_rpc_stats_json(ctl, p), *pol;

	pol = o ? sn_pipeline_rpc_port_json(ctl, p) : NULL;
	if (pol && json_object_set_new(o, "policy", pol)) {
		json_decref(o);
		return NULL;
	}
	if (o && cf && cf->n) {
		struct sn_cpufair_port cs = { 0 }, w;

		/* summed over the workers when the port's object is built */
		for (unsigned k = 0; k < cf->n; k++) {
			sn_cpufair_port_stats(ctl->cpufair[k], p->slot, &w);
			cs.cpu_ns += w.cpu_ns;
			cs.kept += w.kept;
			cs.dropped += w.dropped;
		}
		if (json_object_set_new(o, "cpu_fair", json_pack("{s:I, s:I, s:I}",
				"cpu_ns", (json_int_t)cs.cpu_ns,
				"kept", (json_int_t)cs.kept,
				"dropped", (json_int_t)cs.dropped))) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* The "arbiter" object (sn_pipeline_rpc.c) with, when CPU fair dropping
 * is on, each worker's instance as "cpu_fair" in its "workers" entry. */
static json_t *arbiter_json(const struct sn_ctl *ctl, const struct cf_snap *cf)
{
	json_t *a = sn_pipeline_rpc_arbiter_json(ctl);
	json_t *workers = a ? json_object_get(a, "workers") : NULL;

	for (unsigned k = 0; cf && k < cf->n && k < json_array_size(workers); k++)
		if (json_object_set_new(json_array_get(workers, k), "cpu_fair",
					cpufair_stats_json(&cf->w[k]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* The control plane's own counters (sn_rpc_stats, one per cause). */
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
		o = port_json(ctl, t->list[i], cf);
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
	o = json_pack("{s:o, s:{s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:f}",
			 "ports", ports,
			 "mempool", "size", (json_int_t)ctl->mp->size,
			 "in_use", (json_int_t)rte_mempool_in_use_count(ctl->mp),
			 "mac_table", "entries", (json_int_t)ms.entries, "learned", (json_int_t)ms.learned,
			 "aged", (json_int_t)ms.aged, "moves", (json_int_t)ms.moves,
			 "full", (json_int_t)ms.full, "move_refused", (json_int_t)ms.move_refused,
			 "quota", (json_int_t)ms.quota,
			 "uptime_s", (double)(sn_ctl_now_ns() - ctl->start_ns) / 1e9);
	if (o && cf && json_object_set_new(o, "cpu_fair", cpufair_stats_json(&cf->sum))) {
		json_decref(o);
		return NULL;
	}
	if (o && ctl->rpc) {
		json_t *c = control_stats_json(ctl);

		if (!c || json_object_set_new(o, "control", c)) {
			json_decref(o);
			return NULL;
		}
	}
	if (o && ctl->pipeline) {
		json_t *a = arbiter_json(ctl, cf);

		if (!a || json_object_set_new(o, "arbiter", a)) {
			json_decref(o);
			return NULL;
		}
		a = sn_pipeline_rpc_aggregates_json(ctl);
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
	const char *only = sn_rpc_param_str(params, "port", NULL);
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


int sn_ctl_register(struct sn_rpc_server *srv, struct sn_ctl *ctl)
{
	static const struct {
		const char *method;
		sn_rpc_handler_t fn;
	} table[] = {
		{ "version", h_version },
		{ "stats.get", h_stats_get },
		{ "shutdown", h_shutdown },
	};
	int rc;

	ctl->rpc = srv;   /* stats.get "control" */
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		rc = sn_rpc_register(srv, table[i].method, table[i].fn, ctl);
		if (rc)
			return rc;
	}
	rc = sn_port_rpc_register(srv, ctl);
	return rc ? rc : sn_policy_rpc_register(srv, ctl);
}
