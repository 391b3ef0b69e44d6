/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_classify.c — flow classes and aggregates of one worker.
 *
 * Design (Carousel, Saeed et al., "Carousel: Scalable Traffic Shaping at
 * End Hosts", SIGCOMM 2017, §4 "policies" and §5.3 "NBA").
 *  - Classification: the frame's Ethernet (+ one 802.1Q tag) / IPv4 or
 *    IPv6 / TCP|UDP headers are parsed into its 5-tuple and the tag,
 *    DSCP and flow label (sn_flowkey.h: bounds-checked reads, a short or
 *    odd frame simply matches no class). The port's classes are tried in
 *    order; the first match wins.
 *  - Per-flow pacing ("scope": "flow"): every distinct 5-tuple of the class
 *    (IPv4 or IPv6, struct sn_flowkey) has its own sn_tstamp in a per-worker flow table (rte_hash, position
 *    = index into the state array). A state idle for SN_CLASSIFY_AGE_NS
 *    whose LTS lies in the past (no pacing debt left) is freed by an
 *    incremental sweep in tick(). A new flow finding the table full is
 *    paced by the class's shared state and counted (flow_table_full).
 *    Flow states carry the version of their class: a rate change reaches
 *    each flow on its next frame (sn_tstamp_set keeps its LTS).
 *  - "scope": "class": one sn_tstamp for the class's traffic as a whole.
 *  - Aggregates: the worker keeps one sn_tstamp per aggregate at its NBA
 *    grant (Carousel: "each core enforces its share of an aggregate as a
 *    local rate limit"). tick() reports the bytes offered to the aggregate
 *    (its demand, dropped frames included) and its backlog (the share's
 *    pacing debt: bytes it accepted that its grant has not yet let out)
 *    to the aggregate's sn_nba and adopts a new grant when the NBA epoch
 *    moved. A new grant applies to the share's queued frames too: LTS and
 *    the stamps of its frames in the wheel are rescaled by old / new grant
 *    from now (the caller restamps the wheel), so a saturated worker,
 *    whose share runs a full horizon (262 ms) ahead, follows its grant at
 *    once rather than a horizon late; otherwise a grant moved from one
 *    worker to another would take effect at once on the worker below its
 *    share and a horizon later on the saturated one, and the aggregate's
 *    total would swing around its rate (the contention model of
 *    tests/core/test_ref_nba.py).
 * All state is the worker's: no locks; counters are relaxed atomic stores.
 */
#include "sn_classify.h"

#include <errno.h>
#include <string.h>

#include <rte_ether.h>
#include <rte_hash.h>
#include <rte_jhash.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "sn_flowkey.h"
#include "sn_nba.h"
#include "sn_port.h"

#define SWEEP_PER_TICK 256
#define UID_N          256     /* sn_flowkey.cls values */

struct flow {
	struct sn_tstamp ts;
	uint64_t last_ns;          /* last frame */
	uint32_t version;          /* class version its rate belongs to */
	uint8_t used;
};

struct cls {
	/* Per frame. */
	struct sn_policy_match m;
	struct sn_tstamp ts;       /* scope class, or the flow-table-full fallback */
	uint64_t rate_bps;
	uint32_t burst;
	uint32_t version;
	uint8_t scope, clamp;
	uint8_t uid;               /* its flows' key (sn_flowkey.cls), kept while
	                            * the class keeps its name */
	int16_t agg;
	bool has_ts;
	char name[SN_POLICY_NAME_MAX + 1];
	/* Counters: worker is the sole writer. */
	struct sn_classify_class_stats st __rte_cache_aligned;
};

struct agg {
	struct sn_tstamp ts;
	struct sn_nba *nba;        /* NULL = slot unused */
	uint64_t epoch;
	double scale;              /* old / new grant of its last rescaling */
	uint64_t demand_bytes;     /* cumulative, reported to the NBA */
	char name[SN_POLICY_NAME_MAX + 1];
	struct sn_classify_agg_stats st __rte_cache_aligned;
};

struct sn_classify {
	unsigned worker;
	struct rte_hash *h;
	struct flow *flows;        /* indexed by rte_hash position */
	uint32_t sweep;            /* rte_hash_iterate cursor */
	uint32_t next_version;
	/* By port slot, n_slots entries each (allocated at create). */
	unsigned n_slots;
	uint8_t *n_cls;
	uint8_t *next_uid;
	/* Live flow entries keyed with each (slot, uid). A uid is given to a
	 * new class only when none is left: 8-bit uids can wrap within the
	 * 2 s ageing time after 256 class creations, and a new class must not
	 * take over a gone class's flow states (new_uid()). */
	uint32_t (*uid_flows)[UID_N];
	/* Flow-table quota: entries each slot's port holds (the sum of its
	 * uid_flows), its cap (sn_classify_set_flow_quota, 0 = none) and the
	 * new flows refused at the cap (counter: worker writes, relaxed). */
	uint32_t *slot_flows;
	uint32_t *flows_cap;
	uint64_t *quota_flows;
	/* Flow-table reserves: each slot's first flows_rsv entries are its
	 * own; the others, flows_shared = max_flows - n_slots * flows_rsv,
	 * go to slots above their reserve. flows_excess, the sum over the
	 * slots of max(0, slot_flows - flows_rsv) <= flows_shared, is the
	 * part taken: only the worker takes and gives, a plain count. */
	uint32_t max_flows;
	uint32_t flows_rsv;
	uint64_t flows_shared, flows_excess;
	uint64_t flows_held;         /* the sum of slot_flows */
	/* The last apply_port's old class index -> new index
	 * (SN_CLASSIFY_NONE: gone); moved: not the identity. */
	bool *moved;
	bool *created;               /* the last apply_port of the slot made a class */
	uint8_t (*renum)[SN_POLICY_CLASSES_MAX];
	struct cls (*cls)[SN_POLICY_CLASSES_MAX];
	struct agg agg[SN_POLICY_AGGS_MAX];
};

static inline void ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, *c + v, __ATOMIC_RELAXED);
}

