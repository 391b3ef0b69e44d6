/* sn_policy.h — the operator's bandwidth policy: JSON model, validation and
 * RCU publication to the datapath.
 *
 * Model (config key "policy", RPC policy.get/set/del):
 *   {"uplink": {"rate_bps": N, "algorithm": "qfq"|"drr"|"fifo",
 *               "overhead_bytes": 24},
 *    "ports":  {"<port>": {"rate_bps": N, "burst_bytes": B, "weight": W}}}
 * uplink.rate_bps 0 = line rate (no link emulation limit); a port's
 * rate_bps 0 = no rate limit (the port still gets its weight on the
 * uplink). Ports without an entry are not shaped at all. Every key is
 * optional; unknown keys are errors; every message names the field, e.g.
 *   policy.ports.vm0.weight: must be 1..65536
 *
 * Publication contract (liburcu QSBR, the project's flavour):
 *  - MAIN thread is the only writer. sn_policy_publish() swaps the pointer
 *    with rcu_xchg_pointer() (its store-release pairs with the worker's
 *    rcu_dereference() in sn_policy_current()), waits synchronize_rcu()
 *    and frees the old table: no datapath thread can still hold it, since
 *    each announces a quiescent state once per poll-loop iteration.
 *  - DATAPATH threads read with sn_policy_current() between quiescent
 *    states and treat the table as immutable. A table is never modified
 *    after publication, so "validated as a whole, nothing half-applied"
 *    holds by construction: a new policy is parsed into a fresh table and
 *    only a fully valid one is published.
 */
#ifndef SN_POLICY_H
#define SN_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sn_config.h"
#include "sn_sched.h"

#define SN_POLICY_PORTS_MAX     64
#define SN_POLICY_OVERHEAD_DEF  24u

struct sn_policy_port {
	char name[SN_CONFIG_NAME_MAX + 1];
	uint64_t rate_bps;      /* 0 = unlimited, else SN_TSTAMP_RATE_MIN..MAX */
	uint32_t burst_bytes;   /* 0..SN_TSTAMP_BURST_MAX */
	uint32_t weight;        /* 1..SN_SCHED_MAX_WEIGHT */
};

struct sn_policy {
	uint64_t gen;           /* set by sn_policy_publish: 1, 2, ... */
	struct {
		uint64_t rate_bps;         /* 0 = line rate */
		enum sn_sched_algo algo;
		uint32_t overhead_bytes;
	} uplink;
	unsigned n_ports;
	struct sn_policy_port ports[SN_POLICY_PORTS_MAX];
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
 * period, free the previous table. 0 or -ENOMEM (nothing changed then). */
int sn_policy_publish(struct sn_policy_store *st, const struct sn_policy *p);
/* Datapath thread (registered QSBR reader): valid until its next
 * quiescent state. */
const struct sn_policy *sn_policy_current(struct sn_policy_store *st);

#endif /* SN_POLICY_H */
