/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_genpkt.c — frame build/verify and the ARP/ICMP echo responder of sn-gen.
 *
 * Not an algorithm from a paper: this is the measuring instrument of the
 * datapath tests. A switch under test may lose, reorder or
 * corrupt frames; the sink must tell each of those apart from "not mine",
 * so every data frame is self-describing (run, flow, sequence, length) and
 * carries a payload pattern derived from its sequence number. Checking the
 * whole pattern costs a pass over the frame, so the benchmark mode skips it.
 *
 * The echo responder answers only what `ping` from a Linux namespace needs:
 * ARP who-has for our IP and ICMP echo requests to it, rewritten in place
 * (swap addresses, flip the type, fix the ICMP checksum; swapping the IPv4
 * addresses leaves the IPv4 header checksum valid).
 */
#include "sn_genpkt.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_udp.h>

/* The payload pattern: byte i of frame seq is (uint8_t)(seq + i). Built and
 * checked with one memcpy/memcmp from a ramp (ramp[k] = k mod 256) starting
 * at seq mod 256, not byte by byte: at 1514 B a per-byte loop would be
 * the generator's and the sink's main cost. */
static uint8_t ramp[SN_GENPKT_MAX_SIZE + 256];

static const uint8_t *pattern(uint64_t seq)
{
	if (ramp[1] == 0)                 /* single-threaded tool: lazy init */
		for (uint32_t k = 0; k < sizeof(ramp); k++)
			ramp[k] = (uint8_t)k;
	return ramp + (seq & 0xff);
}

int sn_genpkt_build(struct rte_mbuf *m, const struct rte_ether_addr *dst,
		    const struct rte_ether_addr *src, uint32_t run, uint16_t flow,
		    uint64_t seq, uint16_t len)
{
	if (len < SN_GENPKT_MIN_SIZE || len > SN_GENPKT_MAX_SIZE ||
	    len > rte_pktmbuf_tailroom(m))
		return -EINVAL;

	uint8_t *p = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)p;
	struct sn_genpkt_hdr *h = (struct sn_genpkt_hdr *)(p + SN_GENPKT_HDR_OFF);

	rte_ether_addr_copy(dst, &eth->dst_addr);
	rte_ether_addr_copy(src, &eth->src_addr);
	eth->ether_type = rte_cpu_to_be_16(SN_GENPKT_ETHERTYPE);
	h->magic = rte_cpu_to_be_32(SN_GENPKT_MAGIC);
	h->run = rte_cpu_to_be_32(run);
	h->flow = rte_cpu_to_be_16(flow);
	h->len = rte_cpu_to_be_16(len);
	h->seq = rte_cpu_to_be_64(seq);
	uint32_t off = SN_GENPKT_HDR_OFF + sizeof(*h);
	memcpy(p + off, pattern(seq) + off, len - off);
	m->data_len = len;
	m->pkt_len = len;
	return 0;
}

void sn_genpkt_to_udp(struct rte_mbuf *m, uint32_t src, uint32_t dst, uint16_t sport,
		      uint16_t dport)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	uint16_t ip_len = (uint16_t)(m->pkt_len - sizeof(*eth));

	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	memset(ip, 0, sizeof(*ip));
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16(ip_len);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(src);
	ip->dst_addr = rte_cpu_to_be_32(dst);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->src_port = rte_cpu_to_be_16(sport);
	udp->dst_port = rte_cpu_to_be_16(dport);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(ip_len - sizeof(*ip)));
	udp->dgram_cksum = 0;   /* none: allowed for UDP over IPv4 */
}

void sn_genpkt_to_udp6(struct rte_mbuf *m, const uint8_t src[16], const uint8_t dst[16],
		       uint16_t sport, uint16_t dport)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv6_hdr *ip = (struct rte_ipv6_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	uint16_t plen;

	if (m->pkt_len < SN_GENPKT_UDP6_MIN_SIZE)
		m->data_len = m->pkt_len = SN_GENPKT_UDP6_MIN_SIZE;
	plen = (uint16_t)(m->pkt_len - sizeof(*eth) - sizeof(*ip));
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	memset(ip, 0, sizeof(*ip));
	ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
	ip->payload_len = rte_cpu_to_be_16(plen);
	ip->proto = IPPROTO_UDP;
	ip->hop_limits = 64;
	memcpy(&ip->src_addr, src, 16);
	memcpy(&ip->dst_addr, dst, 16);
	udp->src_port = rte_cpu_to_be_16(sport);
	udp->dst_port = rte_cpu_to_be_16(dport);
	udp->dgram_len = rte_cpu_to_be_16(plen);
	udp->dgram_cksum = 0;
	udp->dgram_cksum = rte_ipv6_udptcp_cksum(ip, udp);
}

void sn_genpkt_to_arp(struct rte_mbuf *m, uint32_t spa, uint32_t tpa)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_arp_hdr *a = (struct rte_arp_hdr *)(eth + 1);

	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	memset(a, 0, sizeof(*a));
	a->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	a->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	a->arp_hlen = RTE_ETHER_ADDR_LEN;
	a->arp_plen = 4;
	a->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
	rte_ether_addr_copy(&eth->src_addr, &a->arp_data.arp_sha);
	a->arp_data.arp_sip = rte_cpu_to_be_32(spa);
	a->arp_data.arp_tip = rte_cpu_to_be_32(tpa);
}

