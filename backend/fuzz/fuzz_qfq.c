/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_qfq.c — libFuzzer target: random operation sequences on the QFQ
 * scheduler (and, by the first input byte, DRR / FIFO) through sn_sched.h,
 * against a shadow model.
 *
 * Ops: class add / change / delete with raw (often invalid) weight and
 * lmax, also while backlogged; enqueue with raw lengths; dequeue; peek;
 * bursts (sn_sched_enqueue_burst, sn_sched_dequeue_burst with a byte
 * budget). Checked after every op: the return code is the one the model
 * predicts (-EINVAL/-EEXIST/-ENOSPC/-ENOENT/-EMSGSIZE/-ENOBUFS), dequeued
 * items come out per class in FIFO order and never twice, a delete hands
 * exactly the class's queued items to the drop callback in order, backlog
 * counts agree, and sn_sched_check() (QFQ: bitmaps, bucket lists,
 * timestamps) passes. Any disagreement aborts.
 *
 *   clang -fsanitize=fuzzer,address,undefined -I backend/core \
 *         backend/fuzz/fuzz_qfq.c backend/core/(all .c)
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NCLS 12
#define QLEN 8   /* power of two: the model's ENOBUFS limit is exact */

struct model {
	int present;
	uint32_t weight, lmax;
	uint32_t seq_head, seq_tail;     /* item tags of queued items */
	uint32_t lens[QLEN];
};

struct input {
	const uint8_t *p;
	size_t n;
};

static uint32_t take(struct input *in, int bytes)
{
	uint32_t v = 0;

	for (int i = 0; i < bytes; i++) {
		v <<= 8;
		if (in->n) {
			v |= *in->p++;
			in->n--;
		}
	}
	return v;
}

static void *tag(uint32_t cls, uint32_t seq) { return (void *)(uintptr_t)(((uint64_t)cls << 32 | seq) + 1); }

struct drop_ctx {
	struct model *m;
	uint32_t cls;
};

static void on_drop(void *item, uint32_t len, void *arg)
{
	struct drop_ctx *d = arg;
	struct model *m = &d->m[d->cls];

	SN_VERIFY(m->seq_head != m->seq_tail);
	SN_VERIFY(item == tag(d->cls, m->seq_head));
	SN_VERIFY(len == m->lens[m->seq_head % QLEN]);
	m->seq_head++;
}

/* A weight or lmax drawn mostly from the valid range, sometimes outside. */
static uint32_t draw(struct input *in, uint32_t lo, uint32_t hi)
{
	uint32_t sel = take(in, 1), v = take(in, 3);

	if (sel < 16)
		return v;                  /* raw: often invalid */
	if (sel < 48)
		return sel & 1 ? lo : hi;  /* edges */
	return lo + v % (hi - lo + 1);
}