static inline void ctr_set(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, v, __ATOMIC_RELAXED);
}

/* The entries a slot holding `held` takes from the shared part. */
static inline uint32_t flows_excess_of(const struct sn_classify *c, uint32_t held)
{
	return held > c->flows_rsv ? held - c->flows_rsv : 0;
}

/* Worker: the entries a slot holds (relaxed store: sn_classify_port_flows
 * reads it from any thread) and the shared part they take. */
static inline void slot_flows_add(struct sn_classify *c, uint16_t slot, int d)
{
	const uint32_t old = c->slot_flows[slot], now = old + (uint32_t)d;

	c->flows_excess += flows_excess_of(c, now);
	c->flows_excess -= flows_excess_of(c, old);
	c->flows_held += (uint64_t)(int64_t)d;
	__atomic_store_n(&c->slot_flows[slot], now, __ATOMIC_RELAXED);
}

static void zero_stats(void *st, size_t size)
{
	for (size_t i = 0; i < size / sizeof(uint64_t); i++)
		ctr_set((uint64_t *)st + i, 0);
}

static void slot_tables_free(struct sn_classify *c)
{
	rte_free(c->n_cls);
	rte_free(c->next_uid);
	rte_free(c->uid_flows);
	rte_free(c->slot_flows);
	rte_free(c->flows_cap);
	rte_free(c->quota_flows);
	rte_free(c->moved);
	rte_free(c->created);
	rte_free(c->renum);
	rte_free(c->cls);
}

/* The tables by port slot: 0 or -ENOMEM (slot_tables_free() releases). */
static int slot_tables(struct sn_classify *c, unsigned n, int socket)
{
#define SLOT_TABLE(f) (c->f = rte_zmalloc_socket("sn_classify_slots", n * sizeof(c->f[0]), \
						 RTE_CACHE_LINE_SIZE, socket))
	SLOT_TABLE(n_cls);
	SLOT_TABLE(next_uid);
	SLOT_TABLE(uid_flows);
	SLOT_TABLE(slot_flows);
	SLOT_TABLE(flows_cap);
	SLOT_TABLE(quota_flows);
	SLOT_TABLE(moved);
	SLOT_TABLE(created);
	SLOT_TABLE(renum);
	SLOT_TABLE(cls);
#undef SLOT_TABLE
	c->n_slots = n;
	return c->n_cls && c->next_uid && c->uid_flows && c->slot_flows && c->flows_cap &&
	       c->quota_flows && c->moved && c->created && c->renum &&
	       c->cls ? 0 : -ENOMEM;
}

