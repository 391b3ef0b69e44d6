/* SPDX-License-Identifier: BSD-3-Clause */
/* test_classify.c — the flow classifier (sn_classify.h) without EAL.
 *
 * A table of frames crafted byte by byte in a buffer and wrapped in
 * hand-built mbufs (one segment, or split at any offset into two) goes
 * through sn_classify_frame() on one port with three classes; each row
 * states the class the frame must match (first match wins) and the
 * 5-tuple the classifier must extract, checked through
 * sn_classify_flow_hash() (the jhash of that 5-tuple key; of the Ethernet
 * addresses for a frame that is not parsed; 0 below 12 bytes), also with
 * the frame in one heap segment of exactly its length (ASan: nothing read
 * past its end). Malformed and short frames match no class. A second
 * table does the same for IPv6 (extension headers, first and later
 * fragments, truncated headers), the 802.1Q VLAN ID and PCP, DSCP of
 * IPv4 and IPv6 and the flow label, against a port with a class for each
 * key. Per-flow pacing gets one state per
 * 5-tuple, class pacing one per class; a full flow table falls back to
 * the class's state and counts it; idle flows are aged by tick(); the
 * class counters add up.
 *
 * EAL-free: the classifier's memory and its flow table (rte_hash) are
 * the fakes of sn_fake_classify.c. Exit status 1 if any check failed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_jhash.h>
#include <rte_mbuf.h>

#include "sn_classify.h"
#include "sn_flowkey.h"

#include "sn_check.h"

/* ---- Frames. ---- */

#define SLOT 3
#define NOW  1000000000ull

enum { F_VLAN = 1, F_QINQ = 2 };

#define TCI_SET  0x10000u      /* frame.tci: this TCI, not the default 100 */
#define EXT_MAX  10

/* A frame description; build() turns it into bytes. */
struct frame {
	uint16_t ethertype;        /* after the tags; 0 = IPv4 (IPv6 with v6) */
	unsigned tags;             /* F_VLAN, F_QINQ */
	uint32_t tci;              /* TCI_SET | tci; else 100 */
	uint8_t version, ihl;      /* 0 = 4, 5 */
	uint8_t proto;             /* IPv4 protocol / IPv6 upper-layer header */
	uint8_t tos;               /* IPv4 TOS / IPv6 traffic class */
	uint32_t src, dst;
	uint16_t sport, dport;
	uint16_t frag;             /* fragment_offset field (host order) */
	/* IPv6 (v6 = 1): addresses, flow label, extension headers in
	 * order (0 = hop-by-hop, 43 routing: 24 bytes, 44 fragment with
	 * frag6 as its offset field, 60 destination options). */
	uint8_t v6;
	uint32_t src6[4], dst6[4];
	uint32_t flow;
	uint8_t n_ext, ext[EXT_MAX];
	uint16_t frag6;
	unsigned len;              /* cut the frame here (0 = whole: 64 + payload) */
};

/* A row: the frame, where to split it into two segments (0 = one), the
 * class it must match and the 5-tuple the classifier must see (ip 4 or
 * 6, then the tuple's ports: parsed ones, or 0 where it must not read
 * any; ip 0: not parsed). */
struct row {
	const char *what;
	struct frame f;
	unsigned split;
	int cls;                   /* -1: none */
	int ip;                    /* 4 / 6: flow hash of the 5-tuple; 0: of the MACs */
	uint16_t sport, dport;     /* the 5-tuple's ports */
};

#define IP(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))
#define TCP IPPROTO_TCP
#define UDP IPPROTO_UDP
#define A IP(10, 1, 2, 3)
#define B IP(192, 168, 0, 1)
#define C IP(172, 16, 0, 1)
#define D IP(8, 8, 8, 8)

