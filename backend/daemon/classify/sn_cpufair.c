/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_cpufair.c — fair dropping of the worker's CPU time (Addanki,
 * Linguaglossa, Roberts, Rossi, "Controlling software router resource
 * sharing by fair packet dropping", §III-E: Algorithm 1 on per-flow virtual
 * queues of CPU time, Algorithm 2's apportioning of each burst's measured
 * cost by type weight). The design and the contract are in sn_cpufair.h;
 * the shadow system is sn_fdrop (core library, reference-tested against
 * the paper's loop).
 *
 * Units: ns of the worker thread's CPU time (CLOCK_THREAD_CPUTIME_ID), for
 * the shadow system's clock and for the costs alike (sn_cpufair.h
 * "Clock"). The capacity is budget_pct % of it (1e7 x pct units/s).
 * Algorithm 1's packet.length is the estimate weight x cpw, cpw = ns per
 * weight unit (Q16), an EWMA (gain 1/16) of Algorithm 2's measured
 * Δc / Σw: the paper's "real time updated average based on packet.cost
 * ... for previous batches".
 */
#include "sn_cpufair.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_mbuf.h>

#include "sn_classify.h"
#include "sn_common.h"
#include "sn_fdrop.h"

#define W_FIXED     256u       /* weight of a kept frame: W_FIXED + length */
#define W_DROP      128u       /* weight of a dropped frame */
#define CPW_SHIFT   16         /* cpw fixed point */
#define EWMA_SHIFT  4          /* gain 1/16 */
#define THETA_MS_DIV 32u       /* θ_min = θ_max / 32 */

struct sn_cpufair {
	/* Worker only. */
	struct sn_fdrop *fd;
	uint64_t cpw;                            /* Q16 ns per weight unit; 0 = none yet */
	uint16_t slot;                           /* of the pending burst */
	uint16_t n_done;
	struct sn_fdrop_done done[SN_CPUFAIR_BURST_MAX];
	struct sn_cpufair_stats st;              /* worker's copy */
	unsigned n_slots;
	struct sn_cpufair_port *port;            /* worker's copy, [n_slots] */

	/* Worker writes (relaxed), any thread reads (relaxed). */
	struct sn_cpufair_stats pub;
	struct sn_cpufair_port *port_pub;        /* [n_slots] */
};

static inline void put(uint64_t *dst, uint64_t v)
{
	__atomic_store_n(dst, v, __ATOMIC_RELAXED);
}

struct sn_cpufair *sn_cpufair_create(const struct sn_cpufair_cfg *cfg)
{
	struct sn_cpufair *cf;
	uint64_t cap, theta_max;
	uint32_t rows = 2;

	if (!cfg || cfg->budget_pct < 1 || cfg->budget_pct > 100 ||
	    cfg->max_flows < 8 || cfg->max_flows > (4u << 22) ||
	    cfg->n_slots < 1 || cfg->n_slots > UINT16_MAX) {
		errno = EINVAL;
		return NULL;
	}
	while (rows * 4 < cfg->max_flows)
		rows *= 2;
	cap = 10000000ull * cfg->budget_pct;      /* CPU ns per s of CPU time */
	theta_max = SN_MIN(SN_MAX(cap / 1000, (uint64_t)THETA_MS_DIV), SN_FDROP_MAX_THETA);
	cf = calloc(1, sizeof(*cf));
	if (cf) {
		cf->n_slots = cfg->n_slots;
		cf->port = calloc(cfg->n_slots, sizeof(cf->port[0]));
		cf->port_pub = calloc(cfg->n_slots, sizeof(cf->port_pub[0]));
	}
	if (!cf || !cf->port || !cf->port_pub) {
		if (cf) {
			free(cf->port);
			free(cf->port_pub);
		}
		free(cf);
		errno = ENOMEM;
		return NULL;
	}
	cf->fd = sn_fdrop_create(&(struct sn_fdrop_cfg){
		.capacity = cap, .n_rows = rows, .theta = theta_max,
		.theta_min = theta_max / THETA_MS_DIV, .theta_max = theta_max });
	if (!cf->fd) {
		int e = errno;
		free(cf->port);
		free(cf->port_pub);
		free(cf);
		errno = e;
		return NULL;
	}
	cf->st.budget_pct = cf->pub.budget_pct = cfg->budget_pct;
	cf->st.capacity = cf->pub.capacity = cap;
	return cf;
}

void sn_cpufair_free(struct sn_cpufair *cf)
{
	if (!cf)
		return;
	sn_fdrop_free(cf->fd);
	free(cf->port);
	free(cf->port_pub);
	free(cf);
}

