/* SPDX-License-Identifier: BSD-3-Clause */
/* test_genpkt.c — unit test of sn-gen's frame module (no EAL needed).
 *
 * The sink's verdicts are what the datapath tests trust, so each verdict is
 * exercised here: intact frames, corrupted payload, wrong length, another
 * run, not-ours; and the echo responder's ARP and ICMP replies (fields and
 * checksum), plus requests it must ignore; the nd= frames (fields, ICMPv6
 * checksum); the udp6= frames (fields, length, UDP checksum). mbufs are hand-initialised over
 * static buffers (single segment), which is all these helpers touch.
 */
#include "sn_genpkt.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_udp.h>

static int failures;

#define CHECK(c) do {                                                     \
	if (!(c)) {                                                       \
		fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
		failures++;                                               \
	}                                                                 \
} while (0)

static struct {
	struct rte_mbuf m;
	uint8_t data[RTE_PKTMBUF_HEADROOM + 2048];
} store;

static struct rte_mbuf *fresh(void)
{
	struct rte_mbuf *m = &store.m;

	memset(&store, 0, sizeof(store));
	m->buf_addr = store.data;
	m->buf_len = sizeof(store.data);
	m->data_off = RTE_PKTMBUF_HEADROOM;
	m->nb_segs = 1;
	return m;
}

static const struct rte_ether_addr A = {{0x02, 0x53, 0x47, 0, 0, 1}};
static const struct rte_ether_addr B = {{0x02, 0x53, 0x47, 0, 0, 2}};

static void test_data_frames(void)
{
	uint16_t flow;
	uint64_t seq;
	struct rte_mbuf *m = fresh();

	CHECK(sn_genpkt_build(m, &B, &A, 77, 3, 123456789, 59) != 0);
	CHECK(sn_genpkt_build(m, &B, &A, 77, 3, 123456789, 1515) != 0);
	for (uint16_t len = 60; len <= 1514; len += 181) {
		m = fresh();
		CHECK(sn_genpkt_build(m, &B, &A, 77, 3, 1000 + len, len) == 0);
		CHECK(m->pkt_len == len && m->data_len == len);
		CHECK(sn_genpkt_classify(m, 77, 1, &flow, &seq) == SN_GENPKT_DATA);
		CHECK(flow == 3 && seq == 1000u + len);
		CHECK(sn_genpkt_classify(m, 78, 1, &flow, &seq) == SN_GENPKT_FOREIGN);
		/* one flipped payload byte: bad when verifying, not when counting */
		rte_pktmbuf_mtod(m, uint8_t *)[len - 1] ^= 0x40;
		CHECK(sn_genpkt_classify(m, 77, 1, &flow, &seq) == SN_GENPKT_BAD);
		CHECK(sn_genpkt_classify(m, 77, 0, &flow, &seq) == SN_GENPKT_DATA);
		/* truncated frame */
		rte_pktmbuf_mtod(m, uint8_t *)[len - 1] ^= 0x40;
		m->pkt_len = m->data_len = len - 1;
		CHECK(sn_genpkt_classify(m, 77, 1, &flow, &seq) == SN_GENPKT_BAD);
	}
	m = fresh();
	CHECK(sn_genpkt_build(m, &B, &A, 77, SN_GENPKT_FLOW_LEARN, 2, 64) == 0);
	CHECK(sn_genpkt_classify(m, 77, 1, &flow, &seq) == SN_GENPKT_LEARN && seq == 2);
	/* wrong ethertype / too short: foreign */
	rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->ether_type = rte_cpu_to_be_16(0x0800);
	CHECK(sn_genpkt_classify(m, 77, 1, &flow, &seq) == SN_GENPKT_FOREIGN);
	m->pkt_len = m->data_len = 20;
	CHECK(sn_genpkt_classify(m, 77, 1, &flow, &seq) == SN_GENPKT_FOREIGN);
}

