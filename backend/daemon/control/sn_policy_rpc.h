/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_policy_rpc.h — the policy store's JSON-RPC methods (sn_policy_rpc.c).
 *
 * Main thread only, like every handler (sn_ctl.h).
 */
#ifndef SN_POLICY_RPC_H
#define SN_POLICY_RPC_H

struct sn_ctl;
struct sn_rpc_server;

/* Register policy.get, policy.set and policy.del with ctl as their
 * argument; 0 or the first sn_rpc_register() error. */
int sn_policy_rpc_register(struct sn_rpc_server *srv, struct sn_ctl *ctl);

#endif /* SN_POLICY_RPC_H */
