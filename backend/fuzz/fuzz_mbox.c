/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_mbox.c — libFuzzer target for sn_mbox.
 *
 * The input is a program: a first byte picks the mailbox size (16/32/64
 * slots), then each byte is an operation (insert, insert burst, extract,
 * extract burst, invalid insert, client-list append/next, backpressure
 * set/take) on one of three client mailboxes or on a client list naming
 * them (append, next, last, overflow flag). Every result is checked against an independent model of the
 * specified behaviour: a FIFO with the exact line rule of sn_mbox.h (room
 * is checked only when entering a line, by looking one line ahead, and a
 * line frees up only once the consumer has consumed all of it), the
 * "append only if not the last appended" rule with its overflow flag, and
 * the one-bit backpressure flag.
 * Any difference aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_mbox.h"

#define NMB     3
#define MAXSIZE 64

struct model {
	uint32_t size;
	uint64_t head, tail, lim;
	uintptr_t v[MAXSIZE];
};

#define FAIL(...) do { fprintf(stderr, "fuzz_mbox: " __VA_ARGS__); abort(); } while (0)

static int model_can_insert(struct model *m)
{
	const uint64_t L = SN_MBOX_LINE_SLOTS;

	if (m->tail == m->lim) {
		uint64_t ahead = m->tail + L;

		if (ahead >= m->size && (ahead - m->size) / L >= m->head / L)
			return 0;
		m->lim = m->tail + L;
	}
	return 1;
}

static int model_insert(struct model *m, uintptr_t x)
{
	if (!model_can_insert(m))
		return 0;
	m->v[m->tail++ % m->size] = x;
	return 1;
}

static uintptr_t model_extract(struct model *m)
{
	if (m->head == m->tail)
		return 0;
	return m->v[m->head++ % m->size];
}

static void check_count(const struct model *m, const struct sn_mbox *mb)
{
	if (m->tail - m->head > sn_mbox_capacity(mb))
		FAIL("model holds %llu > capacity %u\n",
		     (unsigned long long)(m->tail - m->head), sn_mbox_capacity(mb));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sn_mbox *mb[NMB], *cl;
	struct model mm[NMB], mcl;
	struct sn_mbox *cl_prod_last = NULL, *cl_cons_last = NULL;
	int bp[NMB] = {0}, cl_ovf = 0;
	uintptr_t next = 1;
	void *buf[48];
	uint32_t qsize;
	size_t i = 0;
	int k;

	if (size < 1)
		return 0;
	qsize = 16u << (data[i++] % 3);
	memset(mm, 0, sizeof(mm));
	memset(&mcl, 0, sizeof(mcl));
	for (k = 0; k < NMB; k++) {
		mb[k] = sn_mbox_create(qsize, &mm[k]);
		if (mb[k] == NULL)
			FAIL("create %u failed\n", qsize);
		mm[k].size = qsize;
	}
	cl = sn_mbox_create(16, NULL);
	if (cl == NULL)
		FAIL("create cl failed\n");
	mcl.size = 16;

	while (i < size) {
		uint8_t op = data[i++];
		uint8_t arg = i < size ? data[i] : 0;
		int w = (op >> 4) % NMB;
		struct sn_mbox *q = mb[w];
		struct model *m = &mm[w];
		uint32_t n, got, j;

		switch (op & 15) {
		case 0: case 1: case 2: {
			uintptr_t x = next << 1;
			int r = sn_mbox_insert(q, (void *)x);

			if (r != (model_insert(m, x) ? 0 : -ENOBUFS))
				FAIL("insert: got %d\n", r);
			if (r == 0)
				next++;
			break;
		}
		case 3: case 4:
			i++;
			n = arg % 40;
			for (j = 0; j < n; j++)
				buf[j] = (void *)((next + j) << 1);
			got = sn_mbox_insert_burst(q, buf, n);
			for (j = 0; j < n && model_insert(m, (next + j) << 1); j++)
				;
			if (got != j)
				FAIL("insert_burst(%u): got %u model %u\n", n, got, j);
			next += got;
			break;
		case 5: case 6: case 7: {
			uintptr_t x = (uintptr_t)sn_mbox_extract(q);

			if (x != model_extract(m))
				FAIL("extract: got %#lx\n", (unsigned long)x);
			break;
		}
		case 8: case 9:
			i++;
			n = arg % 40;
			got = sn_mbox_extract_burst(q, buf, n);
			for (j = 0; j < got; j++)
				if ((uintptr_t)buf[j] != model_extract(m))
					FAIL("extract_burst: item %u differs\n", j);
			if (got < n && model_extract(m) != 0)
				FAIL("extract_burst: stopped early at %u of %u\n", got, n);
			break;
		case 10:
			if (sn_mbox_insert(q, (arg & 1) ? (void *)(uintptr_t)(next * 2 + 1) : NULL) !=
			    -EINVAL)
				FAIL("invalid insert accepted\n");
			break;
		case 11: {
			int r = sn_mbox_cl_append(cl, q), want = 0;

			if (cl_prod_last != q) {
				if (model_insert(&mcl, (uintptr_t)q)) {
					cl_prod_last = q;
				} else {
					want = -ENOBUFS;
					cl_ovf = 1;
				}
			}
			if (r != want)
				FAIL("cl_append: got %d want %d\n", r, want);
			break;
		}
		case 12:
			if (sn_mbox_cl_overflowed(cl) != cl_ovf)
				FAIL("cl_overflowed differs\n");
			cl_ovf = 0;
			break;
		case 13: {
			struct sn_mbox *x = sn_mbox_cl_next(cl);

			if ((uintptr_t)x != model_extract(&mcl))
				FAIL("cl_next differs\n");
			if (x != NULL)
				cl_cons_last = x;
			if (sn_mbox_cl_last(cl) != cl_cons_last)
				FAIL("cl_last differs\n");
			break;
		}
		case 14:
			sn_mbox_bp_set(q);
			bp[w] = 1;
			break;
		case 15:
			if (sn_mbox_bp_take(q) != bp[w])
				FAIL("bp_take differs\n");
			bp[w] = 0;
			break;
		}
		check_count(m, q);
		check_count(&mcl, cl);
	}
	/* Drain: exactly the model's remaining items, in order. */
	for (k = 0; k < NMB; k++) {
		void *x;

		while ((x = sn_mbox_extract(mb[k])) != NULL)
			if ((uintptr_t)x != model_extract(&mm[k]))
				FAIL("final drain differs\n");
		if (model_extract(&mm[k]) != 0)
			FAIL("final drain: items missing\n");
		if (sn_mbox_udata(mb[k]) != &mm[k])
			FAIL("udata\n");
		sn_mbox_free(mb[k]);
	}
	sn_mbox_free(cl);
	return 0;
}
