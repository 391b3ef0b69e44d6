/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_genpkt.h — frames of the sn-gen traffic tool: build, verify, echo.
 *
 * A test frame is an Ethernet II frame with the local experimental
 * ethertype 0x88B5 and, right after the Ethernet header, a fixed header
 * (big endian on the wire):
 *
 *   magic "SNG1" | run id | flow id | frame length | sequence number
 *
 * followed by a pattern byte[i] = (uint8_t)(seq + i) up to the frame length.
 * The run id (the sender's pid) makes frames of another run "foreign"; the
 * flow id SN_GENPKT_FLOW_LEARN marks the broadcast a port sends so that the
 * switch learns its MAC (its sequence number is the sending port's index).
 *
 * All functions are pure per-mbuf helpers: no state, any thread may call
 * them on mbufs it owns.
 */
#ifndef SN_GENPKT_H
#define SN_GENPKT_H

#include <stdint.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#define SN_GENPKT_ETHERTYPE   0x88B5
#define SN_GENPKT_MAGIC       0x534E4731u /* "SNG1" */
#define SN_GENPKT_FLOW_LEARN  0xFFFFu
#define SN_GENPKT_HDR_OFF     ((uint32_t)sizeof(struct rte_ether_hdr))
#define SN_GENPKT_MIN_SIZE    60u   /* Ethernet minimum without FCS */
#define SN_GENPKT_MAX_SIZE    1514u /* one untagged MTU frame, one segment */

struct sn_genpkt_hdr {
	rte_be32_t magic;
	rte_be32_t run;
	rte_be16_t flow;
	rte_be16_t len;
	rte_be64_t seq;
} __attribute__((packed));

enum sn_genpkt_kind {
	SN_GENPKT_FOREIGN = 0, /* not an sn-gen frame of this run */
	SN_GENPKT_DATA,        /* intact data frame: *flow, *seq valid */
	SN_GENPKT_LEARN,       /* learn broadcast: *seq = sender port index */
	SN_GENPKT_BAD,         /* ours (magic + run) but corrupted/truncated */
};

/* Write a complete frame of `len` bytes into the (empty, single-segment)
 * mbuf m. Returns 0, or -EINVAL if len is out of range or does not fit. */
int sn_genpkt_build(struct rte_mbuf *m, const struct rte_ether_addr *dst,
		    const struct rte_ether_addr *src, uint32_t run, uint16_t flow,
		    uint64_t seq, uint16_t len);

/* Turn a frame built by sn_genpkt_build into an IPv4/UDP frame of the
 * same length carrying the 5-tuple (addresses and ports in host order):
 * the Ethernet type and the bytes after the Ethernet header become IPv4
 * and UDP headers (the test header moves out of reach: such a frame
 * classifies as SN_GENPKT_FOREIGN). For traffic classifiers under test. */
void sn_genpkt_to_udp(struct rte_mbuf *m, uint32_t src, uint32_t dst, uint16_t sport,
		      uint16_t dport);
/* The same for an IPv6/UDP frame: addresses src, dst (16 bytes each,
 * network order), ports in host order, hop limit 64, UDP checksum set
 * (IPv6 requires one). The frame keeps its length, but is made
 * SN_GENPKT_UDP6_MIN_SIZE bytes long if shorter (the mbuf of
 * sn_genpkt_build has the room). */
#define SN_GENPKT_UDP6_MIN_SIZE 62u   /* Ethernet + IPv6 + UDP headers */
void sn_genpkt_to_udp6(struct rte_mbuf *m, const uint8_t src[16], const uint8_t dst[16],
		       uint16_t sport, uint16_t dport);
/* The same for an ARP request (IPv4 over Ethernet) from sender hardware
 * address = the frame's source MAC, sender IP spa, target IP tpa (host
 * order); the frame keeps its length (padding after the ARP body). */
void sn_genpkt_to_arp(struct rte_mbuf *m, uint32_t spa, uint32_t tpa);
/* The same for an IPv6 neighbour solicitation (type 135, with a source
 * link-layer address option) or advertisement (136, override flag, with a
 * target link-layer address option): source src, target tgt (16 bytes
 * each, network order), option address lla; destination ff02::1, hop
 * limit 255, checksum set. The frame becomes 86 bytes long (the mbuf
 * of sn_genpkt_build has the room). */
void sn_genpkt_to_nd(struct rte_mbuf *m, uint8_t type, const uint8_t src[16],
		     const uint8_t tgt[16], const struct rte_ether_addr *lla);

/* Classify a received frame; with verify != 0 the whole pattern is checked
 * (a mismatch gives SN_GENPKT_BAD). *flow and *seq are set for DATA/LEARN. */
enum sn_genpkt_kind sn_genpkt_classify(const struct rte_mbuf *m, uint32_t run,
				       int verify, uint16_t *flow, uint64_t *seq);

/* If m is an ARP request for ip or an ICMP echo request to ip (ip and mac
 * being the answering host's), rewrite it in place into the reply from
 * mac/ip and return 1 (ARP) or 2 (ICMP). Otherwise leave m untouched and
 * return 0. ip is in network byte order. */
int sn_genpkt_echo(struct rte_mbuf *m, const struct rte_ether_addr *mac, rte_be32_t ip);

#endif /* SN_GENPKT_H */
