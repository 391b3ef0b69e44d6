/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_ctl.h — schednicd's JSON-RPC method handlers (version, port.add,
 * port.del, port.list, stats.get, shutdown) on top of sn_rpc.
 *
 * Main thread only: handlers run inside sn_rpc_poll() on the control
 * thread, which is also the only thread that adds or deletes ports, so the
 * registry they read cannot change under them. Counters are read with the
 * relaxed loads documented in sn_port.h / sn_switch.h.
 */
#ifndef SN_CTL_H
#define SN_CTL_H

#include <signal.h>
#include <stdint.h>

struct rte_mempool;
struct sn_cpufair;
struct sn_pipeline;
struct sn_policy_store;
struct sn_ports;
struct sn_rpc_server;
struct sn_switch;

struct sn_ctl {
	struct sn_ports *reg;
	struct sn_switch *sw;
	struct rte_mempool *mp;
	struct sn_policy_store *policy;     /* issue 6 */
	struct sn_pipeline *pipeline;       /* issue 6 */
	/* issue 6: CPU fair dropping, worker k's instance cpufair[k] for
	 * k < n_cpufair (n_cpufair 0 = cpu_fair_pct 0). */
	struct sn_cpufair *const *cpufair;
	unsigned n_cpufair;
	uint64_t start_ns;          /* CLOCK_MONOTONIC at start */
	struct sn_rpc_server *rpc;          /* set by sn_ctl_register: stats.get "control" */
	const char *control_socket;         /* port.add refuses it as a path (as the config does) */
	volatile sig_atomic_t *stop;        /* set to 1 by "shutdown" */
};

/* Register every handler; 0 or the first sn_rpc_register() error. */
int sn_ctl_register(struct sn_rpc_server *srv, struct sn_ctl *ctl);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sn_ctl_now_ns(void);

#endif /* SN_CTL_H */
