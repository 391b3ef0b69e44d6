/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_policy.c — policy model: JSON -> struct sn_policy and its
 * validation (sn_policy_json.c: the way back; sn_policy_store.c: the
 * liburcu QSBR publication of the table the datapath reads).
 *
 * Design. The datapath never sees JSON nor a partially built table: the
 * control thread parses a complete candidate (every field range-checked,
 * the sum of weights checked against the scheduler's limit, so the worker
 * can apply any published table without failing), then publishes it as
 * one pointer swap (liburcu QSBR, each poll loop iteration is a
 * quiescent state; the contract table is in sn_policy.h). The worker derives its own
 * per-port timestamping state (Carousel §5.1.1, sn_tstamp) and QFQ classes
 * (PSPAT §3.4) from the table it sees; see sn_pipeline.c.
 */
#include "sn_policy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include "sn_arbiter.h"
#include "sn_nba.h"
#include "sn_tstamp.h"

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	/* One line: the keys and names quoted may hold control characters. */
	for (char *c = err; errlen && *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return -EINVAL;
}

/* An unsigned integer member in [lo, hi] (0 also allowed if zero_ok). */
static int get_uint(const json_t *obj, const char *key, const char *path, uint64_t lo,
		    uint64_t hi, int zero_ok, uint64_t *out, char *err, size_t errlen)
{
	const json_t *v = json_object_get(obj, key);
	json_int_t x;

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return fail(err, errlen, "%s.%s: must be an integer", path, key);
	x = json_integer_value(v);
	if (x < 0 || ((uint64_t)x < lo && !(zero_ok && x == 0)) || (uint64_t)x > hi) {
		if (zero_ok)
			return fail(err, errlen, "%s.%s: must be 0 or %llu..%llu", path, key,
				    (unsigned long long)lo, (unsigned long long)hi);
		return fail(err, errlen, "%s.%s: must be %llu..%llu", path, key,
			    (unsigned long long)lo, (unsigned long long)hi);
	}
	*out = (uint64_t)x;
	return 0;
}

static int check_keys(const json_t *obj, const char *const *keys, const char *path,
		      char *err, size_t errlen)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)obj, key, v) {
		const char *const *k;

		for (k = keys; *k && strcmp(*k, key); k++)
			;
		if (!*k)
			return fail(err, errlen, "%s.%.64s: unknown key", path, key);
	}
	return 0;
}

static int parse_uplink(const json_t *u, struct sn_policy *out, char *err, size_t errlen)
{
	static const char *const keys[] = { "rate_bps", "algorithm", "overhead_bytes", "overload",
					    NULL };
	const json_t *a;
	uint64_t v;
	int rc;

	if (!json_is_object(u))
		return fail(err, errlen, "policy.uplink: must be an object");
	if ((rc = check_keys(u, keys, "policy.uplink", err, errlen)))
		return rc;
	if ((rc = get_uint(u, "rate_bps", "policy.uplink", 1000, SN_ARBITER_MAX_LINK_BPS, 1,
			   &out->uplink.rate_bps, err, errlen)))
		return rc;
	v = out->uplink.overhead_bytes;
	if ((rc = get_uint(u, "overhead_bytes", "policy.uplink", 0, SN_ARBITER_MAX_OVERHEAD, 0,
			   &v, err, errlen)))
		return rc;
	out->uplink.overhead_bytes = (uint32_t)v;
	a = json_object_get(u, "algorithm");
	if (a && (!json_is_string(a) || sn_sched_algo_parse(json_string_value(a), &out->uplink.algo)))
		return fail(err, errlen, "policy.uplink.algorithm: must be \"qfq\", \"drr\" or \"fifo\"");
	a = json_object_get(u, "overload");
	if (a) {
		const char *s = json_is_string(a) ? json_string_value(a) : "";

		if (strcmp(s, "tail") && strcmp(s, "fair"))
			return fail(err, errlen, "policy.uplink.overload: must be \"tail\" or \"fair\"");
		out->uplink.fair_drop = !strcmp(s, "fair");
		if (out->uplink.fair_drop && !out->uplink.rate_bps)
			return fail(err, errlen, "policy.uplink.overload: \"fair\" needs a "
				    "rate_bps (the capacity shared max-min)");
	}
	return 0;
}

