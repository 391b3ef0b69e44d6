/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vnethdr.c — TX virtio-net header -> mbuf offload metadata; see
 * sn_vnethdr.h for the rules (virtio 1.1 §5.1.6.2, and DPDK 22.11's
 * legacy vhost dequeue offload semantics it reproduces). */
#include "sn_vnethdr.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf_core.h>
#include <rte_tcp.h>
#include <rte_udp.h>

/* Copy len bytes at offset off of a frame's payload (guest memory, read
 * once: what we validate is what we use) into dst. */
static bool pkt_read(const struct sn_vring_pkt *p, uint32_t off, void *dst, uint32_t len)
{
	uint8_t *d = dst;

	if (off > p->len || len > p->len - off)
		return false;
	for (uint16_t j = 0; j < p->nseg && len; j++) {
		size_t sl = p->iov[j].iov_len, n;

		if (off >= sl) {
			off -= (uint32_t)sl;
			continue;
		}
		n = RTE_MIN(sl - off, (size_t)len);
		memcpy(d, (const uint8_t *)p->iov[j].iov_base + off, n);
		d += n;
		len -= (uint32_t)n;
		off = 0;
	}
	return len == 0;
}

int sn_vnethdr_parse(const struct sn_vring_pkt *p, struct sn_vnethdr_offl *o)
{
	const struct sn_virtio_net_hdr *h = &p->hdr;
	const uint8_t flags = h->flags & ~SN_VNET_F_DATA_VALID;
	struct rte_ether_hdr eth;
	uint16_t et;
	uint8_t proto;

	memset(o, 0, sizeof(*o));
	if (flags == 0 && h->gso_type == SN_VNET_GSO_NONE)   /* = sn_vnethdr_none() */
		return 0;
	if (flags != SN_VNET_F_NEEDS_CSUM || !pkt_read(p, 0, &eth, sizeof(eth)))
		return -EINVAL;
	o->l2 = sizeof(eth);
	et = eth.ether_type;
	if (et == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN)) {
		struct rte_vlan_hdr v;

		if (!pkt_read(p, o->l2, &v, sizeof(v)))
			return -EINVAL;
		et = v.eth_proto;
		o->l2 += sizeof(v);
	}
	if (et == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) {
		struct rte_ipv4_hdr ip;

		if (!pkt_read(p, o->l2, &ip, sizeof(ip)) || (ip.version_ihl >> 4) != 4 ||
		    rte_ipv4_hdr_len(&ip) < sizeof(ip))
			return -EINVAL;
		o->l3 = (uint16_t)rte_ipv4_hdr_len(&ip);
		proto = ip.next_proto_id;
		o->ol_flags = RTE_MBUF_F_TX_IPV4;
	} else if (et == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6)) {
		struct rte_ipv6_hdr ip6;

		if (!pkt_read(p, o->l2, &ip6, sizeof(ip6)))
			return -EINVAL;
		o->l3 = sizeof(ip6);
		proto = ip6.proto;
		o->ol_flags = RTE_MBUF_F_TX_IPV6;
	} else {
		return -EINVAL;
	}
	if (h->csum_start != o->l2 + o->l3)
		return -EINVAL;
	if (proto == IPPROTO_TCP) {
		struct rte_tcp_hdr tcp;

		if (h->csum_offset != offsetof(struct rte_tcp_hdr, cksum) ||
		    !pkt_read(p, h->csum_start, &tcp, sizeof(tcp)))
			return -EINVAL;
		o->l4 = (uint16_t)((tcp.data_off & 0xf0) >> 2);
		o->ol_flags |= RTE_MBUF_F_TX_TCP_CKSUM;
	} else if (proto == IPPROTO_UDP) {
		if (h->csum_offset != offsetof(struct rte_udp_hdr, dgram_cksum))
			return -EINVAL;
		o->l4 = sizeof(struct rte_udp_hdr);
		o->ol_flags |= RTE_MBUF_F_TX_UDP_CKSUM;
	} else {
		return -EINVAL;
	}
	if (o->l4 < (proto == IPPROTO_TCP ? sizeof(struct rte_tcp_hdr) : sizeof(struct rte_udp_hdr)) ||
	    (uint32_t)o->l2 + o->l3 + o->l4 > p->len)
		return -EINVAL;
	if (h->gso_type == SN_VNET_GSO_NONE)
		return 0;
	if (h->gso_type != SN_VNET_GSO_TCPV4 || proto != IPPROTO_TCP ||
	    !(o->ol_flags & RTE_MBUF_F_TX_IPV4) || h->gso_size == 0 ||
	    (uint32_t)o->l2 + o->l3 + o->l4 + h->gso_size > UINT16_MAX)
		return -EINVAL;
	o->ol_flags |= RTE_MBUF_F_TX_TCP_SEG;
	o->segsz = h->gso_size;
	return 0;
}