struct sn_classify *sn_classify_create(unsigned worker, uint32_t max_flows, unsigned n_slots,
				       unsigned burst, int socket)
{
	char name[RTE_HASH_NAMESIZE];
	struct sn_classify *c;
	int32_t keys;

	if (!max_flows)
		max_flows = SN_CLASSIFY_FLOWS_DEF;
	if (!n_slots || n_slots > UINT16_MAX) {
		errno = EINVAL;
		return NULL;
	}
	c = rte_zmalloc_socket("sn_classify", sizeof(*c), RTE_CACHE_LINE_SIZE, socket);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	if (slot_tables(c, n_slots, socket))
		goto free_c;
	c->worker = worker;
	c->flows_rsv = sn_classify_flows_reserve(max_flows, n_slots, burst);
	c->flows_shared = max_flows - (uint64_t)n_slots * c->flows_rsv;
	c->max_flows = max_flows;
	snprintf(name, sizeof(name), "sn_flows_%u", worker);
	c->h = rte_hash_create(&(struct rte_hash_parameters){
		.name = name, .entries = max_flows, .key_len = sizeof(struct sn_flowkey),
		.hash_func = rte_jhash, .socket_id = socket });
	if (!c->h)
		goto free_c;
	keys = rte_hash_max_key_id(c->h);
	if (keys < 0)
		goto free_h;
	c->flows = rte_zmalloc_socket("sn_flows", ((size_t)keys + 1) * sizeof(struct flow),
				      RTE_CACHE_LINE_SIZE, socket);
	if (!c->flows)
		goto free_h;
	return c;
free_h:
	rte_hash_free(c->h);
free_c:
	slot_tables_free(c);
	rte_free(c);
	errno = ENOMEM;
	return NULL;
}

void sn_classify_free(struct sn_classify *c)
{
	if (!c)
		return;
	rte_hash_free(c->h);
	rte_free(c->flows);
	slot_tables_free(c);
	rte_free(c);
}

static bool same_class(const struct cls *k, const struct sn_policy_class *pc)
{
	return !strcmp(k->name, pc->name);
}

/* Delete every flow entry of (slot, uid) now instead of at ageing. */
static void purge_uid(struct sn_classify *c, uint16_t slot, uint8_t uid)
{
	const void *kp;
	void *data;
	uint32_t it = 0;

	while (c->uid_flows[slot][uid] && rte_hash_iterate(c->h, &kp, &data, &it) >= 0) {
		const struct sn_flowkey k = *(const struct sn_flowkey *)kp;
		int32_t pos;

		if (k.slot != slot || k.cls != uid)
			continue;
		pos = rte_hash_del_key(c->h, &k);
		SN_VERIFY(pos >= 0);
		c->flows[pos].used = 0;
		c->uid_flows[slot][uid]--;
		slot_flows_add(c, slot, -1);
	}
	SN_VERIFY(c->uid_flows[slot][uid] == 0);
}

/* A flow key id for a new class of slot: one no kept class of the new
 * table uses (taken[]), rotating, and one no flow entry is keyed with any
 * more (those of a class that went away age out after
 * SN_CLASSIFY_AGE_NS), so the new class starts with no flow state. Only
 * when every free uid still has entries (>= 240 classes with live flows
 * deleted within the ageing time) are the fewest of them deleted at once:
 * their classes are gone, only their pacing debt is forgotten. */
static uint8_t new_uid(struct sn_classify *c, uint16_t slot, const bool *taken)
{
	int best = -1;

	for (unsigned i = 0; i < UID_N; i++) {
		uint8_t u = c->next_uid[slot]++;

		if (taken[u])
			continue;
		if (!c->uid_flows[slot][u])
			return u;
		if (best < 0 || c->uid_flows[slot][u] < c->uid_flows[slot][best])
			best = u;
	}
	SN_VERIFY(best >= 0);
	purge_uid(c, slot, (uint8_t)best);
	return (uint8_t)best;
}

