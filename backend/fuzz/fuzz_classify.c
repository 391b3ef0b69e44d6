/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_classify.c — libFuzzer target for the flow classifier
 * (sn_classify.h) on arbitrary frames against fuzzed small policies and
 * per-port flow-table quotas.
 *
 * Input: a flow-table size (2..17 entries, or 300: room for a flow of
 * every class uid of a slot, so a new class must purge one), a byte of
 * flow caps for port
 * slots 1..3 (2 bits each: none, 1, 2 or 4 entries), a policy of 0..4
 * classes for each of slots 1..3 (protocol, IPv4 or IPv6 source /
 * destination prefix, family, destination port range, VLAN ID, PCP,
 * DSCP, flow label, pacing rate, scope, horizon, each picked from a few
 * values so frames hit them), then records: a frame (Ethernet, an 802.1Q
 * tag or two with any TCI, IPv4 with options and any TOS / IPv6 with any
 * traffic class and flow label and a chain of up to 11 extension headers
 * / ARP / raw, TCP / UDP / ICMP / any protocol, IPv4 and IPv6
 * fragments, cut anywhere, split over one or two exactly sized mbuf
 * segments) sent from one of 4 slots (slot 0 has no classes), a time
 * step with an ageing tick, or a new policy applied to one of slots
 * 1..3.
 *
 * Checks, each aborting on violation: the class returned is the first
 * class whose match an independent model of the header rules
 * (sn_flowkey.h, sn_policy.h) says the frame matches, SN_CLASSIFY_NONE
 * for a slot without classes, malformed or non-IP frames; the result's
 * slot, clamp and policy count are consistent (a paced class appends
 * exactly one state, nothing else is appended without aggregates); the
 * class and the flow hash do not depend on how the frame is split; a
 * flow seen again before it can age gets the same pacing state, and a
 * frame of a full table gets the class's shared state (counted in
 * flow_table_full); the flow table never holds more entries than its
 * capacity and every class's flows_active = created - aged, their sum =
 * the table's count; offered packets and bytes add up per class;
 * renumbering after a policy change names a class of the new policy or
 * none. Flow quota (doc/isolation.md): a port never holds more entries
 * than its cap; a new flow (a lookup the fake table misses) of a port at
 * its cap, or above its reserve (sn_classify_flows_reserve) while the
 * shared entries are all taken and another slot's reserve is free, gets
 * no entry, is paced by its class's shared state and is counted once in
 * quota_flows (not in flow_table_full), any other new flow gets an
 * entry unless the table is full; a frame of one port never
 * changes another port's entries; the ports' entries add up to the
 * table's, also after a new class purged a gone class's entries; every
 * entry is given back once all flows are idle past the ageing time.
 *
 * EAL-free like daemon/tests/test_classify.c: the classifier's memory
 * and its flow table (rte_hash) are the fakes of
 * daemon/tests/sn_fake_classify.c, which also count the lookups that
 * miss.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include "sn_classify.h"

#include "../daemon/tests/sn_fake_classify.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_classify: " __VA_ARGS__); abort(); } while (0)

/* Entries in use in the classifier's flow table. */
static uint32_t entries(void)
{
	return sn_fake_classify_entries(sn_fake_classify_table());
}

/* ---- Input cursor. ---- */

struct cur {
	const uint8_t *p;
	size_t n;
};

static uint8_t u8(struct cur *c)
{
	if (!c->n)
		return 0;
	c->n--;
	return *c->p++;
}

static uint16_t u16(struct cur *c)
{
	return (uint16_t)(u8(c) << 8 | u8(c));
}

/* ---- The policy. ---- */

#define NSLOTS 4   /* slot 0 never gets classes */
#define MAXCLS 4

static const uint32_t srcs[][2] = {   /* address, prefix length */
	{ 0, 0 }, { 0x0a000000, 8 }, { 0x0a010000, 16 }, { 0xc0a80001, 32 },
};
static const uint32_t srcs6[][5] = {   /* address words, prefix length */
	{ 0, 0, 0, 0, 0 }, { 0x20010db8, 0, 0, 0, 32 }, { 0x20010db8, 1, 0, 0, 64 },
	{ 0x20010db8, 0, 0, 1, 128 },
};
static const uint16_t dports[][2] = { { 0, 65535 }, { 80, 80 }, { 1024, 65535 }, { 53, 53 } };
static const uint8_t protos[] = { 0, 6, 17, 1 };
static const uint16_t vlans[] = { 0, 100, 200, 4095 };
static const uint8_t pcps[] = { 0, 3, 5, 7 };
static const uint8_t dscps[] = { 0, 46, 10, 63 };
static const uint32_t labels[] = { 0, 0x12345, 0xfffff, 1 };

static void set_v6(uint32_t w[4], uint8_t *len, const uint32_t p[5])
{
	memcpy(w, p, 4 * sizeof(w[0]));
	*len = (uint8_t)p[4];
}

static void to_v6(struct sn_policy_match *m)
{
	memset(m->src, 0, sizeof(m->src));
	memset(m->dst, 0, sizeof(m->dst));
	m->src_len = m->dst_len = 0;
	m->family = SN_POLICY_FAMILY_IPV6;
}

