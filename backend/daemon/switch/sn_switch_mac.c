/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_switch_mac.c — the switch's MAC table seen from outside the worker
 * loop: counters, a migrated guest's announce, and the port lifetimes
 * (static entries of allowed_macs, MAC-entry budgets). Contracts in
 * sn_switch.h; the table's own in sn_mac.h.
 */
/* rte_seqlock (sn_mac_impl.h) is experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API
#include "sn_switch_impl.h"
#include "sn_mac_impl.h"

#include <errno.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ether.h>

#include "sn_bind.h"
#include "sn_log.h"
#include "sn_port.h"
#include "sn_quota.h"

void sn_switch_mac_stats(const struct sn_switch *sw, struct sn_mac_stats *out)
{
	sn_mac_stats(sw->mt, out);
}

/* See sn_switch.h: the key a frame from mac would give (sn_mac_keys). */
int sn_switch_learn(struct sn_switch *sw, const struct sn_port *p, const uint8_t mac[6])
{
	struct rte_ether_hdr eth = { 0 };
	uint64_t dkey, skey;

	memcpy(eth.src_addr.addr_bytes, mac, RTE_ETHER_ADDR_LEN);
	if (rte_is_multicast_ether_addr(&eth.src_addr) || rte_is_zero_ether_addr(&eth.src_addr))
		return -EINVAL;
	sn_mac_keys(&eth, &dkey, &skey);
	if (p->bound && p->bind.n_macs && !sn_bind_has_key(&p->bind, skey))
		return -EPERM;
	switch (sn_mac_learn(sw->mt, skey, p->slot, p->gen,
			     (p->type == SN_PORT_VHOST ? SN_MAC_IN_VM : 0) |
			     (p->bound && p->bind.n_macs ? SN_MAC_IN_ALLOWED : 0), rte_rdtsc())) {
	case SN_MAC_KNOWN:
	case SN_MAC_WROTE:
		return 0;
	case SN_MAC_REFUSED:
		return -EPERM;
	default:
		return -ENOSPC;
	}
}

void sn_switch_port_added(struct sn_switch *sw, const struct sn_port *p)
{
	const uint32_t total = sn_quota_total(sw->mq);
	uint32_t min = p->bind.n_macs, max = RTE_MAX(RTE_MIN(p->quota.macs, total), min);
	int rc;

	if (p->type != SN_PORT_VHOST)
		return;
	rc = sn_quota_set(sw->mq, p->slot, min, max ? max : total);
	if (rc)
		sn_log_warn("port %s: MAC quota (reserve %u, cap %u): %s", p->name, min, max,
		       strerror(-rc));
	for (unsigned i = 0; i < p->bind.n_macs; i++) {
		enum sn_mac_learn_res r = sn_mac_learn(sw->mt, p->bind.mac_key[i], p->slot, p->gen,
						       SN_MAC_IN_VM | SN_MAC_IN_ALLOWED |
						       SN_MAC_IN_STATIC, rte_rdtsc());

		if (r != SN_MAC_WROTE && r != SN_MAC_KNOWN) {
			const uint8_t *m = p->bind.mac[i];

			sn_log_warn("port %s: allowed MAC %02x:%02x:%02x:%02x:%02x:%02x not installed "
			       "(%s); learned from its first frame", p->name, m[0], m[1], m[2],
			       m[3], m[4], m[5], r == SN_MAC_FULL ? "bucket of static entries" :
			       r == SN_MAC_QUOTA ? "quota" : "static on another port");
		}
	}
}

void sn_switch_port_deleted(struct sn_switch *sw, uint16_t slot)
{
	sn_mac_forget(sw->mt, slot);
	sn_quota_set(sw->mq, slot, 0, sn_quota_total(sw->mq));
}

uint32_t sn_switch_mac_used(const struct sn_switch *sw, uint16_t slot)
{
	return sn_quota_used(sw->mq, slot);
}