/* ---- flow classes ------------------------------------------------------ */

/* "a.b.c.d[/len]" or an IPv6 "addr[/len]" with no host bits set, into
 * host-order words (IPv4: word 0) and its family. */
static int parse_prefix(const json_t *v, const char *path, const char *key, uint32_t addr[4],
			uint8_t *len, uint8_t *family, char *err, size_t errlen)
{
	char buf[INET6_ADDRSTRLEN + 5], *slash, *end;
	uint8_t a[16];
	unsigned long l, max;
	uint32_t w[4];
	bool v6;

	if (!json_is_string(v) || json_string_length(v) >= sizeof(buf))
		return fail(err, errlen, "%s.%s: bad prefix (want \"a.b.c.d[/len]\" or an IPv6 "
			    "prefix)", path, key);
	snprintf(buf, sizeof(buf), "%s", json_string_value(v));
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	v6 = strchr(buf, ':') != NULL;
	max = v6 ? 128 : 32;
	l = max;
	if (slash) {
		if (slash[1] < '0' || slash[1] > '9')
			return fail(err, errlen, "%s.%s: bad prefix length", path, key);
		l = strtoul(slash + 1, &end, 10);
		if (*end || l > max)
			return fail(err, errlen, "%s.%s: bad prefix length", path, key);
	}
	if (inet_pton(v6 ? AF_INET6 : AF_INET, buf, a) != 1)
		return fail(err, errlen, "%s.%s: bad prefix (want \"a.b.c.d[/len]\" or an IPv6 "
			    "prefix)", path, key);
	memset(w, 0, sizeof(w));
	for (unsigned i = 0; i < (v6 ? 4u : 1u); i++)
		w[i] = (uint32_t)a[4 * i] << 24 | (uint32_t)a[4 * i + 1] << 16 |
		       (uint32_t)a[4 * i + 2] << 8 | a[4 * i + 3];
	for (unsigned i = 0, rest = (unsigned)l; i < 4; i++, rest = rest > 32 ? rest - 32 : 0)
		if (rest < 32 && (w[i] & (UINT32_MAX >> rest)))
			return fail(err, errlen, "%s.%s: bad prefix (host bits set after /%lu)",
				    path, key, l);
	memcpy(addr, w, sizeof(w));
	*len = (uint8_t)l;
	*family = v6 ? SN_POLICY_FAMILY_IPV6 : SN_POLICY_FAMILY_IPV4;
	return 0;
}

static const char *family_name(uint8_t f)
{
	return f == SN_POLICY_FAMILY_IPV6 ? "IPv6" : "IPv4";
}

/* The optional match keys beyond the 5-tuple: family, flow_label, vlan,
 * pcp, dscp. The family a class gets from its prefixes is already in
 * m->family. */
static int parse_match_extra(const json_t *o, const char *path, struct sn_policy_match *m,
			     char *err, size_t errlen)
{
	static const struct {
		const char *key;
		uint8_t bit;
		uint32_t max;
	} fields[] = {
		{ "flow_label", SN_POLICY_M_FLOW_LABEL, SN_POLICY_FLOW_LABEL_MAX },
		{ "vlan", SN_POLICY_M_VLAN, SN_POLICY_VLAN_MAX },
		{ "pcp", SN_POLICY_M_PCP, SN_POLICY_PCP_MAX },
		{ "dscp", SN_POLICY_M_DSCP, SN_POLICY_DSCP_MAX },
	};
	const json_t *v;
	int rc;

	if ((v = json_object_get(o, "family"))) {
		const char *s = json_is_string(v) ? json_string_value(v) : "";
		uint8_t f = !strcmp(s, "ipv4") ? SN_POLICY_FAMILY_IPV4 :
			    !strcmp(s, "ipv6") ? SN_POLICY_FAMILY_IPV6 : SN_POLICY_FAMILY_ANY;

		if (f == SN_POLICY_FAMILY_ANY)
			return fail(err, errlen, "%s.family: must be \"ipv4\" or \"ipv6\"", path);
		if (m->family && m->family != f)
			return fail(err, errlen, "%s.family: \"%s\" in a class of %s prefixes", path,
				    s, family_name(m->family));
		m->family = f;
	}
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		uint64_t x;

		if (!json_object_get(o, fields[i].key))
			continue;
		if ((rc = get_uint(o, fields[i].key, path, 0, fields[i].max, 0, &x, err, errlen)))
			return rc;
		m->keys |= fields[i].bit;
		switch (fields[i].bit) {
		case SN_POLICY_M_FLOW_LABEL:
			if (m->family == SN_POLICY_FAMILY_IPV4)
				return fail(err, errlen, "%s.flow_label: IPv6 only (an IPv4 class)",
					    path);
			m->family = SN_POLICY_FAMILY_IPV6;
			m->flow_label = (uint32_t)x;
			break;
		case SN_POLICY_M_VLAN:
			m->vlan = (uint16_t)x;
			break;
		case SN_POLICY_M_PCP:
			m->pcp = (uint8_t)x;
			break;
		default:
			m->dscp = (uint8_t)x;
			break;
		}
	}
	return 0;
}

