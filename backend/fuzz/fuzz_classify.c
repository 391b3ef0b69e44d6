/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_classify.c — libFuzzer target for the flow classifier
 * (sn_classify.h) on arbitrary frames against a fuzzed small policy.
 *
 * Input: a flow-table size (2..17 entries), a policy of 0..4 classes for
 * port slot 1 (protocol, source prefix, destination port range, pacing
 * rate, scope, horizon, each picked from a few values so frames hit
 * them), then records: a frame (Ethernet, an 802.1Q tag or two, IPv4 with
 * options / IPv6 / ARP / raw, TCP / UDP / ICMP / any protocol, fragments,
 * cut anywhere, split over one or two exactly sized mbuf segments) sent
 * from one of 4 slots, a time step with an ageing tick, or a new policy
 * applied to slot 1.
 *
 * Checks, each aborting on violation: the class returned is the first
 * class whose match an independent model of the 5-tuple rules
 * (sn_classify.h, sn_policy.h) says the frame matches, SN_CLASSIFY_NONE
 * for a slot without classes, malformed or non-IPv4 frames; the result's
 * slot, clamp and policy count are consistent (a paced class appends
 * exactly one state, nothing else is appended without aggregates); the
 * class and the flow hash do not depend on how the frame is split; a
 * flow seen again before it can age gets the same pacing state, and a
 * frame of a full table gets the class's shared state (counted in
 * flow_table_full); the flow table never holds more entries than its
 * capacity and every class's flows_active = created - aged, their sum =
 * the table's count; offered packets and bytes add up per class;
 * renumbering after a policy change names a class of the new policy or
 * none.
 *
 * EAL-free like tests/test_classify.c: the classifier's memory and its
 * flow table (rte_hash) are replaced by the fakes below, which this
 * executable's definitions take precedence over.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_hash.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "sn_classify.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_classify: " __VA_ARGS__); abort(); } while (0)

/* ---- Fakes: heap memory and a small linear flow table. ---- */

void *rte_zmalloc_socket(const char *type, size_t size, unsigned align, int socket)
{
	void *p;

	(void)type, (void)socket;
	if (posix_memalign(&p, align ? align : 64, size ? size : 1))
		return NULL;
	memset(p, 0, size);
	return p;
}

void rte_free(void *p)
{
	free(p);
}

#define FAKE_KEY_MAX 16

struct rte_hash {
	uint32_t n, key_len, count;
	uint8_t (*keys)[FAKE_KEY_MAX];
	uint8_t *used;
};

static struct rte_hash *g_hash;   /* the flow table of the current run */

struct rte_hash *rte_hash_create(const struct rte_hash_parameters *p)
{
	struct rte_hash *h = calloc(1, sizeof(*h));

	g_hash = h;
	if (!h || p->key_len > FAKE_KEY_MAX)
		abort();
	h->n = p->entries;
	h->key_len = p->key_len;
	h->keys = calloc(h->n, FAKE_KEY_MAX);
	h->used = calloc(h->n, 1);
	return h;
}

void rte_hash_free(struct rte_hash *h)
{
	if (!h)
		return;
	free(h->keys);
	free(h->used);
	free(h);
}

int32_t rte_hash_max_key_id(const struct rte_hash *h)
{
	return (int32_t)h->n - 1;
}

int32_t rte_hash_count(const struct rte_hash *h)
{
	return (int32_t)h->count;
}

int32_t rte_hash_lookup(const struct rte_hash *h, const void *key)
{
	for (uint32_t i = 0; i < h->n; i++)
		if (h->used[i] && !memcmp(h->keys[i], key, h->key_len))
			return (int32_t)i;
	return -ENOENT;
}

int32_t rte_hash_add_key(const struct rte_hash *hc, const void *key)
{
	struct rte_hash *h = (struct rte_hash *)hc;
	int32_t pos = rte_hash_lookup(h, key);

	if (pos >= 0)
		return pos;
	for (uint32_t i = 0; i < h->n; i++)
		if (!h->used[i]) {
			h->used[i] = 1;
			memcpy(h->keys[i], key, h->key_len);
			h->count++;
			return (int32_t)i;
		}
	return -ENOSPC;
}

int32_t rte_hash_del_key(const struct rte_hash *hc, const void *key)
{
	struct rte_hash *h = (struct rte_hash *)hc;
	int32_t pos = rte_hash_lookup(h, key);

	if (pos >= 0) {
		h->used[pos] = 0;
		h->count--;
	}
	return pos;
}