static const struct row rows[] = {
	{ "tcp to :80 (class 0, also matches class 1)",
	  { .proto = TCP, .src = A, .dst = B, .sport = 1234, .dport = 80 }, 0, 0, 4, 1234, 80 },
	{ "same flow behind an 802.1Q tag",
	  { .tags = F_VLAN, .proto = TCP, .src = A, .dst = B, .sport = 1234, .dport = 80 }, 0, 0,
	  4, 1234, 80 },
	{ "same flow, split in the IPv4 header's last byte (ports at an odd address)",
	  { .proto = TCP, .src = A, .dst = B, .sport = 1234, .dport = 80 }, 33, 0, 4, 1234, 80 },
	{ "same flow, split inside the ports",
	  { .proto = TCP, .src = A, .dst = B, .sport = 1234, .dport = 80 }, 35, 0, 4, 1234, 80 },
	{ "same flow, split inside the MAC addresses",
	  { .proto = TCP, .src = A, .dst = B, .sport = 1234, .dport = 80 }, 8, 0, 4, 1234, 80 },
	{ "another tcp flow to :80",
	  { .proto = TCP, .src = A, .dst = B, .sport = 1235, .dport = 80 }, 0, 0, 4, 1235, 80 },
	{ "tcp to :80 with IP options (ihl 6)",
	  { .ihl = 6, .proto = TCP, .src = C, .dst = B, .sport = 7, .dport = 80 }, 0, 0, 4, 7, 80 },
	{ "first fragment (MF): ports read",
	  { .proto = TCP, .src = C, .dst = B, .sport = 9, .dport = 80, .frag = 0x2000 }, 0, 0, 4,
	  9, 80 },
	{ "non-first fragment: no ports, src in 10/8 (class 1)",
	  { .proto = TCP, .src = A, .dst = B, .sport = 1234, .dport = 80, .frag = 0x0010 }, 0, 1,
	  4, 0, 0 },
	{ "non-first fragment from outside 10/8: no class",
	  { .proto = TCP, .src = C, .dst = B, .sport = 1, .dport = 80, .frag = 0x0001 }, 0, -1,
	  4, 0, 0 },
	{ "tcp to :443 from 10/8 (class 1)",
	  { .proto = TCP, .src = A, .dst = B, .sport = 1234, .dport = 443 }, 0, 1, 4, 1234, 443 },
	{ "tcp cut after the IPv4 header: ports 0, class 1",
	  { .proto = TCP, .src = A, .dst = B, .sport = 1234, .dport = 80, .len = 34 }, 0, 1, 4,
	  0, 0 },
	{ "tcp cut inside the ports: ports 0, no class",
	  { .proto = TCP, .src = C, .dst = B, .sport = 1234, .dport = 80, .len = 37 }, 0, -1, 4,
	  0, 0 },
	{ "udp (class 2)",
	  { .proto = UDP, .src = C, .dst = D, .sport = 53, .dport = 53 }, 0, 2, 4, 53, 53 },
	{ "icmp from outside 10/8: no class, ports 0",
	  { .proto = IPPROTO_ICMP, .src = C, .dst = D, .sport = 8, .dport = 0 }, 0, -1, 4, 0, 0 },
	{ "icmp from 10/8 (class 1)",
	  { .proto = IPPROTO_ICMP, .src = A, .dst = D }, 0, 1, 4, 0, 0 },
	/* Malformed, short or not IP: no class, hashed by MAC addresses. */
	{ "runt: 10 bytes", { .proto = TCP, .src = A, .dst = B, .len = 10 }, 0, -1, 0, 0, 0 },
	{ "13 bytes: addresses, no ethertype", { .proto = TCP, .src = A, .len = 13 }, 0, -1, 0,
	  0, 0 },
	{ "ethernet header only", { .proto = TCP, .src = A, .len = 14 }, 0, -1, 0, 0, 0 },
	{ "ARP", { .ethertype = RTE_ETHER_TYPE_ARP, .src = A }, 0, -1, 0, 0, 0 },
	{ "IPv6 version, zeros after it: a hop-by-hop chain cut short",
	  { .ethertype = RTE_ETHER_TYPE_IPV6, .proto = TCP, .src = A }, 0, -1,
	  0, 0, 0 },
	{ "802.1Q tag cut short", { .tags = F_VLAN, .proto = TCP, .src = A, .len = 16 }, 0, -1, 0,
	  0, 0 },
	{ "QinQ: one tag only is read", { .tags = F_QINQ, .proto = TCP, .src = A, .dport = 80 },
	  0, -1, 0, 0, 0 },
	{ "IPv4 header cut short", { .proto = TCP, .src = A, .dport = 80, .len = 33 }, 0, -1, 0,
	  0, 0 },
	{ "IP version 6 under the IPv4 ethertype",
	  { .version = 6, .proto = TCP, .src = A, .dport = 80 }, 0, -1, 0, 0, 0 },
	{ "ihl 4", { .ihl = 4, .proto = TCP, .src = A, .dport = 80 }, 0, -1, 0, 0, 0 },
};

static const uint8_t MAC_DST[6] = { 0x52, 0x54, 0x00, 0x00, 0x00, 0x02 };
static const uint8_t MAC_SRC[6] = { 0x52, 0x54, 0x00, 0x00, 0x00, 0x01 };

/* The frame's bytes into buf; returns its length. */
static unsigned build(const struct frame *f, uint8_t *buf, unsigned size)
{
	unsigned off = 0, ihl = f->ihl ? f->ihl : 5;
	uint16_t type = f->ethertype ? f->ethertype : RTE_ETHER_TYPE_IPV4;

	memset(buf, 0, size);
	memcpy(buf, MAC_DST, 6);
	memcpy(buf + 6, MAC_SRC, 6);
	off = 12;
	if (f->v6 && !f->ethertype)
		type = RTE_ETHER_TYPE_IPV6;
	for (unsigned t = 0; t < (f->tags & F_QINQ ? 2u : f->tags & F_VLAN ? 1u : 0u); t++) {
		*(uint16_t *)(buf + off) = rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
		*(uint16_t *)(buf + off + 2) =
			rte_cpu_to_be_16(f->tci & TCI_SET ? (uint16_t)f->tci : 100);
		off += 4;
	}
	*(uint16_t *)(buf + off) = rte_cpu_to_be_16(type);
	off += 2;
	if (type == RTE_ETHER_TYPE_IPV4) {
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(buf + off);

		ip->version_ihl = (uint8_t)((f->version ? f->version : 4) << 4 | ihl);
		ip->total_length = rte_cpu_to_be_16(64);
		ip->fragment_offset = rte_cpu_to_be_16(f->frag);
		ip->type_of_service = f->tos;
		ip->time_to_live = 64;
		ip->next_proto_id = f->proto;
		ip->src_addr = rte_cpu_to_be_32(f->src);
		ip->dst_addr = rte_cpu_to_be_32(f->dst);
		off += 4 * ihl;
		*(uint16_t *)(buf + off) = rte_cpu_to_be_16(f->sport);
		*(uint16_t *)(buf + off + 2) = rte_cpu_to_be_16(f->dport);
	} else if (type == RTE_ETHER_TYPE_IPV6 && f->v6) {
		struct rte_ipv6_hdr *ip = (struct rte_ipv6_hdr *)(buf + off);
		uint32_t be[4];

		ip->vtc_flow = rte_cpu_to_be_32((uint32_t)(f->version ? f->version : 6) << 28 |
						(uint32_t)f->tos << 20 | f->flow);
		ip->proto = f->n_ext ? f->ext[0] : f->proto;
		ip->hop_limits = 64;
		for (unsigned i = 0; i < 4; i++)
			be[i] = rte_cpu_to_be_32(f->src6[i]);
		memcpy(&ip->src_addr, be, 16);
		for (unsigned i = 0; i < 4; i++)
			be[i] = rte_cpu_to_be_32(f->dst6[i]);
		memcpy(&ip->dst_addr, be, 16);
		off += sizeof(*ip);
		for (unsigned i = 0; i < f->n_ext; i++) {
			buf[off] = i + 1u < f->n_ext ? f->ext[i + 1] : f->proto;
			if (f->ext[i] == IPPROTO_FRAGMENT) {
				*(uint16_t *)(buf + off + 2) = rte_cpu_to_be_16(f->frag6);
				off += 8;
			} else if (f->ext[i] == IPPROTO_ROUTING) {
				buf[off + 1] = 2;
				off += 24;
			} else {
				off += 8;
			}
		}
		*(uint16_t *)(buf + off) = rte_cpu_to_be_16(f->sport);
		*(uint16_t *)(buf + off + 2) = rte_cpu_to_be_16(f->dport);
	} else if (type == RTE_ETHER_TYPE_IPV6) {
		buf[off] = 0x60;
	}
	off += 64;   /* L4 header and payload */
	return f->len ? f->len : off;
}

