/* SPDX-License-Identifier: BSD-3-Clause */
/* test_tstamp.c — sn_tstamp exactness, extremes, burst, consolidation.
 *
 * Exactness: a policy kept backlogged must have issued, after k packets
 * totalling S bytes, LTS = t0 + S*8e9/rate exactly (checked against a
 * 128-bit closed form, per packet for the shorter runs and at the end of
 * the long ones), from 1 kbit/s with 64 KiB packets (years of simulated
 * time) to 400 Gbit/s with 64 B packets, and over one simulated hour at
 * 1 Gbit/s. Conformance: no window holds more than rate*T + burst + lmax.
 * TAP-style output; exit 1 on first failure.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_tstamp.h"

#include "sn_tap.h"

typedef unsigned __int128 u128;

static uint64_t rng_state = 777;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ceil(t0 + bytes*8e9/rate) and the exact rational pieces. */
static void closed_form(uint64_t t0, u128 bytes, uint64_t rate, uint64_t *ns, uint64_t *rem)
{
	u128 num = bytes * SN_TSTAMP_NS_BITS;

	*ns = t0 + (uint64_t)(num / rate);
	*rem = (uint64_t)(num % rate);
}

static void test_params(void)
{
	struct sn_tstamp p;

	CHECK(sn_tstamp_init(&p, SN_TSTAMP_RATE_MIN - 1, 0, 0) == -EINVAL, "rate low");
	CHECK(sn_tstamp_init(&p, SN_TSTAMP_RATE_MAX + 1, 0, 0) == -EINVAL, "rate high");
	CHECK(sn_tstamp_init(&p, 1000000, SN_TSTAMP_BURST_MAX + 1, 0) == -EINVAL, "burst");
	CHECK(sn_tstamp_init(NULL, 1000000, 0, 0) == -EINVAL, "null");
	CHECK(sn_tstamp_init(&p, SN_TSTAMP_RATE_MIN, SN_TSTAMP_BURST_MAX, 0) == 0, "min ok");
	CHECK(sn_tstamp_set(&p, 0, 0) == -EINVAL && p.rate == SN_TSTAMP_RATE_MIN, "set bad");
	CHECK(sn_tstamp_init(&p, SN_TSTAMP_RATE_MAX, 0, 0) == 0, "max ok");
	printf("ok %d - parameter validation\n", ++n_test);
}

/* Backlogged policy (every packet arrives at t0): exact sum of increments. */
static void run_exact(uint64_t rate, uint32_t len_lo, uint32_t len_hi, uint64_t npkts,
		      int check_each, const char *what)
{
	const uint64_t t0 = 36000ull * 1000000000ull;   /* start 10 h into the clock */
	struct sn_tstamp p;
	u128 bytes = 0;
	uint64_t ns, rem, ts = 0, prev = 0;

	CHECK(sn_tstamp_init(&p, rate, 0, t0) == 0, "init");
	for (uint64_t i = 0; i < npkts; i++) {
		uint32_t len = len_lo == len_hi ? len_lo
						: len_lo + (uint32_t)(rnd() % (len_hi - len_lo + 1));

		ts = sn_tstamp_stamp(&p, t0, len);
		bytes += len;
		CHECK(ts >= prev, "monotone");
		prev = ts;
		if (check_each) {
			closed_form(t0, bytes, rate, &ns, &rem);
			CHECK(p.lts == ns && p.lts_rem == rem && ts == ns + (rem != 0),
			      "pkt %lu: lts %lu+%lu/r want %lu+%lu/r", (unsigned long)i,
			      (unsigned long)p.lts, (unsigned long)p.lts_rem, (unsigned long)ns,
			      (unsigned long)rem);
		}
	}
	closed_form(t0, bytes, rate, &ns, &rem);
	CHECK(p.lts == ns && p.lts_rem == rem && ts == ns + (rem != 0),
	      "final: lts %lu+%lu/r want %lu+%lu/r", (unsigned long)p.lts,
	      (unsigned long)p.lts_rem, (unsigned long)ns, (unsigned long)rem);
	printf("ok %d - exact %s: rate %lu bit/s, %lu pkts, %.3f s simulated, final ts %lu\n",
	       ++n_test, what, (unsigned long)rate, (unsigned long)npkts,
	       (double)(ts - t0) / 1e9, (unsigned long)ts);
}

/* The fast path over the whole rate range: random rates (and rates next
 * to powers of two), random lengths up to the fast path's limit (the
 * largest numerators it sees), every packet checked against the 128-bit
 * closed form (a faster quotient, e.g. bench_tstamp.c's reciprocal, must
 * pass this too). */
