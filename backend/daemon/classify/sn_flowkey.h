/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_flowkey.h — the flow classifier's view of a frame: its headers
 * parsed into a 5-tuple key plus the other fields a class may match
 * (802.1Q tag, DSCP, IPv6 flow label), and a class's match against it.
 *
 * Pure functions on an mbuf the caller owns: any thread. Guest data is
 * untrusted: every header is read with rte_pktmbuf_read (bounds-checked,
 * any segmentation), a short or odd frame is simply not parsed.
 *
 * What is parsed (doc/policy.md "Flow classes"):
 *  - Ethernet, at most one 802.1Q tag (its VLAN ID and PCP), then IPv4 or
 *    IPv6; anything else (QinQ, ARP, ...) is not parsed.
 *  - IPv4: version 4, ihl >= 5; DSCP = TOS >> 2.
 *  - IPv6: version 6; DSCP = traffic class >> 2, the flow label; the
 *    upper-layer protocol is the next header after at most
 *    SN_FLOWKEY_EXT_MAX extension headers (hop-by-hop, routing,
 *    destination options, fragment). A longer chain, or one cut short,
 *    is not parsed.
 *  - TCP / UDP ports are read in a non-fragment or a first fragment (IPv4
 *    fragment offset 0; IPv6: every fragment header with offset 0) when
 *    their 4 bytes are in the frame, else they are 0 (a non-first
 *    fragment, or a first one whose L4 header is not in it).
 */
#ifndef SN_FLOWKEY_H
#define SN_FLOWKEY_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "sn_policy.h"

struct rte_mbuf;

#define SN_FLOWKEY_EXT_MAX 8   /* IPv6 extension headers walked */

/* A frame's 5-tuple, host order; also the per-worker flow table's key
 * (rte_hash, jhash over every byte: no padding holes, and 48 bytes, a
 * length rte_hash compares without memcmp). Addresses are 32-bit words,
 * most significant first; an IPv4 address is word 0, the others 0.
 * slot and cls are the caller's (0 from sn_flowkey_parse). */
struct sn_flowkey {
	uint32_t src[4], dst[4];
	uint16_t sport, dport;
	uint16_t slot;
	uint8_t proto, cls;
	uint8_t family;            /* SN_POLICY_FAMILY_IPV4 / _IPV6 */
	uint8_t pad_[7];           /* 0 */
};
static_assert(sizeof(struct sn_flowkey) == 48, "hash key without padding");

/* A parsed frame: its key and the fields outside the 5-tuple. */
struct sn_flowhdr {
	struct sn_flowkey k;
	uint32_t flow_label;       /* IPv6; 0 for IPv4 */
	uint16_t vlan;             /* VLAN ID of its 802.1Q tag */
	uint8_t pcp;               /* 802.1p priority of its tag */
	uint8_t dscp;
	bool tagged;               /* it has an 802.1Q tag */
};

/* Parse m into *h (every byte of h->k set). False: not parsed (above). */
bool sn_flowkey_parse(const struct rte_mbuf *m, struct sn_flowhdr *h);
/* Whether the parsed frame h matches m. */
bool sn_flowkey_match(const struct sn_policy_match *m, const struct sn_flowhdr *h);

#endif /* SN_FLOWKEY_H */