/* N or [lo, hi], 0 <= lo <= hi <= 65535. */
static int parse_port_range(const json_t *v, const char *path, const char *key, uint16_t *lo,
			    uint16_t *hi, char *err, size_t errlen)
{
	json_int_t a, b;

	if (json_is_integer(v)) {
		a = b = json_integer_value(v);
	} else if (json_is_array(v) && json_array_size(v) == 2 &&
		   json_is_integer(json_array_get(v, 0)) && json_is_integer(json_array_get(v, 1))) {
		a = json_integer_value(json_array_get(v, 0));
		b = json_integer_value(json_array_get(v, 1));
	} else {
		return fail(err, errlen, "%s.%s: must be a port or [lo, hi]", path, key);
	}
	if (a < 0 || b > 65535 || a > b)
		return fail(err, errlen, "%s.%s: must be 0..65535 with lo <= hi", path, key);
	*lo = (uint16_t)a;
	*hi = (uint16_t)b;
	return 0;
}

static int parse_name(const json_t *v, const char *path, char *out, char *err, size_t errlen)
{
	const char *s;
	size_t n;

	if (!json_is_string(v))
		return fail(err, errlen, "%s: must be a string", path);
	s = json_string_value(v);
	n = strlen(s);
	if (n == 0 || n > SN_POLICY_NAME_MAX || strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"abcdefghijklmnopqrstuvwxyz0123456789_.-") != n)
		return fail(err, errlen, "%s: must match [A-Za-z0-9_.-]{1,%d}", path,
			    SN_POLICY_NAME_MAX);
	snprintf(out, SN_POLICY_NAME_MAX + 1, "%s", s);
	return 0;
}

static int parse_class(const json_t *o, const char *path, const struct sn_policy *pol,
		       struct sn_policy_class *c, unsigned idx, char *err, size_t errlen)
{
	static const char *const keys[] = { "name", "proto", "src", "dst", "src_port",
					    "dst_port", "family", "flow_label", "vlan", "pcp",
					    "dscp", "rate_bps", "burst_bytes", "scope",
					    "aggregate", "horizon", NULL };
	char fpath[112];
	const json_t *v;
	uint64_t x;
	int rc;

