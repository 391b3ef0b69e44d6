/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_bind.h — source-address binding of a VM port (port security as
 * libvirt's and OpenStack's): the source MACs it may send from
 * (allowed_macs) and, optionally, the IPv4/IPv6 source prefixes
 * (allowed_ips). doc/isolation.md "MAC entries and source-address binding".
 *
 * A frame passes when its source MAC is one of allowed_macs (an empty
 * list: any MAC) and, with allowed_ips set:
 *  - IPv4: the source is in an IPv4 prefix, or 0.0.0.0 (DHCP);
 *  - ARP: the sender hardware address is the frame's (allowed) source MAC
 *    and the sender protocol address is in an IPv4 prefix, or 0.0.0.0
 *    (an ARP probe, RFC 5227);
 *  - IPv6: the source is in an IPv6 prefix, or :: (duplicate address
 *    detection), or the modified EUI-64 link-local address of the frame's
 *    source MAC (fe80::/64, RFC 4291); an ICMPv6 neighbour solicitation
 *    or advertisement (and router solicitation) must carry no link-layer
 *    address option other than the source MAC, and an advertisement's
 *    target must itself pass the source check above; ICMPv6 after a
 *    fragment header is dropped (RFC 6980 forbids fragmented ND);
 *  - any other EtherType passes.
 * One or two VLAN tags (0x8100, 0x88a8) are looked through; a frame with
 * more (SN_BIND_VLAN_MAX) is a spoof, since its inner header is unchecked.
 * Every ND option up to the end of the frame is checked; an option of
 * length 0 or past the frame is malformed and refused as SPOOFED_ND, and
 * so is an ND message (ICMPv6 header to the end of the frame) longer than
 * SN_BIND_ND_MAX: real solicitations and advertisements are far shorter,
 * and the bound caps the option walk a guest can make a worker do.
 * Headers are read with rte_pktmbuf_read (any segmentation); a frame too
 * short for the header its EtherType announces is a spoof.
 *
 * Concurrency: a binding is a value, filled by MAIN before its port is
 * published and immutable afterwards; sn_bind_check() reads it from any
 * worker. Parsing functions are pure (any thread).
 */
#ifndef SN_BIND_H
#define SN_BIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define SN_BIND_MACS_MAX 16   /* allowed_macs per port */
#define SN_BIND_IPS_MAX  16   /* allowed_ips per port (both families) */
#define SN_BIND_VLAN_MAX 2    /* VLAN tags looked through with allowed_ips */
#define SN_BIND_ND_MAX 1280   /* bytes of an ND message (the IPv6 minimum MTU) */

struct rte_mbuf;

struct sn_bind_v6 {
	uint8_t addr[16];
	uint8_t len;          /* prefix length 0..128 */
};

struct sn_bind {
	unsigned n_macs, n_v4, n_v6;
	uint8_t mac[SN_BIND_MACS_MAX][6];
	uint64_t mac_key[SN_BIND_MACS_MAX];   /* as sn_mac_keys() computes them */
	uint32_t v4[SN_BIND_IPS_MAX];         /* network (host order) */
	uint32_t v4_mask[SN_BIND_IPS_MAX];
	uint8_t v4_len[SN_BIND_IPS_MAX];
	struct sn_bind_v6 v6[SN_BIND_IPS_MAX];
};

/* What sn_bind_check() found. */
enum sn_bind_verdict {
	SN_BIND_OK,
	SN_BIND_SPOOFED,       /* source MAC, IPv4 or IPv6 source */
	SN_BIND_SPOOFED_ARP,   /* ARP sender hardware or protocol address */
	SN_BIND_SPOOFED_ND,    /* neighbour discovery address or option */
};

/* True when b restricts anything (a port with such a binding is checked). */
static inline bool sn_bind_active(const struct sn_bind *b)
{
	return b->n_macs || b->n_v4 || b->n_v6;
}

/* Pure: fill b from a port's "allowed_macs" and "allowed_ips" values (each
 * NULL when absent; else a JSON array of strings: "52:54:00:12:34:56";
 * "10.0.0.5", "10.0.0.0/24", "2001:db8::/64"). field prefixes messages
 * ("ports[2]." or ""). 0, or -EINVAL with a message naming the field and
 * the element in err. */
int sn_bind_from_json(struct sn_bind *b, const json_t *macs, const json_t *ips,
		      const char *field, char *err, size_t errlen);
/* Pure: {"allowed_macs": [...], "allowed_ips": [...]} of b, new reference
 * (NULL: out of memory). */
json_t *sn_bind_to_json(const struct sn_bind *b);

/* Any thread: whether skey (sn_mac_keys()) is one of b's MACs. */
bool sn_bind_has_key(const struct sn_bind *b, uint64_t skey);

/* WORKER: the verdict for frame m (Ethernet header in its first segment)
 * of source key skey from a port bound by b. */
enum sn_bind_verdict sn_bind_check(const struct sn_bind *b, const struct rte_mbuf *m,
				   uint64_t skey);

#endif /* SN_BIND_H */
