/* SPDX-License-Identifier: BSD-3-Clause */
/* test_policy_nba.c — aggregates in the policy store: the NBA instances
 * sn_policy_publish attaches, their per-worker publication path with two
 * fake workers, and their lifetime across publications.
 *
 * No DPDK: the workers are simulated. Part 1 drives reports and the main
 * thread's sn_policy_tick with a simulated clock and checks the grants
 * against the water-filling answer (sn_nba.h rules). Part 2 runs two
 * registered QSBR reader threads that read the published table and their
 * grant in a loop while main republishes: an NBA instance freed too early
 * is a use-after-free (run under ASan in CI).
 */
#define _LGPL_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <urcu-qsbr.h>

#include "sn_nba.h"
#include "sn_policy.h"

#include "sn_check.h"
#include "sn_test_policy.h"

#define MS 1000000ull

static const char *pol_text(uint64_t rate, unsigned update_ms)
{
	static char buf[512];

	snprintf(buf, sizeof(buf), "{\"aggregates\": {\"agg\": {\"rate_bps\": %llu, "
		 "\"update_ms\": %u}}, \"ports\": {\"vm0\": {\"classes\": [{\"aggregate\": "
		 "\"agg\"}]}, \"vm1\": {\"classes\": [{\"aggregate\": \"agg\"}]}}}",
		 (unsigned long long)rate, update_ms);
	return buf;
}

/* Two fake workers offering d0 and d1 bytes/s for `rounds` periods. */
static uint64_t t_now = 1000 * MS, bytes[2];

static void run_rounds(struct sn_policy_store *st, double d0, double d1, int rounds,
		       uint64_t period)
{
	for (int r = 0; r < rounds; r++) {
		struct sn_nba *nba = sn_policy_main(st)->aggs[0].nba;

		t_now += period;
		bytes[0] += (uint64_t)(d0 * (double)period / 1e9);
		bytes[1] += (uint64_t)(d1 * (double)period / 1e9);
		/* each holds its reserve, half a period of its rate queued
		 * (sn_nba.h rule 1): its demand is its rate */
		CHECK(sn_nba_report(nba, 0, bytes[0], (uint64_t)(d0 * (double)period / 2e9),
				    t_now) == 0);
		CHECK(sn_nba_report(nba, 1, bytes[1], (uint64_t)(d1 * (double)period / 2e9),
				    t_now) == 0);
		sn_policy_tick(st, t_now);
	}
}

static void part1(void)
{
	struct sn_policy p;
	struct sn_policy_store *st;
	struct sn_nba *nba, *nba2;
	uint64_t g0, g1;

	sn_test_policy_parse(pol_text(80000000, 10), &p);
	CHECK(p.n_aggs == 1 && p.aggs[0].nba == NULL);
	CHECK(p.ports[0].classes[0].agg == 0);
	st = sn_policy_store_create(&p);
	CHECK(st != NULL);
	CHECK(sn_policy_store_set_workers(st, 0) == -EINVAL);
	CHECK(sn_policy_store_set_workers(st, 2) == 0);
	nba = sn_policy_main(st)->aggs[0].nba;
	CHECK(nba != NULL);
	/* Before the first update every worker holds A/n. */
	CHECK(sn_nba_grant(nba, 0) == 5000000 && sn_nba_grant(nba, 1) == 5000000);

	/* Demands 2 MB/s and 20 MB/s over a 10 MB/s aggregate: water-filling
	 * gives the small one its demand (+1 % growth margin, sn_nba.h rule 2)
	 * and the saturated one the rest. */
	run_rounds(st, 2e6, 20e6, 6, 10 * MS);
	g0 = sn_nba_grant(nba, 0);
	g1 = sn_nba_grant(nba, 1);
	CHECK(fabs((double)g0 - 2.02e6) < 0.005 * 2.02e6);
	CHECK(g0 + g1 <= 10000000 && g0 + g1 >= 10000000 - 2);

	/* Same name and period: the instance (and its demand estimates) carries
	 * on, the new rate is in force at once. */
	sn_test_policy_parse(pol_text(40000000, 10), &p);
	CHECK(sn_policy_publish(st, &p) == 0);
	CHECK(sn_policy_main(st)->aggs[0].nba == nba);
	sn_policy_tick(st, t_now + 1);   /* dirty: recomputed before the period ends */
	g0 = sn_nba_grant(nba, 0);
	g1 = sn_nba_grant(nba, 1);
	CHECK(fabs((double)g0 - 2.02e6) < 0.005 * 2.02e6);
	CHECK(g0 + g1 <= 5000000 && g0 + g1 >= 5000000 - 2);

	/* Another period: a new instance over both workers (A/n again). */
	sn_test_policy_parse(pol_text(40000000, 20), &p);
	CHECK(sn_policy_publish(st, &p) == 0);
	nba2 = sn_policy_main(st)->aggs[0].nba;
	CHECK(nba2 != NULL);
	CHECK(sn_nba_grant(nba2, 0) == 2500000 && sn_nba_grant(nba2, 1) == 2500000);
	bytes[0] = bytes[1] = 0;
	run_rounds(st, 1e6, 0, 6, 20 * MS);
	/* Worker 1 idle: headroom 1 % of A; worker 0 the rest. */
	CHECK(sn_nba_grant(nba2, 1) == 50000);
	CHECK(sn_nba_grant(nba2, 0) == 5000000 - 50000);

	/* Aggregate removed: no instance left (ASan: freed exactly once). */
	sn_test_policy_parse("{}", &p);
	CHECK(sn_policy_publish(st, &p) == 0);
	CHECK(sn_policy_main(st)->n_aggs == 0);
	CHECK(sn_policy_tick(st, t_now + 1000 * MS) == 0);
	sn_policy_store_destroy(st);
}

