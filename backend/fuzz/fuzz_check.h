/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_check.h — checks shared by the config, policy and classifier fuzz
 * targets: the shape of an error message and the bounds every accepted
 * policy must respect (sn_policy.h). Each failed check aborts.
 */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_arbiter.h"
#include "sn_config.h"
#include "sn_policy.h"
#include "sn_sched.h"
#include "sn_tstamp.h"

#define FCHECK(cond, ...) do { if (!(cond)) { \
	fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); abort(); } } while (0)

/* A refusal's message: non-empty, one line, starts with `prefix` and then
 * names a field ("<prefix><field...>: <reason>"). */
static inline void fuzz_check_error(const char *err, size_t errlen, const char *prefix)
{
	size_t n = strnlen(err, errlen), pl = strlen(prefix);

	FCHECK(n > 0 && n < errlen, "message of length %zu", n);
	FCHECK(!memchr(err, '\n', n) && !memchr(err, '\r', n), "message on several lines: %s", err);
	FCHECK(strncmp(err, prefix, pl) == 0, "message without the prefix %s: %s", prefix, err);
	FCHECK(n > pl && strstr(err + pl, ": ") != NULL, "message naming no field: %s", err);
}

static inline int fuzz_name_ok(const char *s, size_t size)
{
	size_t n = strnlen(s, size);

	if (n == 0 || n == size)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.' || s[i] == '-'))
			return 0;
	return 1;
}

static inline unsigned fuzz_prefix_max(uint8_t family)
{
	return family == SN_POLICY_FAMILY_IPV6 ? 128 : 32;
}

/* No bit of a (4 words, most significant first) set after the first len. */
static inline int fuzz_prefix_ok(const uint32_t a[4], uint8_t len)
{
	for (unsigned i = 0; i < 4; i++) {
		unsigned keep = len > 32 * i ? len - 32 * i : 0;
		uint32_t host = keep >= 32 ? 0 : UINT32_MAX >> keep;

		if (a[i] & host)
			return 0;
	}
	return 1;
}

static inline int fuzz_rate_ok(uint64_t r, int zero_ok)
{
	return (zero_ok && r == 0) || (r >= SN_TSTAMP_RATE_MIN && r <= SN_TSTAMP_RATE_MAX);
}

