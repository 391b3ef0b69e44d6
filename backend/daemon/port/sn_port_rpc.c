/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_rpc.c — the JSON-RPC methods of the port registry: port.add,
 * port.del, port.list, and each port's object of stats.get.
 *
 * sn_rpc has already checked types, required and unknown params against
 * the schema (control/rpc_api.json); these handlers check values (name
 * syntax, ranges, the queue -> worker map) and turn registry errors into
 * the API's error codes. Counters follow the daemon's convention: rx =
 * from the port into the switch, tx = delivered to it.
 *
 * Main thread only (sn_ctl.h): the handlers run inside sn_rpc_poll(), and
 * the main thread is the only one that adds or deletes ports, so the
 * registry snapshot they walk cannot change under them.
 */
#include "sn_port_rpc.h"

#include <errno.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "sn_config.h"
#include "sn_ctl.h"
#include "sn_pipeline.h"
#include "sn_port.h"
#include "sn_port_quota.h"
#include "sn_quota.h"
#include "sn_rpc.h"
#include "sn_switch.h"
#include "sn_uplink.h"
#include "sn_vqtx.h"

/* The hold limits of port.add (max_hold_us, unmarked_max_hold_us) into
 * opts; 0, or -1 with err filled. */
static int port_add_holds(json_t *params, struct sn_vhost_opts *opts, struct sn_rpc_error *err)
{
	json_t *hold = json_object_get(params, "max_hold_us");
	json_t *uhold = json_object_get(params, "unmarked_max_hold_us");

	if (hold) {
		if (!json_is_integer(hold) || json_integer_value(hold) < 0 ||
		    json_integer_value(hold) > SN_CONFIG_MAX_HOLD_US_MAX)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "max_hold_us: must be an integer 0..%u", SN_CONFIG_MAX_HOLD_US_MAX),
			       -1;
		if (json_integer_value(hold) && !opts->deferred)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "max_hold_us: only with completion \"deferred\""), -1;
		opts->max_hold_us = (uint32_t)json_integer_value(hold);
	}
	if (uhold) {
		if (!json_is_integer(uhold) || json_integer_value(uhold) < 1 ||
		    json_integer_value(uhold) > SN_CONFIG_MAX_HOLD_US_MAX)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "unmarked_max_hold_us: must be an integer 1..%u",
					   SN_CONFIG_MAX_HOLD_US_MAX), -1;
		/* The schema default is accepted (and ignored) on immediate
		 * ports, as max_hold_us 0 is. */
		if (!opts->deferred && json_integer_value(uhold) != SN_CONFIG_UNMARKED_HOLD_US_DEF)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "unmarked_max_hold_us: only with completion \"deferred\""), -1;
		opts->unmarked_max_hold_us = (uint32_t)json_integer_value(uhold);
	}
	return 0;
}

/* The queues of port.add and their workers (the queue -> worker map of
 * layout ncore; balanced when absent) into opts, the map in
 * wmap[SN_CONFIG_QUEUES_MAX]; 0, or -1 with err filled. */
static int port_add_queues(const struct sn_ctl *ctl, json_t *params, struct sn_vhost_opts *opts,
			   uint8_t *wmap, struct sn_rpc_error *err)
{
	json_t *queues = json_object_get(params, "queues");
	json_t *workers = json_object_get(params, "workers");
	const unsigned nw = sn_ports_workers(ctl->reg);
	json_t *w;
	size_t k;

	opts->queues = 1;
	if (queues) {
		if (!json_is_integer(queues) || json_integer_value(queues) < 1 ||
		    json_integer_value(queues) > SN_CONFIG_QUEUES_MAX)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "queues: must be an integer 1..%u", SN_CONFIG_QUEUES_MAX), -1;
		opts->queues = (uint16_t)json_integer_value(queues);
	}
	if (!workers)
		return 0;
	if (!json_is_array(workers) || json_array_size(workers) != opts->queues)
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
				   "workers: must be an array of %u worker indexes, one per queue",
				   opts->queues), -1;
	json_array_foreach(workers, k, w) {
		if (!json_is_integer(w) || json_integer_value(w) < 0 ||
		    json_integer_value(w) >= nw)
			return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
					   "workers[%zu]: must be an integer 0..%u (worker lcores)",
					   k, nw - 1), -1;
		wmap[k] = (uint8_t)json_integer_value(w);
	}
	opts->workers = wmap;
	return 0;
}

/* The name and path of port.add against the ports that exist and the
 * control socket: 0, or -1 with err filled (-32000). */
