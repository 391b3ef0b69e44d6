/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_arbiter.c — arbiter decisions per second (PSPAT §6: 28 M/s).
 *
 * 64 clients, one class each (QFQ weights 1..64, or FIFO/DRR for the
 * variants), one client list. A feeder thread (CPU 1) plays all clients:
 * it keeps each mailbox topped up with bursts of 8 items and appends the
 * mailbox to the client list (sn_mbox_cl_append, deduplicated). The
 * arbiter thread (CPU 0) runs sn_arbiter_do_scan(now) in a loop on a link
 * fast enough never to be the limit, with no-op I/O: release() only counts.
 * A decision = one item taken from a mailbox, enqueued, dequeued and
 * released; the result is decisions per second of arbiter time, reported
 * as mops (median of --reps runs), with the arbiter thread's CPU-time rate
 * in the note (the machine may be shared). The "/1thread" cases feed the
 * clients from the arbiter's own loop instead (arbiter inside a worker).
 */
#include <pthread.h>
#include <stddef.h>
#include <time.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sn_arbiter.h"
#include "sn_bench.h"

#define NCLIENTS   64u
#define MBOX_SIZE  256u
#define FEED_BURST 32u

struct item {
	uint32_t len;
} SN_ALIGNED(8);

struct run {
	struct sn_arbiter *arb;
	struct sn_arbiter_client *cli[NCLIENTS];
	struct item items[NCLIENTS][FEED_BURST];
	uint64_t released;
	atomic_int stop;
	atomic_int ready;
};

static void pin_self(int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void cb_release(void *const *items, uint32_t n, void *arg)
{
	(void)items;
	((struct run *)arg)->released += n;
}

static void cb_drop(void *item, enum sn_arbiter_drop cause, void *arg)
{
	(void)item;
	(void)cause;
	(void)arg;
}

/* One pass of the clients over their mailboxes. The same item pointers
 * are reused (release/drop never free them), so feeding costs the mailbox
 * inserts only. */
static uint32_t feed_pass(struct run *r, void *const (*v)[FEED_BURST])
{
	struct sn_mbox *cl = sn_arbiter_clist(r->arb, 0);
	uint32_t c, moved = 0;

	for (c = 0; c < NCLIENTS; c++) {
		struct sn_mbox *mb = sn_arbiter_client_mbox(r->cli[c]);
		uint32_t k = sn_mbox_insert_burst(mb, v[c], FEED_BURST);

		if (k) {
			(void)sn_mbox_cl_append(cl, mb);
			moved += k;
		}
	}
	return moved;
}

static void init_ptrs(struct run *r, void *(*v)[FEED_BURST])
{
	uint32_t c, i;

	for (c = 0; c < NCLIENTS; c++)
		for (i = 0; i < FEED_BURST; i++)
			v[c][i] = &r->items[c][i];
}

static void *feeder(void *arg)
{
	struct run *r = arg;
	void *v[NCLIENTS][FEED_BURST];
	uint32_t idle = 0;

	pin_self(1);
	init_ptrs(r, v);
	atomic_store_explicit(&r->ready, 1, memory_order_release);
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		if (feed_pass(r, (void *const (*)[FEED_BURST])v) == 0 && ++idle >= 64) {
			idle = 0;
			sched_yield();
		}
	}
	return NULL;
}

/* The arbiter's clock. clock_gettime costs ~20-70 ns here (more than a
 * decision), so, like a DPDK datapath using rte_rdtsc(), read the TSC and
 * scale it to ns with a factor calibrated against CLOCK_MONOTONIC. */
#if defined(__x86_64__)
#include <x86intrin.h>
static double tsc_ns_per_tick;

static void clock_calibrate(void)
{
	uint64_t n0 = sn_bench_now_ns(), c0 = __rdtsc(), n1, c1;

	do {
		n1 = sn_bench_now_ns();
	} while (n1 - n0 < 20000000);
	c1 = __rdtsc();
	tsc_ns_per_tick = (double)(n1 - n0) / (double)(c1 - c0);
}

static inline uint64_t real_now_ns(void)
{
	return (uint64_t)((double)__rdtsc() * tsc_ns_per_tick);
}
#else
static void clock_calibrate(void) {}
static inline uint64_t real_now_ns(void) { return sn_bench_now_ns(); }
#endif

/* SN_BENCH_VCLOCK=1 (for callgrind): the arbiter's clock advances 10 us per
 * reading instead of with real time. Under valgrind a scan takes longer
 * than slack_ns, so the real clock would reset the link every scan and
 * the instruction counts would measure a link-limited arbiter. */
static int vclock;
static uint64_t vclock_ns;

static inline uint64_t arb_now_ns(void)
{
	if (vclock)
		return vclock_ns += 10000;
	return real_now_ns();
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall ns per decision; *cpu_ns gets the arbiter thread's CPU ns per
 * decision (what the arbiter costs when it is not preempted). With
 * one_thread the clients are fed from the arbiter's own loop (the
 * arbiter folded into a worker, single-core hosts). */