/* The keys beyond the 5-tuple of a class (b bits 2-4; 0: none), with a
 * byte of values. As the parser gives them: a flow label, an IPv6
 * prefix or family "ipv6" never with an IPv4 prefix. */
static void build_extra(struct cur *c, struct sn_policy_match *m, uint8_t a, unsigned e)
{
	uint8_t d;

	if (!e)
		return;
	d = u8(c);
	switch (e) {
	case 1:
		to_v6(m);
		set_v6(m->src, &m->src_len, srcs6[a >> 2 & 3]);
		break;
	case 2:
		if (d & 1)
			to_v6(m);
		else
			m->family = SN_POLICY_FAMILY_IPV4;
		break;
	case 3:
		m->keys |= SN_POLICY_M_VLAN;
		m->vlan = vlans[d & 3];
		if (d & 4) {
			m->keys |= SN_POLICY_M_PCP;
			m->pcp = pcps[d >> 3 & 3];
		}
		break;
	case 4:
		m->keys |= SN_POLICY_M_PCP;
		m->pcp = pcps[d & 3];
		break;
	case 5:
		m->keys |= SN_POLICY_M_DSCP;
		m->dscp = dscps[d & 3];
		if (d & 4)
			to_v6(m);
		break;
	case 6:
		to_v6(m);
		m->keys |= SN_POLICY_M_FLOW_LABEL;
		m->flow_label = labels[d & 3];
		break;
	default:
		to_v6(m);
		set_v6(m->dst, &m->dst_len, srcs6[d & 3]);
		m->keys |= SN_POLICY_M_DSCP;
		m->dscp = dscps[d >> 2 & 3];
		break;
	}
}

static void build_policy(struct cur *c, struct sn_policy_port *pp, uint16_t slot)
{
	memset(pp, 0, sizeof(*pp));
	snprintf(pp->name, sizeof(pp->name), "vm%u", slot);
	pp->weight = 1;
	pp->n_classes = u8(c) % (MAXCLS + 1);
	for (unsigned i = 0; i < pp->n_classes; i++) {
		struct sn_policy_class *cl = &pp->classes[i];
		uint8_t a = u8(c), b = u8(c);

		snprintf(cl->name, sizeof(cl->name), "c%u", b >> 5);   /* may repeat: renames */
		for (unsigned k = 0; k < i; k++)
			if (!strcmp(pp->classes[k].name, cl->name))
				snprintf(cl->name, sizeof(cl->name), "d%u", i);
		cl->m.proto = protos[a & 3];
		cl->m.src[0] = srcs[a >> 2 & 3][0];
		cl->m.src_len = (uint8_t)srcs[a >> 2 & 3][1];
		if (cl->m.src_len)
			cl->m.family = SN_POLICY_FAMILY_IPV4;
		build_extra(c, &cl->m, a, b >> 2 & 7);
		if (cl->m.proto == 6 || cl->m.proto == 17) {
			cl->m.dport_lo = dports[a >> 4 & 3][0];
			cl->m.dport_hi = dports[a >> 4 & 3][1];
		} else {
			cl->m.dport_hi = 65535;
		}
		cl->m.sport_hi = 65535;
		cl->rate_bps = a & 0x40 ? 1000000 : 0;
		cl->burst_bytes = 3000;
		cl->scope = b & 1 ? SN_POLICY_SCOPE_CLASS : SN_POLICY_SCOPE_FLOW;
		cl->horizon = b & 2 ? SN_POLICY_HORIZON_CLAMP : SN_POLICY_HORIZON_DROP;
		cl->agg = -1;
	}
}

/* ---- Frames and the model of the header rules. ---- */

#define FRAME_MAX 400

/* The 5-tuple (a flow's identity: compared with memcmp, no padding). */
struct tuple {
	uint32_t src[4], dst[4];
	uint16_t sport, dport;
	uint8_t proto, family;
	uint8_t pad_[2];
};

/* What a class may match beyond it. */
struct extra {
	bool tagged;
	uint16_t vlan;
	uint8_t pcp, dscp;
	uint32_t flow_label;
};

static const uint8_t exts[] = { 0, 43, 44, 60 };   /* IPv6 extension headers */

/* An IPv6 header and extension chain at f + off (room up to FRAME_MAX):
 * version (mostly 6), traffic class, flow label, addresses from srcs6,
 * up to 11 extension headers (a routing header 8..32 bytes, a fragment
 * header with a first or a later offset), then the upper-layer protocol.
 * Returns the offset of the upper-layer header. */
