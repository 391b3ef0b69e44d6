/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sched.c — unit tests of sn_sched (QFQ, DRR, FIFO).
 *
 * TAP output. Covers: API error paths; basic service order of each
 * algorithm; the lmax bounds (CVE-2023-31436 class: lmax lowered below the
 * length of queued packets); class change / delete while backlogged (every
 * item comes out exactly once, by dequeue or the drop callback); a random
 * soak against a shadow model (per-class FIFO order and backlog counts)
 * with sn_sched_check() after every operation batch. Fairness and delay
 * bounds are proven by tests/core/test_ref_sched.py against a fluid model.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_qfq.h"
#include "sn_sched.h"

static int n_test, n_fail;

#define OK(cond, ...) do {                                                 \
	n_test++;                                                          \
	if (cond) {                                                        \
		printf("ok %d - ", n_test);                                \
	} else {                                                           \
		n_fail++;                                                  \
		printf("not ok %d - %s:%d: %s: ", n_test, __FILE__, __LINE__, #cond); \
	}                                                                  \
	printf(__VA_ARGS__);                                               \
	putchar('\n');                                                     \
} while (0)

static const enum sn_sched_algo algos[] = { SN_SCHED_QFQ, SN_SCHED_DRR, SN_SCHED_FIFO };

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static struct sn_sched *mk(enum sn_sched_algo a, uint32_t classes, uint32_t qlen, uint32_t quantum)
{
	struct sn_sched_params p = { .algo = a, .max_classes = classes, .queue_len = qlen,
				     .drr_quantum = quantum };
	struct sn_sched *s = sn_sched_create(&p);

	if (!s) {
		perror("sn_sched_create");
		exit(1);
	}
	return s;
}

/* Items are tagged pointers: (class << 32 | seq) + 1, never NULL. */
static void *tag(uint32_t cls, uint32_t seq) { return (void *)(uintptr_t)(((uint64_t)cls << 32 | seq) + 1); }
static uint32_t tag_cls(void *p) { return (uint32_t)(((uintptr_t)p - 1) >> 32); }
static uint32_t tag_seq(void *p) { return (uint32_t)((uintptr_t)p - 1); }

