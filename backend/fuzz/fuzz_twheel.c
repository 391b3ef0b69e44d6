/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_twheel.c — libFuzzer target: random op sequences on sn_twheel and
 * sn_cffs against simple models, with invariant checks.
 *
 *   clang -fsanitize=fuzzer,address,undefined -I backend/core \
 *         backend/fuzz/fuzz_twheel.c backend/core/ *.c
 *
 * Input: 4 header bytes choose the wheel (granularity 1..256 ns, 2..1024
 * slots, 1..64 pool nodes of 7/15/31/63 items, start time) and the cFFS
 * size (1..4096 bits);
 * then each op byte picks insert / extract / next_due / cffs set / clear /
 * find, with operands from the following bytes. The wheel model is the
 * release rule of sn_twheel.h (slot = ceil(ts/g), past -> front, clamp or
 * reject beyond the horizon, slot order then FIFO); the cFFS model is a
 * byte per position. Any disagreement aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sn_cffs.h"
#include "sn_twheel.h"

#define MAX_PEND (64 * SN_TWHEEL_NODE_ITEMS)   /* 64 nodes of the largest size used */

struct in {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct in *in, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		v <<= 8;
		if (in->n) {
			v |= *in->p++;
			in->n--;
		}
	}
	return v;
}

struct mitem {
	uint64_t id, slot;
};

static struct mitem pend[MAX_PEND + 1];
static size_t npend;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	uint64_t g = 1 + take(&in, 1);
	uint32_t slots = 2u << (take(&in, 1) % 10);
	uint32_t nb = (uint32_t)take(&in, 1);
	uint32_t nodes = 1 + nb % 64;
	uint32_t items = 8u << (nb >> 6);   /* 7, 15, 31 or 63 per node */
	uint64_t now = take(&in, 1) * 997;
	uint32_t nbits = 1 + (uint32_t)(take(&in, 2) % 4096);
	struct sn_twheel_params p = { .granularity_ns = g, .slots = slots, .pool_nodes = nodes,
				      .start_ns = now, .node_items = items - 1 };
	struct sn_twheel *w = sn_twheel_create(&p);
	struct sn_cffs *c = sn_cffs_create(nbits);
	uint8_t *cm = calloc(nbits, 1);
	uint64_t front = now / g, next_id = 1;
	void *out[64];

	SN_VERIFY(w && c && cm);
	npend = 0;
	while (in.n) {
		uint8_t op = (uint8_t)take(&in, 1);

		switch (op % 6) {
		case 0: {   /* insert at now + delta (or in the past) */
			uint64_t d = take(&in, 2) * (1 + op / 64);
			int mode = (op >> 3) & 1, rc;
			uint64_t ts = (op & 0x10) ? now - SN_MIN(now, d) : now + d;
			uint64_t s = ts / g + (ts % g != 0);

			if (s <= front)
				s = front;
			rc = sn_twheel_insert(w, (void *)(uintptr_t)next_id, ts, mode);
			if (s > front + slots - 1) {
				if (mode == SN_TWHEEL_REJECT) {
					SN_VERIFY(rc == -ERANGE);
					break;
				}
				s = front + slots - 1;
			}
			if (rc == -ENOBUFS) {
				SN_VERIFY(sn_twheel_pool_free(w) == 0);
				break;
			}
			SN_VERIFY(rc == 0 && npend < MAX_PEND);
			pend[npend++] = (struct mitem){ next_id++, s };
			break;
		}
		case 1: {   /* advance time, extract up to max */
			unsigned max = 1 + (unsigned)(take(&in, 1) % 64);
			uint64_t ns, best;
			unsigned got, k;

			now += take(&in, 2) * (op & 0x80 ? slots : 1);
			ns = now / g;
			got = sn_twheel_extract(w, now, out, max);
			for (k = 0; k < got; k++) {
				size_t bi = SIZE_MAX;

				/* Expected: smallest (slot, insertion order) among due. */
				for (size_t j = 0; j < npend; j++)
					if (pend[j].slot <= ns &&
					    (bi == SIZE_MAX || pend[j].slot < pend[bi].slot))
						bi = j;
				SN_VERIFY(bi != SIZE_MAX);
				SN_VERIFY((uint64_t)(uintptr_t)out[k] == pend[bi].id);
				best = pend[bi].slot;
				memmove(&pend[bi], &pend[bi + 1], (npend - bi - 1) * sizeof(pend[0]));
				npend--;
				if (k + 1 == got && got == max)
					front = best;
			}
			if (got < max) {
				for (size_t j = 0; j < npend; j++)
					SN_VERIFY(pend[j].slot > ns);   /* nothing due left */
				front = SN_MAX(front, ns);
			}
			break;
		}
		case 2: {   /* next_due and count */
			uint64_t best = UINT64_MAX;

			for (size_t j = 0; j < npend; j++)
				best = SN_MIN(best, pend[j].slot * g);
			SN_VERIFY(sn_twheel_next_due(w) == best);
			SN_VERIFY(sn_twheel_count(w) == npend);
			break;
		}
		case 3: {   /* cffs set */
			uint32_t i = (uint32_t)(take(&in, 2) % nbits);

			sn_cffs_set(c, i);
			cm[i] = 1;
			break;
		}
		case 4: {   /* cffs clear */
			uint32_t i = (uint32_t)(take(&in, 2) % nbits);

			sn_cffs_clear(c, i);
			cm[i] = 0;
			break;
		}
		default: {  /* cffs find_next / find_ge / test / count */
			uint32_t pos = (uint32_t)(take(&in, 2) % nbits), want = SN_CFFS_NONE, cnt = 0;

			for (uint32_t d = 0; d < nbits; d++)
				if (cm[(pos + d) % nbits]) {
					want = (pos + d) % nbits;
					break;
				}
			SN_VERIFY(sn_cffs_find_next(c, pos) == want);
			SN_VERIFY(sn_cffs_test(c, pos) == cm[pos]);
			for (uint32_t i = 0; i < nbits; i++)
				cnt += cm[i];
			SN_VERIFY(sn_cffs_count(c) == cnt);
			if (want != SN_CFFS_NONE && want >= pos)
				SN_VERIFY(sn_cffs_find_ge(c, pos) == want);
			break;
		}
		}
		SN_VERIFY(sn_twheel_count(w) == npend);
		/* Pool conservation: every node is free or holds >= 1 item. */
		SN_VERIFY(sn_twheel_pool_free(w) <= nodes);
		SN_VERIFY(nodes - sn_twheel_pool_free(w) <= npend);
	}
	sn_twheel_free(w);
	sn_cffs_free(c);
	free(cm);
	return 0;
}
