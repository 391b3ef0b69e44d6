/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_policy_json.c — struct sn_policy -> JSON (policy.get, and the
 * policy policy.put edits): every key as sn_policy_parse() takes it,
 * so the result parses back to the same table; keys at their default
 * are left out where the parser documents it (sn_policy.h). Pure.
 */
#include "sn_policy.h"

#include <stdio.h>

#include <arpa/inet.h>

#include "sn_sched.h"

static int set_prefix(json_t *o, const char *key, const uint32_t addr[4], uint8_t len,
		      uint8_t family)
{
	char buf[INET6_ADDRSTRLEN + 5];
	char ip[INET6_ADDRSTRLEN];
	uint8_t a[16];

	if (!len)
		return 0;
	for (unsigned i = 0; i < 4; i++) {
		a[4 * i] = (uint8_t)(addr[i] >> 24);
		a[4 * i + 1] = (uint8_t)(addr[i] >> 16);
		a[4 * i + 2] = (uint8_t)(addr[i] >> 8);
		a[4 * i + 3] = (uint8_t)addr[i];
	}
	if (!inet_ntop(family == SN_POLICY_FAMILY_IPV6 ? AF_INET6 : AF_INET, a, ip, sizeof(ip)))
		return -1;
	snprintf(buf, sizeof(buf), "%s/%u", ip, len);
	return json_object_set_new(o, key, json_string(buf));
}

static int set_range(json_t *o, const char *key, uint16_t lo, uint16_t hi)
{
	if (lo == 0 && hi == 65535)
		return 0;
	return json_object_set_new(o, key, json_pack("[i, i]", lo, hi));
}

