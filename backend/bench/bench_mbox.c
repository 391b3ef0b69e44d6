/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_mbox.c — sn_mbox vs DPDK rte_ring (SP/SC), two threads.
 *
 * A producer thread and a consumer thread, pinned to CPUs 1 and 0 when the
 * machine has two, move N pointers through a 1024-slot queue; the time from
 * the first insert to the last extract, divided by N, is ns per item
 * (median of --reps runs, the two queues' runs interleaved). Both queues
 * are driven by the same loop, one item per call ("transfer") and in
 * bursts of 32 ("transfer_burst32"), so the comparison is the queue and
 * nothing else. rte_ring is set up with
 * rte_ring_get_memsize + rte_ring_init on aligned heap memory: no EAL.
 *
 * On a shared 2-CPU machine the peer may be descheduled: waiting sides
 * spin briefly and then yield, identically for both queues.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sn_bench.h"
#include "sn_mbox.h"

#ifdef SN_HAVE_RTE_RING
#include <rte_ring.h>
#endif

#define QSIZE 1024u
#define BURST 32u

enum qkind { Q_MBOX, Q_RING };

struct xfer {
	enum qkind kind;
	uint32_t burst;           /* 1 = single-item calls */
	uint64_t n;
	struct sn_mbox *mb;
	void *ring;               /* struct rte_ring * */
	atomic_int go;
	uint64_t t_start, t_end;
	uint64_t sum;
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

static inline void wait_a_bit(uint32_t *spins)
{
	if (++*spins >= 256) {
		*spins = 0;
		sched_yield();
	} else {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
}

static uint32_t q_put(struct xfer *x, void **v, uint32_t n)
{
#ifdef SN_HAVE_RTE_RING
	if (x->kind == Q_RING)
		return n == 1 ? (rte_ring_sp_enqueue(x->ring, v[0]) == 0)
			      : rte_ring_sp_enqueue_burst(x->ring, v, n, NULL);
#endif
	return n == 1 ? (sn_mbox_insert(x->mb, v[0]) == 0) : sn_mbox_insert_burst(x->mb, v, n);
}

static uint32_t q_get(struct xfer *x, void **v, uint32_t n)
{
#ifdef SN_HAVE_RTE_RING
	if (x->kind == Q_RING)
		return n == 1 ? (rte_ring_sc_dequeue(x->ring, v) == 0)
			      : rte_ring_sc_dequeue_burst(x->ring, v, n, NULL);
#endif
	if (n == 1) {
		v[0] = sn_mbox_extract(x->mb);
		return v[0] != NULL;
	}
	return sn_mbox_extract_burst(x->mb, v, n);
}

static void *producer(void *arg)
{
	struct xfer *x = arg;
	void *v[BURST];
	uint64_t seq = 1;
	uint32_t spins = 0;

	pin_self(1);
	atomic_store_explicit(&x->go, 1, memory_order_release);
	x->t_start = sn_bench_now_ns();
	while (seq <= x->n) {
		uint32_t want = (uint32_t)SN_MIN((uint64_t)x->burst, x->n - seq + 1), i, k;

		for (i = 0; i < want; i++)
			v[i] = (void *)(uintptr_t)((seq + i) << 1);
		k = q_put(x, v, want);
		seq += k;
		if (k == 0)
			wait_a_bit(&spins);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	struct xfer *x = arg;
	void *v[BURST];
	uint64_t got = 0, sum = 0;
	uint32_t spins = 0;

	pin_self(0);
	while (!atomic_load_explicit(&x->go, memory_order_acquire))
		sched_yield();
	while (got < x->n) {
		uint32_t k = q_get(x, v, x->burst), i;

		for (i = 0; i < k; i++)
			sum += (uintptr_t)v[i];
		got += k;
		if (k == 0)
			wait_a_bit(&spins);
	}
	x->t_end = sn_bench_now_ns();
	x->sum = sum;
	return NULL;
}

/* One timed transfer; ns per item, or a negative value on setup failure. */
static double run_once(enum qkind kind, uint32_t burst, uint64_t n)
{
	struct xfer x;
	pthread_t tp, tc;
	void *mem = NULL;
	uint64_t expect = n * (n + 1); /* sum of (i << 1) for i = 1..n */

	memset(&x, 0, sizeof(x));
	x.kind = kind;
	x.burst = burst;
	x.n = n;
	if (kind == Q_MBOX) {
		x.mb = sn_mbox_create(QSIZE, NULL);
		if (x.mb == NULL)
			return -1;
	} else {
#ifdef SN_HAVE_RTE_RING
		ssize_t sz = rte_ring_get_memsize(QSIZE);

		if (sz < 0)
			return -1;
		mem = aligned_alloc(SN_CACHE_LINE, ((size_t)sz + SN_CACHE_LINE - 1) &
				    ~(size_t)(SN_CACHE_LINE - 1));
		if (mem == NULL || rte_ring_init(mem, "sn_bench", QSIZE,
						 RING_F_SP_ENQ | RING_F_SC_DEQ) != 0) {
			free(mem);
			return -1;
		}
		x.ring = mem;
#else
		return -1;
#endif
	}
	pthread_create(&tc, NULL, consumer, &x);
	pthread_create(&tp, NULL, producer, &x);
	pthread_join(tp, NULL);
	pthread_join(tc, NULL);
	sn_mbox_free(x.mb);
	free(mem);
	if (x.sum != expect) {
		fprintf(stderr, "bench_mbox: checksum mismatch (%s)\n",
			kind == Q_MBOX ? "mbox" : "rte_ring");
		return -1;
	}
	sn_bench_sink(x.sum);
	return (double)(x.t_end - x.t_start) / (double)n;
}

/* The mailbox case and its rte_ring baseline run interleaved, one
 * repetition each in turn, so that load from other processes on a shared
 * machine hits both alike; each reports its own median. */
static void run_pair(const char *mbox_name, const char *ring_name, uint32_t burst,
		     const char *mbox_note, const char *ring_note)
{
	uint64_t n = (uint64_t)(20000000.0 * sn_bench_scale());
	int reps = sn_bench_reps(), r;
	int do_mbox = sn_bench_selected(mbox_name), do_ring = 0;
	double vm[64], vr[64];

#ifdef SN_HAVE_RTE_RING
	do_ring = sn_bench_selected(ring_name);
#else
	if (sn_bench_selected(ring_name))
		fprintf(stderr, "bench_mbox: %s not built (no libdpdk)\n", ring_name);
#endif
	if (reps > 64)
		reps = 64;
	if (n < 100000)
		n = 100000;
	for (r = 0; r < reps; r++) {
		if (do_mbox && (vm[r] = run_once(Q_MBOX, burst, n)) < 0) {
			fprintf(stderr, "bench_mbox: %s: setup failed\n", mbox_name);
			do_mbox = 0;
		}
		if (do_ring && (vr[r] = run_once(Q_RING, burst, n)) < 0) {
			fprintf(stderr, "bench_mbox: %s: setup failed\n", ring_name);
			do_ring = 0;
		}
	}
	if (do_mbox)
		sn_bench_report(mbox_name, sn_bench_median(vm, reps), 0, mbox_note);
	if (do_ring)
		sn_bench_report(ring_name, sn_bench_median(vr, reps), 0, ring_note);
}

void sn_bench_mbox(void)
{
	run_pair("mbox/transfer/2threads", "rte_ring_spsc/transfer/2threads", 1,
		 "1024 slots, 1 item per call", "baseline, 1024 slots, 1 item per call");
	run_pair("mbox/transfer_burst32/2threads", "rte_ring_spsc/transfer_burst32/2threads",
		 BURST, "1024 slots, bursts of 32", "baseline, 1024 slots, bursts of 32");
}
