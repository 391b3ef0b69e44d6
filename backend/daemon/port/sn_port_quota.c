/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_quota.c — each port's budgets on the shared pools: resolution
 * (policy entry, else config, else "auto") and the mbuf quota's reserve
 * and cap per port slot (sn_port_quota.h, doc/isolation.md).
 *
 * The "auto" budgets, with B = datapath.burst and nq the port's queues:
 *   mbufs reserve  R nq, R = min(2 B, T / (2 max_ports)) per queue: two
 *                  bursts, or what a pool too small for max_ports ports
 *                  of two bursts leaves (half of it for the reserves;
 *                  logged at start), T the mbuf quota's pool
 *   mbufs cap      max(reserve + 2 B nq, (T - max_ports R) / 2): half of
 *                  what the reserves of a full daemon leave, so two
 *                  tenants at their cap still leave every other port its
 *                  reserve and more
 *   held           per TX queue: max(2 B, min(mbufs cap / nq, 32768))
 *                  (the ring size bounds it too)
 *   backlog, wheel, flows, macs
 *                  the rule of the module that sizes the pool (env's
 *                  auto_*: sn_switch_backlog_quota_auto,
 *                  sn_pipeline_wheel_quota_auto,
 *                  sn_classify_flows_quota_auto, sn_mac_quota_auto;
 *                  doc/isolation.md); the uplink's macs: the whole
 *                  table (its entries are not capped)
 */
#include "sn_port_quota.h"

#include <errno.h>

#include "sn_log.h"
#include "sn_port_internal.h"
#include "sn_quota.h"

