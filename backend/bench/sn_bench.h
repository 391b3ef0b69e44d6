/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_bench.h — tiny harness shared by the sn-bench suites.
 *
 * Each suite (bench_<module>.c) exports `void sn_bench_<module>(void)`,
 * measures its cases itself (several repetitions) and calls
 * sn_bench_report() once per case with the median. Single-threaded: only
 * the thread running main() may call these.
 */
#ifndef SN_BENCH_H
#define SN_BENCH_H

#include <stdint.h>
#include <time.h>

/* Monotonic clock in ns. */
static inline uint64_t sn_bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Repetitions each case should run (from --reps, default 5). */
int sn_bench_reps(void);
/* Scale factor for problem sizes / iteration counts (--quick gives 0.05). */
double sn_bench_scale(void);
/* Median of n values (sorts v in place). */
double sn_bench_median(double *v, int n);
/* True if this case was selected by --filter SUBSTR (or no filter). Call
 * before doing the work of a case. */
int sn_bench_selected(const char *name);
/* Record one case: median ns per operation; mops defaults to 1e3/ns_per_op
 * when passed as 0. `note` may be NULL (e.g. "decisions/s" semantics). */
void sn_bench_report(const char *name, double ns_per_op, double mops, const char *note);
/* Keep a value alive so the compiler cannot drop the benchmarked work. */
void sn_bench_sink(uint64_t v);

void sn_bench_mbox(void);
void sn_bench_arbiter(void);
void sn_bench_twheel(void);
void sn_bench_sched(void);
void sn_bench_tstamp(void);

#endif