static unsigned build_ipv6(struct cur *c, uint8_t *f, unsigned off, uint8_t l)
{
	uint8_t v = u8(c), e = u8(c), *nh = f + off + 6;
	uint8_t tc = (uint8_t)(dscps[v & 3] << 2 | (v >> 2 & 3));
	uint32_t fl = v & 0x10 ? labels[v >> 5 & 3] : (uint32_t)u8(c) << 12 | u8(c);
	const uint32_t *a = srcs6[l >> 2 & 3];
	unsigned n = e & 0x80 ? 0 : e % 12;

	f[off] = (uint8_t)((v & 0x40 && v & 0x80 ? 4 : 6) << 4 | tc >> 4);
	f[off + 1] = (uint8_t)((tc & 15) << 4 | (fl >> 16 & 15));
	f[off + 2] = (uint8_t)(fl >> 8);
	f[off + 3] = (uint8_t)fl;
	f[off + 7] = 64;
	for (unsigned w = 0; w < 4; w++)
		for (unsigned b = 0; b < 4; b++) {
			f[off + 8 + 4 * w + b] = (uint8_t)(a[w] >> (24 - 8 * b));
			f[off + 24 + 4 * w + b] = (uint8_t)(srcs6[(l >> 4) & 3][w] >> (24 - 8 * b));
		}
	f[off + 23] |= u8(c) & 3;
	off += 40;
	for (unsigned i = 0; i < n; i++) {
		uint8_t x = u8(c), type = exts[x & 3];
		unsigned hl = type == 43 ? 8u * (1 + (x >> 2 & 3)) : 8;

		if (off + hl + 4 > FRAME_MAX)
			break;
		*nh = type;
		nh = f + off;
		if (type == 44) {
			f[off + 2] = x & 0x10 ? u8(c) : 0;
			f[off + 3] = (uint8_t)(x & 0x20 ? u8(c) : 1);   /* M only: first */
		} else {
			f[off + 1] = (uint8_t)(hl / 8 - 1);
		}
		off += hl;
	}
	*nh = protos[l & 3] ? protos[l & 3] : u8(c);
	return off;
}

