/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_sched.c — QFQ vs its DRR baseline (and FIFO as the floor).
 *
 * qfq/enq_deq/classes=1024, drr/enq_deq/classes=1024,
 * fifo/enq_deq/classes=1024: 1024 classes with weights uniform in 1..1000
 * (lmax 1500), 8 items queued per class at the start (8192 in total, kept
 * constant); one op = one dequeue + one enqueue of a packet of random
 * length (64..1500) to a random class drawn with probability proportional
 * to its weight, so arrivals match each class's service share and the
 * backlog stays spread over all classes (a saturated link where every
 * class is busy: the case a fair scheduler is for).
 *
 * qfq/enq_deq_uniform/classes=1024, drr/enq_deq_uniform/classes=1024: the
 * same with classes drawn uniformly. Then the backlog drifts into the
 * low-weight classes and most enqueues find their class empty: QFQ
 * re-activates a class (timestamps, bucket insert, group state) on ~80 % of
 * enqueues, while DRR serves each class's whole small queue in one visit.
 *
 * Sequences are precomputed (RNG outside the timed loop); if the drawn
 * class's queue is full the packet goes to the class just served. Timed
 * after a warm-up of one pass; ns/op is per enqueue+dequeue pair, median of
 * --reps runs. The same sequences drive every scheduler.
 *
 * Goals: QFQ <= 40 ns per pair (QFQ paper: ~110 ns), within 1.5x of DRR.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sn_bench.h"
#include "sn_sched.h"

#define NCLASSES  1024u
#define PER_CLASS 8u
#define QUEUE_LEN 256u
#define SEQ       (1u << 16)

static uint32_t seq_cls[SEQ];
static uint32_t seq_uni[SEQ];
static uint32_t seq_len[SEQ];
static uint32_t weight[NCLASSES];

static uint64_t rng_s = 0x2545f4914f6cdd1dull;

static inline uint64_t xorshift(void)
{
	rng_s ^= rng_s << 13;
	rng_s ^= rng_s >> 7;
	rng_s ^= rng_s << 17;
	return rng_s;
}

static struct sn_sched *setup(enum sn_sched_algo algo)
{
	struct sn_sched_params p = { .algo = algo, .max_classes = NCLASSES,
				     .queue_len = QUEUE_LEN, .drr_quantum = 1514 };
	struct sn_sched *s = sn_sched_create(&p);

	if (!s) {
		perror("bench_sched: sn_sched_create");
		exit(1);
	}
	for (uint32_t c = 0; c < NCLASSES; c++) {
		if (sn_sched_class_add(s, c, weight[c], 1500)) {
			fprintf(stderr, "bench_sched: class_add failed\n");
			exit(1);
		}
		for (uint32_t i = 0; i < PER_CLASS; i++)
			sn_sched_enqueue(s, c, (void *)(uintptr_t)(c * PER_CLASS + i + 1),
					 seq_len[(c * PER_CLASS + i) & (SEQ - 1)]);
	}
	return s;
}

/* noinline: callgrind's --toggle-collect=run_sched counts exactly the loop */
__attribute__((noinline))
static uint64_t run_sched(struct sn_sched *s, const uint32_t *cls_seq, uint64_t n)
{
	uint64_t acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t len, cls, j = (uint32_t)i & (SEQ - 1);
		void *item = sn_sched_dequeue(s, &len, &cls);

		acc += len;
		if (sn_sched_enqueue(s, cls_seq[j], item, seq_len[j]))
			sn_sched_enqueue(s, cls, item, seq_len[j]);
	}
	return acc;
}

static void bench_one(const char *name, enum sn_sched_algo algo, const uint32_t *seq,
		      uint64_t n)
{
	int reps = sn_bench_reps(), r;
	double v[64];

	if (!sn_bench_selected(name))
		return;
	if (reps > 64)
		reps = 64;
	for (r = 0; r < reps; r++) {
		struct sn_sched *s = setup(algo);
		uint64_t t0, t1;

		sn_bench_sink(run_sched(s, seq, SEQ));  /* warm-up pass */
		t0 = sn_bench_now_ns();
		sn_bench_sink(run_sched(s, seq, n));
		t1 = sn_bench_now_ns();
		if (sn_sched_backlog(s) != NCLASSES * PER_CLASS) {
			fprintf(stderr, "bench_sched: %s lost items\n", name);
			exit(1);
		}
		v[r] = (double)(t1 - t0) / (double)n;
		sn_sched_free(s);
	}
	sn_bench_report(name, sn_bench_median(v, reps), 0, "per enqueue+dequeue pair");
}

void sn_bench_sched(void)
{
	uint64_t n = (uint64_t)(5000000.0 * sn_bench_scale());

	if (n < SEQ)
		n = SEQ;
	static uint64_t cum[NCLASSES];
	uint64_t wsum = 0;

	for (uint32_t c = 0; c < NCLASSES; c++) {
		weight[c] = 1 + (uint32_t)(xorshift() % 1000);
		wsum += weight[c];
		cum[c] = wsum;
	}
	for (uint32_t i = 0; i < SEQ; i++) {
		uint64_t r = xorshift() % wsum;
		uint32_t lo = 0, hi = NCLASSES - 1;

		while (lo < hi) {  /* first c with cum[c] > r */
			uint32_t mid = (lo + hi) / 2;

			if (cum[mid] > r)
				hi = mid;
			else
				lo = mid + 1;
		}
		seq_cls[i] = lo;
		seq_uni[i] = (uint32_t)(xorshift() % NCLASSES);
		seq_len[i] = 64 + (uint32_t)(xorshift() % (1500 - 63));
	}
	bench_one("qfq/enq_deq/classes=1024", SN_SCHED_QFQ, seq_cls, n);
	bench_one("drr/enq_deq/classes=1024", SN_SCHED_DRR, seq_cls, n);
	bench_one("fifo/enq_deq/classes=1024", SN_SCHED_FIFO, seq_cls, n);
	bench_one("qfq/enq_deq_uniform/classes=1024", SN_SCHED_QFQ, seq_uni, n);
	bench_one("drr/enq_deq_uniform/classes=1024", SN_SCHED_DRR, seq_uni, n);
}