static void run_random_rates(unsigned nrates, unsigned npkts)
{
	const uint64_t t0 = 1000000000ull;
	uint64_t ns, rem;

	for (unsigned k = 0; k < nrates; k++) {
		uint64_t rate = SN_TSTAMP_RATE_MIN +
				rnd() % (SN_TSTAMP_RATE_MAX - SN_TSTAMP_RATE_MIN + 1);
		struct sn_tstamp p;
		u128 bytes = 0;

		if (k % 4 == 0)   /* rates just below a power of two and its neighbours */
			rate = SN_MAX(SN_TSTAMP_RATE_MIN,
				      SN_MIN(SN_TSTAMP_RATE_MAX, (1ull << (10 + k % 29)) - 1 + k % 3));
		CHECK(sn_tstamp_init(&p, rate, 0, t0) == 0, "init");
		for (unsigned i = 0; i < npkts; i++) {
			uint32_t len = rnd() % 2 ? 1 + (uint32_t)(rnd() % 9000)
						 : SN_TSTAMP_FAST_LEN - (uint32_t)(rnd() % 1024);
			uint64_t ts = sn_tstamp_stamp(&p, t0, len);

			bytes += len;
			closed_form(t0, bytes, rate, &ns, &rem);
			CHECK(p.lts == ns && p.lts_rem == rem && ts == ns + (rem != 0),
			      "rate %lu pkt %u len %u: lts %lu+%lu/r want %lu+%lu/r",
			      (unsigned long)rate, i, len, (unsigned long)p.lts,
			      (unsigned long)p.lts_rem, (unsigned long)ns, (unsigned long)rem);
		}
	}
	printf("ok %d - exact at %u random rates x %u packets\n", ++n_test,
	       nrates, npkts);
}

/* Random arrivals around the rate: timestamps never let any window carry
 * more than rate*T + burst + lmax bytes, and the long-run rate is exact. */
static void run_conformance(uint64_t rate, uint32_t burst, uint32_t lmax, unsigned n)
{
	struct sn_tstamp p;
	uint64_t *ts = malloc(n * sizeof(*ts));
	uint32_t *len = malloc(n * sizeof(*len));
	uint64_t now = 5000000000ull, pkt_ns = (uint64_t)lmax * 8000000000ull / rate;
	u128 total = 0;

	CHECK(ts && len, "oom");
	CHECK(sn_tstamp_init(&p, rate, burst, now) == 0, "init");
	for (unsigned i = 0; i < n; i++) {
		/* Mostly faster than the rate, with idle gaps now and then. */
		now += rnd() % 8 == 0 ? rnd() % (20 * pkt_ns + 1) : rnd() % (pkt_ns / 2 + 1);
		len[i] = 1 + (uint32_t)(rnd() % lmax);
		ts[i] = sn_tstamp_stamp(&p, now, len[i]);
		CHECK(ts[i] >= now, "ts before arrival");
		CHECK(i == 0 || ts[i] >= ts[i - 1], "policy timestamps are monotone");
	}
	for (unsigned a = 0; a < n; a++) {
		u128 bytes = 0;

		for (unsigned b = a; b < n; b++) {
			bytes += len[b];
			/* bytes*8e9 <= rate*(ts[b]-ts[a] + 1 ns of ceil rounding)
			 *              + (burst+lmax)*8e9 */
			CHECK(bytes * SN_TSTAMP_NS_BITS <=
			      (u128)rate * (ts[b] - ts[a] + 1) +
			      (u128)(burst + lmax) * SN_TSTAMP_NS_BITS,
			      "window %u..%u exceeds rate", a, b);
		}
		total += len[a];
	}
	free(ts);
	free(len);
	printf("ok %d - conformance rate %lu burst %u lmax %u: %u pkts, windows ok\n", ++n_test,
	       (unsigned long)rate, burst, lmax, n);
	(void)total;
}

static void test_burst(void)
{
	struct sn_tstamp p;
	uint64_t now = 1000000000ull, pkt = 12000;   /* 1500 B at 1 Gbit/s */
	int at_now = 0;

	CHECK(sn_tstamp_init(&p, 1000000000ull, 10 * 1500, 0) == 0, "init");
	for (int i = 0; i < 20; i++) {
		uint64_t ts = sn_tstamp_stamp(&p, now, 1500);

		if (ts == now)
			at_now++;
		else
			CHECK(ts == now + (uint64_t)(i - 10) * pkt, "paced after burst: pkt %d ts %lu",
			      i, (unsigned long)ts);
	}
	/* Carousel's one free packet plus 10 packets of burst. */
	CHECK(at_now == 11, "burst passed %d", at_now);
	/* Fractional burst: 1 byte at 3 bit/s... use 1001 bit/s, burst 1 B:
	 * burst/rate = 8e9/1001 ns, not an integer. Near t = 0 the floor clamps. */
	CHECK(sn_tstamp_init(&p, 1001, 1, 5) == 0, "init small");
	CHECK(p.lts == 0 && p.lts_rem == 0, "floor clamps at 0");
	CHECK(sn_tstamp_init(&p, 1001, 1, 10000000000ull) == 0, "init");
	/* LTS = 1e10 - 8e9/1001 = 1e10 - 7992007 - 993/1001 */
	CHECK(p.lts == 10000000000ull - 7992008ull && p.lts_rem == 1001 - 993,
	      "fractional floor %lu+%lu", (unsigned long)p.lts, (unsigned long)p.lts_rem);
	printf("ok %d - burst allowance\n", ++n_test);
}