static unsigned build_frame(struct cur *c, uint8_t *f)
{
	uint8_t k = u8(c), l = u8(c);
	unsigned off = 12, tags = k & 3, n;

	memset(f, 0, FRAME_MAX);
	for (unsigned i = 0; i < 12; i++)
		f[i] = (uint8_t)(0x52 + i);
	for (unsigned t = 0; t < (tags == 3 ? 2u : tags == 2 ? 1u : 0u); t++) {
		f[off] = 0x81;
		f[off + 2] = u8(c);       /* PCP, DEI, VLAN ID */
		f[off + 3] = u8(c);
		off += 4;
	}
	switch (k >> 2 & 3) {
	case 0: case 1: {       /* IPv4 */
		static const uint8_t vihl[] = { 0x45, 0x46, 0x47, 0x44, 0x65, 0x4f };
		uint8_t v = (k >> 4 & 7) < 6 ? vihl[k >> 4 & 7] : u8(c);
		unsigned ihl;

		f[off] = 0x08;
		f[off + 1] = 0x00;
		off += 2;
		f[off] = v;
		f[off + 1] = u8(c);       /* DSCP, ECN */
		ihl = (v & 15) * 4u;
		f[off + 6] = k & 0x80 ? (u8(c) & 0x3f) : 0;   /* MF / fragment offset */
		f[off + 7] = k & 0x80 ? u8(c) : 0;
		f[off + 9] = protos[l & 3] ? protos[l & 3] : u8(c);
		memcpy(f + off + 12, &(uint32_t){ rte_cpu_to_be_32(srcs[l >> 2 & 3][0] | u8(c)) }, 4);
		memcpy(f + off + 16, &(uint32_t){ rte_cpu_to_be_32(0xc0a80002) }, 4);
		off += ihl < 20 ? 20 : ihl;
		if (off + 4 <= FRAME_MAX) {
			uint16_t sp = u16(c), dp = dports[l >> 4 & 3][0] + (l & 0x40 ? u8(c) : 0);

			f[off] = (uint8_t)(sp >> 8);
			f[off + 1] = (uint8_t)sp;
			f[off + 2] = (uint8_t)(dp >> 8);
			f[off + 3] = (uint8_t)dp;
		}
		off += 20;
		break;
	}
	case 2:                 /* IPv6 or ARP */
		f[off] = k & 0x10 ? 0x86 : 0x08;
		f[off + 1] = k & 0x10 ? 0xdd : 0x06;
		off += 2;
		if (!(k & 0x10)) {
			f[off] = 0x60;
			off += 40;
			break;
		}
		off = build_ipv6(c, f, off, l);
		if (off + 4 <= FRAME_MAX) {
			uint16_t sp = u16(c), dp = dports[l >> 4 & 3][0] + (l & 0x40 ? u8(c) : 0);

			f[off] = (uint8_t)(sp >> 8);
			f[off + 1] = (uint8_t)sp;
			f[off + 2] = (uint8_t)(dp >> 8);
			f[off + 3] = (uint8_t)dp;
		}
		off += 20;
		break;
	default:                /* raw bytes after the addresses */
		n = u8(c) % 48;
		for (unsigned i = 0; i < n && off < FRAME_MAX; i++)
			f[off++] = u8(c);
		break;
	}
	if (off > FRAME_MAX)
		off = FRAME_MAX;
	/* Cut: keep it whole or cut at any length up to it. */
	if (l & 0x80)
		off = u8(c) % (off + 1);
	return off;
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The classifier's rules (sn_flowkey.h) on contiguous bytes. IPv6:
 * version 6, at most 8 extension headers (0, 43, 60: (byte 1 + 1) * 8
 * bytes; 44: 8 bytes, a later fragment if its offset is not 0), each
 * whole 8 first bytes in the frame. Returns the upper-layer header's
 * offset, 0: not classifiable. */
static unsigned model_ipv6(const uint8_t *f, unsigned len, unsigned off, struct tuple *t,
			   struct extra *x, bool *later)
{
	unsigned n = 0;
	uint8_t nh;

	if (len < off + 40 || f[off] >> 4 != 6)
		return 0;
	t->family = 6;
	x->dscp = (uint8_t)((f[off] & 15) << 2 | f[off + 1] >> 6);
	x->flow_label = rd32(f + off) & 0xfffff;
	for (unsigned w = 0; w < 4; w++) {
		t->src[w] = rd32(f + off + 8 + 4 * w);
		t->dst[w] = rd32(f + off + 24 + 4 * w);
	}
	nh = f[off + 6];
	off += 40;
	while (nh == 0 || nh == 43 || nh == 44 || nh == 60) {
		unsigned hl;

		if (++n > 8 || len < off + 8)
			return 0;
		if (nh == 44) {
			*later |= (rd16(f + off + 2) >> 3) != 0;
			hl = 8;
		} else {
			hl = (f[off + 1] + 1u) * 8;
		}
		nh = f[off];
		off += hl;
	}
	t->proto = nh;
	return off;
}

/* IPv4 (version 4, ihl >= 5) or IPv6 after one 802.1Q tag at most;
 * ports of TCP/UDP read only in a non-fragment or first fragment and
 * when the 4 bytes are in the frame, else 0. False: not classifiable. */
static bool model_tuple(const uint8_t *f, unsigned len, struct tuple *t, struct extra *x)
{
	unsigned off = 14, l4;
	bool later = false;
	uint16_t type;

	memset(t, 0, sizeof(*t));
	memset(x, 0, sizeof(*x));
	if (len < 14)
		return false;
	type = rd16(f + 12);
	if (type == 0x8100) {
		if (len < 18)
			return false;
		x->tagged = true;
		x->vlan = rd16(f + 14) & 0xfff;
		x->pcp = f[14] >> 5;
		type = rd16(f + 16);
		off = 18;
	}
	if (type == 0x86dd) {
		l4 = model_ipv6(f, len, off, t, x, &later);
		if (!l4)
			return false;
	} else {
		if (type != 0x0800 || len < off + 20 || f[off] >> 4 != 4 || (f[off] & 15) < 5)
			return false;
		t->family = 4;
		x->dscp = f[off + 1] >> 2;
		t->proto = f[off + 9];
		t->src[0] = rd32(f + off + 12);
		t->dst[0] = rd32(f + off + 16);
		later = (rd16(f + off + 6) & 0x1fff) != 0;
		l4 = off + (f[off] & 15) * 4u;
	}
	if ((t->proto == 6 || t->proto == 17) && !later && len >= l4 + 4) {
		t->sport = rd16(f + l4);
		t->dport = rd16(f + l4 + 2);
	}
	return true;
}

static bool model_prefix(const uint32_t *a, const uint32_t *p, unsigned len)
{
	for (unsigned w = 0; w < 4; w++) {
		unsigned keep = len > 32 * w ? len - 32 * w : 0;
		uint32_t mask = keep >= 32 ? ~0u : keep ? ~0u << (32 - keep) : 0;

		if ((a[w] & mask) != p[w])
			return false;
	}
	return true;
}

static bool model_match(const struct sn_policy_match *m, const struct tuple *t,
			const struct extra *x)
{
	if (m->family && m->family != t->family)
		return false;
	if (m->keys & SN_POLICY_M_VLAN && (!x->tagged || x->vlan != m->vlan))
		return false;
	if (m->keys & SN_POLICY_M_PCP && (!x->tagged || x->pcp != m->pcp))
		return false;
	if (m->keys & SN_POLICY_M_DSCP && x->dscp != m->dscp)
		return false;
	if (m->keys & SN_POLICY_M_FLOW_LABEL && (t->family != 6 || x->flow_label != m->flow_label))
		return false;
	return (m->proto == 0 || m->proto == t->proto) && model_prefix(t->src, m->src, m->src_len) &&
	       model_prefix(t->dst, m->dst, m->dst_len) && t->sport >= m->sport_lo &&
	       t->sport <= m->sport_hi && t->dport >= m->dport_lo && t->dport <= m->dport_hi;
}

/* A frame in one or two exactly sized segments (ASan sees overreads). */
struct pkt {
	struct rte_mbuf m[2];
	uint8_t *seg[2];
};

static void wrap(struct pkt *p, const uint8_t *f, unsigned len, unsigned split)
{
	unsigned l0 = split && split < len ? split : len;

	memset(p->m, 0, sizeof(p->m));
	for (unsigned i = 0; i < 2; i++) {
		unsigned sl = i == 0 ? l0 : len - l0;

		p->seg[i] = malloc(sl ? sl : 1);
		if (!p->seg[i])
			abort();
		memcpy(p->seg[i], f + (i ? l0 : 0), sl);
		p->m[i].buf_addr = p->seg[i];
		p->m[i].buf_len = (uint16_t)sl;
		p->m[i].data_len = (uint16_t)sl;
		p->m[i].nb_segs = 1;
		p->m[i].refcnt = 1;
	}
	p->m[0].pkt_len = len;
	if (l0 < len) {
		p->m[1].pkt_len = len - l0;
		p->m[0].next = &p->m[1];
		p->m[0].nb_segs = 2;
	}
}

static void unwrap(struct pkt *p)
{
	free(p->seg[0]);
	free(p->seg[1]);
}

/* ---- The model of flow states seen (their pacing state pointers). ---- */

#define MFLOWS 64

struct mflow {
	struct tuple t;
	uint8_t cls;
	const struct sn_tstamp *ts;
	uint64_t last;             /* its last frame */
};

/* The model of one port slot. */
struct pstate {
	struct sn_policy_port pp;
	uint32_t cap;              /* its flow quota, 0 = none */
	uint64_t refused;          /* new flows refused at the cap since it took the slot */
	struct mflow fl[MFLOWS];
	unsigned nfl;
	const struct sn_tstamp *class_ts[MAXCLS];   /* shared state seen per class */
	uint64_t offered[MAXCLS], bytes[MAXCLS];
};

struct state {
	struct sn_classify *c;
	uint32_t max_flows;
	uint32_t rsv;              /* each slot's reserve of entries */
	uint32_t shared;           /* max_flows less every slot's reserve */
	struct pstate ps[NSLOTS];
};

static const uint32_t caps[] = { 0, 1, 2, 4 };

static uint64_t class_stat_sum(struct state *s, uint16_t slot, size_t field)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < s->ps[slot].pp.n_classes; i++) {
		struct sn_classify_class_stats st;

		if (sn_classify_class_stats(s->c, slot, i, &st))
			FAIL("no stats for class %u of slot %u\n", i, slot);
		sum += *(const uint64_t *)((const char *)&st + field);
	}
	return sum;
}