static void test_errors(void)
{
	struct sn_sched_params p = { .algo = SN_SCHED_QFQ, .max_classes = 4, .queue_len = 2 };
	enum sn_sched_algo a;

	errno = 0;
	OK(!sn_sched_create(NULL) && errno == EINVAL, "create(NULL) -> EINVAL");
	p.algo = (enum sn_sched_algo)7;
	errno = 0;
	OK(!sn_sched_create(&p) && errno == EINVAL, "create(bad algo) -> EINVAL");
	p.algo = SN_SCHED_DRR;
	p.max_classes = 0;
	OK(!sn_sched_create(&p) && errno == EINVAL, "create(0 classes) -> EINVAL");
	p.max_classes = 4;
	p.queue_len = 0;
	OK(!sn_sched_create(&p) && errno == EINVAL, "create(queue_len 0) -> EINVAL");
	OK(sn_sched_algo_parse("qfq", &a) == 0 && a == SN_SCHED_QFQ, "parse qfq");
	OK(sn_sched_algo_parse("fifo", &a) == 0 && a == SN_SCHED_FIFO, "parse fifo");
	OK(sn_sched_algo_parse("wfq", &a) == -EINVAL, "parse unknown");
	OK(!strcmp(sn_sched_algo_name(SN_SCHED_DRR), "drr"), "name drr");

	for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++) {
		struct sn_sched *s = mk(algos[i], 4, 2, 0);
		const char *n = sn_sched_algo_name(algos[i]);
		uint32_t len = 7, cls = 9;

		OK(sn_sched_class_add(s, 4, 1, 1500) == -EINVAL, "%s: add id out of range", n);
		OK(sn_sched_class_add(s, 0, 0, 1500) == -EINVAL, "%s: add weight 0", n);
		OK(sn_sched_class_add(s, 0, SN_SCHED_MAX_WEIGHT + 1, 1500) == -EINVAL, "%s: add weight too big", n);
		OK(sn_sched_class_add(s, 0, 1, 63) == -EINVAL, "%s: add lmax < 64", n);
		OK(sn_sched_class_add(s, 0, 1, SN_SCHED_MAX_LMAX + 1) == -EINVAL, "%s: add lmax too big", n);
		OK(sn_sched_class_add(s, 0, SN_SCHED_MAX_WEIGHT, 64) == 0, "%s: add max weight, min lmax", n);
		OK(sn_sched_class_add(s, 0, 1, 1500) == -EEXIST, "%s: add twice", n);
		OK(sn_sched_class_add(s, 1, 1, SN_SCHED_MAX_LMAX) == 0, "%s: add weight 1, max lmax", n);
		for (uint32_t c = 2; c < 4; c++)
			sn_sched_class_add(s, c, SN_SCHED_MAX_WEIGHT, 1500);
		OK(sn_sched_class_change(s, 1, SN_SCHED_MAX_WEIGHT * 16, 1500) == -EINVAL,
		   "%s: change weight above max", n);
		sn_sched_class_del(s, 3, NULL, NULL);
		/* wsum = 3 * 2^16 + 1 here; MAX_WSUM is 2^20 */
		OK(sn_sched_class_change(s, 1, SN_SCHED_MAX_WEIGHT, 1500) == 0, "%s: change to max weight", n);
		OK(sn_sched_class_change(s, 7, 1, 1500) == -ENOENT, "%s: change unknown", n);
		OK(sn_sched_class_change(s, 0, 1, 10) == -EINVAL, "%s: change bad lmax", n);
		OK(sn_sched_class_del(s, 3, NULL, NULL) == -ENOENT, "%s: del twice", n);
		OK(sn_sched_dequeue(s, &len, &cls) == NULL && len == 7 && cls == 9, "%s: dequeue empty", n);
		OK(sn_sched_peek_len(s, &len) == -ENOENT, "%s: peek empty", n);
		OK(sn_sched_enqueue(s, 3, tag(3, 0), 100) == -ENOENT, "%s: enqueue deleted class", n);
		OK(sn_sched_enqueue(s, 99, tag(3, 0), 100) == -ENOENT, "%s: enqueue bad id", n);
		OK(sn_sched_enqueue(s, 0, tag(0, 0), 0) == -EMSGSIZE, "%s: enqueue len 0", n);
		OK(sn_sched_enqueue(s, 0, tag(0, 0), 65) == -EMSGSIZE, "%s: enqueue len > lmax", n);
		OK(sn_sched_enqueue(s, 0, tag(0, 0), 64) == 0, "%s: enqueue len == lmax", n);
		OK(sn_sched_enqueue(s, 0, tag(0, 1), 64) == 0, "%s: enqueue 2nd", n);
		OK(sn_sched_enqueue(s, 0, tag(0, 2), 64) == -ENOBUFS, "%s: enqueue full (queue_len 2)", n);
		OK(sn_sched_backlog(s) == 2 && sn_sched_class_backlog(s, 0) == 2 &&
		   sn_sched_class_backlog(s, 1) == 0 && sn_sched_class_backlog(s, 99) == 0,
		   "%s: backlog counts", n);
		OK(sn_sched_peek_len(s, &len) == 0 && len == 64, "%s: peek", n);
		OK(sn_sched_dequeue(s, &len, &cls) == tag(0, 0) && len == 64 && cls == 0, "%s: dequeue", n);
		OK(sn_sched_check(s) == 0, "%s: check", n);
		sn_sched_free(s);
	}
	{
		struct sn_sched *s = mk(SN_SCHED_QFQ, 32, 1, 0);
		int rc = 0;

		for (uint32_t c = 0; c < 16; c++)
			rc |= sn_sched_class_add(s, c, SN_SCHED_MAX_WEIGHT, 1500);
		OK(rc == 0 && sn_sched_class_add(s, 16, 1, 1500) == -ENOSPC, "qfq: weight sum limit");
		OK(sn_sched_class_change(s, 0, SN_SCHED_MAX_WEIGHT - 1, 1500) == 0 &&
		   sn_sched_class_add(s, 16, 1, 1500) == 0 && sn_sched_class_add(s, 17, 1, 1500) == -ENOSPC,
		   "qfq: weight sum freed by change");
		sn_sched_free(s);
	}
}

/* Serve n packets from always-backlogged classes; count per class. */
static void serve_counts(struct sn_sched *s, uint32_t ncls, const uint32_t *lens,
			 int n, uint32_t *count)
{
	uint32_t seq[8] = { 0 };

	memset(count, 0, ncls * sizeof(*count));
	for (int i = 0; i < n; i++) {
		uint32_t len, cls;
		void *it = sn_sched_dequeue(s, &len, &cls);

		if (!it || cls >= ncls || len != lens[cls])
			sn_die("serve_counts: bad dequeue");
		count[cls]++;
		sn_sched_enqueue(s, cls, tag(cls, 1000 + seq[cls]++), lens[cls]);
	}
}

