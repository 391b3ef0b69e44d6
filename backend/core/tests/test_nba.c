/* test_nba.c — unit tests of the NIC-level bandwidth allocator (sn_nba).
 *
 * Water-filling cases with known answers, the headroom and saturation
 * rules, lazy updates, staleness, invariants on random demand vectors and
 * a two-thread check that seqlocked reports are never torn.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "sn_nba.h"

#include "sn_check.h"

#define CHECK_NEAR(a, b, tol) do {                                         \
	double _a = (double)(a), _b = (double)(b);                          \
	if (fabs(_a - _b) > (tol)) {                                       \
		fprintf(stderr, "FAIL %s:%d: %s = %.1f, want %.1f\n",      \
			__FILE__, __LINE__, #a, _a, _b);                   \
		failures++;                                                \
	}                                                                  \
} while (0)

#define MS 1000000ULL
#define GB 1000000000ULL

/* Drive one update round: each core i moved rate[i] bytes/s over the
 * last 100 ms (reports at t0 and t0 + 100 ms), then update at t0 + 100 ms. */
static struct sn_nba *mk(uint32_t n, uint64_t agg, uint32_t sat_ppm)
{
	struct sn_nba_cfg cfg = { .n_cores = n, .aggregate_bps = agg,
				  .period_ns = 100 * MS, .saturation_ppm = sat_ppm };
	struct sn_nba *nba = sn_nba_create(&cfg);

	if (!nba) {
		perror("sn_nba_create");
		exit(1);
	}
	return nba;
}

static void round_(struct sn_nba *nba, uint32_t n, uint64_t *bytes,
		   const uint64_t *rate, uint64_t t)
{
	for (uint32_t i = 0; i < n; i++) {
		bytes[i] += rate[i] / 10; /* 100 ms worth */
		CHECK(sn_nba_report(nba, i, bytes[i], t) == 0);
	}
	CHECK(sn_nba_update(nba, t) == 1);
}

static uint64_t grant_sum(struct sn_nba *nba, uint32_t n)
{
	uint64_t s = 0;

	for (uint32_t i = 0; i < n; i++)
		s += sn_nba_grant(nba, i);
	return s;
}

/* Prime: a first report and update so the next round measures rates. */
static void prime(struct sn_nba *nba, uint32_t n, uint64_t *bytes)
{
	for (uint32_t i = 0; i < n; i++)
		CHECK(sn_nba_report(nba, i, bytes[i], 0) == 0);
	CHECK(sn_nba_update(nba, 0) == 1);
}

static void test_initial_and_args(void)
{
	struct sn_nba_cfg bad = { .n_cores = 0, .aggregate_bps = 1 };

	errno = 0;
	CHECK(sn_nba_create(&bad) == NULL && errno == EINVAL);
	bad.n_cores = 2;
	bad.aggregate_bps = 0;
	errno = 0;
	CHECK(sn_nba_create(&bad) == NULL && errno == EINVAL);

	struct sn_nba *nba = mk(4, GB, SN_NBA_SAT_OFF);
	for (uint32_t i = 0; i < 4; i++)
		CHECK(sn_nba_grant(nba, i) == GB / 4);
	CHECK(sn_nba_grant(nba, 4) == 0);
	CHECK(sn_nba_report(nba, 4, 0, 0) == -EINVAL);
	CHECK(sn_nba_set_aggregate(nba, 0) == -EINVAL);
	/* no reports at all: everyone idle, equal split */
	CHECK(sn_nba_update(nba, 0) == 1);
	for (uint32_t i = 0; i < 4; i++)
		CHECK(sn_nba_grant(nba, i) == GB / 4);
	sn_nba_free(nba);
}

