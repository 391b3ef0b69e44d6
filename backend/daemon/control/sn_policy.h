/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_policy.h — the operator's bandwidth policy: JSON model, validation and
 * RCU publication to the datapath.
 *
 * Model (config key "policy", RPC policy.get/set/del):
 *   {"uplink": {"rate_bps": N, "algorithm": "qfq"|"drr"|"fifo",
 *               "overhead_bytes": 24},
 *    "ports":  {"<port>": {"rate_bps": N, "burst_bytes": B, "peak_bps": P,
 *                          "weight": W | "min_rate_bps": M,
 *                          "inbound": {"rate_bps": N, "peak_bps": P,
 *                                      "burst_bytes": B},
 *                          "classes": [CLASS, ...],
 *                          "quota": {"mbufs": N, "held": N, "backlog": N,
 *                                    "wheel": N, "flows": N, "macs": N}}},
 *    "aggregates": {"<name>": {"rate_bps": N, "burst_bytes": B,
 *                              "update_ms": 100}}}
 *   CLASS = {"name": "web", "proto": "tcp"|"udp"|"icmp"|0..255,
 *            "src": "10.0.0.0/8"|"2001:db8::/32", "dst": "192.0.2.1",
 *            "family": "ipv4"|"ipv6", "flow_label": 0..0xfffff,
 *            "src_port": 80 | [1024, 65535], "dst_port": ...,
 *            "vlan": 0..4095, "pcp": 0..7, "dscp": 0..63,
 *            "rate_bps": N, "burst_bytes": B, "scope": "flow"|"class",
 *            "aggregate": "<name>", "horizon": "drop"|"clamp"}
 * Flow classes (Carousel §4: per-flow pacing, aggregates): a port's
 * frames are matched against its classes in order, first match wins; an
 * absent match key matches anything; a frame that matches no class (or is
 * neither IPv4 nor IPv6) is shaped by the port entry alone. A class's rate_bps (0 = no
 * pacing of its own) applies to each distinct 5-tuple of the class
 * ("scope": "flow", the default: every flow gets its own timestamp state)
 * or to the class's traffic as a whole ("scope": "class"). "aggregate"
 * makes the class's traffic also count against that aggregate, one rate
 * shared by every class (of any port, on any worker) naming it, split per
 * worker by the NBA every update_ms. A frame's release time is the max
 * over every policy it crosses: port limit, class/flow pacing, aggregate
 * share. "horizon": a frame whose release time lies beyond the wheel
 * horizon is dropped ("drop", the default: the rate is a hard limit) or
 * queued at the horizon ("clamp": no drop, the overrun is still charged
 * to the class so it is paid back once the offered load falls).
 * uplink.overload: "tail" (default: a full mailbox / scheduler queue drops
 * the arriving frame) or "fair" (fair dropping in front of the arbiter: per-flow virtual queues served max-min at uplink.rate_bps, a
 * frame whose flow's virtual queue exceeds θ is dropped; needs a rate).
 * uplink.rate_bps 0 = line rate (no link emulation limit); a port's
 * rate_bps 0 = no rate limit (the port still gets its weight on the
 * uplink). peak_bps (needs rate_bps) caps the rate at which a port spends
 * its burst: a second timestamp policy at peak_bps with no burst of its
 * own, crossed by every frame of the port (a two-rate shaper, as tc's
 * rate / ceil). min_rate_bps (needs uplink.rate_bps and a weighted
 * algorithm) is a guaranteed share of the uplink: the port's weight is
 * derived from it (derive_weights() in sn_policy.c) so that its share
 * holds against every other entry's weight, and the sum of the minimums
 * may not exceed uplink.rate_bps (admission control). Ports without an
 * entry are not shaped at all. "inbound" limits the traffic to the port
 * (from the uplink and from other ports) the same way, at the worker that
 * switches it: frames wait in the wheel, beyond its horizon they are
 * dropped. A port's "quota"
 * overrides the config section "quota" for that port, key by key ("auto"
 * or absent: the config's value; doc/isolation.md); an entry with no other
 * key sets budgets only and does not make the port shaped. Every key is
 * optional; unknown keys are errors; every message names the field, e.g.
 *   policy.ports.vm0.weight: must be 1..65536
 *
 * Publication contract (liburcu QSBR), struct sn_policy_store and the
 * tables it publishes:
 *
 *   who              may call / do                   pairs with
 *   ---------------  ------------------------------  ------------------------------------
 *   MAIN (only       sn_policy_store_*,              publish: rcu_xchg_pointer() (store-
 *   writer)          sn_policy_main, _publish,       release) pairs with rcu_dereference()
 *                    _tick; reads the current table  in sn_policy_current(); the old table
 *                    without a read-side section     (and NBA instances no longer named) is
 *                                                    freed after synchronize_rcu()
 *   datapath lcores  sn_policy_current() between     each announces a quiescent state once
 *   (QSBR readers)   quiescent states; the table is  per loop iteration, which ends the
 *                    immutable                       grace period publish waits for
 *   any thread       the pure functions: _parse,     no shared state
 *                    _to_json, _port_find,
 *                    _port_del, _agg_find
 *
 * A table is never modified after publication, so "validated as a whole,
 * nothing half-applied" holds by construction: a new policy is parsed
 * into a fresh table and only a fully valid one is published. The NBA
 * core statistics of the aggregates are MAIN's too (sn_policy_tick runs
 * the NBA there).
 */
#ifndef SN_POLICY_H
#define SN_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sn_config.h"
#include "sn_sched.h"

/* Entries of policy.ports: at most sn_config_port_slots (the port slots,
 * datapath.max_ports + 1), this its hard bound. */
#define SN_POLICY_PORTS_MAX     (SN_CONFIG_PORTS_MAX + 1)
#define SN_POLICY_OVERHEAD_DEF  24u
#define SN_POLICY_CLASSES_MAX   16    /* per port */
#define SN_POLICY_AGGS_MAX      16
#define SN_POLICY_NAME_MAX      31    /* class and aggregate names */
#define SN_POLICY_UPDATE_MS_DEF 100u
#define SN_POLICY_UPDATE_MS_MAX 10000u

struct sn_nba;

enum sn_policy_scope {
	SN_POLICY_SCOPE_FLOW = 0,   /* rate per distinct 5-tuple of the class */
	SN_POLICY_SCOPE_CLASS,      /* rate for the class's traffic as a whole */
};

enum sn_policy_horizon {
	SN_POLICY_HORIZON_DROP = 0, /* beyond the wheel horizon: drop (hard limit) */
	SN_POLICY_HORIZON_CLAMP,    /* beyond the wheel horizon: queue at the horizon */
};

/* A class's filter (doc/policy.md "Flow classes"). Addresses are 32-bit
 * words in host order, most significant first, already masked: an IPv4
 * prefix is word 0 (the others 0), an IPv6 prefix all four. family: the
 * IP version the class matches, set by its prefixes, "family" or
 * "flow_label" (0 = IPv4 and IPv6). keys: which of the optional fields
 * below the class has (SN_POLICY_M_*); an absent one matches anything. */
enum sn_policy_family {
	SN_POLICY_FAMILY_ANY = 0,
	SN_POLICY_FAMILY_IPV4 = 4,
	SN_POLICY_FAMILY_IPV6 = 6,
};

enum sn_policy_match_key {
	SN_POLICY_M_VLAN = 1u << 0,       /* 802.1Q VLAN ID: tagged frames only */
	SN_POLICY_M_PCP = 1u << 1,        /* 802.1p priority: tagged frames only */
	SN_POLICY_M_DSCP = 1u << 2,       /* IPv4 TOS / IPv6 traffic class >> 2 */
	SN_POLICY_M_FLOW_LABEL = 1u << 3, /* IPv6 only */
};

#define SN_POLICY_VLAN_MAX       4095u
#define SN_POLICY_PCP_MAX        7u
#define SN_POLICY_DSCP_MAX       63u
#define SN_POLICY_FLOW_LABEL_MAX 0xfffffu

struct sn_policy_match {
	uint32_t src[4], dst[4];
	uint8_t src_len, dst_len;   /* prefix lengths (IPv4 0..32, IPv6 0..128); 0 = any */
	uint8_t family;             /* enum sn_policy_family */
	uint8_t proto;              /* IP protocol / IPv6 upper-layer header; 0 = any */
	uint16_t sport_lo, sport_hi;  /* 0..65535 = any */
	uint16_t dport_lo, dport_hi;
	uint32_t flow_label;        /* SN_POLICY_M_FLOW_LABEL: 0..SN_POLICY_FLOW_LABEL_MAX */
	uint16_t vlan;              /* SN_POLICY_M_VLAN: 0..SN_POLICY_VLAN_MAX */
	uint8_t pcp;                /* SN_POLICY_M_PCP: 0..SN_POLICY_PCP_MAX */
	uint8_t dscp;               /* SN_POLICY_M_DSCP: 0..SN_POLICY_DSCP_MAX */
	uint8_t keys;               /* enum sn_policy_match_key bits */
	uint8_t pad_[3];
};

struct sn_policy_class {
	char name[SN_POLICY_NAME_MAX + 1];   /* default: its index, "0", "1", ... */
	struct sn_policy_match m;
	uint64_t rate_bps;      /* 0 = no pacing of its own */
	uint32_t burst_bytes;
	uint8_t scope;          /* enum sn_policy_scope */
	uint8_t horizon;        /* enum sn_policy_horizon */
	int16_t agg;            /* index in sn_policy.aggs, -1 = none */
};

struct sn_policy_port {
	char name[SN_CONFIG_NAME_MAX + 1];
	uint64_t rate_bps;      /* 0 = unlimited, else SN_TSTAMP_RATE_MIN..MAX */
	uint64_t peak_bps;      /* 0 = none, else rate_bps..SN_TSTAMP_RATE_MAX */
	uint64_t min_rate_bps;  /* 0 = none: guaranteed share of the uplink */
	uint32_t burst_bytes;   /* 0..SN_TSTAMP_BURST_MAX */
	uint32_t weight;        /* 1..SN_SCHED_MAX_WEIGHT; derived from
	                         * min_rate_bps when that is set */
	/* "inbound": the limit on the traffic to the port; in_rate_bps 0 =
	 * none, else SN_TSTAMP_RATE_MIN..MAX (peak 0 = none). */
	uint64_t in_rate_bps, in_peak_bps;
	uint32_t in_burst_bytes;
	unsigned n_classes;
	struct sn_policy_class classes[SN_POLICY_CLASSES_MAX];
	uint32_t quota[SN_QK_MAX]; /* budgets by enum sn_quota_kind, 0 = not set */
	bool quota_only;        /* the entry has no key but "quota": budgets
	                         * only, the port is not shaped */
};

struct sn_policy_aggregate {
	char name[SN_POLICY_NAME_MAX + 1];
	uint64_t rate_bps;      /* SN_TSTAMP_RATE_MIN..MAX */
	uint32_t burst_bytes;   /* per worker share */
	uint32_t update_ms;     /* NBA period, 1..SN_POLICY_UPDATE_MS_MAX */
	/* Set by sn_policy_publish (NULL in a parsed candidate): the NBA
	 * instance splitting this aggregate over the workers. It lives as long
	 * as a published table names it, plus one grace period. */
	struct sn_nba *nba;
};

struct sn_policy {
	uint64_t gen;           /* set by sn_policy_publish: 1, 2, ... */
	struct {
		uint64_t rate_bps;         /* 0 = line rate */
		enum sn_sched_algo algo;
		uint32_t overhead_bytes;
		bool fair_drop;            /* "overload": "fair" (needs rate_bps > 0) */
	} uplink;
	unsigned n_ports;
	struct sn_policy_port ports[SN_POLICY_PORTS_MAX];
	unsigned n_aggs;
	struct sn_policy_aggregate aggs[SN_POLICY_AGGS_MAX];
};

/* Any thread (pure). Parse and validate `j` (NULL = empty policy) into
 * *out. 0, or -EINVAL with "policy.<field>: <reason>" in err. */
int sn_policy_parse(const json_t *j, struct sn_policy *out, char *err, size_t errlen);
/* Any thread (pure). New reference, NULL on ENOMEM. Round-trips through
 * sn_policy_parse. */
json_t *sn_policy_to_json(const struct sn_policy *p);
/* Any thread (pure). The entry for port `name`, or NULL. */
const struct sn_policy_port *sn_policy_port_find(const struct sn_policy *p, const char *name);
/* Any thread (pure). Remove the entry of `name`: 0 or -ENOENT. */
int sn_policy_port_del(struct sn_policy *p, const char *name);

/* ---- publication --------------------------------------------------------- */
struct sn_policy_store;

/* Main thread. Starts with a copy of `initial`. NULL + errno. */
struct sn_policy_store *sn_policy_store_create(const struct sn_policy *initial);
/* Main thread, after every reader stopped: frees the current table. */
void sn_policy_store_destroy(struct sn_policy_store *st);
/* Main thread: the current table (main is the only writer, so it reads
 * without a read-side section). */
const struct sn_policy *sn_policy_main(const struct sn_policy_store *st);
/* Main thread: publish a copy of `p` (gen assigned here), wait a grace
 * period, free the previous table. Aggregates: an entry whose name and
 * update_ms match the previous table's keeps its NBA instance (its rate is
 * updated in place with sn_nba_set_aggregate: the next sn_policy_tick
 * recomputes the split at once, whatever the period),
 * any other gets a new one over the store's workers; instances no longer
 * named are freed after the grace period. 0 or -ENOMEM / -EINVAL (nothing
 * changed then). */
int sn_policy_publish(struct sn_policy_store *st, const struct sn_policy *p);
/* Main thread, before the first publish and before the workers start:
 * the number of datapath workers the NBA splits aggregates over
 * (1..SN_NBA_MAX_CORES; default 1). Recreates the instances of the
 * current table. 0 or -errno. */
int sn_policy_store_set_workers(struct sn_policy_store *st, unsigned n_workers);
unsigned sn_policy_store_workers(const struct sn_policy_store *st);
/* Main thread, periodically (every few ms): run the NBA of every
 * aggregate of the current table (each recomputes at most once per its
 * update_ms). Returns how many recomputed. */
int sn_policy_tick(struct sn_policy_store *st, uint64_t now_ns);
/* Any thread (pure). Index of aggregate `name`, or -1. */
int sn_policy_agg_find(const struct sn_policy *p, const char *name);
/* Datapath thread (registered QSBR reader): valid until its next
 * quiescent state. */
const struct sn_policy *sn_policy_current(struct sn_policy_store *st);

#endif /* SN_POLICY_H */
