/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_uplink.c — bring up the uplink ethdev (see sn_uplink.h).
 *
 * Nothing to schedule here: the uplink is a plain ethdev, promiscuous so
 * that it receives frames for every VM's MAC; the switch (sn_switch.c)
 * polls its RX queues like any other port's, each on its owning worker.
 * The RX queue count and the RSS hash types are decided once, from what
 * the device reports (dev_info: max_rx_queues, flow_type_rss_offloads),
 * the worker count and uplink.rx_queues.
 */
/* rte_eth_dev_conf_get() is experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API
#include "sn_uplink.h"

#include <errno.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_mempool.h>

#include "sn_log.h"

/* What the switch spreads on: addresses and ports of IPv4/IPv6 TCP/UDP. */
#define RSS_WANTED (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP)

const char *sn_uplink_rx_mode_name(enum sn_uplink_rx_mode m)
{
	switch (m) {
	case SN_UPLINK_RX_RSS:
		return "rss";
	case SN_UPLINK_RX_DEVICE:
		return "device";
	default:
		return "single";
	}
}

enum sn_uplink_rx_mode sn_uplink_rx_mode(uint16_t port_id)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;

	if (rte_eth_dev_info_get(port_id, &info) || info.nb_rx_queues <= 1)
		return SN_UPLINK_RX_SINGLE;
	if (rte_eth_dev_conf_get(port_id, &conf) == 0 &&
	    (conf.rxmode.mq_mode & RTE_ETH_MQ_RX_RSS_FLAG))
		return SN_UPLINK_RX_RSS;
	return SN_UPLINK_RX_DEVICE;
}

/* See sn_uplink.h. */
int sn_uplink_rx_plan(const char *name, const struct sn_uplink_params *prm,
		      const struct rte_eth_dev_info *info, struct sn_uplink_info *out)
{
	const uint64_t hf = info->flow_type_rss_offloads & RSS_WANTED;
	uint16_t n = prm->rx_queues;

	out->rss_hf = 0;
	out->rx_mode = SN_UPLINK_RX_SINGLE;
	if (n == 0) {
		n = 1;
		if (prm->workers > 1 && hf && info->max_rx_queues >= prm->workers) {
			n = prm->workers;
		} else if (!hf && info->max_rx_queues > 1 &&
			   info->max_rx_queues <= SN_UPLINK_RXQ_OWN_MAX) {
			/* The queues its devargs asked for (net_af_xdp
			 * queue_count, net_af_packet qpairs, net_vhost queues),
			 * each fed from outside: one left unpolled would
			 * strand its frames. */
			n = info->max_rx_queues;
			sn_log("uplink: %s: no RSS, %u RX queues of its own: every one polled",
			       name, n);
		} else if (prm->workers > 1)
			sn_log("uplink: %s: %s: one RX queue, worker 0 receives for all %u workers",
			       name, !hf ? "no RSS on IP/TCP/UDP" : "fewer RX queues than workers",
			       prm->workers);
	} else if (n > info->max_rx_queues) {
		sn_log_warn("uplink: %s: uplink.rx_queues %u: the device has %u RX queues", name, n,
		       info->max_rx_queues);
		return -ENOTSUP;
	}
	out->n_rxq = n;
	if (n > 1) {
		out->rx_mode = hf ? SN_UPLINK_RX_RSS : SN_UPLINK_RX_DEVICE;
		out->rss_hf = hf;
	}
	return 0;
}

static int configure(uint16_t port, const struct sn_uplink_info *plan, uint16_t n_txq,
		     struct rte_eth_conf *conf)
{
	conf->rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
	conf->rx_adv_conf.rss_conf.rss_key = NULL;   /* RSS: the device's default key */
	conf->rx_adv_conf.rss_conf.rss_hf = 0;
	if (plan->rx_mode == SN_UPLINK_RX_RSS) {
		conf->rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf->rx_adv_conf.rss_conf.rss_hf = plan->rss_hf;
	}
	return rte_eth_dev_configure(port, plan->n_rxq, n_txq, conf);
}