static void test_all_below_share(void)
{
	uint64_t bytes[4] = { 0 }, rate[4] = { 100 * MS, 200 * MS, 50 * MS, 150 * MS };
	struct sn_nba *nba = mk(4, GB, SN_NBA_SAT_OFF);
	struct sn_nba_core_stats st;

	prime(nba, 4, bytes);
	round_(nba, 4, bytes, rate, 100 * MS);
	/* demand 500 MB/s of 1 GB/s: each keeps its demand + 125 MB/s */
	for (uint32_t i = 0; i < 4; i++) {
		CHECK(sn_nba_core_stats(nba, i, &st) == 0);
		CHECK_NEAR(st.demand_bps, rate[i], 1.0);
		CHECK(st.state == SN_NBA_ACTIVE);
		CHECK_NEAR(sn_nba_grant(nba, i), rate[i] + 125 * MS, 2.0);
	}
	CHECK(grant_sum(nba, 4) <= GB);
	CHECK(grant_sum(nba, 4) >= GB - 4);
	sn_nba_free(nba);
}

static void test_one_hog(void)
{
	uint64_t bytes[4] = { 0 }, rate[4] = { 100 * MS, 100 * MS, 2 * GB, 100 * MS };
	struct sn_nba *nba = mk(4, GB, SN_NBA_SAT_OFF);

	prime(nba, 4, bytes);
	round_(nba, 4, bytes, rate, 100 * MS);
	CHECK_NEAR(sn_nba_grant(nba, 0), 100 * MS, 1.0);
	CHECK_NEAR(sn_nba_grant(nba, 1), 100 * MS, 1.0);
	CHECK_NEAR(sn_nba_grant(nba, 2), 700 * MS, 2.0);
	CHECK_NEAR(sn_nba_grant(nba, 3), 100 * MS, 1.0);
	CHECK(grant_sum(nba, 4) <= GB);

	/* two hogs split what the small ones leave */
	uint64_t rate2[4] = { 100 * MS, 3 * GB, 2 * GB, 100 * MS };
	round_(nba, 4, bytes, rate2, 200 * MS);
	CHECK_NEAR(sn_nba_grant(nba, 1), 400 * MS, 2.0);
	CHECK_NEAR(sn_nba_grant(nba, 2), 400 * MS, 2.0);
	CHECK(grant_sum(nba, 4) <= GB);
	sn_nba_free(nba);
}

static void test_idle_headroom(void)
{
	uint64_t bytes[4] = { 0 }, rate[4] = { 0, 500 * MS, 0, 800 * MS };
	struct sn_nba *nba = mk(4, GB, SN_NBA_SAT_OFF);
	struct sn_nba_core_stats st;

	prime(nba, 4, bytes);
	round_(nba, 4, bytes, rate, 100 * MS);
	/* idle cores: 1 % each; 980 MB/s max-min over 500 and 800 demands */
	CHECK(sn_nba_grant(nba, 0) == 10 * MS);
	CHECK(sn_nba_grant(nba, 2) == 10 * MS);
	CHECK(sn_nba_core_stats(nba, 0, &st) == 0 && st.state == SN_NBA_IDLE);
	CHECK_NEAR(sn_nba_grant(nba, 1), 490 * MS, 2.0);
	CHECK_NEAR(sn_nba_grant(nba, 3), 490 * MS, 2.0);
	CHECK(grant_sum(nba, 4) <= GB);

	/* headroom never exceeds an equal share: 200 cores, 1 active */
	uint64_t b2[200] = { 0 }, r2[200] = { 0 };
	struct sn_nba *big = mk(200, GB, SN_NBA_SAT_OFF);
	r2[7] = 5 * GB;
	prime(big, 200, b2);
	round_(big, 200, b2, r2, 100 * MS);
	CHECK(sn_nba_grant(big, 0) == GB / 200);
	CHECK_NEAR(sn_nba_grant(big, 7), GB / 200, 2.0);
	CHECK(grant_sum(big, 200) <= GB);
	sn_nba_free(big);
	sn_nba_free(nba);
}