static double run_once(enum sn_sched_algo algo, int one_thread, uint64_t target,
		       double *cpu_ns)
{
	void *v[NCLIENTS][FEED_BURST];
	struct sn_arbiter_params p;
	struct run *r = aligned_alloc(SN_CACHE_LINE, (sizeof(*r) + SN_CACHE_LINE - 1) &
				      ~(size_t)(SN_CACHE_LINE - 1));
	pthread_t tf;
	cpu_set_t saved;
	uint64_t t0, t1, c0, c1;
	uint32_t c, i;
	double ns = -1;

	if (r == NULL)
		return -1;
	memset(r, 0, sizeof(*r));
	memset(&p, 0, sizeof(p));
	p.sched.algo = algo;
	p.sched.max_classes = NCLIENTS;
	p.sched.queue_len = 1024;
	p.link_bps = SN_ARBITER_MAX_LINK_BPS;
	p.overhead_bytes = 24;
	p.slack_ns = 1000000;
	p.read_limit = 64;
	p.max_clients = NCLIENTS;
	p.n_clists = 1;
	p.clist_size = 256;
	p.release_burst = 64;
	p.len_offset = offsetof(struct item, len);
	p.release = cb_release;
	p.drop = cb_drop;
	p.cb_arg = r;
	r->arb = sn_arbiter_create(&p, arb_now_ns());
	if (r->arb == NULL)
		goto out;
	for (c = 0; c < NCLIENTS; c++) {
		if (sn_sched_class_add(sn_arbiter_sched(r->arb), c, 1 + c, 1514) != 0)
			goto out;
		r->cli[c] = sn_arbiter_client_add(r->arb, c, MBOX_SIZE);
		if (r->cli[c] == NULL)
			goto out;
		for (i = 0; i < FEED_BURST; i++)
			r->items[c][i].len = 64 + (c * FEED_BURST + i) % 1450;
	}
	pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
	pin_self(0);
	if (one_thread) {
		init_ptrs(r, v);
		c0 = thread_cpu_ns();
		t0 = sn_bench_now_ns();
		while (r->released < target) {
			feed_pass(r, (void *const (*)[FEED_BURST])v);
			sn_arbiter_do_scan(r->arb, arb_now_ns());
		}
		t1 = sn_bench_now_ns();
		c1 = thread_cpu_ns();
	} else {
		pthread_create(&tf, NULL, feeder, r);
		while (!atomic_load_explicit(&r->ready, memory_order_acquire))
			sched_yield();
		c0 = thread_cpu_ns();
		t0 = sn_bench_now_ns();
		while (r->released < target)
			sn_arbiter_do_scan(r->arb, arb_now_ns());
		t1 = sn_bench_now_ns();
		c1 = thread_cpu_ns();
		atomic_store_explicit(&r->stop, 1, memory_order_relaxed);
		pthread_join(tf, NULL);
	}
	pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
	ns = (double)(t1 - t0) / (double)r->released;
	*cpu_ns = (double)(c1 - c0) / (double)r->released;
	sn_bench_sink(r->released);
out:
	sn_arbiter_free(r->arb);
	free(r);
	return ns;
}

static void run_case(const char *name, enum sn_sched_algo algo, int one_thread,
		     const char *algo_name)
{
	uint64_t target = (uint64_t)(20000000.0 * sn_bench_scale());
	int reps = sn_bench_reps(), k;
	static int calibrated;
	double v[64], cpu[64], ns;
	char note[64];

	if (!sn_bench_selected(name))
		return;
	if (!calibrated) {
		const char *e = getenv("SN_BENCH_VCLOCK");

		vclock = e && *e == '1';
		clock_calibrate();
		calibrated = 1;
	}
	if (reps > 64)
		reps = 64;
	if (target < 100000)
		target = 100000;
	for (k = 0; k < reps; k++) {
		v[k] = run_once(algo, one_thread, target, &cpu[k]);
		if (v[k] < 0) {
			fprintf(stderr, "bench_arbiter: %s: setup failed\n", name);
			return;
		}
	}
	ns = sn_bench_median(v, reps);
	snprintf(note, sizeof(note), "decisions/s, %s; arbiter CPU time: %.1f M/s", algo_name,
		 1e3 / sn_bench_median(cpu, reps));
	sn_bench_report(name, ns, 1e3 / ns, note);
}

void sn_bench_arbiter(void)
{
	run_case("arbiter/do_scan/clients=64", SN_SCHED_QFQ, 0, "QFQ");
	run_case("arbiter/do_scan/clients=64/drr", SN_SCHED_DRR, 0, "DRR");
	run_case("arbiter/do_scan/clients=64/fifo", SN_SCHED_FIFO, 0, "FIFO");
	run_case("arbiter/do_scan/clients=64/1thread", SN_SCHED_QFQ, 1, "QFQ, fed inline");
	run_case("arbiter/do_scan/clients=64/1thread/fifo", SN_SCHED_FIFO, 1, "FIFO, fed inline");
}
