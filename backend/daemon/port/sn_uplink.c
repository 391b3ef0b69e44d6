/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_uplink.c — bring up the uplink ethdev (see sn_uplink.h).
 *
 * Nothing to schedule here: the uplink is a plain ethdev with one queue
 * pair, promiscuous so that it receives frames for every VM's MAC; the
 * switch (sn_switch.c) polls it like any other port.
 */
#include "sn_uplink.h"

#include <errno.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_mempool.h>

#include "sn_log.h"

int sn_uplink_open(const char *devargs, struct rte_mempool *mp,
		   uint16_t rx_desc, uint16_t tx_desc, uint16_t n_txq, uint16_t *port_id)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	char name[RTE_ETH_NAME_MAX_LEN];
	const char *comma = strchr(devargs, ',');
	size_t n = comma ? (size_t)(comma - devargs) : strlen(devargs);
	uint16_t port, nrx = rx_desc, ntx = tx_desc;
	int rc;

	if (n == 0 || n >= sizeof(name))
		return -EINVAL;
	memcpy(name, devargs, n);
	name[n] = '\0';
	if (rte_eth_dev_get_port_by_name(name, &port)) {
		sn_log("uplink: no ethdev named %s (devargs %s)", name, devargs);
		return -ENODEV;
	}
	memset(&conf, 0, sizeof(conf));
	rc = rte_eth_dev_info_get(port, &info);
	if (rc)
		goto fail;
	/* Guests hand us checksum-offloaded frames (virtio-net offloads, mbuf
	 * ol_flags set by the vhost library): let the PMD finish them (net_tap
	 * does it in software). TSO frames never reach the PMD: sn_switch.c
	 * segments them (net_tap 22.11's TSO rejects mss + headers > MTU);
	 * the segments are two-mbuf chains, hence MULTI_SEGS. */
	conf.txmode.offloads = info.tx_offload_capa &
		(RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM |
		 RTE_ETH_TX_OFFLOAD_TCP_CKSUM | RTE_ETH_TX_OFFLOAD_MULTI_SEGS);
	if (n_txq == 0 || n_txq > info.max_tx_queues) {
		sn_log("uplink: %s: %u TX queues needed (layout), the device has %u",
		       name, n_txq, info.max_tx_queues);
		rc = -ENOTSUP;
		goto fail;
	}
	rc = rte_eth_dev_configure(port, 1, n_txq, &conf);
	if (rc)
		goto fail;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrx, &ntx);
	if (rc)
		goto fail;
	rc = rte_eth_rx_queue_setup(port, 0, nrx, rte_eth_dev_socket_id(port), NULL, mp);
	if (rc)
		goto fail;
	for (uint16_t q = 0; q < n_txq; q++) {
		rc = rte_eth_tx_queue_setup(port, q, ntx, rte_eth_dev_socket_id(port), NULL);
		if (rc)
			goto fail;
	}
	rc = rte_eth_dev_start(port);
	if (rc)
		goto fail;
	rc = rte_eth_promiscuous_enable(port);
	if (rc && rc != -ENOTSUP)
		sn_log("uplink: %s: promiscuous mode not enabled (%s)", name, strerror(-rc));
	*port_id = port;
	sn_log("uplink: %s started (ethdev %u, rx %u tx %u descriptors)", name, port, nrx, ntx);
	return 0;
fail:
	sn_log("uplink: %s: setup failed: %s", name, strerror(rc < 0 ? -rc : rc));
	rte_eth_dev_close(port);
	return rc < 0 ? rc : -EIO;
}

void sn_uplink_close(uint16_t port_id)
{
	int rc = rte_eth_dev_stop(port_id);

	if (rc)
		sn_log("uplink: ethdev %u stop: %s", port_id, strerror(-rc));
	rte_eth_dev_close(port_id);
}