static void test_saturation(void)
{
	uint64_t bytes[2] = { 0 }, rate[2];
	struct sn_nba *nba = mk(2, GB, 0 /* default 5 % */);
	struct sn_nba_core_stats st;

	prime(nba, 2, bytes);
	/* core 0 light, core 1 uses exactly its grant: it is capped by the
	 * grant, so it must get everything core 0 does not use (core 0 gets
	 * its demand + 10 % growth room) */
	rate[0] = 100 * MS;
	rate[1] = sn_nba_grant(nba, 1);
	round_(nba, 2, bytes, rate, 100 * MS);
	CHECK(sn_nba_core_stats(nba, 1, &st) == 0 && st.state == SN_NBA_SATURATED);
	CHECK_NEAR(sn_nba_grant(nba, 0), 110 * MS, 1.0);
	CHECK_NEAR(sn_nba_grant(nba, 1), 890 * MS, 2.0);
	/* stable: core 0 at 100 of 110 is not saturated, core 1 at 890 is */
	rate[1] = sn_nba_grant(nba, 1);
	round_(nba, 2, bytes, rate, 200 * MS);
	CHECK(sn_nba_core_stats(nba, 0, &st) == 0 && st.state == SN_NBA_ACTIVE);
	CHECK(sn_nba_core_stats(nba, 1, &st) == 0 && st.state == SN_NBA_SATURATED);
	CHECK_NEAR(sn_nba_grant(nba, 0), 110 * MS, 1.0);
	CHECK_NEAR(sn_nba_grant(nba, 1), 890 * MS, 2.0);
	/* core 1 drops to 300 (below its grant): plain demand again; demands
	 * 110 + 330 leave 560 to spread */
	rate[1] = 300 * MS;
	round_(nba, 2, bytes, rate, 300 * MS);
	CHECK(sn_nba_core_stats(nba, 1, &st) == 0 && st.state == SN_NBA_ACTIVE);
	CHECK_NEAR(sn_nba_grant(nba, 0), 110 * MS + 280 * MS, 2.0);
	CHECK_NEAR(sn_nba_grant(nba, 1), 330 * MS + 280 * MS, 2.0);
	/* growth x saturation that could oscillate is rejected */
	struct sn_nba_cfg bad = { .n_cores = 2, .aggregate_bps = GB,
				  .saturation_ppm = 100000, .growth_ppm = 100000 };
	errno = 0;
	CHECK(sn_nba_create(&bad) == NULL && errno == EINVAL);
	sn_nba_free(nba);
}

static void test_lazy_and_stale(void)
{
	uint64_t bytes[2] = { 0 }, rate[2] = { 300 * MS, 600 * MS };
	struct sn_nba *nba = mk(2, GB, SN_NBA_SAT_OFF);
	uint64_t e0;

	prime(nba, 2, bytes);
	e0 = sn_nba_epoch(nba);
	CHECK(sn_nba_update(nba, 50 * MS) == 0);     /* period not elapsed */
	CHECK(sn_nba_update(nba, 99 * MS) == 0);
	CHECK(sn_nba_epoch(nba) == e0);
	round_(nba, 2, bytes, rate, 100 * MS);
	CHECK(sn_nba_epoch(nba) == e0 + 1);
	CHECK_NEAR(sn_nba_grant(nba, 0), 350 * MS, 2.0);
	/* new aggregate applies at the next update call even before the period */
	CHECK(sn_nba_set_aggregate(nba, 2 * GB) == 0);
	CHECK(sn_nba_update(nba, 110 * MS) == 1);
	CHECK_NEAR(sn_nba_grant(nba, 0), 300 * MS + 550 * MS, 2.0);
	/* no report from either core: previous estimate kept within stale_ns */
	CHECK(sn_nba_update(nba, 210 * MS) == 1);
	CHECK_NEAR(sn_nba_grant(nba, 1), 600 * MS + 550 * MS, 2.0);
	/* core 0 goes silent past 2 periods: idle, headroom only */
	CHECK(sn_nba_report(nba, 1, bytes[1] += 60 * MS, 350 * MS) == 0);
	CHECK(sn_nba_update(nba, 350 * MS) == 1);
	CHECK(sn_nba_grant(nba, 0) == 20 * MS);
	CHECK(sn_nba_grant(nba, 1) == 2 * GB - 20 * MS);
	sn_nba_free(nba);
}

