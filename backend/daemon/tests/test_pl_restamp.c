/* SPDX-License-Identifier: BSD-3-Clause */
/* test_pl_restamp.c — the release-time arithmetic the pipeline's restamps
 * rely on (sn_pl_internal.h): a queued frame keeps ts = max(O, A) and the
 * lag O - A of its aggregate share's stamp A, and a restamp must get O
 * and A back from them. Properties:
 *  - split_ts(max(O, A), lag_of(O, A)) is (O, A) whenever |O - A| fits the
 *    lag; saturated, it still gives back ts = max(O, A) exactly and the
 *    smaller one no further than INT32_MAX from ts;
 *  - lag_of() never yields AGG_NONE (the "no aggregate" marker);
 *  - agg_lag_of() at submit gives O = max(now, the other policies'
 *    stamps) and A = max(now, the share's stamp), stamps rounded up;
 *  - an NBA restamp (new A', restamp_aggs()) keeps O: the frame's other
 *    policies are not changed by a new grant.
 * No EAL: only the header's static inline helpers run. */
#include <stdint.h>
#include <stdio.h>

#include "sn_pl_internal.h"
#include "sn_check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A stamp near base: base + [0, span). */
static uint64_t near(uint64_t base, uint64_t span)
{
	return base + next() % span;
}

static void round_trip(void)
{
	const uint64_t base = 1ull << 50;

	for (int i = 0; i < 200000; i++) {
		/* Below the 262 ms horizon, and up to the lag's limit. */
		const uint64_t span = i & 1 ? 262000000ull : (uint64_t)INT32_MAX + 1;
		uint64_t o = near(base, span), a = near(base, span), ro, ra;
		int32_t lag = lag_of(o, a);

		split_ts(RTE_MAX(o, a), lag, &ro, &ra);
		CHECK(lag != AGG_NONE);
		CHECK(ro == o && ra == a);
	}
}

static void saturated(void)
{
	const uint64_t base = 1ull << 50;

	for (int i = 0; i < 100000; i++) {
		const uint64_t far = (uint64_t)INT32_MAX + 1 + next() % (1ull << 40);
		uint64_t o = base, a = base, ts, ro, ra;
		int32_t lag;

		if (i & 1)
			o += far;
		else
			a += far;
		ts = RTE_MAX(o, a);
		lag = lag_of(o, a);
		split_ts(ts, lag, &ro, &ra);
		CHECK(lag != AGG_NONE);
		CHECK(RTE_MAX(ro, ra) == ts);
		CHECK(ts - RTE_MIN(ro, ra) == (uint64_t)INT32_MAX);
	}
	CHECK(lag_of(0, UINT64_MAX >> 1) == -INT32_MAX);
	CHECK(lag_of(UINT64_MAX >> 1, 0) == INT32_MAX);
}

static uint64_t up(const struct sn_tstamp_next *nx)
{
	return nx->lts + (nx->lts_rem != 0);
}

static void at_submit(void)
{
	const uint64_t now = 1ull << 40;

	for (int i = 0; i < 100000; i++) {
		struct sn_tstamp_next nx[SN_CLASSIFY_MAX_POL];
		const unsigned n = 1 + (unsigned)(next() % SN_CLASSIFY_MAX_POL);
		uint64_t o = now, a, ro, ra;

		for (unsigned k = 0; k < n; k++) {
			/* some stamps behind now (an idle limit), most ahead */
			nx[k].lts = near(now - 1000000, 200000000);
			nx[k].lts_rem = (uint32_t)(next() % 3);
		}
		for (unsigned k = 0; k + 1 < n; k++)
			o = RTE_MAX(o, up(&nx[k]));
		a = RTE_MAX(up(&nx[n - 1]), now);
		split_ts(RTE_MAX(o, a), agg_lag_of(nx, n, now), &ro, &ra);
		CHECK(ro == o && ra == a);
	}
}

/* restamp_aggs(): A' = the rescaled share stamp, ts' = max(O, A', now). */
static void nba_restamp_keeps_o(void)
{
	const uint64_t now = 1ull << 40;

	for (int i = 0; i < 100000; i++) {
		uint64_t o = near(now, 262000000), a = near(now, 262000000), ts = RTE_MAX(o, a);
		int32_t lag = lag_of(o, a);
		uint64_t so, sa, a2 = near(now, 262000000), ro, ra;

		split_ts(ts, lag, &so, &sa);
		CHECK(so == o && sa == a);
		lag = lag_of(so, a2);
		ts = RTE_MAX(RTE_MAX(so, a2), now);
		split_ts(ts, lag, &ro, &ra);
		CHECK(ro == o && ra == a2);
	}
}

int main(void)
{
	static_assert(sizeof(struct meta) == 24, "meta fits beside a PMD's Rx timestamp");
	round_trip();
	saturated();
	at_submit();
	nba_restamp_keeps_o();
	return sn_check_exit("test_pl_restamp");
}