static uint64_t wsum_of(const struct model *m)
{
	uint64_t w = 0;

	for (int c = 0; c < NCLS; c++)
		w += m[c].present ? m[c].weight : 0;
	return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct model m[NCLS];
	uint32_t a = take(&in, 1) % 8;
	struct sn_sched_params p = {
		.algo = a < 6 ? SN_SCHED_QFQ : a == 6 ? SN_SCHED_DRR : SN_SCHED_FIFO,
		.max_classes = NCLS, .queue_len = QLEN, .drr_quantum = take(&in, 1) * 16,
	};
	struct sn_sched *s = sn_sched_create(&p);
	uint64_t total = 0;

	SN_VERIFY(s);
	memset(m, 0, sizeof(m));
	while (in.n) {
		uint32_t op = take(&in, 1), c = take(&in, 1) % (NCLS + 1); /* NCLS: bad id */
		struct model *mc = c < NCLS ? &m[c] : NULL;
		int rc, want;

		switch (op % 8) {
		case 0: /* add */
		case 1: { /* change */
			uint32_t w = draw(&in, 1, SN_SCHED_MAX_WEIGHT);
			uint32_t l = draw(&in, 64, SN_SCHED_MAX_LMAX);
			int valid = mc && w >= 1 && w <= SN_SCHED_MAX_WEIGHT && l >= 64 &&
				    l <= SN_SCHED_MAX_LMAX;
			uint64_t ws = wsum_of(m) - (mc && mc->present ? mc->weight : 0) + w;

			if (op % 8 == 0) {
				rc = sn_sched_class_add(s, c, w, l);
				want = !valid ? -EINVAL : mc->present ? -EEXIST :
				       ws > SN_SCHED_MAX_WSUM ? -ENOSPC : 0;
			} else {
				rc = sn_sched_class_change(s, c, w, l);
				want = !mc || !mc->present ? -ENOENT : !valid ? -EINVAL :
				       ws > SN_SCHED_MAX_WSUM ? -ENOSPC : 0;
			}
			SN_VERIFY(rc == want);
			if (!rc) {
				if (!mc->present)
					mc->seq_head = mc->seq_tail = 0;
				mc->present = 1;
				mc->weight = w;
				mc->lmax = l;
			}
			break;
		}
		case 2: { /* delete */
			struct drop_ctx d = { m, c };

			rc = sn_sched_class_del(s, c, mc ? on_drop : NULL, &d);
			SN_VERIFY(rc == (mc && mc->present ? 0 : -ENOENT));
			if (!rc) {
				SN_VERIFY(mc->seq_head == mc->seq_tail);
				mc->present = 0;
			}
			break;
		}
		case 3: /* enqueue */
		case 4:
		case 5: { /* op 5: a burst, through sn_sched_enqueue_burst */
			uint32_t burst = op % 8 == 5 ? 1 + take(&in, 1) % 8 : 1;
			uint32_t l0 = take(&in, 3) % (SN_SCHED_MAX_LMAX + 8);
			void *items[8];
			uint32_t lens[8], got = 0, i;
			int err = 1;

			for (i = 0; i < burst; i++) {
				lens[i] = (l0 + i * 97) % (SN_SCHED_MAX_LMAX + 8);
				items[i] = mc ? tag(c, mc->seq_tail + i) : NULL;
			}
			if (burst > 1)
				got = sn_sched_enqueue_burst(s, c, items, lens, burst, &err);
			for (i = 0; i < burst; i++) {
				uint32_t l = lens[i];

				want = !mc || !mc->present ? -ENOENT :
				       l == 0 || l > mc->lmax ? -EMSGSIZE :
				       mc->seq_tail - mc->seq_head == QLEN ? -ENOBUFS : 0;
				if (burst == 1)
					rc = sn_sched_enqueue(s, c, items[i], l);
				else  /* the burst stops at its first refusal */
					rc = i < got ? 0 : err;
				SN_VERIFY(rc == want);
				if (rc)
					break;
				mc->lens[mc->seq_tail % QLEN] = l;
				mc->seq_tail++;
				total++;
			}
			SN_VERIFY(burst == 1 || (got == i && (got < burst || err == 1)));
			break;
		}
		case 6:
			if (op & 8) { /* sn_sched_dequeue_burst with a byte budget */
				void *items[16];
				uint32_t lens[16], n = 1 + take(&in, 1) % 16, k, i;
				uint64_t budget = take(&in, 2), taken = 0, bytes = 7;
				uint32_t oh = take(&in, 1) % 32;

				k = sn_sched_dequeue_burst(s, items, lens, n, budget, oh, &bytes);
				for (i = 0; i < k; i++) {
					uint32_t cls = NCLS;

					SN_VERIFY(taken < budget && total);
					for (uint32_t j = 0; j < NCLS; j++)
						if (m[j].present && m[j].seq_tail != m[j].seq_head &&
						    items[i] == tag(j, m[j].seq_head))
							cls = j;
					SN_VERIFY(cls < NCLS &&
						  lens[i] == m[cls].lens[m[cls].seq_head % QLEN]);
					m[cls].seq_head++;
					total--;
					taken += lens[i] + oh;
				}
				/* stops at n, at the budget, or when empty */
				SN_VERIFY(bytes == taken && (k == n || taken >= budget || !total));
				break;
			}
			/* fall through */
		default: { /* dequeue, with a peek first */
			uint32_t n = op % 8 == 7 ? 1 + take(&in, 1) % 16 : 1;

			for (uint32_t i = 0; i < n; i++) {
				uint32_t plen = 0, len, cls;
				int prc = sn_sched_peek_len(s, &plen);
				void *item = sn_sched_dequeue(s, &len, &cls);

				if (!total) {
					SN_VERIFY(prc == -ENOENT && !item);
					break;
				}
				SN_VERIFY(prc == 0 && item && cls < NCLS && m[cls].present);
				SN_VERIFY(item == tag(cls, m[cls].seq_head));
				SN_VERIFY(len == plen && len == m[cls].lens[m[cls].seq_head % QLEN]);
				m[cls].seq_head++;
				total--;
			}
			break;
		}
		}
		total = 0;
		for (int k = 0; k < NCLS; k++) {
			uint32_t q = m[k].present ? m[k].seq_tail - m[k].seq_head : 0;

			SN_VERIFY(sn_sched_class_backlog(s, (uint32_t)k) == q);
			total += q;
		}
		SN_VERIFY(sn_sched_backlog(s) == total);
		SN_VERIFY(sn_sched_check(s) == 0);
	}
	sn_sched_free(s);
	return 0;
}