uint64_t sn_cpufair_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint16_t sn_cpufair_filter(struct sn_cpufair *cf, uint16_t slot, struct rte_mbuf **pkts,
			   uint16_t n, bool full, uint64_t cpu_ns)
{
	uint16_t keep = 0;

	SN_VERIFY(n <= SN_CPUFAIR_BURST_MAX && slot < cf->n_slots);
	sn_fdrop_advance(cf->fd, cpu_ns);
	sn_fdrop_adapt(cf->fd, full);
	cf->slot = slot;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		/* flows of different ports never share a virtual queue */
		uint32_t h = sn_classify_flow_hash(m) ^ ((uint32_t)slot * 0x9E3779B1u);
		uint32_t w = W_FIXED + m->pkt_len;
		uint64_t est = cf->cpw ? ((uint64_t)w * cf->cpw) >> CPW_SHIFT : w;
		uint32_t charge = (uint32_t)SN_MAX(SN_MIN(est, (uint64_t)SN_FDROP_MAX_LEN), 1);

		if (sn_fdrop_admit(cf->fd, h, charge) == SN_FDROP_KEEP) {
			cf->done[i] = (struct sn_fdrop_done){ .hash = h, .weight = w,
							      .charged = charge };
			pkts[keep++] = m;
		} else {
			cf->done[i] = (struct sn_fdrop_done){ .hash = h, .weight = W_DROP,
							      .charged = 0 };
			rte_pktmbuf_free(m);
		}
	}
	cf->n_done = n;
	cf->port[slot].kept += keep;
	cf->port[slot].dropped += n - keep;
	return keep;
}

static void publish(struct sn_cpufair *cf, uint16_t slot)
{
	struct sn_fdrop_stats f;

	sn_fdrop_stats(cf->fd, &f);
	cf->st.kept = f.kept;
	cf->st.dropped_fair = f.dropped[SN_FDROP_C_FAIR];
	cf->st.dropped_table_full = f.dropped[SN_FDROP_C_TABLE_FULL];
	cf->st.dropped_invalid = f.dropped[SN_FDROP_C_INVALID];
	cf->st.theta_ns = f.theta;
	cf->st.active = f.active;
	cf->st.active_max = f.active_max;
	cf->st.ns_per_kweight = (cf->cpw * 1000) >> CPW_SHIFT;
	put(&cf->pub.kept, cf->st.kept);
	put(&cf->pub.dropped_fair, cf->st.dropped_fair);
	put(&cf->pub.dropped_table_full, cf->st.dropped_table_full);
	put(&cf->pub.dropped_invalid, cf->st.dropped_invalid);
	put(&cf->pub.bursts, cf->st.bursts);
	put(&cf->pub.theta_ns, cf->st.theta_ns);
	put(&cf->pub.active, cf->st.active);
	put(&cf->pub.active_max, cf->st.active_max);
	put(&cf->pub.ns_per_kweight, cf->st.ns_per_kweight);
	put(&cf->port_pub[slot].cpu_ns, cf->port[slot].cpu_ns);
	put(&cf->port_pub[slot].kept, cf->port[slot].kept);
	put(&cf->port_pub[slot].dropped, cf->port[slot].dropped);
}

void sn_cpufair_account(struct sn_cpufair *cf, uint64_t cpu_ns)
{
	uint64_t sumw = 0;

	if (!cf->n_done)
		return;
	for (uint16_t i = 0; i < cf->n_done; i++)
		sumw += cf->done[i].weight;
	cpu_ns = SN_MIN(cpu_ns, 1000000000ull);   /* 1 s of CPU in one burst: a bug */
	if (cf->cpw) {
		int64_t sample = (int64_t)((cpu_ns << CPW_SHIFT) / sumw);
		cf->cpw = (uint64_t)((int64_t)cf->cpw + ((sample - (int64_t)cf->cpw) >> EWMA_SHIFT));
	} else {
		cf->cpw = (cpu_ns << CPW_SHIFT) / sumw;
	}
	if (!cf->cpw)
		cf->cpw = 1;
	/* sumw > 0: every weight is >= W_DROP */
	SN_VERIFY(sn_fdrop_account(cf->fd, cf->done, cf->n_done, cpu_ns) == 0);
	cf->port[cf->slot].cpu_ns += cpu_ns;
	cf->st.bursts++;
	cf->n_done = 0;
	publish(cf, cf->slot);
}

void sn_cpufair_stats(const struct sn_cpufair *cf, struct sn_cpufair_stats *out)
{
	const uint64_t *src;
	uint64_t *dst;

	memset(out, 0, sizeof(*out));
	out->budget_pct = cf->pub.budget_pct;
	out->capacity = cf->pub.capacity;        /* set at create */
	/* every field after budget_pct is a uint64_t counter */
	src = &cf->pub.kept;
	dst = &out->kept;
	for (size_t i = 0; i < (sizeof(*out) - offsetof(struct sn_cpufair_stats, kept)) /
			       sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

void sn_cpufair_port_stats(const struct sn_cpufair *cf, uint16_t slot,
			   struct sn_cpufair_port *out)
{
	memset(out, 0, sizeof(*out));
	if (slot >= cf->n_slots)
		return;
	out->cpu_ns = __atomic_load_n(&cf->port_pub[slot].cpu_ns, __ATOMIC_RELAXED);
	out->kept = __atomic_load_n(&cf->port_pub[slot].kept, __ATOMIC_RELAXED);
	out->dropped = __atomic_load_n(&cf->port_pub[slot].dropped, __ATOMIC_RELAXED);
}