uint32_t sn_classify_apply_port(struct sn_classify *c, uint16_t slot,
				const struct sn_policy_port *pp, bool fresh, uint64_t now)
{
	struct cls old[SN_POLICY_CLASSES_MAX];
	unsigned n_old = fresh ? 0 : c->n_cls[slot];
	unsigned n = pp ? pp->n_classes : 0;
	uint32_t restamp = 0;
	unsigned from[SN_POLICY_CLASSES_MAX];
	bool taken[UID_N] = { false };

	static_assert(SN_POLICY_CLASSES_MAX <= 32, "restamp mask: one bit per class");
	static_assert(SN_POLICY_CLASSES_MAX < SN_CLASSIFY_NONE, "renumbering: NONE is no index");
	static_assert(SN_POLICY_CLASSES_MAX < UID_N, "a free uid always exists");
	static_assert(UID_N == 1u << (8 * sizeof(((struct sn_flowkey *)0)->cls)), "uid = key.cls");
	if (fresh)
		ctr_set(&c->quota_flows[slot], 0);

	memcpy(old, c->cls[slot], sizeof(old));
	/* A class is its name (policy.set's identity): old index ->
	 * new index, so its counters, its flows and its frames queued in the
	 * wheel (renumbered by the caller, sn_classify_renumber) follow it
	 * when it moves in the list. */
	memset(c->renum[slot], SN_CLASSIFY_NONE, sizeof(c->renum[slot]));
	c->moved[slot] = false;
	c->created[slot] = false;
	for (unsigned i = 0; i < n; i++) {
		unsigned j;

		for (j = 0; j < n_old && !same_class(&old[j], &pp->classes[i]); j++)
			;
		from[i] = j;
		if (j < n_old) {
			c->renum[slot][j] = (uint8_t)i;
			taken[old[j].uid] = true;
		}
	}
	for (unsigned j = 0; j < n_old; j++)
		c->moved[slot] |= c->renum[slot][j] != j;
	for (unsigned i = 0; i < n; i++) {
		const struct sn_policy_class *pc = &pp->classes[i];
		struct cls *k = &c->cls[slot][i];
		unsigned j = from[i];

		if (j < n_old) {
			*k = old[j];        /* carries its pacing state and counters */
		} else {
			c->created[slot] = true;
			memset(k, 0, sizeof(*k));
			zero_stats(&k->st, sizeof(k->st));
			k->version = ++c->next_version;
			k->uid = new_uid(c, slot, taken);
			taken[k->uid] = true;
		}
		snprintf(k->name, sizeof(k->name), "%s", pc->name);
		k->m = pc->m;
		k->scope = pc->scope;
		k->clamp = pc->horizon == SN_POLICY_HORIZON_CLAMP;
		k->agg = pc->agg;
		if (k->rate_bps != pc->rate_bps || k->burst != pc->burst_bytes)
			k->version = ++c->next_version;
		if (!pc->rate_bps) {
			/* pacing removed: its queued frames go back without
			 * it (restamp_wheel) */
			if (k->has_ts)
				restamp |= 1u << i;
			k->has_ts = false;
		} else if (k->has_ts && k->rate_bps != pc->rate_bps) {
			/* A new pacing rate of a kept class (moved or not):
			 * a fresh chain from now, on which the caller lays
			 * the class's queued frames again
			 * (sn_classify_restamp_ts; its flows restart when
			 * their first queued frame is re-laid). */
			SN_VERIFY(sn_tstamp_init(&k->ts, pc->rate_bps, pc->burst_bytes, now) == 0);
			restamp |= 1u << i;
		} else if (k->has_ts) {
			SN_VERIFY(sn_tstamp_set(&k->ts, pc->rate_bps, pc->burst_bytes) == 0);
		} else {
			SN_VERIFY(sn_tstamp_init(&k->ts, pc->rate_bps, pc->burst_bytes, now) == 0);
			/* pacing added to a kept class: its queued frames
			 * are laid on the new chain (restamp_wheel) */
			if (j < n_old)
				restamp |= 1u << i;
		}
		k->has_ts = pc->rate_bps != 0;
		k->rate_bps = pc->rate_bps;
		k->burst = pc->burst_bytes;
	}
	/* Flow entries are keyed by the class's uid, which a moved class
	 * keeps; a class that went away leaves entries the sweep ages out
	 * (their uid is not given to a new class before: new_uid()). */
	__atomic_store_n(&c->n_cls[slot], (uint8_t)n, __ATOMIC_RELAXED);
	return restamp;
}

static void agg_set_grant(struct agg *a, unsigned worker)
{
	uint64_t bps = sn_nba_grant(a->nba, worker) * 8;

	bps = RTE_MAX(bps, SN_TSTAMP_RATE_MIN);
	bps = RTE_MIN(bps, SN_TSTAMP_RATE_MAX);
	SN_VERIFY(sn_tstamp_set(&a->ts, bps, a->ts.burst) == 0);
	ctr_set(&a->st.grant_bps, bps);
	ctr_add(&a->st.grant_updates, 1);
}