static void test_order(void)
{
	uint32_t count[4], lens[4] = { 1000, 1000, 1000, 250 };
	uint32_t len, cls;

	/* FIFO: arrival order across classes. */
	{
		struct sn_sched *s = mk(SN_SCHED_FIFO, 3, 64, 0);
		int good = 1;

		for (uint32_t c = 0; c < 3; c++)
			sn_sched_class_add(s, c, c + 1, 1500);
		for (uint32_t i = 0; i < 30; i++)
			sn_sched_enqueue(s, i % 3, tag(i % 3, i), 100 + i);
		for (uint32_t i = 0; i < 30; i++) {
			void *it = sn_sched_dequeue(s, &len, &cls);

			good &= it == tag(i % 3, i) && len == 100 + i && cls == i % 3;
		}
		OK(good && sn_sched_backlog(s) == 0, "fifo: arrival order");
		sn_sched_free(s);
	}
	/* DRR, quantum 1000 x weight, equal packets: exact round pattern. */
	{
		struct sn_sched *s = mk(SN_SCHED_DRR, 2, 64, 1000);
		static const uint32_t want[] = { 0, 1, 1, 0, 1, 1, 0, 1, 1 };
		int good = 1;

		sn_sched_class_add(s, 0, 1, 1500);
		sn_sched_class_add(s, 1, 2, 1500);
		for (uint32_t i = 0; i < 6; i++) {
			sn_sched_enqueue(s, 0, tag(0, i), 1000);
			sn_sched_enqueue(s, 1, tag(1, i), 1000);
		}
		for (uint32_t i = 0; i < 9; i++) {
			uint32_t plen;

			good &= sn_sched_peek_len(s, &plen) == 0 && plen == 1000;
			good &= sn_sched_dequeue(s, &len, &cls) != NULL && cls == want[i];
		}
		OK(good, "drr: weight 1:2 round pattern 0,1,1");
		sn_sched_free(s);
	}
	/* QFQ and DRR: long-run shares follow weights, also with unequal sizes. */
	for (int a = 0; a < 2; a++) {
		struct sn_sched *s = mk(algos[a], 4, 64, 0);
		uint64_t bytes[4], total = 0;
		const char *n = sn_sched_algo_name(algos[a]);
		double err = 0;

		for (uint32_t c = 0; c < 4; c++) {
			sn_sched_class_add(s, c, 1u << c, 1500);
			for (uint32_t i = 0; i < 8; i++)
				sn_sched_enqueue(s, c, tag(c, i), lens[c]);
		}
		serve_counts(s, 4, lens, 60000, count);
		for (uint32_t c = 0; c < 4; c++) {
			bytes[c] = (uint64_t)count[c] * lens[c];
			total += bytes[c];
		}
		for (uint32_t c = 0; c < 4; c++) {
			double share = (double)bytes[c] / (double)total, want = (1u << c) / 15.0;
			double e = share / want - 1;

			err = SN_MAX(err, e < 0 ? -e : e);
		}
		OK(err < 0.01, "%s: byte shares within 1%% of weights 1:2:4:8 (max rel err %.4f)", n, err);
		OK(sn_sched_check(s) == 0, "%s: check after share run", n);
		sn_sched_free(s);
	}
	/* QFQ: per-class FIFO order is kept. */
	{
		struct sn_sched *s = mk(SN_SCHED_QFQ, 3, 64, 0);
		uint32_t next[3] = { 0 };
		int good = 1;

		for (uint32_t c = 0; c < 3; c++)
			sn_sched_class_add(s, c, 10 * (c + 1), 1500);
		for (uint32_t i = 0; i < 40; i++)
			sn_sched_enqueue(s, i % 3, tag(i % 3, i / 3), 64 + (uint32_t)(rnd() % 1400));
		for (void *it; (it = sn_sched_dequeue(s, &len, &cls));)
			good &= tag_cls(it) == cls && tag_seq(it) == next[cls]++;
		OK(good && next[0] == 14 && next[1] == 13 && next[2] == 13, "qfq: per-class FIFO");
		sn_sched_free(s);
	}
}

struct seen {
	uint8_t *v;
	uint32_t n;
	int dup;
	uint64_t drops;
};

static void on_drop(void *item, uint32_t len, void *arg)
{
	struct seen *sn = arg;
	uint32_t i = tag_seq(item);

	(void)len;
	if (i >= sn->n || sn->v[i]++)
		sn->dup = 1;
	sn->drops++;
}

/* lmax lowered below queued lengths, weights changed, classes deleted, all
 * while backlogged: nothing lost, nothing duplicated, invariants hold. */
static void test_churn(void)
{
	for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
		const char *n = sn_sched_algo_name(algos[a]);
		struct sn_sched *s = mk(algos[a], 8, 256, 0);
		struct seen sn = { .n = 8 * 200 };
		uint32_t id = 0, len, cls, enq = 0;
		int good = 1;

		sn.v = calloc(sn.n, 1);
		for (uint32_t c = 0; c < 8; c++)
			sn_sched_class_add(s, c, 1 + c * 7, SN_SCHED_MAX_LMAX);
		for (uint32_t i = 0; i < 8 * 200; i++) {
			uint32_t c = (uint32_t)(rnd() % 8);

			if (sn_sched_enqueue(s, c, tag(c, id++), 64 + (uint32_t)(rnd() % (SN_SCHED_MAX_LMAX - 63))) == 0)
				enq++;
			else
				sn.v[id - 1] = 1; /* never queued */
		}
		/* CVE-2023-31436 shape: shrink lmax to the minimum with 64 KiB
		 * packets queued, and weight to the maximum (smallest group). */
		for (uint32_t c = 0; c < 8; c += 2)
			good &= sn_sched_class_change(s, c, SN_SCHED_MAX_WEIGHT, 64) == 0;
		good &= sn_sched_check(s) == 0;
		for (int i = 0; i < 300; i++) {
			void *it = sn_sched_dequeue(s, &len, &cls);

			good &= it && tag_cls(it) == cls;
			if (it && sn.v[tag_seq(it)]++)
				sn.dup = 1;
		}
		good &= sn_sched_check(s) == 0;
		good &= sn_sched_class_change(s, 1, 1, 64) == 0;  /* largest -> smallest ratio flip */
		good &= sn_sched_class_del(s, 3, on_drop, &sn) == 0;
		good &= sn_sched_class_del(s, 4, on_drop, &sn) == 0;
		good &= sn_sched_class_backlog(s, 3) == 0 && sn_sched_check(s) == 0;
		good &= sn_sched_class_add(s, 3, 5, 1500) == 0;
		good &= sn_sched_enqueue(s, 3, tag(3, 0), 1501) == -EMSGSIZE;
		for (void *it; (it = sn_sched_dequeue(s, &len, &cls));) {
			good &= tag_cls(it) == cls;
			if (sn.v[tag_seq(it)]++)
				sn.dup = 1;
		}
		for (uint32_t i = 0; i < sn.n; i++)
			good &= sn.v[i] == 1;
		OK(good && !sn.dup && sn_sched_backlog(s) == 0 && sn_sched_check(s) == 0,
		   "%s: change/del while backlogged: %u enqueued, %llu dropped by del, none lost or duplicated",
		   n, enq, (unsigned long long)sn.drops);
		free(sn.v);
		sn_sched_free(s);
	}
}

