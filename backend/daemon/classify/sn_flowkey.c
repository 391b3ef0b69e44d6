/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_flowkey.c — a frame's 5-tuple and a class's match (sn_flowkey.h).
 *
 * The header walk reads each header it needs once, into a stack buffer
 * when the header straddles segments (rte_pktmbuf_read). The IPv6
 * extension chain is bounded (SN_FLOWKEY_EXT_MAX): a guest cannot make
 * the worker walk a long chain, and every header of it is read only
 * where the frame holds it.
 */
#include "sn_flowkey.h"

#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

union hdr_buf {
	struct rte_ether_hdr eth;
	struct rte_vlan_hdr vlan;
	struct rte_ipv4_hdr ip;
	struct rte_ipv6_hdr ip6;
	uint8_t ext[8];
	uint16_t ports[2];
};

/* The TCP / UDP ports at off, if the frame holds them (else 0, 0). */
static void read_ports(const struct rte_mbuf *m, uint32_t off, struct sn_flowkey *k)
{
	union hdr_buf buf;
	uint16_t ports[2];   /* copied: a segment may put them at any address */
	const void *pt;

	if (k->proto != IPPROTO_TCP && k->proto != IPPROTO_UDP)
		return;
	pt = rte_pktmbuf_read(m, off, sizeof(ports), &buf);
	if (!pt)
		return;
	memcpy(ports, pt, sizeof(ports));
	k->sport = rte_be_to_cpu_16(ports[0]);
	k->dport = rte_be_to_cpu_16(ports[1]);
}

static bool parse_ipv4(const struct rte_mbuf *m, uint32_t off, struct sn_flowhdr *h)
{
	union hdr_buf buf;
	const struct rte_ipv4_hdr *ip = rte_pktmbuf_read(m, off, sizeof(*ip), &buf);
	unsigned ihl;

	if (!ip || (ip->version_ihl >> 4) != 4)
		return false;
	ihl = (ip->version_ihl & 0xf) * 4u;
	if (ihl < sizeof(*ip))
		return false;
	h->k.family = SN_POLICY_FAMILY_IPV4;
	h->k.src[0] = rte_be_to_cpu_32(ip->src_addr);
	h->k.dst[0] = rte_be_to_cpu_32(ip->dst_addr);
	h->k.proto = ip->next_proto_id;
	h->dscp = ip->type_of_service >> 2;
	if (!(rte_be_to_cpu_16(ip->fragment_offset) & RTE_IPV4_HDR_OFFSET_MASK))
		read_ports(m, off + ihl, &h->k);
	return true;
}

static void addr6(uint32_t w[4], const void *a)
{
	uint32_t be[4];

	memcpy(be, a, sizeof(be));
	for (unsigned i = 0; i < 4; i++)
		w[i] = rte_be_to_cpu_32(be[i]);
}

static bool parse_ipv6(const struct rte_mbuf *m, uint32_t off, struct sn_flowhdr *h)
{
	union hdr_buf buf;
	const struct rte_ipv6_hdr *ip = rte_pktmbuf_read(m, off, sizeof(*ip), &buf);
	bool first = true;
	uint32_t vtc;
	uint8_t nh;
	unsigned i;

	if (!ip)
		return false;
	vtc = rte_be_to_cpu_32(ip->vtc_flow);
	if (vtc >> 28 != 6)
		return false;
	h->k.family = SN_POLICY_FAMILY_IPV6;
	addr6(h->k.src, &ip->src_addr);
	addr6(h->k.dst, &ip->dst_addr);
	h->dscp = (uint8_t)(vtc >> 22 & 0x3f);
	h->flow_label = vtc & 0xfffff;
	nh = ip->proto;
	off += sizeof(*ip);
	for (i = 0; nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS ||
		    nh == IPPROTO_FRAGMENT; i++) {
		/* Every one of these is at least 8 bytes: next header, then
		 * its length in 8-byte units past the first 8 (fragment:
		 * fixed 8 bytes, offset in bits 3..15 of bytes 2-3). */
		const uint8_t *x;

		if (i == SN_FLOWKEY_EXT_MAX)
			return false;
		x = rte_pktmbuf_read(m, off, sizeof(buf.ext), &buf);
		if (!x)
			return false;
		if (nh == IPPROTO_FRAGMENT) {
			first = first && ((x[2] << 8 | x[3]) & 0xfff8) == 0;
			off += 8;
		} else {
			off += (x[1] + 1u) * 8;
		}
		nh = x[0];
	}
	h->k.proto = nh;
	if (first)
		read_ports(m, off, &h->k);
	return true;
}

bool sn_flowkey_parse(const struct rte_mbuf *m, struct sn_flowhdr *h)
{
	union hdr_buf buf;
	const struct rte_ether_hdr *eth;
	const struct rte_vlan_hdr *vlan;
	uint32_t off = sizeof(*eth);
	uint16_t type;

	memset(h, 0, sizeof(*h));
	eth = rte_pktmbuf_read(m, 0, sizeof(*eth), &buf);
	if (!eth)
		return false;
	type = eth->ether_type;
	if (type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN)) {
		uint16_t tci;

		vlan = rte_pktmbuf_read(m, off, sizeof(*vlan), &buf);
		if (!vlan)
			return false;
		type = vlan->eth_proto;
		tci = rte_be_to_cpu_16(vlan->vlan_tci);
		h->tagged = true;
		h->vlan = tci & 0xfff;
		h->pcp = (uint8_t)(tci >> 13);
		off += sizeof(*vlan);
	}
	if (type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return parse_ipv4(m, off, h);
	if (type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6))
		return parse_ipv6(m, off, h);
	return false;
}

/* The first len bits of a and want agree (len 0..128). */
static inline bool prefix_ok(const uint32_t a[4], const uint32_t want[4], unsigned len)
{
	for (unsigned i = 0; i < 4 && len; i++) {
		unsigned n = len < 32 ? len : 32;

		if ((a[i] ^ want[i]) >> (32 - n))
			return false;
		len -= n;
	}
	return true;
}

bool sn_flowkey_match(const struct sn_policy_match *m, const struct sn_flowhdr *h)
{
	const struct sn_flowkey *k = &h->k;

	if ((m->family && m->family != k->family) || (m->proto && m->proto != k->proto) ||
	    !prefix_ok(k->src, m->src, m->src_len) || !prefix_ok(k->dst, m->dst, m->dst_len) ||
	    k->sport < m->sport_lo || k->sport > m->sport_hi ||
	    k->dport < m->dport_lo || k->dport > m->dport_hi)
		return false;
	if (!m->keys)
		return true;
	return (!(m->keys & SN_POLICY_M_VLAN) || (h->tagged && h->vlan == m->vlan)) &&
	       (!(m->keys & SN_POLICY_M_PCP) || (h->tagged && h->pcp == m->pcp)) &&
	       (!(m->keys & SN_POLICY_M_DSCP) || h->dscp == m->dscp) &&
	       (!(m->keys & SN_POLICY_M_FLOW_LABEL) || (k->family == SN_POLICY_FAMILY_IPV6 &&
							h->flow_label == m->flow_label));
}
