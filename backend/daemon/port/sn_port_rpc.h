/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_rpc.h — the port registry's JSON-RPC methods (sn_port_rpc.c).
 *
 * Main thread only, like every handler (sn_ctl.h).
 */
#ifndef SN_PORT_RPC_H
#define SN_PORT_RPC_H

#include <jansson.h>

struct sn_ctl;
struct sn_port;
struct sn_rpc_server;

/* Register port.add, port.del and port.list with ctl as their argument;
 * 0 or the first sn_rpc_register() error. */
int sn_port_rpc_register(struct sn_rpc_server *srv, struct sn_ctl *ctl);

/* Port p's object in stats.get's "ports" (counters, drops; a vhost-user
 * port's completion and queues): a new reference, NULL when out of
 * memory. The caller adds the members other modules own ("policy",
 * "cpu_fair"). */
json_t *sn_port_rpc_stats_json(const struct sn_ctl *ctl, const struct sn_port *p);

#endif /* SN_PORT_RPC_H */