void sn_classify_apply_aggs(struct sn_classify *c, const struct sn_policy *pol, uint64_t now)
{
	struct agg old[SN_POLICY_AGGS_MAX];

	memcpy(old, c->agg, sizeof(old));
	for (unsigned i = 0; i < SN_POLICY_AGGS_MAX; i++) {
		const struct sn_policy_aggregate *pa = i < pol->n_aggs ? &pol->aggs[i] : NULL;
		struct agg *a = &c->agg[i];
		unsigned j;

		if (!pa) {
			a->nba = NULL;
			continue;
		}
		for (j = 0; j < SN_POLICY_AGGS_MAX && !(old[j].nba && !strcmp(old[j].name, pa->name));
		     j++)
			;
		if (j < SN_POLICY_AGGS_MAX && old[j].nba == pa->nba) {
			/* Same NBA instance: state and counters carry on, and
			 * so does its epoch: a grant the NBA already moved
			 * (an aggregate rate change recomputed before this
			 * apply) is adopted by the next tick() with the
			 * rescale of the share's queued frames (adopting it
			 * here would skip that restamp). */
			*a = old[j];
			SN_VERIFY(sn_tstamp_set(&a->ts, a->ts.rate, pa->burst_bytes) == 0);
		} else {
			memset(a, 0, sizeof(*a));
			zero_stats(&a->st, sizeof(a->st));
			snprintf(a->name, sizeof(a->name), "%s", pa->name);
			SN_VERIFY(sn_tstamp_init(&a->ts, SN_TSTAMP_RATE_MIN, pa->burst_bytes, now) == 0);
			a->nba = pa->nba;
			a->epoch = sn_nba_epoch(a->nba);
			agg_set_grant(a, c->worker);
		}
	}
}

uint32_t sn_classify_flow_hash(const struct rte_mbuf *m)
{
	struct sn_flowhdr h;
	uint8_t eth[2 * RTE_ETHER_ADDR_LEN];
	const void *p;

	if (sn_flowkey_parse(m, &h))
		return rte_jhash(&h.k, sizeof(h.k), 0);
	p = rte_pktmbuf_read(m, 0, sizeof(eth), eth);
	return p ? rte_jhash(p, sizeof(eth), 1) : 0;
}

/* The flow state of k in class k->cls (created if new); NULL = the port
 * is at its flow quota (quota_flows) or the table is full. */
static struct sn_tstamp *flow_ts(struct sn_classify *c, struct cls *kc,
				 const struct sn_flowkey *key, uint64_t now)
{
	int32_t pos = rte_hash_lookup(c->h, key);
	struct flow *f;

	if (pos < 0) {
		const uint32_t cap = c->flows_cap[key->slot], held = c->slot_flows[key->slot];

		/* At its cap, or above its reserve with the shared part
		 * taken while other slots' reserves are free: those stay
		 * free. A table without a free entry is full instead. */
		if ((cap && held >= cap) ||
		    (held >= c->flows_rsv && c->flows_excess >= c->flows_shared &&
		     c->flows_held < c->max_flows)) {
			ctr_add(&c->quota_flows[key->slot], 1);
			return NULL;
		}
		pos = rte_hash_add_key(c->h, key);
		if (pos < 0) {
			ctr_add(&kc->st.flow_table_full, 1);
			return NULL;
		}
		f = &c->flows[pos];
		SN_VERIFY(sn_tstamp_init(&f->ts, kc->rate_bps, kc->burst, now) == 0);
		f->version = kc->version;
		f->used = 1;
		c->uid_flows[key->slot][key->cls]++;
		slot_flows_add(c, key->slot, 1);
		ctr_add(&kc->st.flows_created, 1);
		ctr_add(&kc->st.flows_active, 1);
	}
	f = &c->flows[pos];
	if (f->version != kc->version) {
		SN_VERIFY(sn_tstamp_set(&f->ts, kc->rate_bps, kc->burst) == 0);
		f->version = kc->version;
	}
	f->last_ns = now;
	return &f->ts;
}

uint32_t sn_classify_restart_port(struct sn_classify *c, uint16_t slot, uint64_t now)
{
	uint32_t restamp = 0;

	/* The port's limit got a new rate: restamp_wheel() re-lays
	 * the port's queued frames from now, and a frame's release time is
	 * the max over every policy it crosses (Carousel §5.1.1), so each
	 * paced class's chain restarts at now too and its frames are laid on
	 * it again; a new version restarts its flows on their first re-laid
	 * frame (sn_classify_restamp_ts), and only re-rates (same rate, LTS
	 * kept) the flows with nothing queued (flow_ts). */
	for (unsigned i = 0; i < c->n_cls[slot]; i++) {
		struct cls *k = &c->cls[slot][i];

		if (!k->has_ts)
			continue;
		SN_VERIFY(sn_tstamp_init(&k->ts, k->rate_bps, k->burst, now) == 0);
		k->version = ++c->next_version;
		restamp |= 1u << i;
	}
	return restamp;
}