static void check_stats(struct state *s)
{
	uint64_t active = 0, held = 0;

	for (uint16_t slot = 0; slot < NSLOTS; slot++) {
		struct pstate *ps = &s->ps[slot];
		uint64_t slot_active = 0;
		uint32_t pf = sn_classify_port_flows(s->c, slot);

		for (unsigned i = 0; i < ps->pp.n_classes; i++) {
			struct sn_classify_class_stats st;

			if (sn_classify_class_stats(s->c, slot, i, &st))
				FAIL("no stats for class %u of %u\n", i, ps->pp.n_classes);
			if (st.flows_active != st.flows_created - st.flows_aged)
				FAIL("slot %u class %u: flows_active %llu, created %llu - aged %llu\n",
				     slot, i, (unsigned long long)st.flows_active,
				     (unsigned long long)st.flows_created,
				     (unsigned long long)st.flows_aged);
			if (st.offered_packets != ps->offered[i] || st.offered_bytes != ps->bytes[i])
				FAIL("slot %u class %u: offered %llu/%llu, model %llu/%llu\n", slot, i,
				     (unsigned long long)st.offered_packets,
				     (unsigned long long)st.offered_bytes,
				     (unsigned long long)ps->offered[i], (unsigned long long)ps->bytes[i]);
			slot_active += st.flows_active;
		}
		if (sn_classify_class_stats(s->c, slot, ps->pp.n_classes,
					    &(struct sn_classify_class_stats){ 0 }) != -ENOENT)
			FAIL("stats of class %u of %u\n", ps->pp.n_classes, ps->pp.n_classes);
		/* Entries of a class that went away stay until they age:
		 * a port holds at least its classes' active flows. */
		if (ps->cap && pf > ps->cap)
			FAIL("slot %u holds %u flow entries, its cap is %u\n", slot, pf, ps->cap);
		if (slot_active > pf)
			FAIL("slot %u: %llu flows active, %u entries held\n", slot,
			     (unsigned long long)slot_active, pf);
		if (sn_classify_quota_flows(s->c, slot) != ps->refused)
			FAIL("slot %u: quota_flows %llu, %llu new flows refused at the cap\n", slot,
			     (unsigned long long)sn_classify_quota_flows(s->c, slot),
			     (unsigned long long)ps->refused);
		active += slot_active;
		held += pf;
	}
	if (held != entries())
		FAIL("ports hold %llu flow entries, the table %u\n", (unsigned long long)held,
		     entries());
	if (active > s->max_flows || entries() > s->max_flows || active > entries())
		FAIL("%llu flows active, %u in the table of %u\n", (unsigned long long)active,
		     entries(), s->max_flows);
}