static void test_echo_arp(void)
{
	rte_be32_t me = rte_cpu_to_be_32(0x0ac90002), peer = rte_cpu_to_be_32(0x0ac90001);
	struct rte_mbuf *m = fresh();
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);

	memset(&eth->dst_addr, 0xff, sizeof(eth->dst_addr));
	eth->src_addr = B;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = 6;
	arp->arp_plen = 4;
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
	arp->arp_data.arp_sha = B;
	arp->arp_data.arp_sip = peer;
	arp->arp_data.arp_tip = rte_cpu_to_be_32(0x0ac90003);
	m->pkt_len = m->data_len = 60;
	CHECK(sn_genpkt_echo(m, &A, me) == 0); /* not for us */
	arp->arp_data.arp_tip = me;
	CHECK(sn_genpkt_echo(m, &A, me) == 1);
	CHECK(arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REPLY));
	CHECK(rte_is_same_ether_addr(&eth->dst_addr, &B));
	CHECK(rte_is_same_ether_addr(&eth->src_addr, &A));
	CHECK(rte_is_same_ether_addr(&arp->arp_data.arp_sha, &A));
	CHECK(rte_is_same_ether_addr(&arp->arp_data.arp_tha, &B));
	CHECK(arp->arp_data.arp_sip == me && arp->arp_data.arp_tip == peer);
	/* a reply is not answered */
	CHECK(sn_genpkt_echo(m, &A, me) == 0);
}

static void test_echo_icmp(void)
{
	rte_be32_t me = rte_cpu_to_be_32(0x0ac90002), peer = rte_cpu_to_be_32(0x0ac90001);
	struct rte_mbuf *m = fresh();
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)(ip + 1);
	uint16_t icmp_len = sizeof(*icmp) + 56;

	eth->dst_addr = A;
	eth->src_addr = B;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16(sizeof(*ip) + icmp_len);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_ICMP;
	ip->src_addr = peer;
	ip->dst_addr = me;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	icmp->icmp_type = RTE_IP_ICMP_ECHO_REQUEST;
	icmp->icmp_ident = rte_cpu_to_be_16(0x1234);
	icmp->icmp_seq_nb = rte_cpu_to_be_16(7);
	for (int i = 0; i < 56; i++)
		((uint8_t *)(icmp + 1))[i] = (uint8_t)(i * 3);
	icmp->icmp_cksum = (uint16_t)~rte_raw_cksum(icmp, icmp_len);
	m->pkt_len = m->data_len = sizeof(*eth) + sizeof(*ip) + icmp_len;

	CHECK(sn_genpkt_echo(m, &A, rte_cpu_to_be_32(0x0ac90009)) == 0);
	CHECK(sn_genpkt_echo(m, &A, me) == 2);
	CHECK(icmp->icmp_type == RTE_IP_ICMP_ECHO_REPLY);
	CHECK(ip->src_addr == me && ip->dst_addr == peer);
	CHECK(rte_is_same_ether_addr(&eth->dst_addr, &B));
	CHECK(rte_is_same_ether_addr(&eth->src_addr, &A));
	CHECK(rte_raw_cksum(icmp, icmp_len) == 0xffff);     /* ICMP checksum valid */
	CHECK(rte_raw_cksum(ip, sizeof(*ip)) == 0xffff);      /* IPv4 header still valid */
	CHECK(icmp->icmp_seq_nb == rte_cpu_to_be_16(7));
	CHECK(sn_genpkt_echo(m, &A, me) == 0);              /* a reply is ignored */
	/* truncated IP total length beyond the frame: ignored */
	icmp->icmp_type = RTE_IP_ICMP_ECHO_REQUEST;
	ip->dst_addr = me;
	ip->total_length = rte_cpu_to_be_16(1500);
	CHECK(sn_genpkt_echo(m, &A, me) == 0);
}

/* nd=: an advertisement / solicitation with its option and a valid
 * ICMPv6 checksum, as a sink sees foreign frames. */