static int port_add_unique(const struct sn_ctl *ctl, const char *name, const char *path,
			   struct sn_rpc_error *err)
{
	const struct sn_port_table *t = sn_ports_table_main(ctl->reg);

	/* A client port on the control socket would talk vhost-user to our
	 * own RPC server, reconnecting forever (the config refuses it too). */
	if (ctl->control_socket && !strcmp(path, ctl->control_socket))
		return sn_rpc_fail(err, SN_RPC_ERR_EXISTS, "path %s is the control socket", path), -1;
	for (unsigned i = 0; i < t->n; i++) {
		if (!strcmp(t->list[i]->name, name))
			return sn_rpc_fail(err, SN_RPC_ERR_EXISTS, "port %s already exists", name), -1;
		if (t->list[i]->type == SN_PORT_VHOST && !strcmp(t->list[i]->path, path))
			return sn_rpc_fail(err, SN_RPC_ERR_EXISTS, "path %s already used by port %s",
					   path, t->list[i]->name), -1;
	}
	return 0;
}

static json_t *h_port_add(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	const char *name = sn_rpc_param_str(params, "name", NULL);
	const char *path = sn_rpc_param_str(params, "path", NULL);
	const char *mode = sn_rpc_param_str(params, "mode", "server");
	const char *type = sn_rpc_param_str(params, "type", "vhost-user");
	const char *completion = sn_rpc_param_str(params, "completion", "immediate");
	struct sn_vhost_opts opts = { 0 };
	uint8_t wmap[SN_CONFIG_QUEUES_MAX];
	struct sn_bind bind;
	char msg[160];
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
	if (port_add_holds(params, &opts, err) || port_add_queues(ctl, params, &opts, wmap, err) ||
	    port_add_unique(ctl, name, path, err))
		return NULL;
	if (sn_bind_from_json(&bind, json_object_get(params, "allowed_macs"),
			      json_object_get(params, "allowed_ips"), "", msg, sizeof(msg)))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "%s", msg);
	opts.bind = &bind;
	rc = sn_ports_add_vhost(ctl->reg, name, path, &opts);
	switch (rc) {
	case 0:
		return json_pack("{s:s}", "name", name);
	case -EEXIST:
		return sn_rpc_fail(err, SN_RPC_ERR_EXISTS, "port %s or path %s already in use", name, path);
	case -ENOSPC:
		return sn_rpc_fail(err, SN_RPC_ERR_RESOURCE, "port limit (%u) reached: datapath.max_ports",
				   sn_config_port_slots - 1);
	case -ENOBUFS:
		return sn_rpc_fail(err, SN_RPC_ERR_RESOURCE,
				   "port %s: its mbuf reserve does not fit the pool: quota.mbufs "
				   "(raise datapath.mbufs, lower quota.mbufs_reserve or queues)", name);
	case -EAGAIN:
		return sn_rpc_fail(err, SN_RPC_ERR_RESOURCE,
				   "every free port slot still has frames of a deleted port out "
				   "(quota.mbufs used): retry when they are completed");
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
	const char *name = sn_rpc_param_str(params, "name", NULL);
	int rc;

	if (!name)
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "name: required");
	rc = sn_ports_remove(ctl->reg, name);   /* for good: its records go */
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

/* allowed_macs and allowed_ips of a vhost-user port into o: 0 or -1. */
static int bind_add(const struct sn_port *p, json_t *o)
{
	json_t *b = sn_bind_to_json(&p->bind);

	if (!b || json_object_update(o, b)) {
		json_decref(b);
		return -1;
	}
	json_decref(b);
	return 0;
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
			/* Queue -> worker map (layout ncore). */
			json_t *q = json_array();

			for (unsigned qi = 0; q && qi < p->nq; qi++)
				if (json_array_append_new(q, json_pack("{s:i, s:i}", "queue", (int)qi,
								       "worker", (int)p->q[qi].owner))) {
					json_decref(q);
					q = NULL;
				}
			o = !q ? NULL : json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o}", "name",
				      p->name, "type", type_str(p), "owner", sn_port_owner_names[p->owner],
				      "path", p->path,
				      "mode", p->client ? "client" : "server", "state", state_str(p),
				      "completion_mode", completion_mode_str(p), "queues", q);
			if (o && bind_add(p, o)) {
				json_decref(o);
				o = NULL;
			}
		} else
			o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", p->name, "type", type_str(p),
				      "owner", sn_port_owner_names[p->owner], "mode", "ethdev",
				      "state", state_str(p));
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
		vs->stop_wait_us_max = qi ? RTE_MAX(vs->stop_wait_us_max - q.stop_wait_us_max,
						    q.stop_wait_us_max) : q.stop_wait_us_max;
	}
}