/* Random operation soak against a shadow model of per-class queues. */
#define SOAK_CLASSES 16
#define SOAK_QLEN    32
static void test_soak(void)
{
	for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
		const char *n = sn_sched_algo_name(algos[a]);
		struct sn_sched *s = mk(algos[a], SOAK_CLASSES, SOAK_QLEN, 1514);
		uint32_t head[SOAK_CLASSES] = { 0 }, tail[SOAK_CLASSES] = { 0 };
		uint32_t lmax[SOAK_CLASSES] = { 0 }, qlen[SOAK_CLASSES][SOAK_QLEN];
		int present[SOAK_CLASSES] = { 0 }, good = 1;
		uint64_t total = 0, ops = 0;
		int steps = 400000;

		for (int step = 0; step < steps && good; step++) {
			uint32_t c = (uint32_t)(rnd() % SOAK_CLASSES), r = (uint32_t)(rnd() % 100);
			uint32_t w = 1 + (uint32_t)(rnd() % 1000), lm = 64 + (uint32_t)(rnd() % 9000);
			uint32_t len, cls;
			int rc;

			ops++;
			if (r < 3) {
				rc = sn_sched_class_add(s, c, w, lm);
				good &= rc == (present[c] ? -EEXIST : 0);
				if (!rc) {
					present[c] = 1;
					lmax[c] = lm;
					head[c] = tail[c] = 0;
				}
			} else if (r < 6) {
				rc = sn_sched_class_change(s, c, w, lm);
				good &= rc == (present[c] ? 0 : -ENOENT);
				if (!rc)
					lmax[c] = lm;
			} else if (r < 8) {
				rc = sn_sched_class_del(s, c, NULL, NULL);
				good &= rc == (present[c] ? 0 : -ENOENT);
				if (!rc) {
					total -= tail[c] - head[c];
					present[c] = 0;
				}
			} else if (r < 55) {
				uint32_t l = 1 + (uint32_t)(rnd() % (lmax[c] ? lmax[c] + 10 : 1500));

				rc = sn_sched_enqueue(s, c, tag(c, tail[c]), l);
				if (!present[c])
					good &= rc == -ENOENT;
				else if (l > lmax[c])
					good &= rc == -EMSGSIZE;
				else if (tail[c] - head[c] == SOAK_QLEN)
					good &= rc == -ENOBUFS;
				else {
					good &= rc == 0;
					qlen[c][tail[c] % SOAK_QLEN] = l;
					tail[c]++;
					total++;
				}
			} else {
				uint32_t plen = 0;
				int prc = sn_sched_peek_len(s, &plen);
				void *it = sn_sched_dequeue(s, &len, &cls);

				if (!total) {
					good &= !it && prc == -ENOENT;
				} else {
					good &= it && prc == 0 && cls < SOAK_CLASSES && present[cls] &&
						plen == len && tag_cls(it) == cls &&
						tag_seq(it) == head[cls] &&
						len == qlen[cls][head[cls] % SOAK_QLEN];
					if (good) {
						head[cls]++;
						total--;
					}
				}
			}
			good &= sn_sched_backlog(s) == total;
			good &= sn_sched_class_backlog(s, c) == (present[c] ? tail[c] - head[c] : 0);
			if (step % 64 == 0)
				good &= sn_sched_check(s) == 0;
		}
		OK(good, "%s: random soak, %llu ops, backlog/order/peek agree with the model", n,
		   (unsigned long long)ops);
		sn_sched_free(s);
	}
}

/* QFQ's virtual time wraps around 2^64 (two weight-1 classes sending 64 KiB
 * packets advance V by 2^45 per packet): order, shares and invariants must
 * survive the wrap (sn_time_before/after everywhere). */
static void test_qfq_wrap(void)
{
	struct sn_sched *s = mk(SN_SCHED_QFQ, 2, 16, 0);
	uint32_t len, cls, count[2] = { 0 }, seq[2] = { 0 }, next[2] = { 0 };
	int good = 1, worst = 0;

	sn_sched_class_add(s, 0, 1, SN_SCHED_MAX_LMAX);
	sn_sched_class_add(s, 1, 1, SN_SCHED_MAX_LMAX);
	for (uint32_t c = 0; c < 2; c++)
		for (uint32_t i = 0; i < 8; i++)
			sn_sched_enqueue(s, c, tag(c, seq[c]++), SN_SCHED_MAX_LMAX);
	for (uint32_t i = 1; i <= 1200000; i++) {
		void *it = sn_sched_dequeue(s, &len, &cls);

		good &= it && tag_cls(it) == cls && tag_seq(it) == next[cls]++;
		count[cls]++;
		sn_sched_enqueue(s, cls, tag(cls, seq[cls]++), SN_SCHED_MAX_LMAX);
		if (i % 100000 == 0) {
			int d = (int)count[0] - (int)count[1];

			worst = SN_MAX(worst, d < 0 ? -d : d);
			count[0] = count[1] = 0;
			good &= sn_sched_check(s) == 0;
		}
	}
	OK(good && worst <= 2, "qfq: ~2.3 wraps of V, equal weights stay within %d packets per 100k", worst);
	sn_sched_free(s);
}