/* A frame in one mbuf, or in two split at `split`. */
struct pkt {
	struct rte_mbuf m[2];
	uint8_t seg[2][256];
};

static void wrap(struct pkt *p, const uint8_t *data, unsigned len, unsigned split)
{
	unsigned l0 = split && split < len ? split : len;

	memset(p->m, 0, sizeof(p->m));
	for (unsigned i = 0; i < 2; i++) {
		p->m[i].buf_addr = p->seg[i];
		p->m[i].buf_len = sizeof(p->seg[i]);
		p->m[i].data_off = 0;
		p->m[i].nb_segs = 1;
		p->m[i].refcnt = 1;
	}
	memcpy(p->seg[0], data, l0);
	p->m[0].data_len = (uint16_t)l0;
	p->m[0].pkt_len = len;
	if (l0 < len) {
		memcpy(p->seg[1], data + l0, len - l0);
		p->m[1].data_len = (uint16_t)(len - l0);
		p->m[1].pkt_len = len - l0;
		p->m[0].next = &p->m[1];
		p->m[0].nb_segs = 2;
	}
}

/* The classifier's flow key, as sn_classify_flow_hash() hashes it. */
static uint32_t want_hash(const struct row *r)
{
	uint32_t words[sizeof(struct sn_flowkey) / 4];
	struct sn_flowkey k;

	if (!r->ip) {
		unsigned len = r->f.len ? r->f.len : 100;
		uint8_t eth[12];

		if (len < 12)
			return 0;
		memcpy(eth, MAC_DST, 6);
		memcpy(eth + 6, MAC_SRC, 6);
		return rte_jhash(eth, sizeof(eth), 1);
	}
	memset(&k, 0, sizeof(k));
	if (r->ip == 6) {
		memcpy(k.src, r->f.src6, sizeof(k.src));
		memcpy(k.dst, r->f.dst6, sizeof(k.dst));
		k.family = SN_POLICY_FAMILY_IPV6;
	} else {
		k.src[0] = r->f.src;
		k.dst[0] = r->f.dst;
		k.family = SN_POLICY_FAMILY_IPV4;
	}
	k.proto = r->f.proto;
	k.sport = r->sport;
	k.dport = r->dport;
	/* rte_jhash reads 32-bit words: hash a copy of the key that has
	 * that type (reading the 16-bit fields through uint32_t pointers
	 * would break strict aliasing). */
	memcpy(words, &k, sizeof(words));
	return rte_jhash(words, sizeof(words), 0);
}

/* The port's classes: 0 "web" tcp to :80, paced per flow; 1 "net10"
 * anything from 10/8, paced as a class ("clamp"); 2 "udp", no pacing. */
static void policy(struct sn_policy_port *pp)
{
	memset(pp, 0, sizeof(*pp));
	pp->n_classes = 3;
	for (unsigned i = 0; i < 3; i++) {
		struct sn_policy_class *c = &pp->classes[i];

		c->m.sport_hi = c->m.dport_hi = 65535;
		c->agg = -1;
	}
	snprintf(pp->classes[0].name, sizeof(pp->classes[0].name), "web");
	pp->classes[0].m.proto = TCP;
	pp->classes[0].m.dport_lo = pp->classes[0].m.dport_hi = 80;
	pp->classes[0].rate_bps = 10000000;
	pp->classes[0].burst_bytes = 3000;
	pp->classes[0].scope = SN_POLICY_SCOPE_FLOW;
	snprintf(pp->classes[1].name, sizeof(pp->classes[1].name), "net10");
	pp->classes[1].m.src[0] = IP(10, 0, 0, 0);
	pp->classes[1].m.family = SN_POLICY_FAMILY_IPV4;
	pp->classes[1].m.src_len = 8;
	pp->classes[1].rate_bps = 20000000;
	pp->classes[1].burst_bytes = 3000;
	pp->classes[1].scope = SN_POLICY_SCOPE_CLASS;
	pp->classes[1].horizon = SN_POLICY_HORIZON_CLAMP;
	snprintf(pp->classes[2].name, sizeof(pp->classes[2].name), "udp");
	pp->classes[2].m.proto = UDP;
}

/* The flow hash of the frame in one heap segment of exactly its length:
 * under ASan, any read past the frame's end is reported. */
static uint32_t hash_exact(const uint8_t *data, unsigned len)
{
	struct rte_mbuf m;
	uint8_t *seg = malloc(len ? len : 1);
	uint32_t h;

	CHECK(seg != NULL);
	if (!seg)
		return 0;
	memcpy(seg, data, len);
	memset(&m, 0, sizeof(m));
	m.buf_addr = seg;
	m.buf_len = (uint16_t)len;
	m.data_len = (uint16_t)len;
	m.pkt_len = len;
	m.nb_segs = 1;
	m.refcnt = 1;
	h = sn_classify_flow_hash(&m);
	free(seg);
	return h;
}

static void classify_at(struct sn_classify *c, uint16_t slot, const struct row *r,
			struct sn_classify_res *res, unsigned *len)
{
	uint8_t data[256];
	struct pkt p;

	*len = build(&r->f, data, sizeof(data));
	wrap(&p, data, *len, r->split);
	memset(res, 0, sizeof(*res));
	sn_classify_frame(c, slot, &p.m[0], NOW, res);
	if (sn_classify_flow_hash(&p.m[0]) != want_hash(r)) {
		fprintf(stderr, "%s: flow hash\n", r->what);
		CHECK(!"the 5-tuple as expected");
	}
	if (hash_exact(data, *len) != want_hash(r)) {
		fprintf(stderr, "%s: flow hash of an exactly sized segment\n", r->what);
		CHECK(!"the 5-tuple as expected, nothing read past the frame");
	}
}

