/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_quota.h — resolving each port's budgets (struct sn_port_quota)
 * and the mbuf quota every port's frames draw from (doc/isolation.md).
 *
 * A budget comes from, in order: the port's policy entry
 * (policy.ports.<name>.quota.<key>), the config section "quota" (a number),
 * else the "auto" default derived here from the pool sizes, the port count
 * and the burst. Resolution runs on MAIN when a port is created (before
 * it is published) and after every policy publication
 * (sn_ports_quota_apply); each field of p->quota is stored relaxed (the
 * datapath lcores load it relaxed once per burst, sn_port.h).
 *
 * The mbuf quota (sn_quota.h, owners = port slots) covers the shared
 * mempool minus what is never a guest's: the uplink's RX share (its RX
 * descriptors and a burst per RX queue), the per-lcore mempool caches and
 * the workers' recycle stashes. Each vhost-user port reserves
 * quota.mbufs_reserve of it (auto: two bursts per queue) and holds at most
 * quota.mbufs; a port's reserve is released when it is deleted.
 *
 * Contract: every function here is MAIN only; sn_port_quota_resolve is
 * pure (any thread).
 */
#ifndef SN_PORT_QUOTA_H
#define SN_PORT_QUOTA_H

#include <stdint.h>

#include "sn_config.h"
#include "sn_port.h"

struct sn_ports;
struct sn_quota;

/* What the "auto" budgets are derived from (MAIN fills it once). */
struct sn_port_quota_env {
	uint32_t limit[SN_QK_MAX];    /* config quota.<key>, 0 = auto */
	uint32_t mbufs_reserve;       /* config quota.mbufs_reserve, 0 = auto */
	uint32_t mbuf_total;          /* the mbuf quota's pool (see above) */
	uint32_t uplink_mbufs;        /* the uplink's RX share, reserved */
	unsigned max_ports;           /* datapath.max_ports */
	unsigned burst;               /* datapath.burst */
	/* The "auto" caps of the pools other modules size, each from that
	 * module's rule (MAIN fills them): sn_switch_backlog_quota_auto,
	 * sn_pipeline_wheel_quota_auto, sn_classify_flows_quota_auto,
	 * sn_mac_quota_auto. */
	uint32_t auto_backlog, auto_wheel, auto_flows, auto_macs;
	uint32_t mac_table_size;      /* MAC table entries (the uplink's macs) */
};

/* The overrides of port `name` (uint32_t[SN_QK_MAX], 0 = not set) in the
 * policy in force, or NULL: MAIN, the policy store's reader. */
typedef const uint32_t *(*sn_port_quota_policy_fn)(void *arg, const char *name);

/* Pure: p's budgets (p: its type and nq) under env and the overrides pol
 * (NULL: none) into *out, and its mbuf reserve into *mbufs_min. */
void sn_port_quota_resolve(const struct sn_port_quota_env *env, const struct sn_port *p,
			   const uint32_t *pol, struct sn_port_quota *out, uint32_t *mbufs_min);

/* MAIN, before any port is added: the budgets' inputs (copied) and the
 * policy lookup (fn NULL: none). Creates the mbuf quota over
 * env->mbuf_total units for sn_config_port_slots owners. 0, -EINVAL
 * (mbuf_total 0), -ENOMEM. */
int sn_ports_quota_setup(struct sn_ports *reg, const struct sn_port_quota_env *env,
			 sn_port_quota_policy_fn fn, void *arg);
/* MAIN: the mbuf quota (NULL before setup). */
struct sn_quota *sn_ports_mbuf_quota(const struct sn_ports *reg);
/* MAIN: resolve and store the budgets of port p (its slot's reserve and
 * cap in the mbuf quota with them); p need not be published yet. A
 * reserve that no longer fits the pool is lowered to what fits; one that
 * cannot be raised now (the units held beyond the reserves leave no room)
 * stays as it is until the next call (both logged). p->quota.mbufs is the
 * cap the quota enforces (the pool's size at most). */
void sn_ports_quota_port(struct sn_ports *reg, struct sn_port *p);
/* MAIN: a free slot for a new port: the lowest one without a port whose
 * mbuf quota units are all back (a deleted port's frames still out give
 * their units to their slot when freed, so a slot is not reused before:
 * the units would be charged to the new port). The slot, -ENOSPC (no
 * free slot), -EAGAIN (every free slot still has frames out). */
int sn_ports_quota_pick_slot(const struct sn_ports *reg);
/* MAIN, in port.add before anything is set up: -ENOBUFS (logged) if the
 * mbuf reserve p needs for its p->nq queues does not fit beside the
 * reserves in force (the pool is too small for this port, whatever its
 * queue count was assumed to be), else 0. */
int sn_ports_quota_admit(struct sn_ports *reg, const struct sn_port *p);
/* MAIN: sn_ports_quota_port for every port (after a policy publication). */
void sn_ports_quota_apply(struct sn_ports *reg);
/* MAIN: port p goes: its reserve back to the pool (frames still out give
 * their mbufs back to its slot when they are freed). */
void sn_ports_quota_release(struct sn_ports *reg, const struct sn_port *p);
/* MAIN: free the mbuf quota (registry destroy). */
void sn_ports_quota_fini(struct sn_ports *reg);

#endif /* SN_PORT_QUOTA_H */
