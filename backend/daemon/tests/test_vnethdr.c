/* SPDX-License-Identifier: BSD-3-Clause */
/* test_vnethdr.c — sn_vnethdr_parse(): every accepted request gives the
 * offload metadata rte_vhost would set, every invalid or unsupported one
 * is refused (TAP-style output, exit status = failures). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf_core.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "sn_vnethdr.h"

static int fails, n;

#define CHECK(cond, ...) do { \
	n++; \
	if (cond) { printf("ok %d - ", n); } \
	else { printf("not ok %d - %s:%d: ", n, __FILE__, __LINE__); fails++; } \
	printf(__VA_ARGS__); printf("\n"); \
} while (0)

static uint8_t frame[256];

enum l3 { V4, V6, ARP };

/* Build eth [+ vlan] + IP + L4 (+ 100 bytes payload) into frame; returns
 * its length. */
static uint32_t build(enum l3 l3, uint8_t proto, bool vlan, uint8_t tcp_doff, uint8_t ihl)
{
	uint32_t off = 0;
	struct rte_ether_hdr *eth = (void *)frame;

	memset(frame, 0, sizeof(frame));
	eth->ether_type = rte_cpu_to_be_16(l3 == V4 ? RTE_ETHER_TYPE_IPV4 :
					   l3 == V6 ? RTE_ETHER_TYPE_IPV6 : RTE_ETHER_TYPE_ARP);
	off = sizeof(*eth);
	if (vlan) {
		struct rte_vlan_hdr *v = (void *)(frame + off);

		v->eth_proto = eth->ether_type;
		eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
		off += sizeof(*v);
	}
	if (l3 == V4) {
		struct rte_ipv4_hdr *ip = (void *)(frame + off);

		ip->version_ihl = (uint8_t)(0x40 | ihl);
		ip->next_proto_id = proto;
		off += (uint32_t)ihl * 4;
	} else if (l3 == V6) {
		struct rte_ipv6_hdr *ip6 = (void *)(frame + off);

		ip6->vtc_flow = rte_cpu_to_be_32(6u << 28);
		ip6->proto = proto;
		off += sizeof(*ip6);
	} else {
		off += 28;
	}
	if (proto == IPPROTO_TCP) {
		struct rte_tcp_hdr *t = (void *)(frame + off);

		t->data_off = (uint8_t)(tcp_doff << 4);
		off += 20;
	} else if (proto == IPPROTO_UDP) {
		off += 8;
	}
	return off + 100;
}

/* One segment, or two split at cut (0 = one). */
static void pkt_of(struct sn_vring_pkt *p, uint32_t len, uint32_t cut)
{
	memset(p, 0, sizeof(*p));
	p->len = len;
	if (cut) {
		p->nseg = 2;
		p->iov[0] = (struct iovec){ frame, cut };
		p->iov[1] = (struct iovec){ frame + cut, len - cut };
	} else {
		p->nseg = 1;
		p->iov[0] = (struct iovec){ frame, len };
	}
}

static void csum(struct sn_vring_pkt *p, uint16_t start, uint16_t offset)
{
	p->hdr.flags = SN_VNET_F_NEEDS_CSUM;
	p->hdr.csum_start = start;
	p->hdr.csum_offset = offset;
}

static void gso(struct sn_vring_pkt *p, uint8_t type, uint16_t size)
{
	p->hdr.gso_type = type;
	p->hdr.gso_size = size;
}