/* ---- part 2: readers under republication ---------------------------------- */
static struct sn_policy_store *g_st;
static atomic_int g_stop;
static atomic_ulong g_reads[2];
static _Atomic uint64_t g_now;	/* the publisher's clock, read by the readers */

/* Wait (bounded: 10 s) until both readers have gone round their loop at
 * least once more than `since`; false if one never does. Without it the
 * 400 publications can finish before a reader thread is first scheduled
 * (seen on a loaded 2-core CI host) and the test proves nothing. */
static bool readers_progressed(const unsigned long since[2])
{
	for (int ms = 0; ms < 10000; ms++) {
		if (atomic_load(&g_reads[0]) > since[0] && atomic_load(&g_reads[1]) > since[1])
			return true;
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	return false;
}

static void *reader(void *arg)
{
	unsigned w = (unsigned)(uintptr_t)arg;
	uint64_t b = 0;

	rcu_register_thread();
	while (!atomic_load(&g_stop)) {
		const struct sn_policy *p = sn_policy_current(g_st);

		for (unsigned i = 0; i < p->n_aggs; i++) {
			b += 1000;
			sn_nba_report(p->aggs[i].nba, w, b, 0, atomic_load(&g_now));
			CHECK(sn_nba_grant(p->aggs[i].nba, w) <= p->aggs[i].rate_bps / 8);
		}
		atomic_fetch_add(&g_reads[w], 1);
		rcu_quiescent_state();
	}
	rcu_unregister_thread();
	return NULL;
}

static void part2(void)
{
	struct sn_policy p;
	pthread_t th[2];

	sn_test_policy_parse(pol_text(80000000, 10), &p);
	g_st = sn_policy_store_create(&p);
	CHECK(g_st && sn_policy_store_set_workers(g_st, 2) == 0);
	atomic_store(&g_now, t_now);
	for (uintptr_t i = 0; i < 2; i++)
		CHECK(pthread_create(&th[i], NULL, reader, (void *)i) == 0);
	for (unsigned k = 0; k < 400; k++) {
		if (k % 100 == 0) {	/* readers really run between publications */
			unsigned long seen[2] = { atomic_load(&g_reads[0]), atomic_load(&g_reads[1]) };

			CHECK(readers_progressed(seen));
		}
		/* Alternate: same instance kept / replaced / removed. */
		const char *txt = k % 3 == 2 ? "{}" : pol_text(8000000 + k * 1000, k % 3 ? 10 : 20);

		sn_test_policy_parse(txt, &p);
		CHECK(sn_policy_publish(g_st, &p) == 0);
		sn_policy_tick(g_st, t_now += MS);
		atomic_store(&g_now, t_now);
	}
	atomic_store(&g_stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK(atomic_load(&g_reads[0]) > 0 && atomic_load(&g_reads[1]) > 0);
	sn_policy_store_destroy(g_st);
}

int main(void)
{
	part1();
	part2();
	return sn_check_exit("test_policy_nba");
}