static void test_nd(void)
{
	const uint8_t src[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x11 };
	const uint8_t tgt[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x10 };
	uint16_t flow;
	uint64_t seq;

	for (uint8_t type = 135; type <= 136; type++) {
		struct rte_mbuf *m = fresh();
		struct rte_ipv6_hdr *ip;
		uint32_t sum;
		uint8_t *nd;

		CHECK(sn_genpkt_build(m, &B, &A, 77, 3, 5, 64) == 0);
		sn_genpkt_to_nd(m, type, src, tgt, &B);
		ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv6_hdr *, sizeof(struct rte_ether_hdr));
		nd = (uint8_t *)(ip + 1);
		CHECK(m->pkt_len == 86 && m->data_len == 86);
		CHECK(rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->ether_type ==
		      rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6));
		CHECK(ip->proto == IPPROTO_ICMPV6 && ip->hop_limits == 255 &&
		      ip->payload_len == rte_cpu_to_be_16(32) && !memcmp(ip->src_addr, src, 16));
		CHECK(nd[0] == type && !memcmp(nd + 8, tgt, 16));
		CHECK(nd[24] == (type == 135 ? 1 : 2) && nd[25] == 1 && !memcmp(nd + 26, B.addr_bytes, 6));
		/* one's-complement sum over pseudo header and message: all ones */
		sum = rte_raw_cksum(nd, 32) + rte_ipv6_phdr_cksum(ip, 0);
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		CHECK(sum == 0xffff);
		CHECK(sn_genpkt_classify(m, 77, 1, &flow, &seq) == SN_GENPKT_FOREIGN);
	}
}

/* udp6=: IPv6/UDP of the frame's length (62 B at least) with a valid
 * UDP checksum, foreign to a sink. */
static void test_udp6(void)
{
	const uint8_t src[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x01 };
	const uint8_t dst[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 1, [15] = 0x02 };
	static const uint16_t lens[] = { 60, 62, 64, 1000, 1514 };
	uint16_t flow;
	uint64_t seq;

	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct rte_mbuf *m = fresh();
		uint16_t want = lens[i] < 62 ? 62 : lens[i];
		struct rte_ipv6_hdr *ip;
		struct rte_udp_hdr *udp;
		uint32_t sum;

		CHECK(sn_genpkt_build(m, &B, &A, 77, 3, 5 + i, lens[i]) == 0);
		sn_genpkt_to_udp6(m, src, dst, 4000, 53);
		ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv6_hdr *, sizeof(struct rte_ether_hdr));
		udp = (struct rte_udp_hdr *)(ip + 1);
		CHECK(m->pkt_len == want && m->data_len == want);
		CHECK(rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->ether_type ==
		      rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6));
		CHECK(rte_be_to_cpu_32(ip->vtc_flow) == 6u << 28 && ip->proto == IPPROTO_UDP &&
		      ip->hop_limits == 64 && ip->payload_len == rte_cpu_to_be_16(want - 54));
		CHECK(!memcmp(&ip->src_addr, src, 16) && !memcmp(&ip->dst_addr, dst, 16));
		CHECK(udp->src_port == rte_cpu_to_be_16(4000) && udp->dst_port == rte_cpu_to_be_16(53) &&
		      udp->dgram_len == ip->payload_len && udp->dgram_cksum != 0);
		/* one's-complement sum over pseudo header and datagram: all ones */
		sum = rte_raw_cksum(udp, want - 54u) + rte_ipv6_phdr_cksum(ip, 0);
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		CHECK(sum == 0xffff);
		CHECK(sn_genpkt_classify(m, 77, 1, &flow, &seq) == SN_GENPKT_FOREIGN);
	}
}

int main(void)
{
	test_data_frames();
	test_echo_arp();
	test_echo_icmp();
	test_nd();
	test_udp6();
	if (failures) {
		fprintf(stderr, "test_genpkt: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_genpkt: ok\n");
	return 0;
}