/* FIFO's shared ring grows past its initial 1024 entries, keeping order. */
static void test_fifo_grow(void)
{
	struct sn_sched *s = mk(SN_SCHED_FIFO, 64, 64, 0);
	uint32_t len, cls, n = 0;
	int64_t prev = -1;
	int good = 1;

	for (uint32_t c = 0; c < 64; c++)
		sn_sched_class_add(s, c, 1, 1500);
	for (uint32_t i = 0; i < 64 * 64; i++)
		good &= sn_sched_enqueue(s, i % 64, tag(i % 64, i), 64 + i % 1000) == 0;
	good &= sn_sched_enqueue(s, 5, tag(5, 0), 100) == -ENOBUFS;
	good &= sn_sched_class_del(s, 7, NULL, NULL) == 0 && sn_sched_check(s) == 0;
	for (void *it; (it = sn_sched_dequeue(s, &len, &cls)); n++) {
		uint32_t i = tag_seq(it);

		/* enqueue order, class 7 gone */
		good &= cls != 7 && cls == i % 64 && len == 64 + i % 1000 && (int64_t)i > prev;
		prev = i;
	}
	OK(good && n == 63 * 64 && sn_sched_backlog(s) == 0, "fifo: ring grows to 4096, order kept, del compacts");
	sn_sched_free(s);
}

/* enqueue_burst = n single enqueues, stopping at the first refusal. */
static void test_enqueue_burst(void)
{
	for (size_t a = 0; a < SN_ARRAY_SIZE(algos); a++) {
		struct sn_sched *s = mk(algos[a], 4, 4, 0);
		void *items[6];
		uint32_t lens[6] = { 100, 200, 300, 400, 500, 600 }, len, cid, i, got;
		int err = 0;

		OK(sn_sched_class_add(s, 1, 1, 1514) == 0, "%s add", sn_sched_algo_name(algos[a]));
		for (i = 0; i < 6; i++)
			items[i] = (void *)(uintptr_t)(0x1000 + 16 * i);
		got = sn_sched_enqueue_burst(s, 1, items, lens, 6, &err);
		OK(got == 4 && err == -ENOBUFS && sn_sched_backlog(s) == 4,
		   "%s burst stops at queue full: got %u err %d", sn_sched_algo_name(algos[a]),
		   got, err);
		for (i = 0; i < 4; i++) {
			void *it = sn_sched_dequeue(s, &len, &cid);

			OK(it == items[i] && len == lens[i] && cid == 1, "%s burst order %u",
			   sn_sched_algo_name(algos[a]), i);
		}
		err = 0;
		lens[1] = 2000;
		got = sn_sched_enqueue_burst(s, 1, items, lens, 3, &err);
		OK(got == 1 && err == -EMSGSIZE, "%s burst stops at bad length: got %u err %d",
		   sn_sched_algo_name(algos[a]), got, err);
		err = 0;
		got = sn_sched_enqueue_burst(s, 3, items, lens, 2, &err);
		OK(got == 0 && err == -ENOENT, "%s burst to a missing class: err %d",
		   sn_sched_algo_name(algos[a]), err);
		err = 1;
		got = sn_sched_enqueue_burst(s, 1, items, lens, 0, &err);
		OK(got == 0 && err == 1, "%s empty burst leaves err alone",
		   sn_sched_algo_name(algos[a]));
		sn_sched_free(s);
	}
}

/* A burst must leave the scheduler exactly as the single enqueues would:
 * two instances of each algorithm, one fed item by item, one by bursts
 * (random classes, sizes, lengths including too long ones, queues running
 * full, dequeues and lmax changes in between), give the same dequeue
 * sequence, the same refusals and pass the self-check throughout. */