static void apply(struct state *s, struct cur *c, uint16_t slot, uint64_t now, bool fresh)
{
	struct pstate *ps = &s->ps[slot];
	struct sn_policy_port old = ps->pp;
	uint32_t changed;

	build_policy(c, &ps->pp, slot);
	changed = sn_classify_apply_port(s->c, slot, &ps->pp, fresh, now);
	if (ps->pp.n_classes < 32 && (changed >> ps->pp.n_classes))
		FAIL("apply returned changed classes %#x of %u\n", changed, ps->pp.n_classes);
	for (unsigned i = 0; i < old.n_classes; i++) {
		uint8_t r = sn_classify_renumber(s->c, slot, (uint8_t)i);

		if (r != SN_CLASSIFY_NONE && r >= ps->pp.n_classes)
			FAIL("renumber %u -> %u of %u classes\n", i, r, ps->pp.n_classes);
		if (r != SN_CLASSIFY_NONE && strcmp(ps->pp.classes[r].name, old.classes[i].name))
			FAIL("renumber %u (%s) -> %u (%s)\n", i, old.classes[i].name, r,
			     ps->pp.classes[r].name);
	}
	/* Counters follow the class (kept by name) or restart: reread them. */
	for (unsigned i = 0; i < ps->pp.n_classes; i++) {
		struct sn_classify_class_stats st;

		if (sn_classify_class_stats(s->c, slot, i, &st))
			FAIL("no stats for class %u after apply\n", i);
		ps->offered[i] = st.offered_packets;
		ps->bytes[i] = st.offered_bytes;
	}
	if (fresh)
		ps->refused = 0;   /* another port took the slot */
	ps->nfl = 0;
	memset(ps->class_ts, 0, sizeof(ps->class_ts));
}

/* The flow quota around one classification of a frame of a flow-scoped
 * paced class (flow = true) or of anything else: the fake table's missed
 * lookups say whether the classifier saw a new flow. Returns the new
 * flows refused at the cap (0 or 1). */
static unsigned check_quota(struct state *s, uint16_t slot, const uint32_t pf[NSLOTS],
			    uint64_t misses, uint64_t quota, uint64_t created, uint64_t full,
			    bool flow, int cls)
{
	const struct pstate *ps = &s->ps[slot];
	bool new_flow = sn_fake_classify_misses() - misses == 1;
	uint64_t excess = 0, held = 0;
	bool at_cap;

	/* At its cap, or above its reserve with every shared entry taken by
	 * the slots above theirs and a free entry left (another slot's
	 * reserve; none left: the table is full). */
	for (uint16_t o = 0; o < NSLOTS; o++) {
		excess += pf[o] > s->rsv ? pf[o] - s->rsv : 0;
		held += pf[o];
	}
	at_cap = (ps->cap && pf[slot] >= ps->cap) ||
		 (pf[slot] >= s->rsv && excess >= s->shared && held < s->max_flows);
	uint64_t refused = sn_classify_quota_flows(s->c, slot) - quota;
	uint64_t created_now = 0, full_now = 0;
	uint32_t pf_now = sn_classify_port_flows(s->c, slot);

	for (uint16_t o = 0; o < NSLOTS; o++)
		if (o != slot && sn_classify_port_flows(s->c, o) != pf[o])
			FAIL("a frame of slot %u (%u/%u entries) changed slot %u's entries %u -> %u\n",
			     slot, pf[slot], ps->cap, o, pf[o], sn_classify_port_flows(s->c, o));
	if (cls >= 0) {
		created_now = class_stat_sum(s, slot, offsetof(struct sn_classify_class_stats,
							       flows_created));
		full_now = class_stat_sum(s, slot, offsetof(struct sn_classify_class_stats,
							    flow_table_full));
	}
	if (!flow || !new_flow) {
		if (refused || pf_now != pf[slot] || created_now != created)
			FAIL("slot %u: a known or unpaced flow: %llu refused, entries %u -> %u\n",
			     slot, (unsigned long long)refused, pf[slot], pf_now);
		if (sn_fake_classify_misses() - misses > (flow ? 1u : 0u))
			FAIL("slot %u: %llu flow lookups missed for one frame\n", slot,
			     (unsigned long long)(sn_fake_classify_misses() - misses));
		return 0;
	}
	if (at_cap) {
		if (refused != 1 || pf_now != pf[slot] || created_now != created || full_now != full)
			FAIL("slot %u at its cap %u: new flow, %llu refused, entries %u -> %u, "
			     "created +%llu, table full +%llu\n", slot, ps->cap,
			     (unsigned long long)refused, pf[slot], pf_now,
			     (unsigned long long)(created_now - created),
			     (unsigned long long)(full_now - full));
		return 1;
	}
	if (refused)
		FAIL("slot %u below its cap (%u of %u): a new flow counted in quota_flows\n", slot,
		     pf[slot], ps->cap);
	if (full_now == full && (pf_now != pf[slot] + 1 || created_now != created + 1))
		FAIL("slot %u: new flow with room, entries %u -> %u, created +%llu\n", slot,
		     pf[slot], pf_now, (unsigned long long)(created_now - created));
	if (full_now != full && (full_now != full + 1 || pf_now != pf[slot] || entries() < s->max_flows))
		FAIL("slot %u: table full counted with %u of %u entries used\n", slot,
		     entries(), s->max_flows);
	return 0;
}