static void test_consolidate_and_set(void)
{
	struct sn_tstamp fast, slow;
	struct sn_tstamp *both[2] = { &fast, &slow };
	uint64_t now = 1000, ts = 0, ns, rem;

	CHECK(sn_tstamp_init(&fast, 1000000000ull, 0, now) == 0, "init");
	CHECK(sn_tstamp_init(&slow, 100000000ull, 0, now) == 0, "init");
	CHECK(sn_tstamp_consolidate(both, 0, now, 100) == now, "no policy: now");
	for (int i = 0; i < 1000; i++)
		ts = sn_tstamp_consolidate(both, 2, now, 333);
	closed_form(now, 333 * 1000, 100000000ull, &ns, &rem);
	CHECK(ts == ns + (rem != 0), "slow dominates: %lu want %lu", (unsigned long)ts,
	      (unsigned long)(ns + (rem != 0)));
	closed_form(now, 333 * 1000, 1000000000ull, &ns, &rem);
	CHECK(fast.lts == ns && fast.lts_rem == rem, "fast advanced by its own rate");

	/* Rate change: the only rounding is LTS up to a whole ns. */
	CHECK(sn_tstamp_set(&slow, 3000000000ull, 0) == 0, "set");
	{
		uint64_t base = slow.lts;

		CHECK(slow.lts_rem == 0, "fraction folded");
		for (int i = 0; i < 3; i++)
			ts = sn_tstamp_stamp(&slow, now, 64);
		closed_form(base, 192, 3000000000ull, &ns, &rem);
		CHECK(slow.lts == ns && slow.lts_rem == rem && ts == ns + (rem != 0),
		      "exact after set");
	}
	/* Peek leaves the policies alone until commit (dropped packets are
	 * not charged). */
	{
		struct sn_tstamp_next nx[2];
		struct sn_tstamp f0 = fast, s0 = slow;
		uint64_t t1 = sn_tstamp_consolidate_peek(both, 2, now, 1500, nx);
		uint64_t t2 = sn_tstamp_consolidate_peek(both, 2, now, 1500, nx);

		CHECK(t1 == t2 && !memcmp(&f0, &fast, sizeof(f0)) && !memcmp(&s0, &slow, sizeof(s0)),
		      "peek is pure");
		sn_tstamp_consolidate_commit(both, 2, nx);
		CHECK(sn_tstamp_stamp(&slow, now, 0) == t1, "commit applied");
		CHECK(fast.lts == nx[0].lts && fast.lts_rem == nx[0].lts_rem, "commit fast");
	}
	printf("ok %d - consolidation, peek/commit and rate change\n", ++n_test);
}

/* sn_tstamp_peek_run() against per-packet sn_tstamp_peek_at() and
 * sn_tstamp_commit() over random runs: rates from the extremes to random
 * ones, with and without a burst allowance, the LTS ahead of, around and
 * far behind `now`, 1-32 packets of 1 B to 64 KiB plus runs at the
 * SN_TSTAMP_FAST_LEN limit. The run's LTS must be bit for bit the
 * per-packet one and its timestamp the last packet's. */
