/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vnethdr.h — the TX virtio-net header of a guest frame (virtio 1.1
 * §5.1.6) as mbuf offload metadata, for deferred-completion ports
 * (sn_vqtx_pop.c).
 *
 * rte_vhost_dequeue_burst does this for immediate ports (DPDK 22.11
 * vhost_dequeue_offload_legacy: NEEDS_CSUM -> RTE_MBUF_F_TX_IPV4/6 +
 * TX_TCP/UDP_CKSUM with l2/l3 lengths parsed from the frame; GSO ->
 * + TX_TCP_SEG, tso_segsz = gso_size), so that a frame of either kind of
 * port takes the same switch paths (sn_switch.c: software checksum and GSO
 * for the uplink, rte_vhost_enqueue_burst writes the request into a VM
 * destination's RX header). Here the request is untrusted and checked
 * against the frame: csum_start = l2 + l3, csum_offset = the TCP/UDP
 * checksum field, every header inside the frame, GSO only TCP/IPv4 (what
 * the switch can segment; TSO6/UFO/ECN are not offered) together with
 * NEEDS_CSUM and a gso_size with headers + gso_size <= 64 KiB. DATA_VALID
 * is an RX-only flag a driver must not set on TX: ignored, as the stock
 * backends do. The headers are read once, from the guest buffers, into
 * local copies (what is validated is what is used; sn_switch re-validates
 * the copy it segments).
 *
 * Pure function, any thread.
 */
#ifndef SN_VNETHDR_H
#define SN_VNETHDR_H

#include <stdbool.h>
#include <stdint.h>

#include "sn_vring.h"

#define SN_VNET_F_NEEDS_CSUM 1
#define SN_VNET_F_DATA_VALID 2
#define SN_VNET_GSO_NONE     0
#define SN_VNET_GSO_TCPV4    1
#define SN_VNET_GSO_UDP      3
#define SN_VNET_GSO_TCPV6    4
#define SN_VNET_GSO_ECN      0x80

struct sn_vnethdr_offl {
	uint64_t ol_flags;            /* RTE_MBUF_F_TX_*; 0 = no request */
	uint16_t l2, l3, l4, segsz;   /* mbuf l2_len, l3_len, l4_len, tso_segsz */
};

/* 0 (o filled; ol_flags 0 when the header asks for nothing) or -EINVAL
 * (invalid or unsupported request: the caller drops the frame). */
int sn_vnethdr_parse(const struct sn_vring_pkt *p, struct sn_vnethdr_offl *o);

/* True when the header asks for nothing (the common frame; the
 * same test sn_vnethdr_parse() starts with): the caller may skip the
 * parse and treat o->ol_flags as 0. */
static inline bool sn_vnethdr_none(const struct sn_vring_pkt *p)
{
	return (p->hdr.flags & ~SN_VNET_F_DATA_VALID) == 0 &&
	       p->hdr.gso_type == SN_VNET_GSO_NONE;
}

#endif /* SN_VNETHDR_H */
