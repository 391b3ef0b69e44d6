/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_tstamp.c — Carousel timestamping per packet (sn_tstamp_peek_at +
 * commit, the daemon's submit fast path: one 64-bit divide by the rate per
 * packet) against the same arithmetic with the quotient from a
 * precomputed reciprocal and an exact correction step (the arbiter's
 * link_advance trick). On AMD EPYC (family 25) both cost about 5 ns per
 * stamp, the difference within code placement noise (at most 2 cycles of
 * a ~340-cycle frame), so the daemon keeps the divide (one word per
 * policy, no reciprocal to keep in step); this bench re-checks that on
 * other CPUs.
 *
 * One policy stamps a burst of packets at one `now`, as submit does: each
 * packet's LTS depends on the previous one, so the quotient sits on the
 * dependency chain. 400 Gbit/s (the datapath benchmark's never-limiting
 * rate: every 64 B packet crosses a whole ns) and 1 Gbit/s with mixed
 * lengths. Both variants must end at the same LTS (checked).
 */
#include <stdio.h>
#include <stdlib.h>

#include "sn_bench.h"
#include "sn_tstamp.h"

#define NPKT_BASE 20000000ull
#define LENS      1024u   /* lengths cycled through (power of two) */

/* sn_tstamp_peek_at() with num / rate from inv = floor((2^64 - 1) / rate):
 * the estimate is at most 2 below the quotient (num < 2^64), corrected. */
static inline uint64_t peek_at_recip(const struct sn_tstamp *p, uint64_t inv, uint64_t now,
				     const struct sn_tstamp_floor *f, uint32_t len,
				     struct sn_tstamp_next *nx)
{
	uint64_t num = p->lts_rem + (uint64_t)len * p->rem_byte;
	uint64_t q = (uint64_t)(((unsigned __int128)num * inv) >> 64);
	uint64_t r = num - q * p->rate;

	while (sn_unlikely(r >= p->rate)) {
		q++;
		r -= p->rate;
	}
	nx->lts = p->lts + (uint64_t)len * p->ns_byte + q;
	nx->lts_rem = r;
	if (nx->lts < f->ns || (nx->lts == f->ns && nx->lts_rem < f->rem)) {
		nx->lts = f->ns;
		nx->lts_rem = f->rem;
	}
	return SN_MAX(nx->lts + (nx->lts_rem != 0), now);
}

static double run(uint64_t rate, const uint32_t *lens, uint64_t npkts, int recip,
		  uint64_t *lts_out)
{
	struct sn_tstamp p;
	struct sn_tstamp_floor fl;
	uint64_t now = 1000000000ull, acc = 0, t0, inv = UINT64_MAX / rate;

	if (sn_tstamp_init(&p, rate, 0, now))
		exit(1);
	sn_tstamp_floor_at(&p, now, &fl);
	t0 = sn_bench_now_ns();
	for (uint64_t i = 0; i < npkts; i++) {
		struct sn_tstamp_next nx;
		uint32_t len = lens[i & (LENS - 1)];

		acc += recip ? peek_at_recip(&p, inv, now, &fl, len, &nx)
			     : sn_tstamp_peek_at(&p, now, &fl, len, &nx);
		sn_tstamp_commit(&p, &nx);
	}
	t0 = sn_bench_now_ns() - t0;
	sn_bench_sink(acc);
	*lts_out = p.lts ^ (p.lts_rem << 1);
	return (double)t0 / (double)npkts;
}

void sn_bench_tstamp(void)
{
	static const struct {
		const char *tag;
		uint64_t rate;
		int mixed;
	} cases[] = {
		{ "rate=400G/len=64", SN_TSTAMP_RATE_MAX, 0 },
		{ "rate=1G/len=64-1518", 1000000000ull, 1 },
	};
	int reps = sn_bench_reps();
	uint64_t npkts = (uint64_t)((double)NPKT_BASE * sn_bench_scale()) + 1000;
	double *v = malloc((size_t)reps * sizeof(*v));
	uint32_t lens[LENS];
	uint64_t seed = 88172645463325252ull;

	if (!v)
		exit(1);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint64_t end[2] = { 0, 0 };

		for (unsigned i = 0; i < LENS; i++) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			lens[i] = cases[c].mixed ? 64 + (uint32_t)(seed % (1518 - 64 + 1)) : 64;
		}
		for (int recip = 0; recip <= 1; recip++) {
			char name[96];

			snprintf(name, sizeof(name), "tstamp/stamp%s/%s", recip ? "_reciprocal" : "",
				 cases[c].tag);
			if (!sn_bench_selected(name))
				continue;
			for (int r = 0; r < reps; r++)
				v[r] = run(cases[c].rate, lens, npkts, recip, &end[recip]);
			sn_bench_report(name, sn_bench_median(v, reps), 0,
					recip ? "alternative: quotient from a reciprocal"
					      : "sn_tstamp_peek_at: one 64-bit divide per packet");
		}
		if (end[0] && end[1] && end[0] != end[1]) {
			fprintf(stderr, "bench tstamp: reciprocal and divide disagree\n");
			exit(1);
		}
	}
	free(v);
}