struct sn_tstamp *sn_classify_restamp_ts(struct sn_classify *c, uint16_t slot, uint8_t cls,
					 const struct rte_mbuf *m, uint64_t now)
{
	struct sn_flowhdr h;
	struct sn_flowkey *key = &h.k;
	struct cls *kc;
	struct flow *f;
	int32_t pos;

	if (cls == SN_CLASSIFY_NONE || cls >= c->n_cls[slot] || !c->cls[slot][cls].has_ts)
		return NULL;
	kc = &c->cls[slot][cls];
	if (kc->scope != SN_POLICY_SCOPE_FLOW || !sn_flowkey_parse(m, &h))
		return &kc->ts;
	key->slot = slot;
	key->cls = kc->uid;
	pos = rte_hash_lookup(c->h, key);
	if (pos < 0) {
		/* A flow of a class whose pacing was just added has
		 * no state yet: created from now (flow_ts); the table full,
		 * the class's state paces it, as at submit */
		struct sn_tstamp *t = flow_ts(c, kc, key, now);

		return t ? t : &kc->ts;
	}
	f = &c->flows[pos];
	if (f->version != kc->version) {
		/* The flow's first queued frame since the change: its chain
		 * restarts at now, like the class's (apply_port). */
		SN_VERIFY(sn_tstamp_init(&f->ts, kc->rate_bps, kc->burst, now) == 0);
		f->version = kc->version;
	}
	return &f->ts;
}

void sn_classify_frame(struct sn_classify *c, uint16_t slot, const struct rte_mbuf *m,
		       uint64_t now, struct sn_classify_res *r)
{
	struct sn_flowhdr h;
	struct cls *kc = NULL;
	unsigned i, n = c->n_cls[slot];

	r->slot = slot;
	r->cls = SN_CLASSIFY_NONE;
	r->clamp = false;
	r->agg = false;
	if (n == 0 || !sn_flowkey_parse(m, &h))
		return;
	for (i = 0; i < n; i++)
		if (sn_flowkey_match(&c->cls[slot][i].m, &h))
			break;
	if (i == n)
		return;
	kc = &c->cls[slot][i];
	r->cls = (uint8_t)i;
	r->clamp = kc->clamp;
	ctr_add(&kc->st.offered_packets, 1);
	ctr_add(&kc->st.offered_bytes, m->pkt_len);
	if (kc->has_ts) {
		struct sn_tstamp *t = NULL;

		if (kc->scope == SN_POLICY_SCOPE_FLOW) {
			h.k.slot = slot;
			h.k.cls = kc->uid;
			t = flow_ts(c, kc, &h.k, now);
		}
		r->pol[r->n++] = t ? t : &kc->ts;
	}
	if (kc->agg >= 0 && c->agg[kc->agg].nba) {
		struct agg *a = &c->agg[kc->agg];

		a->demand_bytes += m->pkt_len;
		ctr_add(&a->st.offered_packets, 1);
		ctr_add(&a->st.offered_bytes, m->pkt_len);
		r->pol[r->n++] = &a->ts;
		r->agg = true;
	}
}

void sn_classify_accepted(struct sn_classify *c, const struct sn_classify_res *r, bool clamped)
{
	if (clamped && r->cls != SN_CLASSIFY_NONE && r->cls < c->n_cls[r->slot])
		ctr_add(&c->cls[r->slot][r->cls].st.clamped, 1);
}

void sn_classify_dropped(struct sn_classify *c, const struct sn_classify_res *r, uint32_t len,
			 enum sn_classify_drop cause)
{
	struct cls *kc;

	(void)len;
	if (r->cls == SN_CLASSIFY_NONE || r->cls >= c->n_cls[r->slot])
		return;    /* no class, or (a restamp) its class went away meanwhile */
	kc = &c->cls[r->slot][r->cls];
	ctr_add(&kc->st.drop[cause], 1);
	if (kc->agg >= 0 && c->agg[kc->agg].nba)
		ctr_add(&c->agg[kc->agg].st.drop[cause], 1);
}