static void classify(struct sn_classify *c, const struct row *r, struct sn_classify_res *res,
		     unsigned *len)
{
	classify_at(c, SLOT, r, res, len);
}

static void test_table(void)
{
	struct sn_classify *c = sn_classify_create(0, 64, 8, 1, 0);
	struct sn_policy_port pp;
	struct sn_tstamp *flow_of_row[RTE_DIM(rows)] = { NULL };
	struct sn_tstamp *class1_ts = NULL;
	uint64_t offered[3] = { 0 }, bytes[3] = { 0 };
	struct sn_classify_class_stats st;

	CHECK(c != NULL);
	if (!c)
		return;
	policy(&pp);
	CHECK(sn_classify_apply_port(c, SLOT, &pp, true, NOW) == 0);
	CHECK(sn_classify_created(c, SLOT));
	for (unsigned i = 0; i < RTE_DIM(rows); i++) {
		const struct row *r = &rows[i];
		struct sn_classify_res res;
		int got;
		unsigned len;

		classify(c, r, &res, &len);
		got = res.cls == SN_CLASSIFY_NONE ? -1 : res.cls;
		if (got != r->cls) {
			fprintf(stderr, "%s: class %d, want %d\n", r->what, got, r->cls);
			CHECK(!"class as expected");
			continue;
		}
		CHECK(res.slot == SLOT && !res.agg);
		CHECK(res.clamp == (r->cls == 1));
		/* Policies crossed: flow or class pacing for classes 0 and 1. */
		CHECK(res.n == (r->cls == 0 || r->cls == 1 ? 1u : 0u));
		if (r->cls == 0)
			flow_of_row[i] = res.pol[0];
		if (r->cls == 1) {
			CHECK(class1_ts == NULL || class1_ts == res.pol[0]);
			class1_ts = res.pol[0];
		}
		if (r->cls >= 0) {
			offered[r->cls]++;
			bytes[r->cls] += len;
		}
	}
	/* Rows 0-4 are one flow, row 5 another, rows 6 and 7 two more. */
	CHECK(flow_of_row[0] && flow_of_row[0] == flow_of_row[1] && flow_of_row[0] == flow_of_row[2] &&
	      flow_of_row[0] == flow_of_row[3] && flow_of_row[0] == flow_of_row[4]);
	CHECK(flow_of_row[5] && flow_of_row[5] != flow_of_row[0]);
	CHECK(flow_of_row[6] && flow_of_row[7] && flow_of_row[6] != flow_of_row[7] &&
	      flow_of_row[6] != flow_of_row[0] && flow_of_row[7] != flow_of_row[5]);
	CHECK(class1_ts && class1_ts != flow_of_row[0]);
	for (unsigned k = 0; k < 3; k++) {
		CHECK(sn_classify_class_stats(c, SLOT, k, &st) == 0);
		CHECK(st.offered_packets == offered[k] && st.offered_bytes == bytes[k]);
	}
	CHECK(offered[0] == 8 && offered[1] == 4 && offered[2] == 1);
	CHECK(sn_classify_class_stats(c, SLOT, 0, &st) == 0);
	CHECK(st.flows_created == 4 && st.flows_active == 4 && st.flow_table_full == 0);
	CHECK(sn_classify_class_stats(c, SLOT, 3, &st) == -ENOENT);
	CHECK(sn_classify_class_stats(c, SLOT + 1, 0, &st) == -ENOENT);
	/* Idle for more than SN_CLASSIFY_AGE_NS, no pacing debt: aged. */
	CHECK(sn_classify_tick(c, NOW + SN_CLASSIFY_AGE_NS / 2, 0) == 0);
	CHECK(sn_classify_class_stats(c, SLOT, 0, &st) == 0 && st.flows_aged == 0);
	CHECK(sn_classify_tick(c, NOW + SN_CLASSIFY_AGE_NS + 1, 0) == 0);
	CHECK(sn_classify_class_stats(c, SLOT, 0, &st) == 0);
	CHECK(st.flows_aged == 4 && st.flows_active == 0);
	sn_classify_free(c);
}

/* A flow table of 4: the fifth and sixth flows are paced by the class's
 * state, counted as flow_table_full on every frame. */
static void test_table_full(void)
{
	struct sn_classify *c = sn_classify_create(0, 4, 64, 1, 0);
	struct sn_policy_port pp;
	struct sn_tstamp *ts[8];
	struct sn_classify_class_stats st;

	CHECK(c != NULL);
	if (!c)
		return;
	policy(&pp);
	sn_classify_apply_port(c, SLOT, &pp, true, NOW);
	for (unsigned i = 0; i < 8; i++) {
		struct row r = { "flow", { .proto = TCP, .src = IP(192, 0, 2, 1), .dst = B,
					   .sport = (uint16_t)(1000 + (i < 6 ? i : i - 2)),
					   .dport = 80 }, 0, 0, 4, 0, 80 };
		struct sn_classify_res res;
		unsigned len;

		r.sport = r.f.sport;
		classify(c, &r, &res, &len);
		CHECK(res.cls == 0 && res.n == 1);
		ts[i] = res.pol[0];
	}
	/* Flows 0-3 have their own states; 4 and 5 (frames 4-7) share one. */
	for (unsigned i = 0; i < 4; i++)
		for (unsigned j = i + 1; j < 8; j++)
			CHECK(ts[i] != ts[j]);
	CHECK(ts[4] == ts[5] && ts[4] == ts[6] && ts[4] == ts[7]);
	CHECK(sn_classify_class_stats(c, SLOT, 0, &st) == 0);
	CHECK(st.flows_created == 4 && st.flow_table_full == 4 && st.offered_packets == 8);
	sn_classify_free(c);
}