static json_t *class_to_json(const struct sn_policy *p, const struct sn_policy_class *c)
{
	json_t *o = json_pack("{s:s, s:I, s:I, s:s, s:s}", "name", c->name,
			      "rate_bps", (json_int_t)c->rate_bps,
			      "burst_bytes", (json_int_t)c->burst_bytes,
			      "scope", c->scope == SN_POLICY_SCOPE_CLASS ? "class" : "flow",
			      "horizon", c->horizon == SN_POLICY_HORIZON_CLAMP ? "clamp" : "drop");
	int rc = 0;

	if (!o)
		return NULL;
	if (c->m.proto == 6 || c->m.proto == 17 || c->m.proto == 1)
		rc |= json_object_set_new(o, "proto", json_string(c->m.proto == 6 ? "tcp" :
					  c->m.proto == 17 ? "udp" : "icmp"));
	else if (c->m.proto)
		rc |= json_object_set_new(o, "proto", json_integer(c->m.proto));
	rc |= set_prefix(o, "src", c->m.src, c->m.src_len, c->m.family);
	rc |= set_prefix(o, "dst", c->m.dst, c->m.dst_len, c->m.family);
	rc |= set_range(o, "src_port", c->m.sport_lo, c->m.sport_hi);
	rc |= set_range(o, "dst_port", c->m.dport_lo, c->m.dport_hi);
	/* The family only where no prefix implies it. */
	if (c->m.family && !c->m.src_len && !c->m.dst_len)
		rc |= json_object_set_new(o, "family", json_string(
				c->m.family == SN_POLICY_FAMILY_IPV6 ? "ipv6" : "ipv4"));
	if (c->m.keys & SN_POLICY_M_FLOW_LABEL)
		rc |= json_object_set_new(o, "flow_label", json_integer(c->m.flow_label));
	if (c->m.keys & SN_POLICY_M_VLAN)
		rc |= json_object_set_new(o, "vlan", json_integer(c->m.vlan));
	if (c->m.keys & SN_POLICY_M_PCP)
		rc |= json_object_set_new(o, "pcp", json_integer(c->m.pcp));
	if (c->m.keys & SN_POLICY_M_DSCP)
		rc |= json_object_set_new(o, "dscp", json_integer(c->m.dscp));
	if (c->agg >= 0)
		rc |= json_object_set_new(o, "aggregate", json_string(p->aggs[c->agg].name));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *inbound_to_json(const struct sn_policy_port *pp)
{
	json_t *o = json_pack("{s:I, s:I}", "rate_bps", (json_int_t)pp->in_rate_bps,
			      "burst_bytes", (json_int_t)pp->in_burst_bytes);

	if (o && pp->in_peak_bps &&
	    json_object_set_new(o, "peak_bps", json_integer((json_int_t)pp->in_peak_bps))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *sn_policy_to_json(const struct sn_policy *p)
{
	json_t *ports = json_object(), *aggs = json_object(), *r;

	if (!ports || !aggs)
		goto fail;
	for (unsigned i = 0; i < p->n_ports; i++) {
		const struct sn_policy_port *pp = &p->ports[i];
		json_t *cl = NULL;
		/* a budgets-only entry reads back as one (it shapes nothing) */
		json_t *o = pp->quota_only ? json_object() :
			json_pack("{s:I, s:I}", "rate_bps", (json_int_t)pp->rate_bps,
				  "burst_bytes", (json_int_t)pp->burst_bytes);

		if (!o || json_object_set_new(ports, pp->name, o))
			goto fail;
		/* the weight of a port with a minimum is derived, not written */
		if (!pp->quota_only &&
		    json_object_set_new(o, pp->min_rate_bps ? "min_rate_bps" : "weight",
					json_integer((json_int_t)(pp->min_rate_bps ? pp->min_rate_bps
									: pp->weight))))
			goto fail;
		if (pp->peak_bps &&
		    json_object_set_new(o, "peak_bps", json_integer((json_int_t)pp->peak_bps)))
			goto fail;
		if (pp->in_rate_bps && json_object_set_new(o, "inbound", inbound_to_json(pp)))
			goto fail;
		/* "classes" only when there are some: a port entry without
		 * classes reads back as it was written. */
		if (pp->n_classes && json_object_set_new(o, "classes", cl = json_array()))
			goto fail;
		for (unsigned k = 0; k < pp->n_classes; k++)
			if (json_array_append_new(cl, class_to_json(p, &pp->classes[k])))
				goto fail;
		/* "quota" only with a budget set, each set key alone (a
		 * budgets-only entry keeps it, empty or not). */
		if (pp->quota_only && json_object_set_new(o, "quota", json_object()))
			goto fail;
		for (unsigned k = 0; k < SN_QK_MAX; k++) {
			json_t *q = json_object_get(o, "quota");

			if (!pp->quota[k])
				continue;
			if (!q && json_object_set_new(o, "quota", q = json_object()))
				goto fail;
			if (json_object_set_new(q, sn_config_quota_keys[k],
						json_integer(pp->quota[k])))
				goto fail;
		}
	}
	for (unsigned i = 0; i < p->n_aggs; i++) {
		const struct sn_policy_aggregate *a = &p->aggs[i];

		if (json_object_set_new(aggs, a->name, json_pack("{s:I, s:I, s:I}",
					"rate_bps", (json_int_t)a->rate_bps,
					"burst_bytes", (json_int_t)a->burst_bytes,
					"update_ms", (json_int_t)a->update_ms)))
			goto fail;
	}
	r = json_pack("{s:{s:I, s:s, s:I}, s:o, s:o}", "uplink",
		      "rate_bps", (json_int_t)p->uplink.rate_bps,
		      "algorithm", sn_sched_algo_name(p->uplink.algo),
		      "overhead_bytes", (json_int_t)p->uplink.overhead_bytes,
		      "ports", ports, "aggregates", aggs);
	/* "overload" only when not the default: an uplink entry without it
	 * reads back as it was written. */
	if (r && p->uplink.fair_drop &&
	    json_object_set_new(json_object_get(r, "uplink"), "overload", json_string("fair"))) {
		json_decref(r);
		return NULL;
	}
	return r;
fail:
	json_decref(ports);
	json_decref(aggs);
	return NULL;
}