static void test_burst_equals_singles(void)
{
	enum { NCL = 40, ROUNDS = 20000 };

	for (size_t a = 0; a < SN_ARRAY_SIZE(algos); a++) {
		struct sn_sched *s1 = mk(algos[a], NCL, 16, 0), *s2 = mk(algos[a], NCL, 16, 0);
		uint32_t serial = 0, mism = 0, bad_check = 0;

		for (uint32_t c = 0; c < NCL - 2; c++) {  /* ids NCL-2, NCL-1: missing */
			uint32_t w = 1 + (uint32_t)(rnd() % 1000), lm = 64 + (uint32_t)(rnd() % 9000);

			mism += sn_sched_class_add(s1, c, w, lm) != 0 || sn_sched_class_add(s2, c, w, lm) != 0;
		}
		for (uint32_t r = 0; r < ROUNDS; r++) {
			void *items[24];
			uint32_t lens[24], id = (uint32_t)(rnd() % NCL), n = (uint32_t)(rnd() % 24), i;
			uint32_t got1 = 0, got2;
			int e1 = 1, e2 = 1;

			for (i = 0; i < n; i++) {
				items[i] = (void *)(uintptr_t)(++serial);
				lens[i] = rnd() % 50 ? 1 + (uint32_t)(rnd() % 9100) : 0;
			}
			for (i = 0; i < n; i++) {
				int rc = sn_sched_enqueue(s1, id, items[i], lens[i]);

				if (rc) {
					e1 = rc;
					break;
				}
				got1++;
			}
			got2 = sn_sched_enqueue_burst(s2, id, items, lens, n, &e2);
			mism += got1 != got2 || e1 != e2;
			for (uint32_t k = (uint32_t)(rnd() % 30); k; k--) {
				uint32_t l1 = 0, l2 = 0, c1 = 0, c2 = 0;
				void *i1 = sn_sched_dequeue(s1, &l1, &c1), *i2 = sn_sched_dequeue(s2, &l2, &c2);

				mism += i1 != i2 || l1 != l2 || c1 != c2;
			}
			if (rnd() % 500 == 0) {
				uint32_t c = (uint32_t)(rnd() % (NCL - 2)), w = 1 + (uint32_t)(rnd() % 1000);
				uint32_t lm = 64 + (uint32_t)(rnd() % 9000);

				mism += sn_sched_class_change(s1, c, w, lm) != sn_sched_class_change(s2, c, w, lm);
			}
			if (r % 1000 == 0)
				bad_check += sn_sched_check(s1) != 0 || sn_sched_check(s2) != 0;
		}
		OK(!mism && !bad_check && sn_sched_backlog(s1) == sn_sched_backlog(s2),
		   "%s: bursts and single enqueues give the same schedule (%u mismatches)",
		   sn_sched_algo_name(algos[a]), mism);
		sn_sched_free(s1);
		sn_sched_free(s2);
	}
}

/* sn_qfq_dequeue_burst (with its short path for a run of one
 * class, qfq_dequeue_run) must leave QFQ exactly as single dequeues do:
 * two instances fed the same random trace (1, 3 or 8 classes, random
 * weights and lmax, lengths that often keep a class in its front slot and
 * sometimes move it, weight changes), one drained by bursts of random
 * size and byte budget, the other one item at a time under the same
 * budget rule, give the same items, lengths, byte counts, the same V and
 * every class's S and F after every burst, and pass the self-check. */
/* Two QFQ instances (exit if either could not be created) get the same
 * `active` classes 0 .. active - 1: class 0 weight 1, the others random
 * weights and lmax. Returns the number of class_add calls that failed. */
static uint32_t qfq_twin_classes(struct sn_qfq *a, struct sn_qfq *b, uint32_t active)
{
	uint32_t mism = 0;

	if (!a || !b) {
		perror("sn_qfq_create");
		exit(1);
	}
	for (uint32_t c = 0; c < active; c++) {
		uint32_t w = c == 0 ? 1 : 1 + (uint32_t)(rnd() % 1000);
		uint32_t lm = rnd() % 2 ? 1518 : 64 + (uint32_t)(rnd() % 9000);

		mism += sn_qfq_class_add(a, c, w, lm) != 0 || sn_qfq_class_add(b, c, w, lm) != 0;
	}
	return mism;
}

static void test_dequeue_burst_equals_singles(void)
{
	enum { NCL = 8, ROUNDS = 40000 };
	static const uint32_t active[] = { 1, 3, NCL };

	for (size_t m = 0; m < SN_ARRAY_SIZE(active); m++) {
		struct sn_qfq *a = sn_qfq_create(NCL, 256), *b = sn_qfq_create(NCL, 256);
		uint32_t serial = 0, mism = 0, bad_check = 0, ov = (uint32_t)(m * 12);
		uint64_t served = 0;

		mism += qfq_twin_classes(a, b, active[m]);
		for (uint32_t r = 0; r < ROUNDS; r++) {
			uint32_t id = (uint32_t)(rnd() % active[m]), k = (uint32_t)(rnd() % 40);
			uint32_t fixed = 64 + (uint32_t)(rnd() % 64);
			void *ia[64];
			uint32_t la[64], n = 1 + (uint32_t)(rnd() % 64), ib = 0;
			uint64_t budget = rnd() % 3 ? UINT64_MAX : 1 + rnd() % 6000, ba = 0, tb = 0;
			uint32_t got;

			for (uint32_t i = 0; i < k; i++) {
				uint32_t len = rnd() % 4 ? fixed : 1 + (uint32_t)(rnd() % 1518);
				void *it = (void *)(uintptr_t)(++serial);
				int ra = sn_qfq_enqueue(a, id, it, len), rb = sn_qfq_enqueue(b, id, it, len);

				mism += ra != rb;
			}
			got = sn_qfq_dequeue_burst(a, ia, la, n, budget, ov, &ba);
			while (ib < n && tb < budget && sn_qfq_backlog(b)) {
				uint32_t l = 0, c = 0;
				void *it = sn_qfq_dequeue(b, &l, &c);

				mism += ib >= got || it != ia[ib] || l != la[ib];
				tb += (uint64_t)l + ov;
				ib++;
			}
			mism += got != ib || ba != tb;
			served += got;
			for (uint32_t c = 0; c < active[m]; c++) {
				uint64_t v1, s1, f1, v2, s2, f2;

				sn_qfq_times(a, c, &v1, &s1, &f1);
				sn_qfq_times(b, c, &v2, &s2, &f2);
				mism += v1 != v2 || s1 != s2 || f1 != f2;
			}
			if (rnd() % 700 == 0) {
				uint32_t c = (uint32_t)(rnd() % active[m]), w = 1 + (uint32_t)(rnd() % 1000);

				mism += sn_qfq_class_change(a, c, w, 1518) != sn_qfq_class_change(b, c, w, 1518);
			}
			if (r % 500 == 0)
				bad_check += sn_qfq_check(a) != 0 || sn_qfq_check(b) != 0;
		}
		OK(!mism && !bad_check && served > ROUNDS && sn_qfq_backlog(a) == sn_qfq_backlog(b),
		   "qfq, %u classes: burst dequeues give the single dequeues' items, V, S, F "
		   "(%u mismatches, %llu served)", active[m], mism, (unsigned long long)served);
		sn_qfq_free(a);
		sn_qfq_free(b);
	}
}