static void frame(struct state *s, struct cur *c, uint64_t now)
{
	uint8_t f[FRAME_MAX], sel = u8(c);
	uint16_t slot = (uint16_t)(sel & 3);
	struct pstate *ps = &s->ps[slot];
	unsigned len = build_frame(c, f), split = u8(c) % (len + 1);
	struct tuple t;
	struct extra x;
	bool ok = model_tuple(f, len, &t, &x), flow = false;
	int want = -1;
	struct sn_classify_res r1, r2;
	struct pkt p1, p2;
	uint32_t h1, h2, pf[NSLOTS];
	uint64_t full_before = 0, misses, quota, created = 0, full = 0;
	unsigned refused, again;

	if (ok)
		for (unsigned i = 0; i < ps->pp.n_classes && want < 0; i++)
			if (model_match(&ps->pp.classes[i].m, &t, &x))
				want = (int)i;
	if (want >= 0) {
		struct sn_classify_class_stats st;

		sn_classify_class_stats(s->c, slot, (unsigned)want, &st);
		full_before = st.flow_table_full;
		flow = ps->pp.classes[want].rate_bps && ps->pp.classes[want].scope == SN_POLICY_SCOPE_FLOW;
		created = class_stat_sum(s, slot, offsetof(struct sn_classify_class_stats, flows_created));
		full = class_stat_sum(s, slot, offsetof(struct sn_classify_class_stats, flow_table_full));
	}
	for (uint16_t o = 0; o < NSLOTS; o++)
		pf[o] = sn_classify_port_flows(s->c, o);
	misses = sn_fake_classify_misses();
	quota = sn_classify_quota_flows(s->c, slot);
	wrap(&p1, f, len, split);
	wrap(&p2, f, len, 0);
	memset(&r1, 0, sizeof(r1));
	r1.n = sel >> 7;   /* a port limit may be there already */
	r2 = r1;
	sn_classify_frame(s->c, slot, &p1.m[0], now, &r1);
	refused = check_quota(s, slot, pf, misses, quota, created, full, flow, want);
	ps->refused += refused;
	h1 = sn_classify_flow_hash(&p1.m[0]);
	h2 = sn_classify_flow_hash(&p2.m[0]);
	if (h1 != h2)
		FAIL("flow hash %#x split at %u, %#x whole\n", h1, split, h2);
	if (r1.slot != slot || r1.agg)
		FAIL("result slot %u agg %d for slot %u\n", r1.slot, r1.agg, slot);
	if ((want < 0 && r1.cls != SN_CLASSIFY_NONE) || (want >= 0 && r1.cls != want))
		FAIL("frame of %u bytes (split %u) on slot %u: class %u, model %d\n", len, split,
		     slot, r1.cls, want);
	if (want < 0) {
		if (r1.n != (unsigned)(sel >> 7) || r1.clamp)
			FAIL("unclassified frame: n %u clamp %d\n", r1.n, r1.clamp);
	} else {
		const struct sn_policy_class *cl = &ps->pp.classes[want];
		unsigned base = sel >> 7;
		const struct sn_tstamp *ts = r1.n > base ? r1.pol[base] : NULL;

		if (r1.clamp != (cl->horizon == SN_POLICY_HORIZON_CLAMP))
			FAIL("class %d clamp %d\n", want, r1.clamp);
		if (r1.n != base + (cl->rate_bps ? 1u : 0u) || (cl->rate_bps && !ts))
			FAIL("class %d (rate %llu): %u policies after %u\n", want,
			     (unsigned long long)cl->rate_bps, r1.n, base);
		ps->offered[want]++;
		ps->bytes[want] += len;
		if (ts && cl->scope == SN_POLICY_SCOPE_FLOW) {
			struct sn_classify_class_stats st;
			uint64_t active = 0;
			unsigned k;

			sn_classify_class_stats(s->c, slot, (unsigned)want, &st);
			for (unsigned i = 0; i < ps->pp.n_classes; i++) {
				struct sn_classify_class_stats o;

				sn_classify_class_stats(s->c, slot, i, &o);
				active += o.flows_active;
			}
			for (k = 0; k < ps->nfl; k++)
				if (ps->fl[k].cls == want && !memcmp(&ps->fl[k].t, &t, sizeof(t)))
					break;
			if (active > entries())
				FAIL("classes hold %llu flows, the table %u\n",
				     (unsigned long long)active, entries());
			if (st.flow_table_full > full_before || refused) {
				/* Table full or the port at its cap: paced by
				 * the class's shared state. */
				if (!refused && entries() < s->max_flows)
					FAIL("flow_table_full counted with %u of %u entries used\n",
					     entries(), s->max_flows);
				if (k < ps->nfl)
					FAIL("a flow in the table was refused an entry\n");
				if (ps->class_ts[want] && ps->class_ts[want] != ts)
					FAIL("class %d: shared state %p, earlier %p\n", want, (void *)ts,
					     (const void *)ps->class_ts[want]);
				ps->class_ts[want] = ts;
				for (k = 0; k < ps->nfl; k++)
					if (ps->fl[k].ts == ts)
						FAIL("a class's shared state is also a flow's\n");
				ts = NULL;
			} else if (k < ps->nfl) {
				if (ps->fl[k].ts != ts)
					FAIL("flow of class %d: state %p, earlier %p\n", want, (void *)ts,
					     (const void *)ps->fl[k].ts);
				ps->fl[k].last = now;
			} else {
				if (ts == ps->class_ts[want])
					FAIL("a new flow got the class's shared state without a full table\n");
				if (ps->nfl < MFLOWS)
					ps->fl[ps->nfl++] = (struct mflow){ t, (uint8_t)want, ts, now };
			}
		} else if (ts) {
			if (ps->class_ts[want] && ps->class_ts[want] != ts)
				FAIL("class %d: shared state %p, earlier %p\n", want, (void *)ts,
				     (const void *)ps->class_ts[want]);
			ps->class_ts[want] = ts;
			ts = NULL;
		}
		/* Per-flow states are distinct across flows. */
		for (unsigned k = 0; ts && k < ps->nfl; k++)
			if (ps->fl[k].ts == ts && (ps->fl[k].cls != want || memcmp(&ps->fl[k].t, &t, sizeof(t))))
				FAIL("two flows share one pacing state\n");
	}
	/* The same frame in one segment classifies the same (a second
	 * offered frame: counted; refused again if the first was). */
	for (uint16_t o = 0; o < NSLOTS; o++)
		pf[o] = sn_classify_port_flows(s->c, o);
	misses = sn_fake_classify_misses();
	quota = sn_classify_quota_flows(s->c, slot);
	if (want >= 0) {
		created = class_stat_sum(s, slot, offsetof(struct sn_classify_class_stats, flows_created));
		full = class_stat_sum(s, slot, offsetof(struct sn_classify_class_stats, flow_table_full));
	}
	sn_classify_frame(s->c, slot, &p2.m[0], now, &r2);
	again = check_quota(s, slot, pf, misses, quota, created, full, flow, want);
	if (again != refused)
		FAIL("whole frame: %u refused, split at %u: %u\n", again, split, refused);
	ps->refused += again;
	if (r2.cls != r1.cls || r2.n != r1.n || (r1.n && r1.pol[r1.n - 1] != r2.pol[r2.n - 1]))
		FAIL("whole frame: class %u n %u, split at %u: class %u n %u\n", r2.cls, r2.n, split,
		     r1.cls, r1.n);
	if (want >= 0) {
		ps->offered[want]++;
		ps->bytes[want] += len;
		sn_classify_accepted(s->c, &r1, false);
		sn_classify_released(s->c, slot, r1.cls, len);
	}
	unwrap(&p1);
	unwrap(&p2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct state s;
	static const struct sn_policy empty;
	struct cur c = { data, size };
	uint64_t now = 1000000000ull;
	unsigned burst;
	uint8_t cb;

	if (size < 3)
		return 0;
	memset(&s, 0, sizeof(s));
	cb = u8(&c);
	s.max_flows = cb >= 0xf0 ? 300 : cb % 16 + 2u;
	burst = 1u + (cb >> 4 & 3);
	s.rsv = sn_classify_flows_reserve(s.max_flows, NSLOTS, burst);
	s.shared = s.max_flows - NSLOTS * s.rsv;
	cb = u8(&c);
	s.c = sn_classify_create(0, s.max_flows, NSLOTS, burst, 0);
	if (!s.c)
		FAIL("create: %s\n", strerror(errno));
	sn_classify_apply_aggs(s.c, &empty, now);
	for (uint16_t slot = 1; slot < NSLOTS; slot++) {
		s.ps[slot].cap = caps[cb >> (2 * (slot - 1)) & 3];
		sn_classify_set_flow_quota(s.c, slot, s.ps[slot].cap);
		apply(&s, &c, slot, now, true);
	}
	while (c.n) {
		uint8_t op = u8(&c);

		if (op < 200) {
			frame(&s, &c, now);
		} else if (op < 240) {
			bool age = op & 1;

			now += age ? SN_CLASSIFY_AGE_NS + 1 : (uint64_t)u8(&c) * 1000000;
			sn_classify_tick(s.c, now, 100000000);
			if (age) {
				/* A sweep may start mid-table: a second tick
				 * covers the rest, and every entry is idle for
				 * longer than the ageing time: all given back. */
				sn_classify_tick(s.c, now, 100000000);
				for (uint16_t slot = 0; slot < NSLOTS; slot++)
					if (sn_classify_port_flows(s.c, slot))
						FAIL("slot %u holds %u entries after ageing\n", slot,
						     sn_classify_port_flows(s.c, slot));
				if (entries())
					FAIL("%u entries after ageing\n", entries());
			}
			/* Flows idle for half the ageing time may be aged
			 * by now: forget their states. */
			for (uint16_t slot = 0; slot < NSLOTS; slot++) {
				struct pstate *ps = &s.ps[slot];

				for (unsigned k = 0; k < ps->nfl;)
					if (now - ps->fl[k].last > SN_CLASSIFY_AGE_NS / 2)
						ps->fl[k] = ps->fl[--ps->nfl];
					else
						k++;
			}
		} else {
			apply(&s, &c, (uint16_t)(1 + (op >> 1 & 7) % (NSLOTS - 1)), now, op & 1);
		}
		check_stats(&s);
	}
	sn_classify_free(s.c);
	return 0;
}
