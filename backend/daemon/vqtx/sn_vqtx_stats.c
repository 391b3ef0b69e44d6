/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vqtx_stats.c — the exported counters of a deferred TX queue and the
 * percentiles of their histograms (any thread).
 */
#include "sn_vqtx_impl.h"

#include <rte_common.h>
#include <rte_cycles.h>

void sn_vqtx_stats_read(const struct sn_vqtx *q, struct sn_vqtx_stats *out)
{
	const uint64_t *src = (const uint64_t *)&q->st;
	uint64_t *dst = (uint64_t *)out;

	static_assert(sizeof(*out) % sizeof(uint64_t) == 0, "sn_vqtx_stats: all u64");
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	out->mem_maps = __atomic_load_n(&q->nmaps, __ATOMIC_RELAXED);
}

double sn_vqtx_hold_pct_us(const struct sn_vqtx_stats *st, double pct)
{
	uint64_t total = 0, want, run = 0;

	for (unsigned i = 0; i < SN_VQTX_HOLD_BUCKETS; i++)
		total += st->hold_hist[i];
	if (!total)
		return 0;
	want = (uint64_t)((double)total * pct / 100.0 + 0.999999);
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < SN_VQTX_HOLD_BUCKETS; i++) {
		run += st->hold_hist[i];
		if (run >= want) {
			double edge = (double)(i + 1 < 64 ? (1ULL << (i + 1)) : UINT64_MAX);

			return RTE_MIN(edge, (double)st->hold_max) * 1e6 / (double)rte_get_tsc_hz();
		}
	}
	return sn_vqtx_hold_max_us(st);
}

double sn_vqtx_hold_max_us(const struct sn_vqtx_stats *st)
{
	return (double)st->hold_max * 1e6 / (double)rte_get_tsc_hz();
}

void sn_vqtx_occ_range(unsigned b, uint32_t *lo, uint32_t *hi)
{
	if (b < SN_VQTX_OCC_LINEAR) {
		*lo = *hi = b;
		return;
	}
	*lo = SN_VQTX_OCC_LINEAR << (b - SN_VQTX_OCC_LINEAR);
	*hi = 2 * *lo - 1;
}

uint32_t sn_vqtx_occ_pct(const struct sn_vqtx_stats *st, double pct)
{
	double total = 0, want, run = 0;
	uint32_t lo, hi = 0;

	for (unsigned i = 0; i < SN_VQTX_OCC_BUCKETS; i++)
		total += (double)st->occ_cycles[i];
	if (total <= 0)
		return 0;
	want = total * pct / 100.0;
	for (unsigned i = 0; i < SN_VQTX_OCC_BUCKETS; i++) {
		if (!st->occ_cycles[i])
			continue;
		run += (double)st->occ_cycles[i];
		sn_vqtx_occ_range(i, &lo, &hi);
		if (run >= want)
			return hi;
	}
	return hi;   /* rounding: the last non-empty bucket */
}