void sn_genpkt_to_nd(struct rte_mbuf *m, uint8_t type, const uint8_t src[16],
		     const uint8_t tgt[16], const struct rte_ether_addr *lla)
{
	static const uint8_t all_nodes[16] = { 0xff, 0x02, [15] = 1 };
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv6_hdr *ip = (struct rte_ipv6_hdr *)(eth + 1);
	uint8_t *nd = (uint8_t *)(ip + 1);
	const uint16_t plen = 24 + 8;   /* header, flags, target; one option */

	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	memset(ip, 0, sizeof(*ip) + plen);
	ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
	ip->payload_len = rte_cpu_to_be_16(plen);
	ip->proto = IPPROTO_ICMPV6;
	ip->hop_limits = 255;
	memcpy(ip->src_addr, src, 16);
	memcpy(ip->dst_addr, all_nodes, 16);
	nd[0] = type;
	if (type == 136)
		nd[4] = 0x20;                 /* override */
	memcpy(nd + 8, tgt, 16);
	nd[24] = type == 135 ? 1 : 2;         /* source / target link-layer address */
	nd[25] = 1;
	memcpy(nd + 26, lla->addr_bytes, RTE_ETHER_ADDR_LEN);
	m->data_len = (uint16_t)(sizeof(*eth) + sizeof(*ip) + plen);
	m->pkt_len = m->data_len;
	*(uint16_t *)(nd + 2) = rte_ipv6_udptcp_cksum(ip, nd);
}

enum sn_genpkt_kind sn_genpkt_classify(const struct rte_mbuf *m, uint32_t run,
				       int verify, uint16_t *flow, uint64_t *seq)
{
	uint8_t copy[SN_GENPKT_MAX_SIZE];
	uint32_t min = SN_GENPKT_HDR_OFF + sizeof(struct sn_genpkt_hdr);

	if (m->pkt_len < min)
		return SN_GENPKT_FOREIGN;
	uint32_t avail = RTE_MIN(m->pkt_len, (uint32_t)sizeof(copy));
	const uint8_t *p = rte_pktmbuf_read(m, 0, avail, copy);
	if (p == NULL)
		return SN_GENPKT_FOREIGN;

	const struct rte_ether_hdr *eth = (const struct rte_ether_hdr *)p;
	const struct sn_genpkt_hdr *h = (const struct sn_genpkt_hdr *)(p + SN_GENPKT_HDR_OFF);
	if (eth->ether_type != rte_cpu_to_be_16(SN_GENPKT_ETHERTYPE) ||
	    rte_be_to_cpu_32(h->magic) != SN_GENPKT_MAGIC ||
	    rte_be_to_cpu_32(h->run) != run)
		return SN_GENPKT_FOREIGN;

	uint16_t len = rte_be_to_cpu_16(h->len);
	*flow = rte_be_to_cpu_16(h->flow);
	*seq = rte_be_to_cpu_64(h->seq);
	if (len != m->pkt_len)
		return SN_GENPKT_BAD;
	if (verify && len > min && memcmp(p + min, pattern(*seq) + min, len - min) != 0)
		return SN_GENPKT_BAD;
	return *flow == SN_GENPKT_FLOW_LEARN ? SN_GENPKT_LEARN : SN_GENPKT_DATA;
}

static int echo_arp(struct rte_mbuf *m, struct rte_ether_hdr *eth,
		    const struct rte_ether_addr *mac, rte_be32_t ip)
{
	if (m->data_len < sizeof(*eth) + sizeof(struct rte_arp_hdr))
		return 0;
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST) ||
	    arp->arp_data.arp_tip != ip)
		return 0;

	struct rte_arp_ipv4 *a = &arp->arp_data;
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
	rte_ether_addr_copy(&a->arp_sha, &a->arp_tha);
	a->arp_tip = a->arp_sip;
	rte_ether_addr_copy(mac, &a->arp_sha);
	a->arp_sip = ip;
	rte_ether_addr_copy(&eth->src_addr, &eth->dst_addr);
	rte_ether_addr_copy(mac, &eth->src_addr);
	return 1;
}

static int echo_icmp(struct rte_mbuf *m, struct rte_ether_hdr *eth,
		     const struct rte_ether_addr *mac, rte_be32_t ip)
{
	if (m->data_len < sizeof(*eth) + sizeof(struct rte_ipv4_hdr))
		return 0;
	struct rte_ipv4_hdr *iph = (struct rte_ipv4_hdr *)(eth + 1);
	uint32_t ihl = (uint32_t)(iph->version_ihl & 0x0f) * 4;
	uint32_t tot = rte_be_to_cpu_16(iph->total_length);
	if ((iph->version_ihl >> 4) != 4 || ihl < sizeof(*iph) ||
	    iph->next_proto_id != IPPROTO_ICMP || iph->dst_addr != ip ||
	    tot < ihl + sizeof(struct rte_icmp_hdr) ||
	    sizeof(*eth) + tot > m->data_len ||
	    (iph->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_OFFSET_MASK |
						     RTE_IPV4_HDR_MF_FLAG)))
		return 0;
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)((uint8_t *)iph + ihl);
	if (icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST || icmp->icmp_code != 0)
		return 0;

	icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
	icmp->icmp_cksum = 0;
	uint16_t ck = rte_raw_cksum(icmp, tot - ihl);
	icmp->icmp_cksum = (ck == 0xffff) ? ck : (uint16_t)~ck;
	iph->dst_addr = iph->src_addr;
	iph->src_addr = ip;
	rte_ether_addr_copy(&eth->src_addr, &eth->dst_addr);
	rte_ether_addr_copy(mac, &eth->src_addr);
	return 2;
}

int sn_genpkt_echo(struct rte_mbuf *m, const struct rte_ether_addr *mac, rte_be32_t ip)
{
	if (m->nb_segs != 1 || m->data_len < sizeof(struct rte_ether_hdr))
		return 0;
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP))
		return echo_arp(m, eth, mac, ip);
	if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return echo_icmp(m, eth, mac, ip);
	return 0;
}