	if (!json_is_object(o))
		return fail(err, errlen, "%s: must be an object", path);
	if ((rc = check_keys(o, keys, path, err, errlen)))
		return rc;
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%u", idx);
	c->m.sport_hi = c->m.dport_hi = 65535;
	c->agg = -1;
	if ((v = json_object_get(o, "name"))) {
		snprintf(fpath, sizeof(fpath), "%s.name", path);
		if ((rc = parse_name(v, fpath, c->name, err, errlen)))
			return rc;
	}
	if ((v = json_object_get(o, "proto"))) {
		const char *s = json_is_string(v) ? json_string_value(v) : "";

		if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 255)
			c->m.proto = (uint8_t)json_integer_value(v);
		else if (!strcmp(s, "tcp"))
			c->m.proto = 6;
		else if (!strcmp(s, "udp"))
			c->m.proto = 17;
		else if (!strcmp(s, "icmp"))
			c->m.proto = 1;
		else
			return fail(err, errlen, "%s.proto: must be \"tcp\", \"udp\", \"icmp\" "
				    "or 0..255", path);
	}
	if ((v = json_object_get(o, "src")) &&
	    (rc = parse_prefix(v, path, "src", c->m.src, &c->m.src_len, &c->m.family, err,
			       errlen)))
		return rc;
	if ((v = json_object_get(o, "dst"))) {
		uint8_t f;

		if ((rc = parse_prefix(v, path, "dst", c->m.dst, &c->m.dst_len, &f, err, errlen)))
			return rc;
		if (c->m.family && c->m.family != f)
			return fail(err, errlen, "%s.dst: an %s prefix in a class of %s src", path,
				    family_name(f), family_name(c->m.family));
		c->m.family = f;
	}
	if ((rc = parse_match_extra(o, path, &c->m, err, errlen)))
		return rc;
	if ((v = json_object_get(o, "src_port")) &&
	    (rc = parse_port_range(v, path, "src_port", &c->m.sport_lo, &c->m.sport_hi, err, errlen)))
		return rc;
	if ((v = json_object_get(o, "dst_port")) &&
	    (rc = parse_port_range(v, path, "dst_port", &c->m.dport_lo, &c->m.dport_hi, err, errlen)))
		return rc;
	if ((c->m.sport_lo || c->m.sport_hi != 65535 || c->m.dport_lo || c->m.dport_hi != 65535) &&
	    c->m.proto != 6 && c->m.proto != 17)
		return fail(err, errlen, "%s: src_port/dst_port need \"proto\": \"tcp\" or \"udp\"",
			    path);
	if ((rc = get_uint(o, "rate_bps", path, SN_TSTAMP_RATE_MIN, SN_TSTAMP_RATE_MAX, 1,
			   &c->rate_bps, err, errlen)))
		return rc;
	x = 0;
	if ((rc = get_uint(o, "burst_bytes", path, 0, SN_TSTAMP_BURST_MAX, 0, &x, err, errlen)))
		return rc;
	c->burst_bytes = (uint32_t)x;
	if ((v = json_object_get(o, "scope"))) {
		const char *s = json_is_string(v) ? json_string_value(v) : "";

		if (!strcmp(s, "flow"))
			c->scope = SN_POLICY_SCOPE_FLOW;
		else if (!strcmp(s, "class"))
			c->scope = SN_POLICY_SCOPE_CLASS;
		else
			return fail(err, errlen, "%s.scope: must be \"flow\" or \"class\"", path);
	}
	if ((v = json_object_get(o, "horizon"))) {
		const char *s = json_is_string(v) ? json_string_value(v) : "";

		if (!strcmp(s, "drop"))
			c->horizon = SN_POLICY_HORIZON_DROP;
		else if (!strcmp(s, "clamp"))
			c->horizon = SN_POLICY_HORIZON_CLAMP;
		else
			return fail(err, errlen, "%s.horizon: must be \"drop\" or \"clamp\"", path);
	}
	if ((v = json_object_get(o, "aggregate"))) {
		int a = json_is_string(v) ? sn_policy_agg_find(pol, json_string_value(v)) : -1;

		if (a < 0)
			return fail(err, errlen, "%s.aggregate: no such entry in policy.aggregates",
				    path);
		c->agg = (int16_t)a;
	}
	return 0;
}

static int parse_classes(const json_t *a, const char *path, const struct sn_policy *pol,
			 struct sn_policy_port *pp, char *err, size_t errlen)
{
	char cpath[96];
	size_t i;
	json_t *o;
	int rc;

	if (!json_is_array(a))
		return fail(err, errlen, "%s.classes: must be an array", path);
	if (json_array_size(a) > SN_POLICY_CLASSES_MAX)
		return fail(err, errlen, "%s.classes: at most %d classes", path,
			    SN_POLICY_CLASSES_MAX);
	json_array_foreach(a, i, o) {
		snprintf(cpath, sizeof(cpath), "%s.classes[%zu]", path, i);
		if ((rc = parse_class(o, cpath, pol, &pp->classes[i], (unsigned)i, err, errlen)))
			return rc;
		for (size_t k = 0; k < i; k++)
			if (!strcmp(pp->classes[k].name, pp->classes[i].name))
				return fail(err, errlen, "%s.name: \"%s\" used twice", cpath,
					    pp->classes[i].name);
		pp->n_classes = (unsigned)i + 1;
	}
	return 0;
}