static void test_peek_run(unsigned trials)
{
	static const uint64_t rates[] = { SN_TSTAMP_RATE_MIN, SN_TSTAMP_RATE_MAX, 1000000000ull,
					  999999937ull, 400000000000ull - 1 };
	unsigned floor_bound = 0;

	for (unsigned t = 0; t < trials; t++) {
		struct sn_tstamp p, q;
		struct sn_tstamp_floor f;
		struct sn_tstamp_next nx, rn;
		uint64_t rate = t % 3 == 0 ? rates[t / 3 % 5]
					   : SN_TSTAMP_RATE_MIN + rnd() % (SN_TSTAMP_RATE_MAX -
									    SN_TSTAMP_RATE_MIN);
		uint32_t burst = t % 2 ? 0 : (uint32_t)(rnd() % 100000);
		uint64_t now = 1000000000000ull + rnd() % 1000000000ull, ts = 0, rts;
		uint32_t len[32], k = 1 + (uint32_t)(rnd() % 32), bytes = 0;
		uint64_t start = now - burst * 8000000000ull / rate;

		CHECK(sn_tstamp_init(&p, rate, burst, 0) == 0, "init");
		/* LTS: far behind, just behind, at, or ahead of now */
		switch (rnd() % 4) {
		case 0: p.lts = now - rnd() % now; break;
		case 1: p.lts = start - 1 - rnd() % 5000; break;
		case 2: p.lts = now; break;
		default: p.lts = now + rnd() % 1000000; break;
		}
		p.lts_rem = rnd() % rate;
		for (uint32_t i = 0; i < k; i++) {
			len[i] = t % 97 == 0 ? SN_TSTAMP_FAST_LEN / k
					     : 1 + (uint32_t)(rnd() % (rnd() % 2 ? 1518 : 65536));
			bytes += len[i];
		}
		q = p;
		sn_tstamp_floor_at(&p, now, &f);
		for (uint32_t i = 0; i < k; i++) {
			ts = sn_tstamp_peek_at(&q, now, &f, len[i], &nx);
			sn_tstamp_commit(&q, &nx);
		}
		rts = sn_tstamp_peek_run(&p, now, &f, len[0], bytes, &rn);
		CHECK(rn.lts == q.lts && rn.lts_rem == q.lts_rem && rts == ts,
		      "run of %u (%u B) at rate %lu burst %u: %lu+%lu ts %lu, per packet %lu+%lu "
		      "ts %lu", k, bytes, (unsigned long)rate, burst, (unsigned long)rn.lts,
		      (unsigned long)rn.lts_rem, (unsigned long)rts, (unsigned long)q.lts,
		      (unsigned long)q.lts_rem, (unsigned long)ts);
		/* the floor term decided the run: the result is not x_0 + C(1..k) */
		{
			uint64_t num = p.lts_rem + (uint64_t)bytes * p.rem_byte;

			if (k > 1 && (rn.lts != p.lts + (uint64_t)bytes * p.ns_byte + num / rate ||
				      rn.lts_rem != num % rate))
				floor_bound++;
		}
	}
	CHECK(floor_bound > trials / 10, "floor-bound runs %u of %u", floor_bound, trials);
	printf("ok %d - run of packets in closed form = per-packet steps (%u runs)\n", ++n_test,
	       trials);
}

int main(void)
{
	test_params();
	test_burst();
	test_consolidate_and_set();
	test_peek_run(200000);
	/* Extremes, per-packet checked. */
	run_exact(SN_TSTAMP_RATE_MIN, 65536, 65536, 200000, 1, "1 kbit/s 64 KiB");
	run_exact(SN_TSTAMP_RATE_MIN, 1, 65536, 200000, 1, "1 kbit/s random len");
	run_exact(SN_TSTAMP_RATE_MAX, 64, 64, 2000000, 1, "400 Gbit/s 64 B");
	run_exact(SN_TSTAMP_RATE_MAX, 64, 9000, 2000000, 1, "400 Gbit/s random len");
	run_exact(1001, 1, 1500, 200000, 1, "1001 bit/s");
	run_exact(999999937ull, 1, 1, 2000000, 1, "prime rate, 1 B");
	run_exact(SN_TSTAMP_RATE_MAX, SN_TSTAMP_FAST_LEN - 1, SN_TSTAMP_FAST_LEN + 1, 100000, 1,
		  "400 Gbit/s across the 128-bit path");
	run_exact(SN_TSTAMP_RATE_MIN, UINT32_MAX, UINT32_MAX, 100, 1, "1 kbit/s 4 GiB packets");
	/* Long runs, checked at the end: 400 Gbit/s 64 B for 5e7 packets and
	 * one full simulated hour of 1500 B at 1 Gbit/s (3e8 packets). */
	run_exact(SN_TSTAMP_RATE_MAX, 64, 64, 50000000, 0, "400 Gbit/s 64 B long");
	run_exact(1000000000ull, 1500, 1500, 300000000, 0, "1 Gbit/s 1500 B, one hour");
	run_exact(3000000000ull, 64, 1518, 50000000, 0, "3 Gbit/s mixed");
	run_random_rates(2000, 500);
	run_conformance(1000000000ull, 0, 1500, 3000);
	run_conformance(1000000000ull, 64000, 1500, 3000);
	run_conformance(SN_TSTAMP_RATE_MIN, 1000, 1500, 2000);
	run_conformance(SN_TSTAMP_RATE_MAX, 9000, 9000, 2000);
	printf("1..%d\n", n_test);
	return 0;
}
