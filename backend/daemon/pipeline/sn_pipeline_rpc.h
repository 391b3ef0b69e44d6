/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pipeline_rpc.h — the pipeline's members of stats.get
 * (sn_pipeline_rpc.c). Each returns a new reference, or NULL (out of
 * memory, or as stated).
 *
 * Main thread only, inside a handler (sn_ctl.h); ctl->pipeline non-NULL
 * unless stated.
 */
#ifndef SN_PIPELINE_RPC_H
#define SN_PIPELINE_RPC_H

#include <jansson.h>

struct sn_ctl;
struct sn_port;

/* The "policy" member of port p's stats: its shaper counters, drops,
 * classes, clock_ns and clock_consistent. NULL also when p is not shaped
 * or ctl->pipeline is NULL. */
json_t *sn_pipeline_rpc_port_json(const struct sn_ctl *ctl, const struct sn_port *p);
/* The top-level "aggregates" object: name -> counters and NBA view. */
json_t *sn_pipeline_rpc_aggregates_json(const struct sn_ctl *ctl);
/* The top-level "arbiter" object: arbiter counters and drops, overload
 * mode, thread loop counters and the "workers" array (one object per
 * worker lcore, in order). */
json_t *sn_pipeline_rpc_arbiter_json(const struct sn_ctl *ctl);

#endif /* SN_PIPELINE_RPC_H */