/* sn_qfq_pass_burst leaves a scheduler exactly as sn_qfq_enqueue_burst
 * + sn_qfq_dequeue_burst do (items out, bytes, V, S, F of every class,
 * backlogs, the self-check), with every room, budget and overhead case;
 * sn_qfq_pass_ok says yes exactly when the scheduler is empty and the
 * enqueue would take every item. a takes the pass, b the two calls. */
static void test_pass_equals_enqueue_dequeue(void)
{
	enum { NCL = 8, ROUNDS = 60000 };
	static const uint32_t active[] = { 1, 3, NCL };

	for (size_t m = 0; m < SN_ARRAY_SIZE(active); m++) {
		struct sn_qfq *a = sn_qfq_create(NCL, 64), *b = sn_qfq_create(NCL, 64);
		uint32_t serial = 0, mism = 0, bad_check = 0, passes = 0, partial = 0, refused = 0;
		uint64_t served = 0;

		mism += qfq_twin_classes(a, b, active[m]);
		for (uint32_t r = 0; r < ROUNDS; r++) {
			/* ids past the registered classes: no class, no pass */
			uint32_t id = (uint32_t)(rnd() % (active[m] + 1)), n = 1 + (uint32_t)(rnd() % 80);
			uint32_t fixed = 64 + (uint32_t)(rnd() % 64), ov = (uint32_t)(rnd() % 3 * 12);
			uint32_t room = 1 + (uint32_t)(rnd() % 80), lens[80], la[80], lb[80];
			uint64_t budget = rnd() % 3 ? UINT64_MAX : rnd() % 6000, ba = 0, bb = 0;
			void *items[80], *ia[80], *ib[80];
			bool ok;
			int err = 0;

			for (uint32_t i = 0; i < n; i++) {
				lens[i] = rnd() % 4 ? fixed : 1 + (uint32_t)(rnd() % 1518);
				if (rnd() % 500 == 0)
					lens[i] = rnd() % 2 ? 0 : 20000;   /* refused by the enqueue */
				items[i] = (void *)(uintptr_t)(++serial);
			}
			uint32_t lo = UINT32_MAX, hi = 0;

			for (uint32_t i = 0; i < n; i++) {
				lo = lens[i] < lo ? lens[i] : lo;
				hi = lens[i] > hi ? lens[i] : hi;
			}
			ok = sn_qfq_pass_ok(a, id, n, lo, hi);
			if (ok) {
				uint32_t ka, gb, kb;

				passes++;
				mism += sn_qfq_backlog(a) != 0;
				ka = sn_qfq_pass_burst(a, id, items, lens, n, room, budget, ov, &ba);
				gb = sn_qfq_enqueue_burst(b, id, items, lens, n, &err);
				kb = sn_qfq_dequeue_burst(b, ib, lb, room, budget, ov, &bb);
				mism += gb != n || ka != kb || ba != bb;
				for (uint32_t i = 0; i < ka && i < kb; i++)
					mism += items[i] != ib[i] || lens[i] != lb[i];
				partial += ka < n;
				served += ka;
			} else {
				/* the same enqueue on both; it must refuse something
				 * if the scheduler was empty */
				uint32_t ga = sn_qfq_enqueue_burst(a, id, items, lens, n, &err);
				uint32_t gb = sn_qfq_enqueue_burst(b, id, items, lens, n, &err);

				mism += ga != gb;
				refused += sn_qfq_backlog(a) == ga;   /* was empty */
				mism += sn_qfq_backlog(a) == ga && ga == n;
			}
			/* empty both now and then (only an empty scheduler passes) */
			if (rnd() % 3) {
				uint32_t ka = sn_qfq_dequeue_burst(a, ia, la, 80, UINT64_MAX, ov, &ba);
				uint32_t kb = sn_qfq_dequeue_burst(b, ib, lb, 80, UINT64_MAX, ov, &bb);

				mism += ka != kb || ba != bb;
				for (uint32_t i = 0; i < ka && i < kb; i++)
					mism += ia[i] != ib[i] || la[i] != lb[i];
			}
			mism += sn_qfq_backlog(a) != sn_qfq_backlog(b);
			for (uint32_t c = 0; c < active[m]; c++) {
				uint64_t v1, s1, f1, v2, s2, f2;

				sn_qfq_times(a, c, &v1, &s1, &f1);
				sn_qfq_times(b, c, &v2, &s2, &f2);
				mism += v1 != v2 || s1 != s2 || f1 != f2;
				mism += sn_qfq_class_backlog(a, c) != sn_qfq_class_backlog(b, c);
			}
			if (rnd() % 700 == 0) {
				uint32_t c = (uint32_t)(rnd() % active[m]), w = 1 + (uint32_t)(rnd() % 1000);

				mism += sn_qfq_class_change(a, c, w, 1518) != sn_qfq_class_change(b, c, w, 1518);
			}
			if (r % 500 == 0)
				bad_check += sn_qfq_check(a) != 0 || sn_qfq_check(b) != 0;
		}
		OK(!mism && !bad_check && passes > ROUNDS / 4 && partial > 100 && refused > 10 &&
		   served > ROUNDS,
		   "qfq, %u classes: a pass through the empty scheduler leaves it as enqueue + "
		   "dequeue burst do (%u mismatches; %u passes, %u partial, %u refused, %llu "
		   "served)", active[m], mism, passes, partial, refused,
		   (unsigned long long)served);
		sn_qfq_free(a);
		sn_qfq_free(b);
	}
}