/* A TCP flow to :80 (class "web", paced per flow) from source port sport. */
static struct sn_tstamp *web_flow(struct sn_classify *c, uint16_t slot, uint16_t sport)
{
	struct row r = { "flow", { .proto = TCP, .src = IP(192, 0, 2, 1), .dst = B,
				   .sport = sport, .dport = 80 }, 0, 0, 4, sport, 80 };
	struct sn_classify_res res;
	unsigned len;

	classify_at(c, slot, &r, &res, &len);
	CHECK(res.cls == 0 && res.n == 1);
	return res.n ? res.pol[0] : NULL;
}

/* Slot SLOT sprays 10 flows with a flow quota of 4, in a table of 64:
 * its first 4 flows get states, the other 6 share the class's state and
 * count quota_flows (not flow_table_full), while slot SLOT + 1 still gets
 * a state for each of its flows. Ageing gives the entries back. */
static void test_flow_quota(void)
{
	struct sn_classify *c = sn_classify_create(0, 64, 8, 1, 0);
	const uint16_t s2 = SLOT + 1;
	struct sn_policy_port pp;
	struct sn_tstamp *ts[10], *t2[3];
	struct sn_classify_class_stats st;

	CHECK(c != NULL);
	if (!c)
		return;
	policy(&pp);
	sn_classify_apply_port(c, SLOT, &pp, true, NOW);
	sn_classify_apply_port(c, s2, &pp, true, NOW);
	sn_classify_set_flow_quota(c, SLOT, 4);
	sn_classify_set_flow_quota(c, s2, 4);
	for (unsigned i = 0; i < 10; i++)
		ts[i] = web_flow(c, SLOT, (uint16_t)(2000 + i));
	for (unsigned i = 0; i < 3; i++)
		t2[i] = web_flow(c, s2, (uint16_t)(2000 + i));
	for (unsigned i = 0; i < 4; i++)
		for (unsigned j = i + 1; j < 10; j++)
			CHECK(ts[i] != ts[j]);
	for (unsigned i = 5; i < 10; i++)
		CHECK(ts[i] == ts[4]);
	CHECK(t2[0] != t2[1] && t2[1] != t2[2] && t2[0] != t2[2] && t2[0] != ts[4]);
	printf("flow quota 4: slot %u holds %u entries, %" PRIu64 " refused; slot %u holds %u, "
	       "%" PRIu64 " refused\n", SLOT, sn_classify_port_flows(c, SLOT),
	       sn_classify_quota_flows(c, SLOT), s2, sn_classify_port_flows(c, s2),
	       sn_classify_quota_flows(c, s2));
	CHECK(sn_classify_port_flows(c, SLOT) == 4 && sn_classify_quota_flows(c, SLOT) == 6);
	CHECK(sn_classify_port_flows(c, s2) == 3 && sn_classify_quota_flows(c, s2) == 0);
	CHECK(sn_classify_class_stats(c, SLOT, 0, &st) == 0);
	CHECK(st.flows_created == 4 && st.flow_table_full == 0 && st.flows_active == 4);
	CHECK(sn_classify_class_stats(c, s2, 0, &st) == 0);
	CHECK(st.flows_created == 3 && st.flow_table_full == 0);
	/* A known flow at the quota keeps its state. */
	CHECK(web_flow(c, SLOT, 2000) == ts[0]);
	/* Aged out: the entries leave the count, a new flow gets one. */
	CHECK(sn_classify_tick(c, NOW + SN_CLASSIFY_AGE_NS + 1, 0) == 0);
	CHECK(sn_classify_port_flows(c, SLOT) == 0 && sn_classify_port_flows(c, s2) == 0);
	CHECK(web_flow(c, SLOT, 3000) != ts[4]);
	CHECK(sn_classify_port_flows(c, SLOT) == 1 && sn_classify_quota_flows(c, SLOT) == 6);
	/* A new port on the slot starts with no refusals counted. */
	sn_classify_apply_port(c, SLOT, &pp, true, NOW);
	CHECK(sn_classify_quota_flows(c, SLOT) == 0);
	sn_classify_free(c);
}

/* Two ports at their auto flow quota cannot take a third's reserve. A
 * table of 2 (S - 1) R entries, S slots with a reserve of R = 2 bursts
 * each, gives every slot a quota of (S - 1) R: two quotas are the whole
 * table. Slots 1 then 2 spray more flows than their quota: together they
 * hold at most the table less the S - 2 other reserves (slot 1 takes the
 * shared part, slot 2 gets its reserve, its other new flows count in
 * quota_flows), and slot SLOT still gets an entry for each of its R
 * flows. */
static void test_flow_reserve(void)
{
	const unsigned n = 8, burst = 1, r = 2 * burst;
	const uint32_t max = 2 * (n - 1) * r, q = sn_classify_flows_quota_auto(max, n, burst);
	struct sn_classify *c = sn_classify_create(0, max, n, burst, 0);
	struct sn_classify_class_stats st;
	struct sn_policy_port pp;
	struct sn_tstamp *ts[2];
	uint32_t h1, h2;

	CHECK(sn_classify_flows_reserve(max, n, burst) == r && q == (n - 1) * r);
	CHECK(sn_classify_flows_reserve(10, 4, 32) == 2);
	CHECK(c != NULL);
	if (!c)
		return;
	policy(&pp);
	for (uint16_t slot = 1; slot <= SLOT; slot++) {
		sn_classify_apply_port(c, slot, &pp, true, NOW);
		sn_classify_set_flow_quota(c, slot, q);
	}
	for (uint16_t slot = 1; slot <= 2; slot++)
		for (unsigned i = 0; i < q + r; i++)
			web_flow(c, slot, (uint16_t)(2000 + i));
	for (unsigned i = 0; i < r; i++)
		ts[i] = web_flow(c, SLOT, (uint16_t)(2000 + i));
	h1 = sn_classify_port_flows(c, 1);
	h2 = sn_classify_port_flows(c, 2);
	printf("flow reserve %u of %u entries, quota %u: slots 1, 2, %u hold %u, %u, %u; "
	       "quota_flows %" PRIu64 ", %" PRIu64 ", %" PRIu64 "\n", r, max, q, SLOT, h1, h2,
	       sn_classify_port_flows(c, SLOT), sn_classify_quota_flows(c, 1),
	       sn_classify_quota_flows(c, 2), sn_classify_quota_flows(c, SLOT));
	CHECK(h1 <= q && h2 <= q && h1 + h2 <= max - (n - 2) * r);
	CHECK(h1 == q && h2 == r && sn_classify_quota_flows(c, 2) == q);
	CHECK(sn_classify_port_flows(c, SLOT) == r && sn_classify_quota_flows(c, SLOT) == 0);
	CHECK(ts[0] != ts[1]);
	CHECK(sn_classify_class_stats(c, SLOT, 0, &st) == 0);
	CHECK(st.flows_created == r && st.flow_table_full == 0);
	/* Aged out: every entry back, the shared part free again. */
	CHECK(sn_classify_tick(c, NOW + SN_CLASSIFY_AGE_NS + 1, 0) == 0);
	CHECK(sn_classify_port_flows(c, 1) == 0 && sn_classify_port_flows(c, 2) == 0);
	for (unsigned i = 0; i < q; i++)
		web_flow(c, 2, (uint16_t)(4000 + i));
	CHECK(sn_classify_port_flows(c, 2) == q);
	sn_classify_free(c);
}