/* "held_occupancy" of a deferred TX queue (or the sum of a port's
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

/* Adds the stock-guest fallback's counters (sn_vqtx_copy_out) to the
 * "completion" object c. 0 or -1. */
static int copy_add(json_t *c, const struct sn_vqtx_stats *vs)
{
	return json_object_set_new(c, "copied_out", json_integer((json_int_t)vs->copied_out)) ||
	       json_object_set_new(c, "copy_no_mbuf", json_integer((json_int_t)vs->copy_no_mbuf)) ||
	       json_object_set_new(c, "quota_held", json_integer((json_int_t)vs->quota_held)) ||
	       json_object_set_new(c, "quota_mbufs", json_integer((json_int_t)vs->quota_mbufs)) ||
	       json_object_set_new(c, "quota_mbufs_dropped",
				   json_integer((json_int_t)vs->quota_mbufs_dropped))
	       ? -1 : 0;
}

/* completion_json()'s object o with copy_add() (consumed; NULL on failure). */
static json_t *copy_json(json_t *o, const struct sn_vqtx_stats *vs)
{
	if (o && copy_add(o, vs)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The device stop counters of a completion object (sn_vqtx_stop). */
static json_t *stop_json(const struct sn_vqtx_stats *vs)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I}",
			 "purged_backlog", (json_int_t)vs->purged[SN_VQTX_PURGED_BACKLOG],
			 "purged_wheel", (json_int_t)vs->purged[SN_VQTX_PURGED_WHEEL],
			 "purged_sched", (json_int_t)vs->purged[SN_VQTX_PURGED_SCHED],
			 "wait_us_max", (json_int_t)vs->stop_wait_us_max,
			 "timeouts", (json_int_t)vs->stop_timeouts);
}

/* The "completion" object of a vhost-user port (zeros in immediate mode). */
static json_t *completion_json(const struct sn_port *p)
{
	struct sn_vqtx_stats vs;
	json_t *errs = json_object();
	json_t *o;

	if (!errs)
		return NULL;
	completion_sum(p, &vs);
	for (unsigned i = 1; i < SN_VRING_E__MAX; i++)
		if (json_object_set_new(errs, sn_vring_err_name((enum sn_vring_err)i),
					json_integer((json_int_t)vs.err[i]))) {
			json_decref(errs);
			return NULL;
		}
	o = copy_json(json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
			 "s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:{s:f, s:f, s:f}, s:o, "
			 "s:I, s:I}",
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
			 "mem_remaps", (json_int_t)vs.mem_remaps,
			 "mem_maps", (json_int_t)vs.mem_maps,
			 "extbuf_in_use", (json_int_t)vs.extbuf_in_use,
			 "slots_leaked", (json_int_t)vs.slots_leaked,
			 "horizon_waits", (json_int_t)vs.horizon_waits,
			 "waiting_now", (json_int_t)vs.waiting_now,
			 "vring_errors", errs,
			 "hold_us", "p50", sn_vqtx_hold_pct_us(&vs, 50), "p99",
			 sn_vqtx_hold_pct_us(&vs, 99), "max", sn_vqtx_hold_max_us(&vs),
			 "held_occupancy", occ_json(&vs),
			 "recovered_after_restart", (json_int_t)vs.recovered_after_restart,
			 "record_rejected", (json_int_t)vs.record_rejected), &vs);
	if (o && json_object_set_new(o, "stop", stop_json(&vs))) {
		json_decref(o);
		return NULL;
	}
	return o;
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
		if (o && copy_add(json_object_get(o, "completion"), &vs)) {
			json_decref(o);
			o = NULL;
		}
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* The uplink's queues (sn_uplink.h): "rx_mode", "rx_queues" (our
 * per-queue counters, written by the owning worker alone, and the PMD's
 * own count where it keeps one) and "tx_queues" (which lcore transmits on
 * each: worker k on queue k, the arbiter on queue W; a queue at or past
 * ctl->uplink_txq_used, set up only because the device pairs its queues,
 * is "unused"). es: the PMD's
 * counters, or NULL. */