/* Purge: the taken items leave exactly once, every other item keeps its
 * class's order, the scheduler stays consistent and serves on. */
static bool take_every_other(void *item, uint32_t len, void *arg)
{
	uint32_t *taken = arg;

	(void)len;
	if (!((tag_seq(item) >> 2) & 1))
		return false;
	taken[tag_seq(item)]++;
	return true;
}

static bool take_all(void *item, uint32_t len, void *arg)
{
	uint32_t *taken = arg;

	(void)len;
	taken[tag_seq(item)]++;
	return true;
}

#define PURGE_N 64
static void test_purge(void)
{
	for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
		const char *n = sn_sched_algo_name(algos[a]);
		struct sn_sched *s = mk(algos[a], 4, PURGE_N, 1514);
		uint32_t taken[4 * PURGE_N] = { 0 }, seen[4 * PURGE_N] = { 0 };
		uint32_t last[4] = { 0 }, len, cls, got = 0, k1, k2, k3;
		bool good = true, order = true;

		for (uint32_t c = 0; c < 4; c++)
			good &= sn_sched_class_add(s, c, c + 1, 1514) == 0;
		for (uint32_t i = 0; i < 4 * PURGE_N; i++)
			good &= sn_sched_enqueue(s, i % 4, tag(i % 4, i), 64 + i % 1400) == 0;
		for (int i = 0; i < 10; i++) {   /* mid-service */
			void *it = sn_sched_dequeue(s, &len, &cls);

			good &= it != NULL;
			if (it) {
				seen[tag_seq(it)]++;
				last[cls] = tag_seq(it);
				got++;
			}
		}
		k1 = sn_sched_class_purge(s, 1, take_every_other, taken);
		good &= sn_sched_check(s) == 0;
		k2 = sn_sched_class_purge(s, 2, take_all, taken);
		good &= sn_sched_check(s) == 0 && sn_sched_class_backlog(s, 2) == 0;
		k3 = sn_sched_class_purge(s, 9, take_all, taken);
		OK(k3 == 0, "%s: purge of an unknown class takes nothing", n);
		/* the class still serves after a purge */
		good &= sn_sched_enqueue(s, 2, tag(2, 4 * PURGE_N - 2), 100) == 0;
		for (void *it; (it = sn_sched_dequeue(s, &len, &cls));) {
			uint32_t q = tag_seq(it);

			good &= tag_cls(it) == cls;
			if (q != 4 * PURGE_N - 2) {
				order &= q >= last[cls];
				last[cls] = q;
				seen[q]++;
			}
		}
		for (uint32_t i = 0; i < 4 * PURGE_N; i++)
			good &= seen[i] + taken[i] == 1 &&
				(taken[i] == 0 || i % 4 == 2 || (i % 4 == 1 && ((i >> 2) & 1)));
		OK(good && order && k1 > 0 && k2 > 0 && sn_sched_backlog(s) == 0 &&
		   sn_sched_check(s) == 0,
		   "%s: purge while backlogged: %u + %u taken after %u served, the rest in "
		   "order, none lost", n, k1, k2, got);
		sn_sched_free(s);
	}
}

int main(void)
{
	test_errors();
	test_order();
	test_churn();
	test_qfq_wrap();
	test_fifo_grow();
	test_soak();
	test_enqueue_burst();
	test_burst_equals_singles();
	test_dequeue_burst_equals_singles();
	test_pass_equals_enqueue_dequeue();
	test_purge();
	printf("1..%d\n", n_test);
	if (n_fail)
		fprintf(stderr, "%d of %d failed\n", n_fail, n_test);
	return n_fail ? 1 : 0;
}