/* Every bound sn_policy.h promises for an accepted policy. */
static inline void fuzz_check_policy(const struct sn_policy *p)
{
	uint64_t wsum = 0;

	/* The uplink's rate is the link emulation's, not a shaper's. */
	FCHECK(p->uplink.rate_bps == 0 ||
	       (p->uplink.rate_bps >= 1000 && p->uplink.rate_bps <= SN_ARBITER_MAX_LINK_BPS),
	       "uplink.rate_bps %llu",
	       (unsigned long long)p->uplink.rate_bps);
	FCHECK(p->uplink.algo == SN_SCHED_QFQ || p->uplink.algo == SN_SCHED_DRR ||
	       p->uplink.algo == SN_SCHED_FIFO, "algo %d", (int)p->uplink.algo);
	FCHECK(!p->uplink.fair_drop || p->uplink.rate_bps > 0, "fair dropping without a rate");
	FCHECK(p->n_ports <= sn_config_port_slots && p->n_ports <= SN_POLICY_PORTS_MAX,
	       "%u port entries, %u slots", p->n_ports, sn_config_port_slots);
	FCHECK(p->n_aggs <= SN_POLICY_AGGS_MAX, "%u aggregates", p->n_aggs);
	for (unsigned a = 0; a < p->n_aggs; a++) {
		const struct sn_policy_aggregate *ag = &p->aggs[a];

		FCHECK(fuzz_name_ok(ag->name, sizeof(ag->name)), "aggregate %u name", a);
		FCHECK(fuzz_rate_ok(ag->rate_bps, 0), "aggregate %s rate %llu", ag->name,
		       (unsigned long long)ag->rate_bps);
		FCHECK(ag->burst_bytes <= SN_TSTAMP_BURST_MAX, "aggregate %s burst", ag->name);
		FCHECK(ag->update_ms >= 1 && ag->update_ms <= SN_POLICY_UPDATE_MS_MAX,
		       "aggregate %s update_ms %u", ag->name, ag->update_ms);
		FCHECK(ag->nba == NULL, "a parsed aggregate has an NBA instance");
		for (unsigned b = 0; b < a; b++)
			FCHECK(strcmp(p->aggs[b].name, ag->name), "aggregate %s twice", ag->name);
	}
	for (unsigned i = 0; i < p->n_ports; i++) {
		const struct sn_policy_port *pp = &p->ports[i];

		FCHECK(fuzz_name_ok(pp->name, sizeof(pp->name)), "port %u name", i);
		FCHECK(sn_policy_port_find(p, pp->name) == pp, "port %s found elsewhere", pp->name);
		FCHECK(fuzz_rate_ok(pp->rate_bps, 1), "port %s rate %llu", pp->name,
		       (unsigned long long)pp->rate_bps);
		FCHECK(pp->burst_bytes <= SN_TSTAMP_BURST_MAX, "port %s burst", pp->name);
		FCHECK(pp->weight >= 1 && pp->weight <= SN_SCHED_MAX_WEIGHT, "port %s weight %u",
		       pp->name, pp->weight);
		wsum += pp->weight;
		FCHECK(pp->n_classes <= SN_POLICY_CLASSES_MAX, "port %s: %u classes", pp->name,
		       pp->n_classes);
		for (unsigned c = 0; c < pp->n_classes; c++) {
			const struct sn_policy_class *cl = &pp->classes[c];
			const struct sn_policy_match *m = &cl->m;

			FCHECK(fuzz_name_ok(cl->name, sizeof(cl->name)), "port %s class %u name",
			       pp->name, c);
			for (unsigned d = 0; d < c; d++)
				FCHECK(strcmp(pp->classes[d].name, cl->name), "class %s twice", cl->name);
			FCHECK(m->family == SN_POLICY_FAMILY_ANY || m->family == SN_POLICY_FAMILY_IPV4 ||
			       m->family == SN_POLICY_FAMILY_IPV6, "family %u", m->family);
			FCHECK((!m->src_len && !m->dst_len) || m->family, "a prefix with no family");
			FCHECK(m->src_len <= fuzz_prefix_max(m->family) &&
			       m->dst_len <= fuzz_prefix_max(m->family), "prefix lengths %u %u",
			       m->src_len, m->dst_len);
			FCHECK(fuzz_prefix_ok(m->src, m->src_len) && fuzz_prefix_ok(m->dst, m->dst_len),
			       "host bits set in a prefix");
			FCHECK(!(m->keys & ~(SN_POLICY_M_VLAN | SN_POLICY_M_PCP | SN_POLICY_M_DSCP |
					     SN_POLICY_M_FLOW_LABEL)), "match keys %#x", m->keys);
			FCHECK(m->vlan <= SN_POLICY_VLAN_MAX && m->pcp <= SN_POLICY_PCP_MAX &&
			       m->dscp <= SN_POLICY_DSCP_MAX && m->flow_label <= SN_POLICY_FLOW_LABEL_MAX,
			       "vlan %u pcp %u dscp %u flow label %#x", m->vlan, m->pcp, m->dscp,
			       m->flow_label);
			FCHECK(!(m->keys & SN_POLICY_M_FLOW_LABEL) || m->family == SN_POLICY_FAMILY_IPV6,
			       "a flow label in a class that is not IPv6");
			FCHECK(m->sport_lo <= m->sport_hi && m->dport_lo <= m->dport_hi,
			       "port ranges %u-%u %u-%u", m->sport_lo, m->sport_hi, m->dport_lo,
			       m->dport_hi);
			FCHECK(fuzz_rate_ok(cl->rate_bps, 1), "class %s rate", cl->name);
			FCHECK(cl->burst_bytes <= SN_TSTAMP_BURST_MAX, "class %s burst", cl->name);
			FCHECK(cl->scope <= SN_POLICY_SCOPE_CLASS && cl->horizon <= SN_POLICY_HORIZON_CLAMP,
			       "class %s scope %u horizon %u", cl->name, cl->scope, cl->horizon);
			FCHECK(cl->agg >= -1 && cl->agg < (int)p->n_aggs, "class %s aggregate %d",
			       cl->name, cl->agg);
		}
	}
	FCHECK(wsum <= SN_SCHED_MAX_WSUM, "sum of weights %llu", (unsigned long long)wsum);
}

#endif /* FUZZ_CHECK_H */