static int parse_aggregates(const json_t *a, struct sn_policy *out, char *err, size_t errlen)
{
	static const char *const keys[] = { "rate_bps", "burst_bytes", "update_ms", NULL };
	char path[96];
	const char *name;
	json_t *o;
	int rc;

	if (!json_is_object(a))
		return fail(err, errlen, "policy.aggregates: must be an object");
	if (json_object_size(a) > SN_POLICY_AGGS_MAX)
		return fail(err, errlen, "policy.aggregates: at most %d entries", SN_POLICY_AGGS_MAX);
	json_object_foreach((json_t *)a, name, o) {
		struct sn_policy_aggregate *ag = &out->aggs[out->n_aggs];
		json_t *n = json_string(name);
		uint64_t v;

		if (!n)
			return fail(err, errlen, "policy.aggregates: out of memory");
		rc = parse_name(n, "policy.aggregates", ag->name, err, errlen);
		json_decref(n);
		if (rc)
			return rc;
		snprintf(path, sizeof(path), "policy.aggregates.%s", name);
		if (!json_is_object(o))
			return fail(err, errlen, "%s: must be an object", path);
		if ((rc = check_keys(o, keys, path, err, errlen)))
			return rc;
		if (!json_object_get(o, "rate_bps"))
			return fail(err, errlen, "%s.rate_bps: required", path);
		if ((rc = get_uint(o, "rate_bps", path, SN_TSTAMP_RATE_MIN, SN_TSTAMP_RATE_MAX, 0,
				   &ag->rate_bps, err, errlen)))
			return rc;
		v = 0;
		if ((rc = get_uint(o, "burst_bytes", path, 0, SN_TSTAMP_BURST_MAX, 0, &v, err,
				   errlen)))
			return rc;
		ag->burst_bytes = (uint32_t)v;
		v = SN_POLICY_UPDATE_MS_DEF;
		if ((rc = get_uint(o, "update_ms", path, 1, SN_POLICY_UPDATE_MS_MAX, 0, &v, err,
				   errlen)))
			return rc;
		ag->update_ms = (uint32_t)v;
		ag->nba = NULL;
		out->n_aggs++;
	}
	return 0;
}

/* policy.ports.<name>.quota: each key "auto" (not set) or a budget in
 * the config section's range (sn_config.c: at least 1, 2 or 4 units). */
static int parse_quota(const json_t *q, const char *path, struct sn_policy_port *pp,
		       char *err, size_t errlen)
{
	static const uint32_t lo[SN_QK_MAX] = { 4, 2, 2, 2, 2, 1 };
	char qpath[80];
	const char *key;
	json_t *v;

	snprintf(qpath, sizeof(qpath), "%s.quota", path);
	if (!json_is_object(q))
		return fail(err, errlen, "%s: must be an object", qpath);
	json_object_foreach((json_t *)q, key, v) {
		unsigned k;

		for (k = 0; k < SN_QK_MAX && strcmp(key, sn_config_quota_keys[k]); k++)
			;
		if (k == SN_QK_MAX)
			return fail(err, errlen, "%s.%s: unknown key", qpath, key);
		if (json_is_string(v) && !strcmp(json_string_value(v), "auto"))
			continue;
		if (!json_is_integer(v) || json_integer_value(v) < lo[k] ||
		    json_integer_value(v) > SN_CONFIG_QUOTA_MAX)
			return fail(err, errlen, "%s.%s: must be \"auto\" or %u..%u", qpath, key,
				    lo[k], SN_CONFIG_QUOTA_MAX);
		pp->quota[k] = (uint32_t)json_integer_value(v);
	}
	return 0;
}

/* A rate with its peak and burst (a port's own, or its inbound limit's):
 * rate_bps (0 allowed when zero_ok), peak_bps (0 = none, else not below
 * the rate), burst_bytes. */