int main(void)
{
	struct sn_vring_pkt p;
	struct sn_vnethdr_offl o;
	const uint16_t TCPC = offsetof(struct rte_tcp_hdr, cksum);
	const uint16_t UDPC = offsetof(struct rte_udp_hdr, dgram_cksum);
	uint32_t len;

	/* Accepted. */
	len = build(V4, IPPROTO_TCP, false, 5, 5);
	pkt_of(&p, len, 0);
	CHECK(sn_vnethdr_parse(&p, &o) == 0 && o.ol_flags == 0, "no request: no flags");
	CHECK(sn_vnethdr_none(&p), "no request: the fast test says none");
	csum(&p, 34, TCPC);
	CHECK(!sn_vnethdr_none(&p), "csum request: the fast test does not skip it");
	CHECK(sn_vnethdr_parse(&p, &o) == 0 &&
	      o.ol_flags == (RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_CKSUM) &&
	      o.l2 == 14 && o.l3 == 20 && o.l4 == 20 && o.segsz == 0, "TCP/IPv4 csum");
	p.hdr.flags |= SN_VNET_F_DATA_VALID;
	CHECK(sn_vnethdr_parse(&p, &o) == 0 && (o.ol_flags & RTE_MBUF_F_TX_TCP_CKSUM),
	      "DATA_VALID next to NEEDS_CSUM is ignored");
	gso(&p, SN_VNET_GSO_TCPV4, 1448);
	p.hdr.flags = SN_VNET_F_NEEDS_CSUM;
	CHECK(sn_vnethdr_parse(&p, &o) == 0 && (o.ol_flags & RTE_MBUF_F_TX_TCP_SEG) &&
	      o.segsz == 1448 && o.l4 == 20, "TSO4");
	pkt_of(&p, len, 20);   /* IP header split over two guest buffers */
	csum(&p, 34, TCPC);
	gso(&p, SN_VNET_GSO_TCPV4, 1448);
	CHECK(sn_vnethdr_parse(&p, &o) == 0 && o.l3 == 20 && o.segsz == 1448,
	      "headers across two segments");
	len = build(V4, IPPROTO_TCP, true, 8, 6);
	pkt_of(&p, len, 0);
	csum(&p, 18 + 24, TCPC);
	CHECK(sn_vnethdr_parse(&p, &o) == 0 && o.l2 == 18 && o.l3 == 24 && o.l4 == 32,
	      "VLAN, IP options, TCP options");
	len = build(V6, IPPROTO_UDP, false, 0, 0);
	pkt_of(&p, len, 0);
	csum(&p, 54, UDPC);
	CHECK(sn_vnethdr_parse(&p, &o) == 0 &&
	      o.ol_flags == (RTE_MBUF_F_TX_IPV6 | RTE_MBUF_F_TX_UDP_CKSUM) &&
	      o.l3 == 40 && o.l4 == 8, "UDP/IPv6 csum");
	p.hdr.flags = SN_VNET_F_DATA_VALID;
	CHECK(sn_vnethdr_parse(&p, &o) == 0 && o.ol_flags == 0, "DATA_VALID alone: nothing");
	CHECK(sn_vnethdr_none(&p), "DATA_VALID alone: the fast test says none");
	p.hdr.flags = 0;
	gso(&p, SN_VNET_GSO_TCPV4, 1448);
	CHECK(!sn_vnethdr_none(&p), "GSO without flags: the fast test does not skip it");

	/* Refused. */
#define REFUSE(what) CHECK(sn_vnethdr_parse(&p, &o) == -EINVAL && !sn_vnethdr_none(&p), \
			   "refused: " what)
	len = build(V4, IPPROTO_TCP, false, 5, 5);
	pkt_of(&p, len, 0);
	csum(&p, 33, TCPC);
	REFUSE("csum_start != l2 + l3");
	csum(&p, 34, UDPC);
	REFUSE("csum_offset of UDP on TCP");
	csum(&p, 34, TCPC);
	p.hdr.flags |= 4;
	REFUSE("unknown flag (RSC_INFO)");
	pkt_of(&p, 40, 0);
	csum(&p, 34, TCPC);
	REFUSE("TCP header beyond the frame");
	pkt_of(&p, len, 0);
	gso(&p, SN_VNET_GSO_TCPV4, 1448);
	REFUSE("GSO without NEEDS_CSUM");
	csum(&p, 34, TCPC);
	gso(&p, SN_VNET_GSO_TCPV4, 0);
	REFUSE("gso_size 0");
	gso(&p, SN_VNET_GSO_TCPV4, 65535);
	REFUSE("gso_size + headers > 64 KiB");
	gso(&p, SN_VNET_GSO_TCPV4 | SN_VNET_GSO_ECN, 1448);
	REFUSE("GSO with ECN");
	gso(&p, SN_VNET_GSO_TCPV6, 1448);
	REFUSE("TSO6 on an IPv4 frame");
	gso(&p, SN_VNET_GSO_UDP, 1448);
	REFUSE("UFO");
	len = build(V6, IPPROTO_TCP, false, 5, 0);
	pkt_of(&p, len, 0);
	csum(&p, 54, TCPC);
	gso(&p, SN_VNET_GSO_TCPV6, 1440);
	REFUSE("TSO6 (not offered)");
	gso(&p, SN_VNET_GSO_TCPV4, 1440);
	REFUSE("TSO4 on an IPv6 frame");
	len = build(V4, IPPROTO_TCP, false, 4, 5);
	pkt_of(&p, len, 0);
	csum(&p, 34, TCPC);
	REFUSE("TCP data offset < 5");
	len = build(V4, IPPROTO_TCP, false, 5, 4);
	pkt_of(&p, len, 0);
	csum(&p, 30, TCPC);
	REFUSE("IPv4 ihl < 5");
	len = build(V4, IPPROTO_ICMP, false, 0, 5);
	pkt_of(&p, len, 0);
	csum(&p, 34, 2);
	REFUSE("ICMP");
	len = build(ARP, 0, false, 0, 0);
	pkt_of(&p, len, 0);
	csum(&p, 42, 0);
	REFUSE("not IP");
	pkt_of(&p, 10, 0);
	csum(&p, 34, TCPC);
	REFUSE("runt frame");
	printf("1..%d\n", n);
	return fails;
}