int32_t rte_hash_iterate(const struct rte_hash *h, const void **key, void **data, uint32_t *next)
{
	for (; *next < h->n; (*next)++)
		if (h->used[*next]) {
			*key = h->keys[*next];
			*data = NULL;
			return (int32_t)(*next)++;
		}
	return -ENOENT;
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

#define SLOT   1
#define NSLOTS 4
#define MAXCLS 4

static const uint32_t srcs[][2] = {   /* address, prefix length */
	{ 0, 0 }, { 0x0a000000, 8 }, { 0x0a010000, 16 }, { 0xc0a80001, 32 },
};
static const uint16_t dports[][2] = { { 0, 65535 }, { 80, 80 }, { 1024, 65535 }, { 53, 53 } };
static const uint8_t protos[] = { 0, 6, 17, 1 };

static void build_policy(struct cur *c, struct sn_policy_port *pp)
{
	memset(pp, 0, sizeof(*pp));
	snprintf(pp->name, sizeof(pp->name), "vm1");
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
		cl->m.src = srcs[a >> 2 & 3][0];
		cl->m.src_len = (uint8_t)srcs[a >> 2 & 3][1];
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

/* ---- Frames and the model of the 5-tuple rules. ---- */

#define FRAME_MAX 160

struct tuple {
	uint32_t src, dst;
	uint16_t sport, dport;
	uint8_t proto;
};

static unsigned build_frame(struct cur *c, uint8_t *f)
{
	uint8_t k = u8(c), l = u8(c);
	unsigned off = 12, tags = k & 3, n;

	memset(f, 0, FRAME_MAX);
	for (unsigned i = 0; i < 12; i++)
		f[i] = (uint8_t)(0x52 + i);
	for (unsigned t = 0; t < (tags == 3 ? 2u : tags == 2 ? 1u : 0u); t++) {
		f[off] = 0x81;
		f[off + 2] = 0;
		f[off + 3] = 100;
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
		f[off + 2] = 0x60;
		off += 42;
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

/* The classifier's 5-tuple rules on contiguous bytes: IPv4 (one 802.1Q
 * tag at most), version 4, ihl >= 5; ports of TCP/UDP read only in a
 * non-fragment or first fragment and when the 4 bytes are in the frame,
 * else 0. False: not classifiable. */
static bool model_tuple(const uint8_t *f, unsigned len, struct tuple *t)
{
	unsigned off = 14, ihl;
	uint16_t type;

	if (len < 14)
		return false;
	type = rd16(f + 12);
	if (type == 0x8100) {
		if (len < 18)
			return false;
		type = rd16(f + 16);
		off = 18;
	}
	if (type != 0x0800 || len < off + 20 || f[off] >> 4 != 4 || (f[off] & 15) < 5)
		return false;
	ihl = (f[off] & 15) * 4u;
	t->proto = f[off + 9];
	t->src = (uint32_t)f[off + 12] << 24 | (uint32_t)f[off + 13] << 16 | (uint32_t)f[off + 14] << 8 | f[off + 15];
	t->dst = (uint32_t)f[off + 16] << 24 | (uint32_t)f[off + 17] << 16 | (uint32_t)f[off + 18] << 8 | f[off + 19];
	t->sport = t->dport = 0;
	if ((t->proto == 6 || t->proto == 17) && !(rd16(f + off + 6) & 0x1fff) &&
	    len >= off + ihl + 4) {
		t->sport = rd16(f + off + ihl);
		t->dport = rd16(f + off + ihl + 2);
	}
	return true;
}

static bool model_match(const struct sn_policy_match *m, const struct tuple *t)
{
	uint32_t smask = m->src_len ? ~0u << (32 - m->src_len) : 0;
	uint32_t dmask = m->dst_len ? ~0u << (32 - m->dst_len) : 0;

	return (m->proto == 0 || m->proto == t->proto) && (t->src & smask) == m->src &&
	       (t->dst & dmask) == m->dst && t->sport >= m->sport_lo && t->sport <= m->sport_hi &&
	       t->dport >= m->dport_lo && t->dport <= m->dport_hi;
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

struct state {
	struct sn_classify *c;
	struct sn_policy_port pp;
	uint32_t max_flows;
	struct mflow fl[MFLOWS];
	unsigned nfl;
	const struct sn_tstamp *class_ts[MAXCLS];   /* shared state seen per class */
	uint64_t offered[MAXCLS], bytes[MAXCLS];
};

static void check_stats(struct state *s)
{
	uint64_t active = 0;

	for (unsigned i = 0; i < s->pp.n_classes; i++) {
		struct sn_classify_class_stats st;

		if (sn_classify_class_stats(s->c, SLOT, i, &st))
			FAIL("no stats for class %u of %u\n", i, s->pp.n_classes);
		if (st.flows_active != st.flows_created - st.flows_aged)
			FAIL("class %u: flows_active %llu, created %llu - aged %llu\n", i,
			     (unsigned long long)st.flows_active, (unsigned long long)st.flows_created,
			     (unsigned long long)st.flows_aged);
		if (st.offered_packets != s->offered[i] || st.offered_bytes != s->bytes[i])
			FAIL("class %u: offered %llu/%llu, model %llu/%llu\n", i,
			     (unsigned long long)st.offered_packets, (unsigned long long)st.offered_bytes,
			     (unsigned long long)s->offered[i], (unsigned long long)s->bytes[i]);
		active += st.flows_active;
	}
	if (sn_classify_class_stats(s->c, SLOT, s->pp.n_classes, &(struct sn_classify_class_stats){ 0 }) !=
	    -ENOENT)
		FAIL("stats of class %u of %u\n", s->pp.n_classes, s->pp.n_classes);
	if (active > s->max_flows || g_hash->count > s->max_flows || active > g_hash->count)
		FAIL("%llu flows active, %u in the table of %u\n", (unsigned long long)active,
		     g_hash->count, s->max_flows);
}

static void apply(struct state *s, struct cur *c, uint64_t now, bool fresh)
{
	struct sn_policy_port old = s->pp;
	uint32_t changed;

	build_policy(c, &s->pp);
	changed = sn_classify_apply_port(s->c, SLOT, &s->pp, fresh, now);
	if (s->pp.n_classes < 32 && (changed >> s->pp.n_classes))
		FAIL("apply returned changed classes %#x of %u\n", changed, s->pp.n_classes);
	for (unsigned i = 0; i < old.n_classes; i++) {
		uint8_t r = sn_classify_renumber(s->c, SLOT, (uint8_t)i);

		if (r != SN_CLASSIFY_NONE && r >= s->pp.n_classes)
			FAIL("renumber %u -> %u of %u classes\n", i, r, s->pp.n_classes);
		if (r != SN_CLASSIFY_NONE && strcmp(s->pp.classes[r].name, old.classes[i].name))
			FAIL("renumber %u (%s) -> %u (%s)\n", i, old.classes[i].name, r,
			     s->pp.classes[r].name);
	}
	/* Counters follow the class (kept by name) or restart: reread them. */
	for (unsigned i = 0; i < s->pp.n_classes; i++) {
		struct sn_classify_class_stats st;

		if (sn_classify_class_stats(s->c, SLOT, i, &st))
			FAIL("no stats for class %u after apply\n", i);
		s->offered[i] = st.offered_packets;
		s->bytes[i] = st.offered_bytes;
	}
	s->nfl = 0;
	memset(s->class_ts, 0, sizeof(s->class_ts));
}

static void frame(struct state *s, struct cur *c, uint64_t now)
{
	uint8_t f[FRAME_MAX], sel = u8(c);
	uint16_t slot = (uint16_t)(sel & 3);
	unsigned len = build_frame(c, f), split = u8(c) % (len + 1);
	struct tuple t;
	bool ok = model_tuple(f, len, &t);
	int want = -1;
	struct sn_classify_res r1, r2;
	struct pkt p1, p2;
	uint32_t h1, h2;
	uint64_t full_before = 0;

	if (ok && slot == SLOT)
		for (unsigned i = 0; i < s->pp.n_classes && want < 0; i++)
			if (model_match(&s->pp.classes[i].m, &t))
				want = (int)i;
	if (want >= 0) {
		struct sn_classify_class_stats st;

		sn_classify_class_stats(s->c, SLOT, (unsigned)want, &st);
		full_before = st.flow_table_full;
	}
	wrap(&p1, f, len, split);
	wrap(&p2, f, len, 0);
	memset(&r1, 0, sizeof(r1));
	r1.n = sel >> 7;   /* a port limit may be there already */
	r2 = r1;
	sn_classify_frame(s->c, slot, &p1.m[0], now, &r1);
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
		const struct sn_policy_class *cl = &s->pp.classes[want];
		unsigned base = sel >> 7;
		const struct sn_tstamp *ts = r1.n > base ? r1.pol[base] : NULL;

		if (r1.clamp != (cl->horizon == SN_POLICY_HORIZON_CLAMP))
			FAIL("class %d clamp %d\n", want, r1.clamp);
		if (r1.n != base + (cl->rate_bps ? 1u : 0u) || (cl->rate_bps && !ts))
			FAIL("class %d (rate %llu): %u policies after %u\n", want,
			     (unsigned long long)cl->rate_bps, r1.n, base);
		s->offered[want]++;
		s->bytes[want] += len;
		if (ts && cl->scope == SN_POLICY_SCOPE_FLOW) {
			struct sn_classify_class_stats st;
			uint64_t active = 0;
			unsigned k;

			sn_classify_class_stats(s->c, SLOT, (unsigned)want, &st);
			for (unsigned i = 0; i < s->pp.n_classes; i++) {
				struct sn_classify_class_stats o;

				sn_classify_class_stats(s->c, SLOT, i, &o);
				active += o.flows_active;
			}
			for (k = 0; k < s->nfl; k++)
				if (s->fl[k].cls == want && !memcmp(&s->fl[k].t, &t, sizeof(t)))
					break;
			if (active > g_hash->count)
				FAIL("classes hold %llu flows, the table %u\n",
				     (unsigned long long)active, g_hash->count);
			if (st.flow_table_full > full_before) {
				/* Table full: paced by the class's shared state. */
				if (g_hash->count < s->max_flows)
					FAIL("flow_table_full counted with %u of %u entries used\n",
					     g_hash->count, s->max_flows);
				if (k < s->nfl)
					FAIL("a flow in the table was counted as table full\n");
				if (s->class_ts[want] && s->class_ts[want] != ts)
					FAIL("class %d: shared state %p, earlier %p\n", want, (void *)ts,
					     (const void *)s->class_ts[want]);
				s->class_ts[want] = ts;
				for (k = 0; k < s->nfl; k++)
					if (s->fl[k].ts == ts)
						FAIL("a class's shared state is also a flow's\n");
				ts = NULL;
			} else if (k < s->nfl) {
				if (s->fl[k].ts != ts)
					FAIL("flow of class %d: state %p, earlier %p\n", want, (void *)ts,
					     (const void *)s->fl[k].ts);
				s->fl[k].last = now;
			} else {
				if (ts == s->class_ts[want])
					FAIL("a new flow got the class's shared state without a full table\n");
				if (s->nfl < MFLOWS)
					s->fl[s->nfl++] = (struct mflow){ t, (uint8_t)want, ts, now };
			}
		} else if (ts) {
			if (s->class_ts[want] && s->class_ts[want] != ts)
				FAIL("class %d: shared state %p, earlier %p\n", want, (void *)ts,
				     (const void *)s->class_ts[want]);
			s->class_ts[want] = ts;
			ts = NULL;
		}
		/* Per-flow states are distinct across flows. */
		for (unsigned k = 0; ts && k < s->nfl; k++)
			if (s->fl[k].ts == ts && (s->fl[k].cls != want || memcmp(&s->fl[k].t, &t, sizeof(t))))
				FAIL("two flows share one pacing state\n");
	}
	/* The same frame in one segment classifies the same (a second
	 * offered frame: counted). */
	sn_classify_frame(s->c, slot, &p2.m[0], now, &r2);
	if (r2.cls != r1.cls || r2.n != r1.n || (r1.n && r1.pol[r1.n - 1] != r2.pol[r2.n - 1]))
		FAIL("whole frame: class %u n %u, split at %u: class %u n %u\n", r2.cls, r2.n, split,
		     r1.cls, r1.n);
	if (want >= 0) {
		s->offered[want]++;
		s->bytes[want] += len;
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

	if (size < 2)
		return 0;
	memset(&s, 0, sizeof(s));
	s.max_flows = u8(&c) % 16 + 2;
	s.c = sn_classify_create(0, s.max_flows, NSLOTS, 0);
	if (!s.c)
		FAIL("create: %s\n", strerror(errno));
	sn_classify_apply_aggs(s.c, &empty, now);
	apply(&s, &c, now, true);
	while (c.n) {
		uint8_t op = u8(&c);

		if (op < 200) {
			frame(&s, &c, now);
		} else if (op < 240) {
			uint64_t step = op & 1 ? SN_CLASSIFY_AGE_NS + 1 : (uint64_t)u8(&c) * 1000000;

			now += step;
			sn_classify_tick(s.c, now, 100000000);
			/* Flows idle for half the ageing time may be aged
			 * by now: forget their states. */
			for (unsigned k = 0; k < s.nfl;)
				if (now - s.fl[k].last > SN_CLASSIFY_AGE_NS / 2)
					s.fl[k] = s.fl[--s.nfl];
				else
					k++;
		} else {
			apply(&s, &c, now, op & 1);
		}
		check_stats(&s);
	}
	sn_classify_free(s.c);
	return 0;
}