/* Random demand vectors: sum <= A, idle cores get exactly the headroom,
 * and max-min: an active core granted less than its demand holds at least
 * as much as any other active core (nobody is favoured over a bottleneck). */
static void test_random_invariants(void)
{
	uint64_t seed = 12345;

	for (int it = 0; it < 2000; it++) {
		uint32_t n = 1 + (uint32_t)(seed % 16);
		uint64_t agg = 1000 + (seed >> 8) % (100 * GB);
		uint64_t bytes[16] = { 0 }, rate[16];
		struct sn_nba *nba = mk(n, agg, SN_NBA_SAT_OFF);
		int n_active = 0;

		for (uint32_t i = 0; i < n; i++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			rate[i] = (seed >> 33) % 4 == 0 ? 0 : ((seed >> 20) % (2 * agg / n + 1)) * 10;
			n_active += rate[i] > 0;
		}
		prime(nba, n, bytes);
		round_(nba, n, bytes, rate, 100 * MS);
		uint64_t s = grant_sum(nba, n);
		CHECK(s <= agg);
		CHECK(s + n + 1 >= agg);
		double h = fmin(agg * 0.01, (double)agg / n);
		for (uint32_t i = 0; i < n; i++) {
			uint64_t g = sn_nba_grant(nba, i);
			if (n_active && rate[i] == 0)
				CHECK_NEAR(g, h, 1.0);
			if (rate[i] == 0 || g + 2 >= rate[i])
				continue;
			for (uint32_t j = 0; j < n; j++)
				if (rate[j] > 0)
					CHECK(g + 2 >= sn_nba_grant(nba, j));
		}
		sn_nba_free(nba);
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
	}
}

/* Torn reads: the writer always reports bytes == ts (1 GB/s exactly), so
 * any torn (bytes, ts) pair shows up as a demand other than 1e9. */
struct writer_arg {
	struct sn_nba *nba;
	atomic_int stop;
};

static void *writer(void *p)
{
	struct writer_arg *w = p;
	uint64_t t = 0;

	while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
		t += 1000;
		sn_nba_report(w->nba, 0, t, t);
	}
	return NULL;
}

static void test_two_threads(void)
{
	struct sn_nba_cfg cfg = { .n_cores = 1, .aggregate_bps = 10 * GB,
				  .period_ns = 1, .saturation_ppm = SN_NBA_SAT_OFF };
	struct writer_arg w = { .nba = sn_nba_create(&cfg) };
	struct sn_nba_core_stats st;
	pthread_t th;
	int measured = 0;

	CHECK(w.nba != NULL);
	atomic_init(&w.stop, 0);
	/* consume a first report so every later estimate is a measured rate */
	sn_nba_report(w.nba, 0, 0, 0);
	sn_nba_update(w.nba, 0);
	CHECK(pthread_create(&th, NULL, writer, &w) == 0);
	for (uint64_t now = 1; now < 50000000 && measured < 100000; now++) {
		sn_nba_update(w.nba, now);
		sn_nba_core_stats(w.nba, 0, &st);
		if (st.demand_bps == 1e10)  /* first-report guess, not measured yet */
			continue;
		if (st.state == SN_NBA_ACTIVE && st.demand_bps != 1e9) {
			fprintf(stderr, "torn report: demand %.3f\n", st.demand_bps);
			failures++;
			break;
		}
		measured += st.state == SN_NBA_ACTIVE;
		sn_nba_grant(w.nba, 0);
	}
	atomic_store(&w.stop, 1);
	pthread_join(th, NULL);
	printf("two threads: %d updates with a measured demand\n", measured);
	CHECK(measured > 0);
	sn_nba_free(w.nba);
}

int main(void)
{
	test_initial_and_args();
	test_all_below_share();
	test_one_hog();
	test_idle_headroom();
	test_saturation();
	test_lazy_and_stale();
	test_random_invariants();
	test_two_threads();
	return sn_check_exit("test_nba");
}
