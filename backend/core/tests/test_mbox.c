/* SPDX-License-Identifier: BSD-3-Clause */
/* test_mbox.c — single-threaded unit tests of sn_mbox: FIFO order, full and
 * empty, lap tags across wrap-around, lazy per-line release, bursts, client
 * list dedupe and the backpressure flag. Two-thread behaviour is in
 * test_mbox_stress.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "sn_mbox.h"

#include "sn_check.h"

/* Fake items: distinct, even, never dereferenced. */
static void *item(uint64_t i) { return (void *)(uintptr_t)((i + 1) << 1); }

static void test_create(void)
{
	struct sn_mbox *mb;
	int cookie;

	errno = 0;
	CHECK(sn_mbox_create(24, NULL) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(sn_mbox_create(SN_MBOX_LINE_SLOTS, NULL) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(sn_mbox_create(0, NULL) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(sn_mbox_create(SN_MBOX_MAX_SIZE * 2u, NULL) == NULL && errno == EINVAL);
	mb = sn_mbox_create(64, &cookie);
	CHECK(mb != NULL);
	CHECK(((uintptr_t)mb % SN_CACHE_LINE) == 0);
	CHECK(sn_mbox_udata(mb) == &cookie);
	CHECK(sn_mbox_capacity(mb) == 64 - SN_MBOX_LINE_SLOTS);
	sn_mbox_free(mb);
}

static void test_fifo_full_empty(void)
{
	struct sn_mbox *mb = sn_mbox_create(64, NULL);
	uint32_t cap = sn_mbox_capacity(mb), i;

	CHECK(sn_mbox_extract(mb) == NULL);
	CHECK(sn_mbox_insert(mb, NULL) == -EINVAL);
	CHECK(sn_mbox_insert(mb, (void *)(uintptr_t)3) == -EINVAL);
	for (i = 0; i < cap; i++)
		CHECK(sn_mbox_insert(mb, item(i)) == 0);
	CHECK(sn_mbox_insert(mb, item(999)) == -ENOBUFS);
	CHECK(sn_mbox_insert(mb, item(999)) == -ENOBUFS);
	for (i = 0; i < cap; i++)
		CHECK(sn_mbox_extract(mb) == item(i));
	CHECK(sn_mbox_extract(mb) == NULL);
	CHECK(sn_mbox_extract(mb) == NULL);
	/* Empty again: a full capacity fits again. */
	for (i = 0; i < cap; i++)
		CHECK(sn_mbox_insert(mb, item(100 + i)) == 0);
	CHECK(sn_mbox_insert(mb, item(999)) == -ENOBUFS);
	for (i = 0; i < cap; i++)
		CHECK(sn_mbox_extract(mb) == item(100 + i));
	CHECK(sn_mbox_extract(mb) == NULL);
	sn_mbox_free(mb);
}

/* The consumer releases a line only after consuming all of it, by zeroing
 * its first slot; the other slots keep their stale values. */
static void test_lazy_release(void)
{
	const uint32_t L = SN_MBOX_LINE_SLOTS;
	struct sn_mbox *mb = sn_mbox_create(2 * L, NULL);
	uint32_t i;

	for (i = 0; i < L; i++)
		CHECK(sn_mbox_insert(mb, item(i)) == 0);
	CHECK(sn_mbox_insert(mb, item(99)) == -ENOBUFS);
	for (i = 0; i + 1 < L; i++)
		CHECK(sn_mbox_extract(mb) == item(i));
	/* Line 0 not fully consumed: not released, producer still blocked. */
	CHECK(atomic_load(&mb->slots[0]) != 0);
	CHECK(sn_mbox_insert(mb, item(99)) == -ENOBUFS);
	CHECK(sn_mbox_extract(mb) == item(L - 1));
	/* Released by zeroing one slot; the rest stays stale (lazy). */
	CHECK(atomic_load(&mb->slots[0]) == 0);
	for (i = 1; i < L; i++)
		CHECK(atomic_load(&mb->slots[i]) == (uintptr_t)item(i));
	CHECK(sn_mbox_insert(mb, item(L)) == 0);
	CHECK(sn_mbox_extract(mb) == item(L));
	sn_mbox_free(mb);
}

/* Stale entries from the previous lap must read as empty. */
static void test_lap_tag(void)
{
	const uint32_t L = SN_MBOX_LINE_SLOTS;
	struct sn_mbox *mb = sn_mbox_create(2 * L, NULL);
	uint64_t seq = 0, got = 0;
	uint32_t i, lap;

	for (lap = 0; lap < 5; lap++) {
		for (i = 0; i < 2 * L; i++) {
			CHECK(sn_mbox_insert(mb, item(seq++)) == 0);
			CHECK(sn_mbox_extract(mb) == item(got++));
			CHECK(sn_mbox_extract(mb) == NULL);
		}
		/* Slot 1 now holds a stale entry of this lap; insert one item
		 * into slot 0 of the next lap: only that one may come out. */
		CHECK(sn_mbox_insert(mb, item(seq++)) == 0);
		CHECK(sn_mbox_extract(mb) == item(got++));
		CHECK(sn_mbox_extract(mb) == NULL);
		CHECK(atomic_load(&mb->slots[1]) != 0);
		/* Finish this line so the next iteration starts at slot 0 of a
		 * line again. */
		for (i = 1; i < L; i++) {
			CHECK(sn_mbox_insert(mb, item(seq++)) == 0);
			CHECK(sn_mbox_extract(mb) == item(got++));
		}
		CHECK(sn_mbox_extract(mb) == NULL);
		/* One more lap of 8 to keep the parity changing. */
		for (i = 0; i < L; i++) {
			CHECK(sn_mbox_insert(mb, item(seq++)) == 0);
			CHECK(sn_mbox_extract(mb) == item(got++));
		}
	}
	CHECK(seq == got);
	sn_mbox_free(mb);
}

/* Random interleaving of bursts over many laps against a counter model:
 * exact order and the exact full/empty points of the line rule. */
static void test_random_bursts(void)
{
	const uint32_t L = SN_MBOX_LINE_SLOTS, size = 64;
	struct sn_mbox *mb = sn_mbox_create(size, NULL);
	uint64_t tail = 0, head = 0, lim = 0, rng = 88172645463325252ull;
	void *buf[40];
	uint32_t it, i;

	for (it = 0; it < 200000; it++) {
		uint32_t n, k, want;

		rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
		n = (uint32_t)(rng >> 40) % 40;
		if (rng & 1) {
			for (i = 0; i < n; i++)
				buf[i] = item(tail + i);
			k = sn_mbox_insert_burst(mb, buf, n);
			/* Model: at each line start, room iff the line after it
			 * was consumed in the previous lap (or never used). */
			want = 0;
			while (want < n) {
				if (tail == lim) {
					uint64_t prev = tail + L;
					if (prev >= size && (prev - size) / L >= head / L)
						break;
					lim = tail + L;
				}
				tail++;
				want++;
			}
			CHECK(k == want);
		} else {
			k = sn_mbox_extract_burst(mb, buf, n);
			want = (uint32_t)SN_MIN((uint64_t)n, tail - head);
			CHECK(k == want);
			for (i = 0; i < k; i++)
				CHECK(buf[i] == item(head + i));
			head += k;
		}
		CHECK(tail - head <= sn_mbox_capacity(mb));
		if (failures)
			break;
	}
	CHECK(tail > 100000);
	sn_mbox_free(mb);
}

static void test_burst_edges(void)
{
	struct sn_mbox *mb = sn_mbox_create(32, NULL);
	void *in[40], *out[40];
	uint32_t i, cap = sn_mbox_capacity(mb);

	for (i = 0; i < 40; i++)
		in[i] = item(i);
	CHECK(sn_mbox_insert_burst(mb, in, 0) == 0);
	CHECK(sn_mbox_insert_burst(mb, in, 40) == cap);
	CHECK(sn_mbox_insert_burst(mb, in, 1) == 0);
	CHECK(sn_mbox_extract_burst(mb, out, 3) == 3);
	CHECK(out[0] == item(0) && out[2] == item(2));
	CHECK(sn_mbox_extract_burst(mb, out, 40) == cap - 3);
	CHECK(out[0] == item(3) && out[cap - 4] == item(cap - 1));
	CHECK(sn_mbox_extract_burst(mb, out, 40) == 0);
	/* A NULL in the burst stops it there. */
	in[5] = NULL;
	CHECK(sn_mbox_insert_burst(mb, in, 10) == 5);
	CHECK(sn_mbox_extract_burst(mb, out, 40) == 5);
	sn_mbox_free(mb);
}

static void test_client_list(void)
{
	struct sn_mbox *cl = sn_mbox_create(16, NULL);
	struct sn_mbox *a = sn_mbox_create(16, NULL), *b = sn_mbox_create(16, NULL);
	uint32_t i, n;

	CHECK(sn_mbox_cl_last(cl) == NULL);
	CHECK(sn_mbox_cl_next(cl) == NULL);
	CHECK(sn_mbox_cl_overflowed(cl) == 0);
	CHECK(sn_mbox_cl_append(cl, a) == 0);
	CHECK(sn_mbox_cl_append(cl, a) == 0);
	CHECK(sn_mbox_cl_append(cl, a) == 0);
	CHECK(sn_mbox_cl_next(cl) == a);
	CHECK(sn_mbox_cl_next(cl) == NULL);      /* deduplicated */
	CHECK(sn_mbox_cl_last(cl) == a);
	/* Still the last appended, even after the consumer took it. */
	CHECK(sn_mbox_cl_append(cl, a) == 0);
	CHECK(sn_mbox_cl_next(cl) == NULL);
	CHECK(sn_mbox_cl_append(cl, b) == 0);
	CHECK(sn_mbox_cl_append(cl, a) == 0);
	CHECK(sn_mbox_cl_append(cl, a) == 0);
	CHECK(sn_mbox_cl_next(cl) == b);
	CHECK(sn_mbox_cl_next(cl) == a);
	CHECK(sn_mbox_cl_next(cl) == NULL);
	CHECK(sn_mbox_cl_last(cl) == a);
	/* Full list (fresh, so capacity is exact): append fails, is not
	 * recorded as last, and succeeds once the consumer made room. */
	sn_mbox_free(cl);
	cl = sn_mbox_create(16, NULL);
	for (n = 0; n < 40; n++)
		if (sn_mbox_cl_append(cl, (n & 1) ? a : b) != 0)
			break;
	CHECK(n == sn_mbox_capacity(cl));
	CHECK(sn_mbox_cl_overflowed(cl) == 1);   /* the failed append above */
	CHECK(sn_mbox_cl_overflowed(cl) == 0);
	CHECK(sn_mbox_cl_append(cl, (n & 1) ? a : b) == -ENOBUFS);
	CHECK(sn_mbox_cl_append(cl, (n & 1) ? a : b) == -ENOBUFS);
	CHECK(sn_mbox_cl_overflowed(cl) == 1);
	CHECK(sn_mbox_cl_overflowed(cl) == 0);
	for (i = 0; i < n; i++)
		CHECK(sn_mbox_cl_next(cl) == ((i & 1) ? a : b));
	CHECK(sn_mbox_cl_next(cl) == NULL);
	CHECK(sn_mbox_cl_last(cl) == ((n & 1) ? b : a));
	CHECK(sn_mbox_cl_append(cl, (n & 1) ? a : b) == 0);
	CHECK(sn_mbox_cl_next(cl) == ((n & 1) ? a : b));
	sn_mbox_free(a);
	sn_mbox_free(b);
	sn_mbox_free(cl);
}

static void test_backpressure(void)
{
	struct sn_mbox *mb = sn_mbox_create(16, NULL);

	CHECK(sn_mbox_bp_take(mb) == 0);
	sn_mbox_bp_set(mb);
	sn_mbox_bp_set(mb);
	CHECK(sn_mbox_bp_take(mb) == 1);
	CHECK(sn_mbox_bp_take(mb) == 0);
	sn_mbox_bp_set(mb);
	CHECK(sn_mbox_bp_take(mb) == 1);
	CHECK(sn_mbox_bp_take(mb) == 0);
	sn_mbox_free(mb);
}

int main(void)
{
	test_create();
	test_fifo_full_empty();
	test_lazy_release();
	test_lap_tag();
	test_random_bursts();
	test_burst_edges();
	test_client_list();
	test_backpressure();
	return sn_check_exit("test_mbox");
}