/* The default cap: the table less every other slot's reserve of two
 * bursts, or the fair share when the reserves do not fit. */
static void test_flow_quota_auto(void)
{
	CHECK(sn_classify_flows_quota_auto(16384, 65, 32) == 16384 - 64 * 64);
	CHECK(sn_classify_flows_quota_auto(0, 65, 32) == SN_CLASSIFY_FLOWS_DEF - 64 * 64);
	CHECK(sn_classify_flows_quota_auto(16384, 1, 32) == 16384);
	CHECK(sn_classify_flows_quota_auto(16384, 513, 32) == 16384 / 513);
	CHECK(sn_classify_flows_quota_auto(8, 4096, 32) == 1);
}

/* A port without classes classifies nothing; its frames cross no policy. */
/* ---- IPv6, 802.1Q, DSCP and flow label keys. ---- */

#define SLOT6 5
/* 2001:db8:a:b:: + c:d (32-bit words c, d) */
#define DB8(a, b, c, d) { 0x20010db8u, (uint32_t)(a) << 16 | (b), (c), (d) }
#define HBH 0
#define RT  IPPROTO_ROUTING
#define FR  IPPROTO_FRAGMENT
#define DO  IPPROTO_DSTOPTS
#define V6(...) .v6 = 1, __VA_ARGS__
#define VLAN(vid, pcp) .tags = F_VLAN, .tci = TCI_SET | (uint32_t)(pcp) << 13 | (vid)

/* Classes of SLOT6, in order (first match wins). */
enum { C_NET10, C_V6WEB, C_V6DNS, C_LABEL, C_VLAN, C_PCP, C_EF4, C_EF, C_V6UDP, C_V4ANY, C_N };