static uint32_t max_u32(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

void sn_port_quota_resolve(const struct sn_port_quota_env *env, const struct sn_port *p,
			   const uint32_t *pol, struct sn_port_quota *out, uint32_t *mbufs_min)
{
	const uint32_t b2 = 2 * env->burst, nq = p->nq ? p->nq : 1;
	/* per queue: two bursts, or what a pool too small for that leaves */
	const uint32_t rq = min_u32(b2, env->mbuf_total / (2 * max_u32(env->max_ports, 1)));
	const uint64_t reserves = (uint64_t)env->max_ports * rq;
	uint32_t v[SN_QK_MAX], rsv;

	for (unsigned k = 0; k < SN_QK_MAX; k++)
		v[k] = pol && pol[k] ? pol[k] : env->limit[k];
	rsv = env->mbufs_reserve ? env->mbufs_reserve : rq * nq;
	if (!v[SN_QK_MBUFS])
		v[SN_QK_MBUFS] = max_u32(rsv + b2 * nq, env->mbuf_total > reserves ?
					 (uint32_t)((env->mbuf_total - reserves) / 2) : 0);
	if (p->type == SN_PORT_UPLINK) {
		/* its frames come from its RX share, not from the quota */
		v[SN_QK_MBUFS] = env->uplink_mbufs ? env->uplink_mbufs : 1;
		rsv = 0;
	}
	if (!v[SN_QK_HELD])
		v[SN_QK_HELD] = max_u32(b2, min_u32(v[SN_QK_MBUFS] / nq, 32768));
	if (!v[SN_QK_BACKLOG])
		v[SN_QK_BACKLOG] = max_u32(1, env->auto_backlog);
	if (!v[SN_QK_WHEEL])
		v[SN_QK_WHEEL] = max_u32(1, env->auto_wheel);
	if (!v[SN_QK_FLOWS])
		v[SN_QK_FLOWS] = max_u32(1, env->auto_flows);
	if (!v[SN_QK_MACS])
		v[SN_QK_MACS] = max_u32(1, env->auto_macs);
	if (p->type == SN_PORT_UPLINK)
		v[SN_QK_MACS] = max_u32(1, env->mac_table_size);
	out->mbufs = v[SN_QK_MBUFS];
	out->held = v[SN_QK_HELD];
	out->backlog = v[SN_QK_BACKLOG];
	out->wheel = v[SN_QK_WHEEL];
	out->flows = v[SN_QK_FLOWS];
	out->macs = v[SN_QK_MACS];
	*mbufs_min = min_u32(rsv, out->mbufs);
}

int sn_ports_quota_setup(struct sn_ports *reg, const struct sn_port_quota_env *env,
			 sn_port_quota_policy_fn fn, void *arg)
{
	if (!env->mbuf_total)
		return -EINVAL;
	reg->mbufq = sn_quota_create(sn_config_port_slots, env->mbuf_total);
	if (!reg->mbufq)
		return -errno;
	reg->qenv = *env;
	reg->qpol = fn;
	reg->qpol_arg = arg;
	if (!env->mbufs_reserve &&
	    env->mbuf_total / (2 * max_u32(env->max_ports, 1)) < 2 * env->burst)
		sn_log_warn("quota: %u mbufs for %u ports leave a reserve of %u mbufs per queue, "
		       "less than two bursts (%u): raise datapath.mbufs or use \"auto\"",
		       env->mbuf_total, env->max_ports,
		       env->mbuf_total / (2 * max_u32(env->max_ports, 1)), 2 * env->burst);
	return 0;
}

struct sn_quota *sn_ports_mbuf_quota(const struct sn_ports *reg)
{
	return reg->mbufq;
}

void sn_ports_quota_port(struct sn_ports *reg, struct sn_port *p)
{
	const uint32_t *pol = reg->qpol ? reg->qpol(reg->qpol_arg, p->name) : NULL;
	struct sn_quota_owner_stats os;
	struct sn_port_quota q;
	uint32_t min;
	int rc;

	sn_port_quota_resolve(&reg->qenv, p, pol, &q, &min);
	__atomic_store_n(&p->quota.mbufs, q.mbufs, __ATOMIC_RELAXED);
	__atomic_store_n(&p->quota.held, q.held, __ATOMIC_RELAXED);
	__atomic_store_n(&p->quota.backlog, q.backlog, __ATOMIC_RELAXED);
	__atomic_store_n(&p->quota.wheel, q.wheel, __ATOMIC_RELAXED);
	__atomic_store_n(&p->quota.flows, q.flows, __ATOMIC_RELAXED);
	__atomic_store_n(&p->quota.macs, q.macs, __ATOMIC_RELAXED);
	if (!reg->mbufq || p->type != SN_PORT_VHOST)
		return;
	if (q.mbufs > sn_quota_total(reg->mbufq))
		q.mbufs = sn_quota_total(reg->mbufq);
	min = min_u32(min, q.mbufs);
	rc = sn_quota_set(reg->mbufq, p->slot, min, q.mbufs);
	if (rc == -ENOSPC) {
		/* the reserves of the other ports leave less: what fits */
		uint32_t free_rsv;

		sn_quota_owner_stats(reg->mbufq, p->slot, &os);
		free_rsv = sn_quota_total(reg->mbufq) - (sn_quota_reserved(reg->mbufq) - os.min);
		sn_log_warn("port %s: quota.mbufs_reserve %u does not fit the pool's %u unreserved "
		       "mbufs: reserve %u", p->name, min, free_rsv, min_u32(min, free_rsv));
		rc = sn_quota_set(reg->mbufq, p->slot, min_u32(min, free_rsv), q.mbufs);
	}
	if (rc == -ENOSPC) {
		/* Units the owners hold beyond their reserves leave no room to
		 * raise this one now: the cap applies, the reserve stays as
		 * it is (never raised, so this cannot fail) until the next
		 * resolution (policy publication). */
		sn_quota_owner_stats(reg->mbufq, p->slot, &os);
		sn_log_warn("port %s: quota.mbufs_reserve %u cannot be reserved while %u shared "
		       "mbufs are in use: reserve %u, cap %u, until the next policy publication",
		       p->name, min, sn_quota_shared_used(reg->mbufq), min_u32(os.min, q.mbufs),
		       q.mbufs);
		rc = sn_quota_set(reg->mbufq, p->slot, min_u32(os.min, q.mbufs), q.mbufs);
	}
	if (rc)
		sn_log_err("port %s: mbuf quota of slot %u not set: %d", p->name, p->slot, rc);
	/* the limits reported are the ones the quota enforces */
	sn_quota_owner_stats(reg->mbufq, p->slot, &os);
	__atomic_store_n(&p->quota.mbufs, os.max, __ATOMIC_RELAXED);
}

int sn_ports_quota_pick_slot(const struct sn_ports *reg)
{
	int busy = -ENOSPC;

	for (unsigned i = 0; i < sn_config_port_slots; i++) {
		if (reg->slot[i])
			continue;
		if (!reg->mbufq || sn_quota_used(reg->mbufq, i) == 0)
			return (int)i;
		busy = -EAGAIN;
	}
	return busy;
}

int sn_ports_quota_admit(struct sn_ports *reg, const struct sn_port *p)
{
	const uint32_t *pol = reg->qpol ? reg->qpol(reg->qpol_arg, p->name) : NULL;
	struct sn_quota_owner_stats os;
	struct sn_port_quota q;
	uint32_t min, unreserved;

	if (!reg->mbufq || p->type != SN_PORT_VHOST)
		return 0;
	sn_port_quota_resolve(&reg->qenv, p, pol, &q, &min);
	min = min_u32(min, min_u32(q.mbufs, sn_quota_total(reg->mbufq)));
	sn_quota_owner_stats(reg->mbufq, p->slot, &os);
	unreserved = sn_quota_total(reg->mbufq) - (sn_quota_reserved(reg->mbufq) - os.min);
	if (min <= unreserved)
		return 0;
	sn_log_warn("port %s: its mbuf reserve for %u queue%s (%u, quota.mbufs_reserve) does not fit "
	       "the %u mbufs of quota.mbufs' pool the other ports leave unreserved: raise "
	       "datapath.mbufs, or lower quota.mbufs_reserve or the port's queues",
	       p->name, p->nq, p->nq > 1 ? "s" : "", min, unreserved);
	return -ENOBUFS;
}

void sn_ports_quota_apply(struct sn_ports *reg)
{
	for (unsigned i = 0; i < sn_config_port_slots; i++) {
		struct sn_port *p = reg->slot[i];

		if (!p)
			continue;
		sn_ports_quota_port(reg, p);
		/* the MAC table's cap of the port follows (its hook sets the
		 * reserve and cap; static entries are already in place) */
		if (reg->mac_hooks)
			reg->mac_hooks->added(reg->mac_hooks_arg, p);
	}
}

void sn_ports_quota_release(struct sn_ports *reg, const struct sn_port *p)
{
	if (reg->mbufq && p->type == SN_PORT_VHOST)
		sn_quota_set(reg->mbufq, p->slot, 0, sn_quota_total(reg->mbufq));
}

void sn_ports_quota_fini(struct sn_ports *reg)
{
	sn_quota_free(reg->mbufq);
	reg->mbufq = NULL;
}