static int uplink_queues_add(const struct sn_ctl *ctl, const struct sn_port *p,
			     const struct rte_eth_stats *es, json_t *o)
{
	const unsigned nw = sn_ports_workers(ctl->reg);
	struct rte_eth_dev_info info;
	json_t *rx = json_array(), *tx = json_array();
	unsigned ntx = 0;

	if (rte_eth_dev_info_get(p->eth_port, &info) == 0)
		ntx = info.nb_tx_queues;
	for (unsigned qi = 0; rx && qi < p->nq; qi++) {
		struct sn_portq_stats qs;

		sn_portq_stats_read(p, qi, &qs);
		if (json_array_append_new(rx, json_pack(
				"{s:i, s:i, s:I, s:I, s:I, s:I}", "queue", (int)qi,
				"worker", (int)p->q[qi].owner,
				"rx_packets", (json_int_t)qs.rx_packets,
				"rx_bytes", (json_int_t)qs.rx_bytes,
				"rx_bursts", (json_int_t)qs.rx_bursts,
				"pmd_rx_packets", (json_int_t)(es && qi < RTE_ETHDEV_QUEUE_STAT_CNTRS ?
							       es->q_ipackets[qi] : 0)))) {
			json_decref(rx);
			rx = NULL;
		}
	}
	for (unsigned qi = 0; tx && qi < ntx; qi++) {
		const bool unused = qi >= ctl->uplink_txq_used, arb = !unused && qi >= nw;

		if (json_array_append_new(tx, json_pack(
				"{s:i, s:s, s:i, s:I}", "queue", (int)qi,
				"lcore", unused ? "unused" : arb ? "arbiter" : "worker",
				"worker", unused || arb ? -1 : (int)qi,
				"pmd_tx_packets", (json_int_t)(es && qi < RTE_ETHDEV_QUEUE_STAT_CNTRS ?
							       es->q_opackets[qi] : 0)))) {
			json_decref(tx);
			tx = NULL;
		}
	}
	if (!rx || !tx ||
	    json_object_set_new(o, "rx_mode",
				json_string(sn_uplink_rx_mode_name(sn_uplink_rx_mode(p->eth_port)))) ||
	    json_object_set_new(o, "rx_queues", rx) || json_object_set_new(o, "tx_queues", tx)) {
		json_decref(rx);
		json_decref(tx);
		return -1;
	}
	return 0;
}

/* The "migration" object of a vhost-user port (live migration:
 * sn_vqtx.c flush(), sn_port_migrate.c). */
static json_t *migration_json(const struct sn_port *p)
{
	struct sn_vqtx_stats vs;

	completion_sum(p, &vs);
	return json_pack("{s:I, s:I, s:I}", "log_writes", (json_int_t)vs.log_writes,
			 "rarp_received",
			 (json_int_t)__atomic_load_n(&p->rarp_received, __ATOMIC_RELAXED),
			 "rarp_learned",
			 (json_int_t)__atomic_load_n(&p->rarp_learned, __ATOMIC_RELAXED));
}

/* See sn_port_rpc.h. */
/* The "quota" object: each budget of p (sn_port_quota.h) with, where the
 * port module accounts it, its use and hits. mbufs: the port's slot in
 * the mbuf quota (the uplink: its reserved RX share, limit only); held:
 * the limit per TX queue, the most any queue holds now, the polls it
 * limited. */
static json_t *quota_json(const struct sn_ctl *ctl, const struct sn_port *p)
{
	const struct sn_quota *mq = sn_ports_mbuf_quota(ctl->reg);
	struct sn_quota_owner_stats os = { 0 };
	uint64_t held_now = 0, held_hits = 0, mbuf_hits = 0, mbuf_drops = 0;
	json_t *o, *mb;

	for (unsigned qi = 0; qi < p->nq; qi++) {
		struct sn_vqtx_stats vs;

		if (!p->q[qi].vq) {   /* immediate: freed by the switch (sn_switch_poll.c) */
			struct sn_portq_stats qs;

			sn_portq_stats_read(p, qi, &qs);
			mbuf_drops += qs.quota_mbufs_dropped;
			continue;
		}
		sn_vqtx_stats_read(p->q[qi].vq, &vs);
		held_now = RTE_MAX(held_now, vs.extbuf_in_use);
		held_hits += vs.quota_held;
		mbuf_hits += vs.quota_mbufs;
		mbuf_drops += vs.quota_mbufs_dropped;
	}
	if (mq && p->type == SN_PORT_VHOST)
		sn_quota_owner_stats(mq, p->slot, &os);
	if (!p->vq)   /* immediate: the switch's refused takes (sn_switch_poll.c) */
		mbuf_hits = os.hits;
	mb = json_pack("{s:I, s:I, s:I, s:I, s:I}",
		       "limit", (json_int_t)__atomic_load_n(&p->quota.mbufs, __ATOMIC_RELAXED),
		       "reserve", (json_int_t)os.min, "used", (json_int_t)os.used,
		       "hits", (json_int_t)mbuf_hits, "dropped", (json_int_t)mbuf_drops);
	o = !mb ? NULL : json_pack("{s:o, s:{s:I, s:I, s:I}, s:{s:I}, s:{s:I}, s:{s:I}, s:{s:I}}",
		       "mbufs", mb,
		       "held", "limit", (json_int_t)__atomic_load_n(&p->quota.held, __ATOMIC_RELAXED),
		       "used", (json_int_t)held_now, "hits", (json_int_t)held_hits,
		       "backlog", "limit",
		       (json_int_t)__atomic_load_n(&p->quota.backlog, __ATOMIC_RELAXED),
		       "wheel", "limit", (json_int_t)__atomic_load_n(&p->quota.wheel, __ATOMIC_RELAXED),
		       "flows", "limit", (json_int_t)__atomic_load_n(&p->quota.flows, __ATOMIC_RELAXED),
		       "macs", "limit", (json_int_t)__atomic_load_n(&p->quota.macs, __ATOMIC_RELAXED));
	return o;
}

