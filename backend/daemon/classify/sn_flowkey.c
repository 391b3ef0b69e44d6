/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_flowkey.c — a frame's 5-tuple and a class's match (sn_flowkey.h).
 * Non-first IPv4 fragments carry no ports (0, 0).
 */
#include "sn_flowkey.h"

#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

bool sn_flowkey_parse(const struct rte_mbuf *m, struct sn_flowkey *k)
{
	union {
		struct rte_ether_hdr eth;
		struct rte_vlan_hdr vlan;
		struct rte_ipv4_hdr ip;
		uint16_t ports[2];
	} buf;
	const struct rte_ether_hdr *eth;
	const struct rte_vlan_hdr *vlan;
	const struct rte_ipv4_hdr *ip;
	const void *pt;
	uint16_t ports[2];   /* copied: a segment may put them at any address */
	uint32_t off = sizeof(*eth);
	uint16_t type;
	unsigned ihl;

	memset(k, 0, sizeof(*k));
	eth = rte_pktmbuf_read(m, 0, sizeof(*eth), &buf);
	if (!eth)
		return false;
	type = eth->ether_type;
	if (type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN)) {
		vlan = rte_pktmbuf_read(m, off, sizeof(*vlan), &buf);
		if (!vlan)
			return false;
		type = vlan->eth_proto;
		off += sizeof(*vlan);
	}
	if (type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return false;
	ip = rte_pktmbuf_read(m, off, sizeof(*ip), &buf);
	if (!ip || (ip->version_ihl >> 4) != 4)
		return false;
	ihl = (ip->version_ihl & 0xf) * 4u;
	if (ihl < sizeof(*ip))
		return false;
	k->src = rte_be_to_cpu_32(ip->src_addr);
	k->dst = rte_be_to_cpu_32(ip->dst_addr);
	k->proto = ip->next_proto_id;
	k->sport = k->dport = 0;
	if ((k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP) &&
	    !(rte_be_to_cpu_16(ip->fragment_offset) & RTE_IPV4_HDR_OFFSET_MASK)) {
		pt = rte_pktmbuf_read(m, off + ihl, 2 * sizeof(uint16_t), &buf);
		if (pt) {
			memcpy(ports, pt, sizeof(ports));
			k->sport = rte_be_to_cpu_16(ports[0]);
			k->dport = rte_be_to_cpu_16(ports[1]);
		}
	}
	return true;
}

static inline bool prefix_ok(uint32_t a, uint32_t want, uint8_t len)
{
	return len == 0 || ((a ^ want) >> (32 - len)) == 0;
}

bool sn_flowkey_match(const struct sn_policy_match *m, const struct sn_flowkey *k)
{
	return (m->proto == 0 || m->proto == k->proto) && prefix_ok(k->src, m->src, m->src_len) &&
	       prefix_ok(k->dst, m->dst, m->dst_len) &&
	       k->sport >= m->sport_lo && k->sport <= m->sport_hi &&
	       k->dport >= m->dport_lo && k->dport <= m->dport_hi;
}
