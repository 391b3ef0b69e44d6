/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_flowkey.h — the flow classifier's view of a frame: its headers
 * parsed into a 5-tuple key, and a class's match against it.
 *
 * Pure functions on an mbuf the caller owns: any thread. Guest data is
 * untrusted: every header is read with rte_pktmbuf_read (bounds-checked,
 * any segmentation), a short or odd frame is simply not parsed.
 */
#ifndef SN_FLOWKEY_H
#define SN_FLOWKEY_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "sn_policy.h"

struct rte_mbuf;

/* A frame's 5-tuple, host order; also the per-worker flow table's key
 * (rte_hash, jhash over every byte: no padding holes). slot and cls are
 * the caller's (0 from sn_flowkey_parse). */
struct sn_flowkey {
	uint32_t src, dst;
	uint16_t sport, dport;
	uint16_t slot;
	uint8_t proto, cls;
};
static_assert(sizeof(struct sn_flowkey) == 16, "hash key without padding");

/* The 5-tuple of an IPv4 frame (Ethernet, one 802.1Q tag at most). TCP
 * and UDP ports are read in a non-fragment or a first fragment when the 4
 * bytes are in the frame, else they are 0. False: not IPv4, or truncated
 * before the end of the IPv4 header. */
bool sn_flowkey_parse(const struct rte_mbuf *m, struct sn_flowkey *k);
/* Whether the frame of key k matches m. */
bool sn_flowkey_match(const struct sn_policy_match *m, const struct sn_flowkey *k);

#endif /* SN_FLOWKEY_H */