static const struct row rows6[] = {
	{ "v6 tcp to :80 from 2001:db8::1 (v6web)",
	  { V6(.proto = TCP, .src6 = DB8(0, 0, 0, 1), .dst6 = DB8(0, 0, 0, 2), .sport = 1234,
	       .dport = 80) }, 0, C_V6WEB, 6, 1234, 80 },
	{ "same flow behind hop-by-hop and destination options",
	  { V6(.proto = TCP, .src6 = DB8(0, 0, 0, 1), .dst6 = DB8(0, 0, 0, 2), .sport = 1234,
	       .dport = 80, .n_ext = 2, .ext = { HBH, DO }) }, 0, C_V6WEB, 6, 1234, 80 },
	{ "same flow behind a 24-byte routing header, split inside it",
	  { V6(.proto = TCP, .src6 = DB8(0, 0, 0, 1), .dst6 = DB8(0, 0, 0, 2), .sport = 1234,
	       .dport = 80, .n_ext = 1, .ext = { RT }) }, 70, C_V6WEB, 6, 1234, 80 },
	{ "same flow, split inside the ports", { V6(.proto = TCP, .src6 = DB8(0, 0, 0, 1),
	  .dst6 = DB8(0, 0, 0, 2), .sport = 1234, .dport = 80) }, 55, C_V6WEB, 6, 1234, 80 },
	{ "another v6 flow: source differs in its last 64 bits only",
	  { V6(.proto = TCP, .src6 = DB8(0, 0, 1, 1), .dst6 = DB8(0, 0, 0, 2), .sport = 1234,
	       .dport = 80) }, 0, C_V6WEB, 6, 1234, 80 },
	{ "another v6 flow: destination differs in word 1",
	  { V6(.proto = TCP, .src6 = DB8(0, 0, 0, 1), .dst6 = DB8(0, 7, 0, 2), .sport = 1234,
	       .dport = 80) }, 0, C_V6WEB, 6, 1234, 80 },
	{ "v6 source 0a00::1 is no IPv4 10/8: no class",
	  { V6(.proto = TCP, .src6 = { 0x0a000000, 0, 0, 1 }, .dst6 = DB8(0, 0, 0, 2),
	       .sport = 1, .dport = 80) }, 0, -1, 6, 1, 80 },
	{ "v4 from 10/8 (net10)", { .proto = TCP, .src = A, .dst = B, .sport = 5, .dport = 80 },
	  0, C_NET10, 4, 5, 80 },
	{ "v6 udp first fragment (M, offset 0): ports read (v6dns)",
	  { V6(.proto = UDP, .src6 = DB8(0, 0, 0, 9), .dst6 = DB8(0x53, 0, 0, 1), .sport = 999,
	       .dport = 53, .n_ext = 1, .ext = { FR }, .frag6 = 1) }, 0, C_V6DNS, 6, 999, 53 },
	{ "v6 udp non-first fragment: ports 0 (v6udp)",
	  { V6(.proto = UDP, .src6 = DB8(0, 0, 0, 9), .dst6 = DB8(0x53, 0, 0, 1), .sport = 999,
	       .dport = 53, .n_ext = 1, .ext = { FR }, .frag6 = 8 << 3) }, 0, C_V6UDP, 6, 0, 0 },
	{ "v6 udp first fragment cut after its fragment header: ports 0 (v6udp)",
	  { V6(.proto = UDP, .src6 = DB8(0, 0, 0, 9), .dst6 = DB8(0x53, 0, 0, 1), .sport = 999,
	       .dport = 53, .n_ext = 1, .ext = { FR }, .frag6 = 1, .len = 14 + 40 + 8) }, 0,
	  C_V6UDP, 6, 0, 0 },
	{ "v6 udp first fragment cut inside the ports: ports 0 (v6udp)",
	  { V6(.proto = UDP, .src6 = DB8(0, 0, 0, 9), .dst6 = DB8(0x53, 0, 0, 1), .sport = 999,
	       .dport = 53, .n_ext = 1, .ext = { FR }, .frag6 = 1, .len = 14 + 40 + 8 + 3) }, 0,
	  C_V6UDP, 6, 0, 0 },
	{ "8 extension headers: parsed (v6dns)",
	  { V6(.proto = UDP, .src6 = DB8(0, 0, 0, 9), .dst6 = DB8(0x53, 0, 0, 1), .sport = 7,
	       .dport = 53, .n_ext = 8, .ext = { HBH, DO, RT, DO, DO, FR, DO, DO }) }, 0,
	  C_V6DNS, 6, 7, 53 },
	{ "9 extension headers: past the bound, not parsed",
	  { V6(.proto = UDP, .src6 = DB8(0, 0, 0, 9), .dst6 = DB8(0x53, 0, 0, 1), .sport = 7,
	       .dport = 53, .n_ext = 9, .ext = { HBH, DO, DO, DO, DO, DO, DO, DO, DO }) }, 0, -1,
	  0, 0, 0 },
	{ "IPv6 header cut short", { V6(.proto = UDP, .dport = 53, .len = 14 + 39) }, 0, -1, 0,
	  0, 0 },
	{ "IPv6 header cut short, split in it", { V6(.proto = UDP, .dport = 53, .len = 14 + 30) },
	  20, -1, 0, 0, 0 },
	{ "extension header cut short", { V6(.proto = UDP, .dst6 = DB8(0x53, 0, 0, 1),
	  .dport = 53, .n_ext = 2, .ext = { HBH, DO }, .len = 14 + 40 + 8 + 7) }, 0, -1, 0, 0,
	  0 },
	{ "routing header reaching past the frame's end: ports 0 (v6udp)",
	  { V6(.proto = UDP, .dst6 = DB8(0x53, 0, 0, 1), .dport = 53, .n_ext = 1, .ext = { RT },
	       .len = 14 + 40 + 20) }, 0, C_V6UDP, 6, 0, 0 },
	{ "IP version 4 under the IPv6 ethertype",
	  { V6(.version = 4, .proto = UDP, .dport = 53) }, 0, -1, 0, 0, 0 },
	{ "v6 flow label 0x12345 (label)",
	  { V6(.proto = UDP, .src6 = DB8(1, 0, 0, 1), .dst6 = DB8(2, 0, 0, 1), .sport = 1,
	       .dport = 2, .flow = 0x12345) }, 0, C_LABEL, 6, 1, 2 },
	{ "v6 flow label 0x12346 (v6udp)",
	  { V6(.proto = UDP, .src6 = DB8(1, 0, 0, 1), .dst6 = DB8(2, 0, 0, 1), .sport = 1,
	       .dport = 2, .flow = 0x12346) }, 0, C_V6UDP, 6, 1, 2 },
	{ "v4 tagged vlan 200 pcp 5 (vlan)",
	  { VLAN(200, 5), .proto = UDP, .src = C, .dst = D, .sport = 1, .dport = 2 }, 0, C_VLAN,
	  4, 1, 2 },
	{ "v6 tagged vlan 200 pcp 5 (vlan)",
	  { VLAN(200, 5), V6(.proto = TCP, .src6 = DB8(1, 0, 0, 1), .sport = 1, .dport = 2) },
	  0, C_VLAN, 6, 1, 2 },
	{ "v4 tagged vlan 200 pcp 3 (pcp)",
	  { VLAN(200, 3), .proto = UDP, .src = C, .dst = D, .sport = 1, .dport = 2 }, 0, C_PCP,
	  4, 1, 2 },
	{ "v4 tagged vlan 201 pcp 5: neither vlan nor pcp (v4any)",
	  { VLAN(201, 5), .proto = UDP, .src = C, .dst = D, .sport = 1, .dport = 2 }, 0, C_V4ANY,
	  4, 1, 2 },
	{ "v4 tagged vlan 0 pcp 0 (v4any)",
	  { VLAN(0, 0), .proto = UDP, .src = C, .dst = D, .sport = 1, .dport = 2 }, 0, C_V4ANY,
	  4, 1, 2 },
	{ "v4 untagged (v4any)", { .proto = UDP, .src = C, .dst = D, .sport = 1, .dport = 2 }, 0,
	  C_V4ANY, 4, 1, 2 },
	{ "v4 tos 0xb8: dscp 46 (ef4)",
	  { .proto = UDP, .tos = 0xb8, .src = C, .dst = D, .sport = 1, .dport = 2 }, 0, C_EF4, 4,
	  1, 2 },
	{ "v4 tos 0xbb: dscp 46 whatever the ECN bits (ef4)",
	  { .proto = UDP, .tos = 0xbb, .src = C, .dst = D, .sport = 1, .dport = 2 }, 0, C_EF4, 4,
	  1, 2 },
	{ "v4 tos 0xb4: dscp 45 (v4any)",
	  { .proto = UDP, .tos = 0xb4, .src = C, .dst = D, .sport = 1, .dport = 2 }, 0, C_V4ANY,
	  4, 1, 2 },
	{ "v6 traffic class 0xb8: dscp 46 (ef)",
	  { V6(.proto = TCP, .tos = 0xb8, .src6 = DB8(1, 0, 0, 1), .sport = 1, .dport = 2) }, 0,
	  C_EF, 6, 1, 2 },
	{ "v6 traffic class 0xb8 with flow label 0xfffff (ef)",
	  { V6(.proto = TCP, .tos = 0xb8, .flow = 0xfffff, .src6 = DB8(1, 0, 0, 1), .sport = 1,
	       .dport = 2) }, 0, C_EF, 6, 1, 2 },
	{ "v6 icmpv6: no ports, no class", { V6(.proto = IPPROTO_ICMPV6, .src6 = DB8(1, 0, 0, 1),
	  .sport = 1, .dport = 2) }, 0, -1, 6, 0, 0 },
};

