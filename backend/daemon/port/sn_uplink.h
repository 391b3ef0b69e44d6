/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_uplink.h — the uplink: any DPDK ethdev named by EAL --vdev devargs
 * (net_tap for tests and the demo, net_null/net_ring for benchmarks, a PCI
 * NIC in production), promiscuous, with one TX queue per transmitting
 * lcore and one or several RX queues.
 *
 * RX queues (uplink.rx_queues, threads.md "Uplink RX"):
 *  - "auto" with W > 1 workers (layout ncore) and a device that offers RSS
 *    on IP/TCP/UDP and at least W RX queues: W queues, RSS over the hash
 *    types the device offers of those (SN_UPLINK_RX_RSS);
 *  - "auto", a device without RSS that has 2..SN_UPLINK_RXQ_OWN_MAX RX
 *    queues: all of them (SN_UPLINK_RX_DEVICE): those are the queues its
 *    devargs asked for (net_af_xdp queue_count, net_af_packet qpairs,
 *    net_vhost queues), each fed by the kernel or the peer;
 *  - "auto" otherwise: one queue (SN_UPLINK_RX_SINGLE): worker 0 receives
 *    every frame and delivers it to its destination port itself;
 *  - N: N queues (at most the device's), RSS if it offers it, else the
 *    device's own spreading (SN_UPLINK_RX_DEVICE).
 * RX queue q is polled by worker q mod W (sn_ports_add_uplink sets the
 * uplink's q[q].owner).
 *
 * Main thread only. After sn_uplink_open() returns, RX queue q belongs to
 * its worker alone and TX queue k to the lcore that transmits on it (DPDK
 * ethdev queues are not thread-safe): worker k on queue k, the arbiter
 * lcore (layouts 2core, ncore) on queue W (sn_pipeline.h); layout 1core
 * has one TX queue, the worker's, on which it also runs the arbiter. A
 * device that pairs its queues (net_tap, net_af_xdp: as many TX as RX
 * queues) gets TX queues up to its RX count; those beyond the layout's
 * are set up and never used.
 * sn_uplink_close() is called after every lcore has stopped.
 */
#ifndef SN_UPLINK_H
#define SN_UPLINK_H

#include <stdbool.h>
#include <stdint.h>

struct rte_eth_dev_info;
struct rte_mempool;

enum sn_uplink_rx_mode {
	SN_UPLINK_RX_SINGLE,   /* one RX queue, worker 0's */
	SN_UPLINK_RX_RSS,      /* several, the device's RSS picks the queue */
	SN_UPLINK_RX_DEVICE,   /* several, without RSS: the device's own choice */
};

/* A device without RSS reporting at most this many RX queues has exactly
 * the ones its devargs asked for (a PMD with queues of its own reports a
 * large fixed maximum: net_null 1024, net_tap 16). */
#define SN_UPLINK_RXQ_OWN_MAX 8
#define SN_UPLINK_RXQ_MAX 8   /* RX queues at most (== SN_PORT_QMAX) */

struct sn_uplink_params {
	const char *devargs;
	struct rte_mempool *mp;
	uint16_t rx_desc, tx_desc;
	uint16_t n_txq;        /* one per transmitting lcore (the layout's); a
				* device that pairs its queues may get more
				* (sn_uplink_info.n_txq), the rest unused */
	uint16_t workers;      /* worker lcores (W) */
	uint16_t rx_queues;    /* 0 = auto, else the RX queue count asked for */
	bool pci;              /* devargs is a PCI address the EAL was to probe */
};

struct sn_uplink_info {
	uint16_t port_id;
	uint16_t n_rxq, n_txq;
	enum sn_uplink_rx_mode rx_mode;
	uint64_t rss_hf;       /* RSS hash types in force (0 unless RSS) */
};

/* Any thread, pure but for its log line: the RX queue count, mode and
 * hash types (out->n_rxq, rx_mode, rss_hf) for prm on a device that
 * reports info (above). 0, or -ENOTSUP when prm->rx_queues exceeds the
 * device's RX queues (logged, naming the device). sn_uplink_open() may
 * still raise n_rxq to the TX queue count, or n_txq to the RX queue count,
 * for a device that pairs them. */
int sn_uplink_rx_plan(const char *name, const struct sn_uplink_params *prm,
		      const struct rte_eth_dev_info *info, struct sn_uplink_info *out);
/* Find the ethdev the EAL created from devargs (name = devargs up to the
 * first ','; main.c passes the name for the uplink's kind, a PCI NIC's
 * address included: sn_eal_uplink_name), configure it, start it, log the
 * RX mode chosen. 0 or -errno (logged). */
int sn_uplink_open(const struct sn_uplink_params *prm, struct sn_uplink_info *out);
/* Any thread, pure: "single", "rss", "device". */
const char *sn_uplink_rx_mode_name(enum sn_uplink_rx_mode m);
/* Main thread: the RX mode an opened uplink runs in, from its ethdev
 * configuration. */
enum sn_uplink_rx_mode sn_uplink_rx_mode(uint16_t port_id);
/* Stop and close it. */
void sn_uplink_close(uint16_t port_id);

#endif /* SN_UPLINK_H */