void sn_classify_released(struct sn_classify *c, uint16_t slot, uint8_t cls, uint32_t len)
{
	struct cls *kc;

	if (cls == SN_CLASSIFY_NONE || cls >= c->n_cls[slot])
		return;    /* no class, or its class went away meanwhile */
	kc = &c->cls[slot][cls];
	ctr_add(&kc->st.sent_packets, 1);
	ctr_add(&kc->st.sent_bytes, len);
	if (kc->agg >= 0 && c->agg[kc->agg].nba) {
		ctr_add(&c->agg[kc->agg].st.sent_packets, 1);
		ctr_add(&c->agg[kc->agg].st.sent_bytes, len);
	}
}

void sn_classify_uplinked(struct sn_classify *c, uint16_t slot, uint8_t cls, uint32_t len)
{
	struct cls *kc;

	if (cls == SN_CLASSIFY_NONE || cls >= c->n_cls[slot])
		return;
	kc = &c->cls[slot][cls];
	ctr_add(&kc->st.uplink_packets, 1);
	ctr_add(&kc->st.uplink_bytes, len);
}

void sn_classify_set_flow_quota(struct sn_classify *c, uint16_t slot, uint32_t cap)
{
	c->flows_cap[slot] = cap;
}

uint32_t sn_classify_port_flows(const struct sn_classify *c, uint16_t slot)
{
	return slot < c->n_slots ? __atomic_load_n(&c->slot_flows[slot], __ATOMIC_RELAXED) : 0;
}

uint64_t sn_classify_quota_flows(const struct sn_classify *c, uint16_t slot)
{
	return slot < c->n_slots ? __atomic_load_n(&c->quota_flows[slot], __ATOMIC_RELAXED) : 0;
}

uint32_t sn_classify_flows_reserve(uint32_t max_flows, unsigned n_slots, unsigned burst)
{
	const uint64_t pool = max_flows ? max_flows : SN_CLASSIFY_FLOWS_DEF;
	const uint64_t reserve = 2ull * (burst ? burst : 1);
	const uint64_t n = n_slots ? n_slots : 1;

	return (uint32_t)RTE_MIN(reserve, pool / n);
}

uint32_t sn_classify_flows_quota_auto(uint32_t max_flows, unsigned n_slots, unsigned burst)
{
	const uint64_t pool = max_flows ? max_flows : SN_CLASSIFY_FLOWS_DEF;
	const uint64_t reserve = 2ull * (burst ? burst : 1);
	const uint64_t n = n_slots ? n_slots : 1;

	/* Every other slot keeps its reserve however one port sprays;
	 * with more slots than reserves fit, the fair share. */
	if (pool >= n * reserve)
		return (uint32_t)(pool - (n - 1) * reserve);
	return (uint32_t)(pool / n ? pool / n : 1);
}

/* Free flow states idle for SN_CLASSIFY_AGE_NS with no pacing debt. */
static void sweep(struct sn_classify *c, uint64_t now)
{
	const void *kp;
	void *data;

	for (unsigned i = 0; i < SWEEP_PER_TICK; i++) {
		int32_t pos = rte_hash_iterate(c->h, &kp, &data, &c->sweep);
		const struct sn_flowkey *k = kp;
		struct flow *f;

		if (pos < 0) {
			c->sweep = 0;
			return;
		}
		/* The iterator's position is its own cursor space: the state
		 * index is the key's lookup position. */
		pos = rte_hash_lookup(c->h, k);
		SN_VERIFY(pos >= 0);
		f = &c->flows[pos];
		if (now - f->last_ns < SN_CLASSIFY_AGE_NS || f->ts.lts >= now)
			continue;
		f->used = 0;
		c->uid_flows[k->slot][k->cls]--;
		slot_flows_add(c, k->slot, -1);
		for (unsigned j = 0; j < c->n_cls[k->slot]; j++) {
			struct cls *kc = &c->cls[k->slot][j];

			if (kc->uid != k->cls)
				continue;
			ctr_add(&kc->st.flows_active, -1ull);
			ctr_add(&kc->st.flows_aged, 1);
			break;
		}
		/* Single writer, no readers elsewhere: a deleted position may be
		 * reused at once (no RTE_HASH_EXTRA_FLAGS_NO_FREE_ON_DEL). */
		SN_VERIFY(rte_hash_del_key(c->h, k) == pos);
	}
}

/* Bytes the worker's share of the aggregate has accepted but not yet
 * released: its pacing debt (LTS - now) at the current grant. The NBA's
 * "would have sent more" signal (sn_nba.h rule 1). */
