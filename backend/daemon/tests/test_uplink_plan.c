/* SPDX-License-Identifier: BSD-3-Clause */
/* test_uplink_plan.c — sn_uplink_rx_plan(): the uplink's RX queue count,
 * mode and RSS hash types for each kind of device (RSS or not, enough
 * queues or not, a few queues of its own) and each uplink.rx_queues, including the refusal of
 * more queues than the device has (TAP-style output, exit status =
 * failures; no EAL: the device is a hand-filled rte_eth_dev_info). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_ethdev.h>

#include "sn_uplink.h"

static int fails, n;

#define CHECK(cond, ...) do { \
	n++; \
	if (cond) { printf("ok %d - ", n); } \
	else { printf("not ok %d - %s:%d: ", n, __FILE__, __LINE__); fails++; } \
	printf(__VA_ARGS__); printf("\n"); \
} while (0)

#define IP_TCP_UDP (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP)

static int plan(uint16_t max_rxq, uint64_t rss, uint16_t workers, uint16_t rx_queues,
		struct sn_uplink_info *out)
{
	struct rte_eth_dev_info info;
	struct sn_uplink_params prm = { .devargs = "net_test0", .n_txq = workers + 1,
					.workers = workers, .rx_queues = rx_queues };

	memset(&info, 0, sizeof(info));
	info.max_rx_queues = max_rxq;
	info.max_tx_queues = 16;
	info.flow_type_rss_offloads = rss;
	memset(out, 0xa5, sizeof(*out));
	return sn_uplink_rx_plan("net_test0", &prm, &info, out);
}

int main(void)
{
	struct sn_uplink_info o;
	int rc;

	/* auto, RSS device with enough queues: one per worker */
	rc = plan(16, IP_TCP_UDP | RTE_ETH_RSS_SCTP, 2, 0, &o);
	CHECK(rc == 0 && o.n_rxq == 2 && o.rx_mode == SN_UPLINK_RX_RSS && o.rss_hf == IP_TCP_UDP,
	      "auto, RSS, 16 queues, 2 workers: 2 queues, rss over IP/TCP/UDP only");
	rc = plan(8, RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_L2_PAYLOAD, 4, 0,
		  &o);
	CHECK(rc == 0 && o.n_rxq == 4 && o.rx_mode == SN_UPLINK_RX_RSS &&
	      o.rss_hf == (RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_UDP),
	      "auto: the hash types are the device's, intersected with IP/TCP/UDP");
	/* auto fallbacks: one queue, worker 0 */
	rc = plan(16, 0, 2, 0, &o);
	CHECK(rc == 0 && o.n_rxq == 1 && o.rx_mode == SN_UPLINK_RX_SINGLE && o.rss_hf == 0,
	      "auto, no RSS, a large fixed maximum of queues: one queue");
	rc = plan(1, 0, 2, 0, &o);
	CHECK(rc == 0 && o.n_rxq == 1 && o.rx_mode == SN_UPLINK_RX_SINGLE,
	      "auto, no RSS, one RX queue: one queue");
	/* auto, no RSS, the few queues its devargs asked for: all polled */
	rc = plan(2, 0, 2, 0, &o);
	CHECK(rc == 0 && o.n_rxq == 2 && o.rx_mode == SN_UPLINK_RX_DEVICE && o.rss_hf == 0,
	      "auto, no RSS, 2 queues of its own: both");
	rc = plan(SN_UPLINK_RXQ_OWN_MAX, 0, 1, 0, &o);
	CHECK(rc == 0 && o.n_rxq == SN_UPLINK_RXQ_OWN_MAX && o.rx_mode == SN_UPLINK_RX_DEVICE,
	      "auto, no RSS, %d queues of its own, one worker: every one", SN_UPLINK_RXQ_OWN_MAX);
	rc = plan(SN_UPLINK_RXQ_OWN_MAX + 1, 0, 2, 0, &o);
	CHECK(rc == 0 && o.n_rxq == 1 && o.rx_mode == SN_UPLINK_RX_SINGLE,
	      "auto, no RSS, %d queues: one queue", SN_UPLINK_RXQ_OWN_MAX + 1);
	rc = plan(16, RTE_ETH_RSS_L2_PAYLOAD, 2, 0, &o);
	CHECK(rc == 0 && o.n_rxq == 1 && o.rx_mode == SN_UPLINK_RX_SINGLE,
	      "auto, RSS without IP/TCP/UDP hash types: one queue");
	rc = plan(1, IP_TCP_UDP, 2, 0, &o);
	CHECK(rc == 0 && o.n_rxq == 1 && o.rx_mode == SN_UPLINK_RX_SINGLE,
	      "auto, RSS but one RX queue: one queue");
	rc = plan(3, IP_TCP_UDP, 4, 0, &o);
	CHECK(rc == 0 && o.n_rxq == 1 && o.rx_mode == SN_UPLINK_RX_SINGLE,
	      "auto, RSS with fewer queues than workers: one queue");
	rc = plan(16, IP_TCP_UDP, 1, 0, &o);
	CHECK(rc == 0 && o.n_rxq == 1 && o.rx_mode == SN_UPLINK_RX_SINGLE && o.rss_hf == 0,
	      "auto, one worker: one queue");
	/* explicit counts */
	rc = plan(4, 0, 2, 4, &o);
	CHECK(rc == 0 && o.n_rxq == 4 && o.rx_mode == SN_UPLINK_RX_DEVICE && o.rss_hf == 0,
	      "rx_queues 4 without RSS: 4 queues, the device's own spreading");
	rc = plan(4, IP_TCP_UDP, 2, 3, &o);
	CHECK(rc == 0 && o.n_rxq == 3 && o.rx_mode == SN_UPLINK_RX_RSS && o.rss_hf == IP_TCP_UDP,
	      "rx_queues 3 with RSS: 3 queues, rss");
	rc = plan(16, IP_TCP_UDP, 2, 1, &o);
	CHECK(rc == 0 && o.n_rxq == 1 && o.rx_mode == SN_UPLINK_RX_SINGLE && o.rss_hf == 0,
	      "rx_queues 1: one queue even with RSS");
	rc = plan(2, IP_TCP_UDP, 2, 3, &o);
	CHECK(rc == -ENOTSUP, "rx_queues 3 on a device with 2 RX queues: refused (%d)", rc);
	rc = plan(0, 0, 2, 1, &o);
	CHECK(rc == -ENOTSUP, "rx_queues 1 on a device with no RX queue: refused (%d)", rc);
	printf("1..%d\n", n);
	return fails;
}
