/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_gen.h — shared state of the sn-gen traffic tool (CLI in sn_gen.c,
 * traffic loops in sn_genrun.c).
 *
 * sn-gen is ONE single-threaded DPDK process that owns every traffic peer
 * (net_virtio_user ports) of a test or benchmark: it sends on one port and
 * drains all of them in the same loop, on one pinned lcore (a separate
 * generator and sink would be a third busy poller on a 2-core machine). Nothing here is shared between threads: the only
 * asynchronous writer is the signal handler, which sets sn_gen_stop.
 */
#ifndef SN_GEN_H
#define SN_GEN_H

#include <signal.h>
#include <stdio.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

struct rte_eth_rxtx_callback;   /* rte_ethdev.h */

#define SN_GEN_MAX_PORTS 8
#define SN_GEN_MAX_FLOWS 32
#define SN_GEN_BURST_MAX 64
#define SN_GEN_MAX_QUEUES 8

/* --marker: the deferred-completion opt-in marker (guest-driver-patch/
 * README.md) in num_buffers, the last 2 bytes of the 12-byte virtio-net
 * header the virtio PMD pushes right before the frame. */
#define SN_GEN_MARKER_MAGIC 0x5344
#define SN_GEN_VNET_HDR_LEN 12

enum sn_gen_mode { SN_GEN_BENCH, SN_GEN_COUNT, SN_GEN_ECHO };

struct sn_gen_port {
	char path[256];
	char extra[256];           /* extra net_virtio_user devargs */
	uint16_t id;               /* ethdev port id */
	uint16_t nq;               /* queue pairs in use (--queues, or fewer if
	                            * the backend does not offer MQ) */
	struct rte_ether_addr mac;
	/* Transmit side: frames built but not yet accepted by the driver, all
	 * of one flow (pend_flow, or -1 for learn frames), kept in order. */
	struct rte_mbuf *pend[SN_GEN_BURST_MAX];
	uint16_t npend;
	int pend_flow;
	/* Counters (all frames unless named otherwise). */
	uint64_t tx_packets, tx_bytes, rx_packets, rx_bytes;
	uint64_t tx_learn, rx_learn, rx_data, rx_foreign, rx_bad;
	uint64_t echo_arp, echo_icmp, echo_tx_fail;
	int link_up;
	uint64_t link_downs;         /* up -> down transitions seen */
	uint64_t rx_q[SN_GEN_MAX_QUEUES], tx_q[SN_GEN_MAX_QUEUES]; /* per queue */
	/* --marker: the TX callback of each queue (NULL without --marker);
	 * bench mode removes queue 0's and marks its frames as it builds
	 * them. */
	const struct rte_eth_rxtx_callback *marker_cb[SN_GEN_MAX_QUEUES];
};

struct sn_gen_flow {
	int src;                     /* port index */
	int dst_port;                /* port index, or -1 if dst is a raw MAC */
	struct rte_ether_addr dst;
	struct rte_ether_addr smac;  /* source MAC (default: src port's MAC) */
	int has_smac;
	/* udp=: IPv4/UDP frames with this 5-tuple (host order) instead of the
	 * 0x88B5 test ethertype (for classifiers; a sn-gen sink sees them as
	 * foreign) */
	int udp;                     /* 4: udp=, 6: udp6= (IPv6/UDP) */
	uint32_t ip_src, ip_dst;
	uint8_t ip6_src[16], ip6_dst[16];   /* udp6= */
	uint16_t udp_sport, udp_dport;
	/* arp=: ARP requests sender ip_src, target ip_dst instead (count mode) */
	int arp;
	/* nd=: IPv6 neighbour solicitations (135) or advertisements (136)
	 * from nd_src for target nd_tgt with link-layer option nd_lla; 0 = no */
	uint8_t nd;
	uint8_t nd_src[16], nd_tgt[16];
	struct rte_ether_addr nd_lla;
	/* smacs=N: frame seq comes from the source MAC whose last three bytes
	 * are the base's + seq mod N (N > 1: a MAC spray) */
	uint32_t smacs;
	uint16_t udp_sports;         /* sports=N: frame k has source port
	                              * udp_sport + k mod N (0, 1: fixed) */
	uint64_t count;
	unsigned int phase;
	uint16_t size;               /* frame bytes; 0 = --size */
	/* progress and receive accounting */
	uint64_t built, sent;
	uint64_t rx, rx_by_port[SN_GEN_MAX_PORTS];
	uint64_t next_seq[SN_GEN_MAX_PORTS]; /* last seq seen at a port, +1 */
	uint64_t rx_ooo, rx_bad;
	/* lat=1: per-seq TX / RX TSC and the sink's poll gap before
	 * the RX, sn_genlat.h; NULL otherwise */
	uint64_t *lat_tx, *lat_rx, *lat_gap;
};

struct sn_gen {
	/* options */
	enum sn_gen_mode mode;
	unsigned int nports, nflows;
	struct sn_gen_port ports[SN_GEN_MAX_PORTS];
	struct sn_gen_flow flows[SN_GEN_MAX_FLOWS];
	uint16_t size, burst;
	uint16_t queues;             /* --queues: queue pairs asked per port */
	uint64_t rate_pps;           /* 0 = unlimited, all flows of a phase together */
	uint64_t gap_us;             /* count mode: pause between bursts (0 = none) */
	int marker;                  /* --marker: opt-in marker in every TX header */
	int hdr_write;               /* --hdr-write (bench): num_buffers stored in every frame */
	uint16_t tx_free_thresh;     /* --tx-free-thresh (0 = the PMD's default) */
	int learn;
	double duration_s, warmup_s, grace_s, phase_gap_s, settle_s, connect_s;
	const char *sync_dir;        /* NULL = timing instead of sync files */
	int echo_port;
	rte_be32_t echo_ip;
	uint64_t sample_ms;          /* sampling sink period, 0 = off */
	const char *sample_path;     /* NULL = stderr */
	const char *lat_path;        /* --lat-file: latency records, sn_genlat.h */
	uint64_t lat_poll, lat_gap;  /* TSC of the latest poll_rx, time since the one before */
	/* runtime */
	uint32_t run_id;
	uint64_t hz;
	struct rte_mempool *mp;
	uint64_t alloc_fail;
	uint64_t next_link_check;    /* TSC of the next link poll */
	FILE *sample_out;            /* sampling sink output (sample_ms != 0) */
	uint64_t next_sample;        /* TSC: next sample due */
	int completed;               /* all frames sent (count) / window done (bench) */
	double elapsed_s;
	/* bench results */
	uint64_t bench_tx, bench_rx;
	double bench_window_s;
	/* bench window, batching proxies: loop iterations, tx_burst
	 * calls and those that took no frame, receive polls of the sink port
	 * that found nothing */
	uint64_t bench_loops, bench_tx_calls, bench_tx_zero, bench_rx_empty;
	uint64_t bench_hdr_stores;   /* frames built with num_buffers stored (--hdr-write/--marker) */
};

extern volatile sig_atomic_t sn_gen_stop;

/* Wait for every port's link, then run g->mode. Returns 0 or -errno. */
int sn_gen_run(struct sn_gen *g);

#endif /* SN_GEN_H */