static uint64_t agg_backlog(const struct agg *a, uint64_t now)
{
	if (a->ts.lts <= now)
		return 0;
	return (uint64_t)((double)(a->ts.lts - now) * (double)a->ts.rate / (double)SN_TSTAMP_NS_BITS);
}

uint32_t sn_classify_tick(struct sn_classify *c, uint64_t now, uint64_t horizon_ns)
{
	uint32_t changed = 0;

	static_assert(SN_POLICY_AGGS_MAX <= 32, "one bit per aggregate");
	for (unsigned i = 0; i < SN_POLICY_AGGS_MAX; i++) {
		struct agg *a = &c->agg[i];
		uint64_t e, old;

		if (!a->nba)
			continue;
		SN_VERIFY(sn_nba_report(a->nba, c->worker, a->demand_bytes, agg_backlog(a, now),
					now) == 0);
		e = sn_nba_epoch(a->nba);
		if (e != a->epoch) {
			a->epoch = e;
			old = a->ts.rate;
			agg_set_grant(a, c->worker);
			if (a->ts.rate != old && a->ts.lts > now) {
				/* The bytes owed stay owed, at the new rate from
				 * now (the stamp's fraction is dropped: < 1 ns),
				 * but for the frames a cut pushes beyond the
				 * horizon: the wheel drops them, and an LTS left
				 * beyond it would stamp every new frame there too
				 * (dropped; nothing sent between the last kept
				 * frame and LTS). */
				a->scale = (double)old / (double)a->ts.rate;
				a->ts.lts = now + RTE_MIN((uint64_t)((double)(a->ts.lts - now) * a->scale),
							  horizon_ns);
				a->ts.lts_rem = 0;
				changed |= 1u << i;
			}
		}
	}
	if (rte_hash_count(c->h) > 0)
		sweep(c, now);
	return changed;
}

uint64_t sn_classify_agg_restamp(const struct sn_classify *c, uint16_t slot, uint8_t cls,
				 uint32_t changed, uint64_t now, uint64_t a)
{
	const struct cls *kc;

	if (a <= now || cls == SN_CLASSIFY_NONE || slot >= c->n_slots || cls >= c->n_cls[slot])
		return a;
	kc = &c->cls[slot][cls];
	if (kc->agg < 0 || !(changed & (1u << kc->agg)))
		return a;
	return now + (uint64_t)((double)(a - now) * c->agg[kc->agg].scale);
}

bool sn_classify_moved(const struct sn_classify *c, uint16_t slot)
{
	return slot < c->n_slots && c->moved[slot];
}

bool sn_classify_created(const struct sn_classify *c, uint16_t slot)
{
	return slot < c->n_slots && c->created[slot];
}

uint8_t sn_classify_renumber(const struct sn_classify *c, uint16_t slot, uint8_t cls)
{
	if (cls == SN_CLASSIFY_NONE || slot >= c->n_slots || cls >= SN_POLICY_CLASSES_MAX)
		return SN_CLASSIFY_NONE;
	return c->renum[slot][cls];
}

bool sn_classify_clamps(const struct sn_classify *c, uint16_t slot, uint8_t cls)
{
	if (cls == SN_CLASSIFY_NONE || slot >= c->n_slots || cls >= c->n_cls[slot])
		return false;
	return c->cls[slot][cls].clamp;
}

int sn_classify_class_stats(const struct sn_classify *c, uint16_t slot, unsigned cls,
			    struct sn_classify_class_stats *out)
{
	const uint64_t *src;
	uint64_t *dst = (uint64_t *)out;

	static_assert(sizeof(*out) % sizeof(uint64_t) == 0, "stats are u64 fields");
	if (slot >= c->n_slots || cls >= __atomic_load_n(&c->n_cls[slot], __ATOMIC_RELAXED))
		return -ENOENT;
	src = (const uint64_t *)&c->cls[slot][cls].st;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	return 0;
}

int sn_classify_agg_stats(const struct sn_classify *c, unsigned agg,
			  struct sn_classify_agg_stats *out)
{
	const uint64_t *src;
	uint64_t *dst = (uint64_t *)out;

	static_assert(sizeof(*out) % sizeof(uint64_t) == 0, "stats are u64 fields");
	if (agg >= SN_POLICY_AGGS_MAX)
		return -ENOENT;
	src = (const uint64_t *)&c->agg[agg].st;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	return 0;
}
