/* SPDX-License-Identifier: BSD-3-Clause */
/* test_mbox_stress.c — two threads through one sn_mbox: every item arrives
 * exactly once and in order, across single and burst operations of random
 * sizes, over millions of laps of a small mailbox (so the lap tags and the
 * per-line release are exercised under real concurrency). Also run under
 * TSan by CI.
 *
 * Items: SN_STRESS_ITEMS in the environment or argv[1] (default 1e8).
 * Mailbox size: SN_STRESS_MBOX_SIZE (default 256).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sn_mbox.h"

struct stress {
	struct sn_mbox *mb;
	uint64_t n;
	uint64_t full_waits;
};

static uint64_t env_u64(const char *name, const char *arg, uint64_t dflt)
{
	const char *s = arg ? arg : getenv(name);
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0')
		return dflt;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end != '\0' || v == 0) {
		fprintf(stderr, "test_mbox_stress: bad value for %s: '%s'\n", name, s);
		exit(2);
	}
	return v;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Both threads may share a CPU with each other and with other work: spin a
 * little, then yield, so a descheduled peer gets to run. */
static void backoff(uint32_t *spins)
{
	if (++*spins > 64) {
		*spins = 0;
		sched_yield();
	}
}

static void *producer(void *arg)
{
	struct stress *st = arg;
	uint64_t seq = 1, rng = 0x9e3779b97f4a7c15ull;
	void *buf[32];
	uint32_t spins = 0;

	while (seq <= st->n) {
		uint64_t r = xorshift(&rng);

		if (r & 1) {
			if (sn_mbox_insert(st->mb, (void *)(uintptr_t)(seq << 1)) == 0) {
				seq++;
				continue;
			}
		} else {
			uint32_t want = (uint32_t)((r >> 8) % 32) + 1, i, k;

			if (want > st->n - seq + 1)
				want = (uint32_t)(st->n - seq + 1);
			for (i = 0; i < want; i++)
				buf[i] = (void *)(uintptr_t)((seq + i) << 1);
			k = sn_mbox_insert_burst(st->mb, buf, want);
			seq += k;
			if (k == want)
				continue;
		}
		st->full_waits++;
		backoff(&spins);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct stress st;
	pthread_t tid;
	uint64_t expect = 1, rng = 0x2545f4914f6cdd1dull, empty_polls = 0;
	uint32_t spins = 0, size;
	void *buf[32];
	struct timespec t0, t1;
	double secs;
	int rc;

	memset(&st, 0, sizeof(st));
	st.n = env_u64("SN_STRESS_ITEMS", argc > 1 ? argv[1] : NULL, 100000000ull);
	size = (uint32_t)env_u64("SN_STRESS_MBOX_SIZE", NULL, 256);
	st.mb = sn_mbox_create(size, NULL);
	if (st.mb == NULL) {
		fprintf(stderr, "test_mbox_stress: sn_mbox_create(%u): %s\n", size, strerror(errno));
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = pthread_create(&tid, NULL, producer, &st);
	if (rc != 0) {
		fprintf(stderr, "test_mbox_stress: pthread_create: %s\n", strerror(rc));
		return 2;
	}
	while (expect <= st.n) {
		uint64_t r = xorshift(&rng);
		uint32_t k, i;

		if (r & 1) {
			void *p = sn_mbox_extract(st.mb);

			k = p != NULL;
			buf[0] = p;
		} else {
			k = sn_mbox_extract_burst(st.mb, buf, (uint32_t)((r >> 8) % 32) + 1);
		}
		for (i = 0; i < k; i++) {
			if ((uintptr_t)buf[i] != (uintptr_t)(expect << 1)) {
				fprintf(stderr, "test_mbox_stress: FAIL: got item %" PRIuPTR
					" expected %" PRIu64 "\n", (uintptr_t)buf[i] >> 1, expect);
				return 1;
			}
			expect++;
		}
		if (k == 0) {
			empty_polls++;
			backoff(&spins);
		}
	}
	pthread_join(tid, NULL);
	/* Nothing beyond the last item may appear. */
	if (sn_mbox_extract(st.mb) != NULL) {
		fprintf(stderr, "test_mbox_stress: FAIL: extra item after the last\n");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	printf("test_mbox_stress: ok: %" PRIu64 " items in order through a %u-slot mailbox "
	       "in %.2f s (%.1f ns/item; %" PRIu64 " full waits, %" PRIu64 " empty polls)\n",
	       st.n, size, secs, secs * 1e9 / (double)st.n, st.full_waits, empty_polls);
	sn_mbox_free(st.mb);
	return 0;
}