int sn_uplink_open(const struct sn_uplink_params *prm, struct sn_uplink_info *out)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	char name[RTE_ETH_NAME_MAX_LEN];
	const char *devargs = prm->devargs;
	const char *comma = strchr(devargs, ',');
	size_t n = comma ? (size_t)(comma - devargs) : strlen(devargs);
	uint16_t n_txq = prm->n_txq;
	uint16_t port, nrx = prm->rx_desc, ntx = prm->tx_desc;
	int rc;

	if (n == 0 || n >= sizeof(name))
		return -EINVAL;
	memcpy(name, devargs, n);
	name[n] = '\0';
	if (rte_eth_dev_get_port_by_name(name, &port)) {
		if (prm->pci)
			sn_log_err("uplink: the EAL did not probe PCI device %s: no ethdev for it "
			       "(see the EAL lines above)", name);
		else
			sn_log_err("uplink: no ethdev named %s (devargs %s)", name, devargs);
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
		sn_log_err("uplink: %s: %u TX queues needed (layout), the device has %u",
		       name, n_txq, info.max_tx_queues);
		rc = -ENOTSUP;
		goto fail;
	}
	rc = sn_uplink_rx_plan(name, prm, &info, out);
	if (rc)
		goto fail;
	rc = configure(port, out, n_txq, &conf);
	if (rc && out->n_rxq < n_txq && n_txq <= info.max_rx_queues &&
	    n_txq <= SN_UPLINK_RXQ_MAX) {
		/* A device whose queues come in pairs (net_tap: one tun queue
		 * per pair) refuses fewer RX than TX queues: every pair's RX
		 * side gets polled, queue q by worker q mod W. */
		sn_log_warn("uplink: %s: %u RX queues refused, trying %u (as many as TX queues)", name,
		       out->n_rxq, n_txq);
		out->n_rxq = n_txq;
		out->rss_hf = info.flow_type_rss_offloads & RSS_WANTED;
		out->rx_mode = out->rss_hf ? SN_UPLINK_RX_RSS : SN_UPLINK_RX_DEVICE;
		rc = configure(port, out, n_txq, &conf);
	} else if (rc && out->n_rxq > n_txq && out->n_rxq <= info.max_tx_queues) {
		/* The same pairing the other way (net_tap, net_af_xdp: several
		 * RX queues, one transmitting lcore in layout 1core): the extra
		 * TX queues are set up but nobody transmits on them. */
		sn_log_warn("uplink: %s: %u TX queues refused, trying %u (as many as RX queues, "
		       "%u unused)", name, n_txq, out->n_rxq, out->n_rxq - n_txq);
		n_txq = out->n_rxq;
		rc = configure(port, out, n_txq, &conf);
	}
	if (rc)
		goto fail;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrx, &ntx);
	if (rc)
		goto fail;
	for (uint16_t q = 0; q < out->n_rxq; q++) {
		rc = rte_eth_rx_queue_setup(port, q, nrx, rte_eth_dev_socket_id(port), NULL,
					    prm->mp);
		if (rc)
			goto fail;
	}
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
		sn_log_warn("uplink: %s: promiscuous mode not enabled (%s)", name, strerror(-rc));
	out->port_id = port;
	out->n_txq = n_txq;
	sn_log("uplink: %s started (ethdev %u, rx %u tx %u descriptors)", name, port, nrx, ntx);
	sn_log("uplink: %s: RX mode %s: %u RX queue%s over %u worker%s (rss_hf 0x%llx), "
	       "%u TX queues", name, sn_uplink_rx_mode_name(out->rx_mode), out->n_rxq,
	       out->n_rxq > 1 ? "s" : "", prm->workers, prm->workers > 1 ? "s" : "",
	       (unsigned long long)out->rss_hf, n_txq);
	return 0;
fail:
	sn_log_err("uplink: %s: setup failed: %s", name, strerror(rc < 0 ? -rc : rc));
	rte_eth_dev_close(port);
	return rc < 0 ? rc : -EIO;
}

void sn_uplink_close(uint16_t port_id)
{
	int rc = rte_eth_dev_stop(port_id);

	if (rc)
		sn_log_err("uplink: ethdev %u stop: %s", port_id, strerror(-rc));
	rte_eth_dev_close(port_id);
}