json_t *sn_port_rpc_stats_json(const struct sn_ctl *ctl, const struct sn_port *p)
{
	struct sn_port_stats st;
	struct rte_eth_stats es;
	bool have_es = false;
	json_t *drops, *o;

	sn_port_stats_read(p, &st);
	if (p->type == SN_PORT_UPLINK) {

		/* Layout 2core: the arbiter lcore's TX on its own queue. */
		if (ctl->pipeline) {
			struct sn_pipeline_uplink_tx ut;

			sn_pipeline_uplink_tx(ctl->pipeline, &ut);
			st.tx_packets += ut.tx_packets;
			st.tx_bytes += ut.tx_bytes;
			st.drop[SN_DROP_RING_FULL] += ut.ring_full;
		}

		/* The PMD drops a frame it has no mbuf for before we see it. */
		have_es = rte_eth_stats_get(p->eth_port, &es) == 0;
		if (have_es)
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
	o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:{s:I, s:I, s:I, s:I}}",
		      "name", p->name, "type", type_str(p), "owner", sn_port_owner_names[p->owner],
		      "state", state_str(p),
		      "rx_packets", (json_int_t)st.rx_packets, "rx_bytes", (json_int_t)st.rx_bytes,
		      "tx_packets", (json_int_t)st.tx_packets, "tx_bytes", (json_int_t)st.tx_bytes,
		      "drops", drops, "mac",
		      "entries", (json_int_t)(ctl->sw ? sn_switch_mac_used(ctl->sw, p->slot) : 0),
		      "quota", (json_int_t)p->quota.macs,
		      "quota_macs", (json_int_t)st.quota_macs,
		      "move_refused", (json_int_t)st.move_refused);
	if (o && json_object_set_new(o, "quota", quota_json(ctl, p))) {
		json_decref(o);
		return NULL;
	}
	if (o && p->type == SN_PORT_VHOST && bind_add(p, o)) {
		json_decref(o);
		return NULL;
	}
	if (o && p->type == SN_PORT_UPLINK &&
	    uplink_queues_add(ctl, p, have_es ? &es : NULL, o)) {
		json_decref(o);
		return NULL;
	}
	if (o && p->type == SN_PORT_VHOST) {
		json_t *c = completion_json(p), *q = queues_json(p);

		if (!c || json_object_set_new(o, "completion", c) ||
		    json_object_set_new(o, "completion_mode", json_string(completion_mode_str(p))) ||
		    !q || json_object_set_new(o, "queues", q) ||
		    json_object_set_new(o, "migration", migration_json(p)) ||
		    json_object_set_new(o, "vhost_user", json_pack("{s:I}", "mem_table_rejected",
			(json_int_t)__atomic_load_n(&p->mem_table_rejected, __ATOMIC_RELAXED)))) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

int sn_port_rpc_register(struct sn_rpc_server *srv, struct sn_ctl *ctl)
{
	int rc = sn_rpc_register(srv, "port.add", h_port_add, ctl);

	if (!rc)
		rc = sn_rpc_register(srv, "port.del", h_port_del, ctl);
	if (!rc)
		rc = sn_rpc_register(srv, "port.list", h_port_list, ctl);
	return rc;
}
