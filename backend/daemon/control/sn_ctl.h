/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_ctl.h — schednicd's JSON-RPC methods on top of sn_rpc: the handler
 * context every method file shares, and the registration of them all.
 *
 * The methods live beside the module they drive: version, shutdown and
 * stats.get in control/sn_ctl.c, port.* in port/sn_port_rpc.c, policy.*
 * in control/sn_policy_rpc.c, the pipeline's stats in
 * pipeline/sn_pipeline_rpc.c. Each gets this struct as its argument.
 *
 * Contract of struct sn_ctl and of every handler:
 *
 *   who            may do                          why it is safe
 *   -------------  ------------------------------  ---------------------------------
 *   MAIN thread    fill it before sn_ctl_register; handlers run inside sn_rpc_poll()
 *                  run every handler (sn_rpc_poll) on MAIN only
 *   handlers       add/delete ports, publish       MAIN is the only writer of the
 *                  policies, read the registry     port registry and the policy
 *                  snapshot and the policy in      store, so what they read cannot
 *                  force without a read section    change under them
 *   handlers       read datapath counters          relaxed loads, as each module's
 *                                                  header documents (sn_port.h,
 *                                                  sn_switch.h, sn_pipeline.h,
 *                                                  sn_vqtx.h, sn_cpufair.h)
 *   shutdown       store 1 in *stop                a sig_atomic_t the main loop polls
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
	struct sn_policy_store *policy;
	struct sn_pipeline *pipeline;
	/* CPU fair dropping: worker k's instance cpufair[k] for k <
	 * n_cpufair (n_cpufair 0 = cpu_fair_pct 0). */
	struct sn_cpufair *const *cpufair;
	unsigned n_cpufair;
	uint64_t start_ns;          /* CLOCK_MONOTONIC at start */
	struct sn_rpc_server *rpc;          /* set by sn_ctl_register: stats.get "control" */
	const char *control_socket;         /* port.add refuses it as a path (as the config does) */
	volatile sig_atomic_t *stop;        /* set to 1 by "shutdown" */
	unsigned uplink_txq_used;           /* uplink TX queues the layout transmits on */
};

/* Register every method (this file's, port.*, policy.*); 0 or the first
 * sn_rpc_register() error. */
int sn_ctl_register(struct sn_rpc_server *srv, struct sn_ctl *ctl);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sn_ctl_now_ns(void);

#endif /* SN_CTL_H */