static void policy6(struct sn_policy_port *pp)
{
	static const char *const names[C_N] = { "net10", "v6web", "v6dns", "label", "vlan",
						"pcp", "ef4", "ef", "v6udp", "v4any" };
	struct sn_policy_match *m;

	memset(pp, 0, sizeof(*pp));
	pp->n_classes = C_N;
	for (unsigned i = 0; i < C_N; i++) {
		struct sn_policy_class *c = &pp->classes[i];

		snprintf(c->name, sizeof(c->name), "%s", names[i]);
		c->m.sport_hi = c->m.dport_hi = 65535;
		c->agg = -1;
	}
	m = &pp->classes[C_NET10].m;
	m->family = SN_POLICY_FAMILY_IPV4;
	m->src[0] = IP(10, 0, 0, 0);
	m->src_len = 8;
	m = &pp->classes[C_V6WEB].m;
	m->family = SN_POLICY_FAMILY_IPV6;
	m->src[0] = 0x20010db8;
	m->src_len = 32;
	m->proto = TCP;
	m->dport_lo = m->dport_hi = 80;
	pp->classes[C_V6WEB].rate_bps = 10000000;
	pp->classes[C_V6WEB].scope = SN_POLICY_SCOPE_FLOW;
	m = &pp->classes[C_V6DNS].m;
	m->family = SN_POLICY_FAMILY_IPV6;
	m->dst[0] = 0x20010db8;
	m->dst[1] = 0x00530000;
	m->dst_len = 48;
	m->proto = UDP;
	m->dport_lo = m->dport_hi = 53;
	m = &pp->classes[C_LABEL].m;
	m->family = SN_POLICY_FAMILY_IPV6;
	m->keys = SN_POLICY_M_FLOW_LABEL;
	m->flow_label = 0x12345;
	m = &pp->classes[C_VLAN].m;
	m->keys = SN_POLICY_M_VLAN | SN_POLICY_M_PCP;
	m->vlan = 200;
	m->pcp = 5;
	m = &pp->classes[C_PCP].m;
	m->keys = SN_POLICY_M_PCP;
	m->pcp = 3;
	m = &pp->classes[C_EF4].m;
	m->family = SN_POLICY_FAMILY_IPV4;
	m->keys = SN_POLICY_M_DSCP;
	m->dscp = 46;
	m = &pp->classes[C_EF].m;
	m->keys = SN_POLICY_M_DSCP;
	m->dscp = 46;
	m = &pp->classes[C_V6UDP].m;
	m->family = SN_POLICY_FAMILY_IPV6;
	m->proto = UDP;
	pp->classes[C_V4ANY].m.family = SN_POLICY_FAMILY_IPV4;
}

/* Every row of rows6 gets its class and 5-tuple; the v6web rows are one
 * flow (0-3, whatever the extension headers and the split) and two more
 * (4, 5), each with its own pacing state. */
static void test_match_keys(void)
{
	struct sn_classify *c = sn_classify_create(0, 64, 8, 1, 0);
	struct sn_tstamp *ts[RTE_DIM(rows6)] = { NULL };
	struct sn_classify_class_stats st;
	struct sn_policy_port pp;

	CHECK(c != NULL);
	if (!c)
		return;
	policy6(&pp);
	sn_classify_apply_port(c, SLOT6, &pp, true, NOW);
	for (unsigned i = 0; i < RTE_DIM(rows6); i++) {
		const struct row *r = &rows6[i];
		struct sn_classify_res res;
		unsigned len;
		int got;

		classify_at(c, SLOT6, r, &res, &len);
		got = res.cls == SN_CLASSIFY_NONE ? -1 : res.cls;
		if (got != r->cls) {
			fprintf(stderr, "%s: class %d, want %d\n", r->what, got, r->cls);
			CHECK(!"class as expected");
			continue;
		}
		CHECK(res.n == (r->cls == C_V6WEB ? 1u : 0u));
		if (r->cls == C_V6WEB)
			ts[i] = res.pol[0];
	}
	CHECK(ts[0] && ts[0] == ts[1] && ts[0] == ts[2] && ts[0] == ts[3]);
	CHECK(ts[4] && ts[5] && ts[4] != ts[0] && ts[5] != ts[0] && ts[4] != ts[5]);
	CHECK(sn_classify_class_stats(c, SLOT6, C_V6WEB, &st) == 0);
	CHECK(st.flows_created == 3 && st.offered_packets == 6);
	sn_classify_free(c);
}

static void test_no_classes(void)
{
	struct sn_classify *c = sn_classify_create(0, 16, 8, 1, 0);
	struct sn_classify_res res;
	unsigned len;

	CHECK(c != NULL);
	if (!c)
		return;
	sn_classify_apply_port(c, SLOT, NULL, true, NOW);
	classify(c, &rows[0], &res, &len);
	CHECK(res.cls == SN_CLASSIFY_NONE && res.n == 0);
	sn_classify_free(c);
}

int main(void)
{
	test_table();
	test_table_full();
	test_flow_quota();
	test_flow_reserve();
	test_flow_quota_auto();
	test_no_classes();
	test_match_keys();
	return sn_check_exit("test_classify");
}