static int parse_rates(const json_t *o, const char *path, int zero_ok, uint64_t *rate,
		       uint64_t *peak, uint32_t *burst, char *err, size_t errlen)
{
	uint64_t v = 0;
	int rc;

	if ((rc = get_uint(o, "rate_bps", path, SN_TSTAMP_RATE_MIN, SN_TSTAMP_RATE_MAX, zero_ok,
			   rate, err, errlen)) ||
	    (rc = get_uint(o, "peak_bps", path, SN_TSTAMP_RATE_MIN, SN_TSTAMP_RATE_MAX, 1,
			   peak, err, errlen)) ||
	    (rc = get_uint(o, "burst_bytes", path, 0, SN_TSTAMP_BURST_MAX, 0, &v, err, errlen)))
		return rc;
	*burst = (uint32_t)v;
	if (*peak && !*rate)
		return fail(err, errlen, "%s.peak_bps: needs rate_bps (the sustained rate)", path);
	if (*peak && *peak < *rate)
		return fail(err, errlen, "%s.peak_bps: %llu is below rate_bps %llu", path,
			    (unsigned long long)*peak, (unsigned long long)*rate);
	return 0;
}

/* "inbound": the limit on the traffic to the port (from the uplink and
 * from other ports): {"rate_bps" (required), "peak_bps", "burst_bytes"}. */
static int parse_inbound(const json_t *o, const char *port_path, struct sn_policy_port *pp,
			 char *err, size_t errlen)
{
	static const char *const keys[] = { "rate_bps", "peak_bps", "burst_bytes", NULL };
	char path[80];
	int rc;

	snprintf(path, sizeof(path), "%s.inbound", port_path);
	if (!json_is_object(o))
		return fail(err, errlen, "%s: must be an object", path);
	if ((rc = check_keys(o, keys, path, err, errlen)))
		return rc;
	if (!json_object_get(o, "rate_bps"))
		return fail(err, errlen, "%s.rate_bps: required", path);
	return parse_rates(o, path, 0, &pp->in_rate_bps, &pp->in_peak_bps, &pp->in_burst_bytes,
			   err, errlen);
}

static int parse_port(const char *name, const json_t *o, const struct sn_policy *pol,
		      struct sn_policy_port *pp, char *err, size_t errlen)
{
	static const char *const keys[] = { "rate_bps", "burst_bytes", "peak_bps", "weight",
					    "min_rate_bps", "inbound", "classes", "quota", NULL };
	char path[64];
	uint64_t v;
	int rc;

	if (!sn_config_port_name_ok(name))
		return fail(err, errlen, "policy.ports: \"%.40s\": port name must match "
			    "[A-Za-z0-9_.-]{1,32}", name);
	snprintf(path, sizeof(path), "policy.ports.%s", name);
	if (!json_is_object(o))
		return fail(err, errlen, "%s: must be an object", path);
	if ((rc = check_keys(o, keys, path, err, errlen)))
		return rc;
	memset(pp, 0, sizeof(*pp));
	snprintf(pp->name, sizeof(pp->name), "%s", name);
	pp->weight = 1;
	if ((rc = parse_rates(o, path, 1, &pp->rate_bps, &pp->peak_bps, &pp->burst_bytes, err,
			      errlen)))
		return rc;
	v = 1;
	if ((rc = get_uint(o, "weight", path, 1, SN_SCHED_MAX_WEIGHT, 0, &v, err, errlen)))
		return rc;
	pp->weight = (uint32_t)v;
	if ((rc = get_uint(o, "min_rate_bps", path, SN_TSTAMP_RATE_MIN, SN_ARBITER_MAX_LINK_BPS,
			   1, &pp->min_rate_bps, err, errlen)))
		return rc;
	if (pp->min_rate_bps) {
		if (json_object_get(o, "weight"))
			return fail(err, errlen, "%s.min_rate_bps: a port with a minimum has the "
				    "weight derived from it: drop \"weight\"", path);
		if (!pol->uplink.rate_bps)
			return fail(err, errlen, "%s.min_rate_bps: needs policy.uplink.rate_bps (a "
				    "share of the line rate is not known)", path);
		if (pol->uplink.algo == SN_SCHED_FIFO)
			return fail(err, errlen, "%s.min_rate_bps: needs a weighted "
				    "policy.uplink.algorithm (qfq or drr), not fifo", path);
		if (pp->rate_bps && pp->min_rate_bps > pp->rate_bps)
			return fail(err, errlen, "%s.min_rate_bps: %llu is above the port's "
				    "rate_bps %llu", path, (unsigned long long)pp->min_rate_bps,
				    (unsigned long long)pp->rate_bps);
	}
	if (json_object_get(o, "inbound") &&
	    (rc = parse_inbound(json_object_get(o, "inbound"), path, pp, err, errlen)))
		return rc;
	if (json_object_get(o, "quota") &&
	    (rc = parse_quota(json_object_get(o, "quota"), path, pp, err, errlen)))
		return rc;
	pp->quota_only = json_object_size(o) == 1 && json_object_get(o, "quota");
	if (json_object_get(o, "classes"))
		return parse_classes(json_object_get(o, "classes"), path, pol, pp, err, errlen);
	return 0;
}

