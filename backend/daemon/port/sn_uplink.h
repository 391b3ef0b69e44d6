/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_uplink.h — the uplink: any DPDK ethdev named by EAL --vdev devargs
 * (net_tap for tests and the demo, net_null/net_ring for benchmarks, a PCI
 * NIC in production), one RX queue and one TX queue per transmitting
 * thread, promiscuous.
 *
 * Main thread only. After sn_uplink_open() returns, RX queue 0 and TX
 * queue 0 belong to the worker lcore alone (DPDK ethdev queues are not
 * thread-safe); TX queue 1 (layout 2core) to the arbiter lcore alone
 * (sn_pipeline.h). sn_uplink_close() is called after both have stopped.
 */
#ifndef SN_UPLINK_H
#define SN_UPLINK_H

#include <stdint.h>

struct rte_mempool;

/* Find the ethdev the EAL created from devargs (name = devargs up to the
 * first ','; main.c passes the name for the uplink's kind, a PCI NIC's
 * address included: sn_eal_uplink_name), configure it, start it. 0 or
 * -errno (logged). */
int sn_uplink_open(const char *devargs, struct rte_mempool *mp,
		   uint16_t rx_desc, uint16_t tx_desc, uint16_t n_txq, uint16_t *port_id);
/* Stop and close it. */
void sn_uplink_close(uint16_t port_id);

#endif /* SN_UPLINK_H */
