/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_policy_rpc.h — the policy store's JSON-RPC methods (sn_policy_rpc.c).
 *
 * Main thread only, like every handler (sn_ctl.h).
 */
#ifndef SN_POLICY_RPC_H
#define SN_POLICY_RPC_H

#include <stddef.h>

#include <jansson.h>

struct sn_ctl;
struct sn_policy;
struct sn_rpc_server;

/* Register policy.get, policy.set and policy.del with ctl as their
 * argument; 0 or the first sn_rpc_register() error. */
int sn_policy_rpc_register(struct sn_rpc_server *srv, struct sn_ctl *ctl);

/* policy.set's two steps, shared with config.reload (MAIN). Check: j
 * parsed and validated as a whole into *pol (sn_policy_parse, and no
 * entry for the uplink): 0, or -EINVAL with the message naming the field
 * in msg[len]; nothing published. Publish: pol in force and the ports'
 * budgets recomputed under it: 0 or sn_policy_publish()'s -errno. */
int sn_policy_rpc_check(const struct sn_ctl *ctl, const json_t *j, struct sn_policy *pol,
			char *msg, size_t len);
int sn_policy_rpc_publish(struct sn_ctl *ctl, const struct sn_policy *pol);

#endif /* SN_POLICY_RPC_H */