/* Weights of the ports with a minimum (min_rate_bps), the others' kept.
 * Each port's share of the uplink while it has demand is at least its
 * weight over the sum of every entry's weight, so with R the uplink rate,
 * S the sum of the n minimums and W the others' weights, the weights
 * w_i = ceil(m_i K) hold every minimum when K (R - S) >= n + W:
 *     w_i / (sum_j w_j + W) >= m_i K / (K S + n + W) >= m_i / R.
 * K is raised (up to the weight limit and the weight sum's) so that the
 * smallest minimum gets a weight of at least WEIGHT_GRAIN: the uplink left
 * over is then shared in proportion to the minimums within 1 /
 * WEIGHT_GRAIN. K is a fraction and every weight an exact integer ceiling
 * (128-bit); every minimum is checked exactly after rounding; a policy whose minimums add
 * up to more than R, or leave too little of it for the others' weights,
 * is refused, naming the port (in the order given) with which they do not
 * fit. */
#define WEIGHT_GRAIN 100u

/* A scale K = num / den (exact: every weight is ceil(m * num / den)). */
struct frac {
	unsigned __int128 num, den;
};

static bool frac_lt(struct frac a, struct frac b)
{
	/* num, den < 2^64 here: the products fit in 128 bits */
	return a.num * b.den < b.num * a.den;
}

static int derive_weights(struct sn_policy *p, char *err, size_t errlen)
{
	const uint64_t r = p->uplink.rate_bps;
	unsigned n = 0, last = 0;
	uint64_t s = 0, w_other = 0, m_min = UINT64_MAX, m_max = 0;
	unsigned __int128 wsum = 0;
	struct frac k, cap;

	for (unsigned i = 0; i < p->n_ports; i++) {
		const struct sn_policy_port *pp = &p->ports[i];

		if (pp->quota_only)
			continue;
		if (!pp->min_rate_bps) {
			w_other += pp->weight;
			continue;
		}
		n++;
		last = i;
		s += pp->min_rate_bps;
		m_min = SN_MIN(m_min, pp->min_rate_bps);
		m_max = SN_MAX(m_max, pp->min_rate_bps);
		if (s > r)
			return fail(err, errlen, "policy.ports.%s.min_rate_bps: the minimums add up "
				    "to %llu bit/s, above policy.uplink.rate_bps %llu", pp->name,
				    (unsigned long long)s, (unsigned long long)r);
	}
	if (!n)
		return 0;
	if (s == r && (w_other || n > 1))
		return fail(err, errlen, "policy.ports.%s.min_rate_bps: the minimums take all of "
			    "policy.uplink.rate_bps %llu: nothing is left for rounding or other "
			    "ports", p->ports[last].name, (unsigned long long)r);
	/* K = max(K0, min(grain, weight limit, weight-sum limit)), K0 the
	 * scale that holds every minimum (s == r: one port alone). */
	k = s == r ? (struct frac){ WEIGHT_GRAIN, m_min } : (struct frac){ n + w_other, r - s };
	cap = (struct frac){ WEIGHT_GRAIN, m_min };
	if (frac_lt((struct frac){ SN_SCHED_MAX_WEIGHT, m_max }, cap))
		cap = (struct frac){ SN_SCHED_MAX_WEIGHT, m_max };
	if (w_other + n < SN_SCHED_MAX_WSUM &&
	    frac_lt((struct frac){ SN_SCHED_MAX_WSUM - w_other - n, s }, cap))
		cap = (struct frac){ SN_SCHED_MAX_WSUM - w_other - n, s };
	if (frac_lt(k, cap))
		k = cap;
	for (unsigned i = 0; i < p->n_ports; i++) {
		struct sn_policy_port *pp = &p->ports[i];
		unsigned __int128 w;

		if (pp->quota_only || !pp->min_rate_bps)
			continue;
		w = ((unsigned __int128)pp->min_rate_bps * k.num + k.den - 1) / k.den;   /* ceil */
		if (w > SN_SCHED_MAX_WEIGHT)
			return fail(err, errlen, "policy.ports.%s.min_rate_bps: the minimums leave too "
				    "little of the uplink for the other ports' weights (weight %llu "
				    "needed, at most %u): lower a minimum or a weight", pp->name,
				    (unsigned long long)SN_MIN(w, (unsigned __int128)UINT64_MAX),
				    SN_SCHED_MAX_WEIGHT);
		pp->weight = (uint32_t)SN_MAX(w, (unsigned __int128)1);
		wsum += pp->weight;
	}
	wsum += w_other;
	for (unsigned i = 0; i < p->n_ports; i++) {
		const struct sn_policy_port *pp = &p->ports[i];

		if (!pp->quota_only && pp->min_rate_bps &&
		    (unsigned __int128)pp->weight * r < (unsigned __int128)pp->min_rate_bps * wsum)
			return fail(err, errlen, "policy.ports.%s.min_rate_bps: the minimums leave too "
				    "little of the uplink for the other ports' weights: lower a "
				    "minimum or a weight", pp->name);
	}
	return 0;
}

int sn_policy_parse(const json_t *j, struct sn_policy *out, char *err, size_t errlen)
{
	static const char *const keys[] = { "uplink", "ports", "aggregates", NULL };
	const json_t *u, *ports, *o, *aggs;
	const char *name;
	uint64_t wsum = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	out->uplink.algo = SN_SCHED_QFQ;
	out->uplink.overhead_bytes = SN_POLICY_OVERHEAD_DEF;
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_object(j))
		return fail(err, errlen, "policy: must be an object");
	if ((rc = check_keys(j, keys, "policy", err, errlen)))
		return rc;
	u = json_object_get(j, "uplink");
	if (u && (rc = parse_uplink(u, out, err, errlen)))
		return rc;
	aggs = json_object_get(j, "aggregates");
	if (aggs && (rc = parse_aggregates(aggs, out, err, errlen)))
		return rc;
	ports = json_object_get(j, "ports");
	if (!ports)
		return 0;
	if (!json_is_object(ports))
		return fail(err, errlen, "policy.ports: must be an object");
	if (json_object_size(ports) > sn_config_port_slots)
		return fail(err, errlen, "policy.ports: at most %u entries (datapath.max_ports + 1)",
			    sn_config_port_slots);
	json_object_foreach((json_t *)ports, name, o) {
		struct sn_policy_port *pp = &out->ports[out->n_ports];

		if ((rc = parse_port(name, o, out, pp, err, errlen)))
			return rc;
		out->n_ports++;
	}
	if ((rc = derive_weights(out, err, errlen)))
		return rc;
	for (unsigned i = 0; i < out->n_ports; i++)
		wsum += out->ports[i].weight;
	if (wsum > SN_SCHED_MAX_WSUM)
		return fail(err, errlen, "policy.ports: sum of weights %llu exceeds %u",
			    (unsigned long long)wsum, SN_SCHED_MAX_WSUM);
	return 0;
}

int sn_policy_agg_find(const struct sn_policy *p, const char *name)
{
	for (unsigned i = 0; i < p->n_aggs; i++)
		if (!strcmp(p->aggs[i].name, name))
			return (int)i;
	return -1;
}

const struct sn_policy_port *sn_policy_port_find(const struct sn_policy *p, const char *name)
{
	for (unsigned i = 0; i < p->n_ports; i++)
		if (!strcmp(p->ports[i].name, name))
			return &p->ports[i];
	return NULL;
}

int sn_policy_port_del(struct sn_policy *p, const char *name)
{
	for (unsigned i = 0; i < p->n_ports; i++) {
		if (strcmp(p->ports[i].name, name))
			continue;
		memmove(&p->ports[i], &p->ports[i + 1], (p->n_ports - i - 1) * sizeof(p->ports[0]));
		p->n_ports--;
		return 0;
	}
	return -ENOENT;
}
