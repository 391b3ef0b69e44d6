/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_sched.c — the sn_sched.h interface: validates the parameters every
 * algorithm shares and dispatches to QFQ (sn_qfq.c), DRR (sn_drr.c) or
 * FIFO (sn_fifo.c). The per-packet calls (enqueue, dequeue, peek_len) go
 * through function pointers set at create time: one indirect tail jump,
 * the same cost for every algorithm and perfectly predicted (an instance
 * never changes algorithm), where a switch made the algorithm tested last
 * pay two more compares per call (measured with callgrind: 9 vs 5
 * instructions per call). The control path keeps a switch. The pointers
 * go to thin wrappers of the algorithms' typed functions, so no call
 * casts a function pointer. Single-threaded, like the algorithms
 * (sn_sched.h).
 */
#include "sn_sched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_drr.h"
#include "sn_fifo.h"
#include "sn_qfq.h"

struct sn_sched {
	/* Per-packet: one line, read only after create. */
	int (*enqueue)(void *impl, uint32_t class_id, void *item, uint32_t len);
	void *(*dequeue)(void *impl, uint32_t *len, uint32_t *class_id);
	int (*peek_len)(void *impl, uint32_t *len);
	union {
		struct sn_qfq *qfq;
		struct sn_drr *drr;
		struct sn_fifo *fifo;
		void *any;
	} u;
	enum sn_sched_algo algo;
};

/* Typed -> void * adapters; each compiles to one jump. */
#define SCHED_OPS(algo, type)                                                  \
static int algo##_enqueue(void *impl, uint32_t id, void *item, uint32_t len)  \
{                                                                              \
	return sn_##algo##_enqueue((type *)impl, id, item, len);              \
}                                                                              \
static void *algo##_dequeue(void *impl, uint32_t *len, uint32_t *id)           \
{                                                                              \
	return sn_##algo##_dequeue((type *)impl, len, id);                    \
}                                                                              \
static int algo##_peek_len(void *impl, uint32_t *len)                          \
{                                                                              \
	return sn_##algo##_peek_len((type *)impl, len);                       \
}

SCHED_OPS(qfq, struct sn_qfq)
SCHED_OPS(drr, struct sn_drr)
SCHED_OPS(fifo, struct sn_fifo)

#define SET_OPS(s, algo) do {                                                  \
	(s)->enqueue = algo##_enqueue;                                         \
	(s)->dequeue = algo##_dequeue;                                         \
	(s)->peek_len = algo##_peek_len;                                       \
} while (0)

static const char *const algo_names[] = {
	[SN_SCHED_QFQ] = "qfq",
	[SN_SCHED_DRR] = "drr",
	[SN_SCHED_FIFO] = "fifo",
};

struct sn_sched *sn_sched_create(const struct sn_sched_params *p)
{
	struct sn_sched *s;
	int err;

	if (!p || (unsigned)p->algo >= SN_ARRAY_SIZE(algo_names)) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->algo = p->algo;
	switch (p->algo) {
	case SN_SCHED_QFQ:
		s->u.qfq = sn_qfq_create(p->max_classes, p->queue_len);
		SET_OPS(s, qfq);
		break;
	case SN_SCHED_DRR:
		s->u.drr = sn_drr_create(p->max_classes, p->queue_len, p->drr_quantum);
		SET_OPS(s, drr);
		break;
	case SN_SCHED_FIFO:
		s->u.fifo = sn_fifo_create(p->max_classes, p->queue_len);
		SET_OPS(s, fifo);
		break;
	}
	if (!s->u.any) {
		err = errno;
		free(s);
		errno = err;
		return NULL;
	}
	return s;
}

void sn_sched_free(struct sn_sched *s)
{
	if (!s)
		return;
	switch (s->algo) {
	case SN_SCHED_QFQ:  sn_qfq_free(s->u.qfq); break;
	case SN_SCHED_DRR:  sn_drr_free(s->u.drr); break;
	case SN_SCHED_FIFO: sn_fifo_free(s->u.fifo); break;
	}
	free(s);
}

int sn_sched_class_add(struct sn_sched *s, uint32_t class_id, uint32_t weight, uint32_t lmax)
{
	switch (s->algo) {
	case SN_SCHED_QFQ:  return sn_qfq_class_add(s->u.qfq, class_id, weight, lmax);
	case SN_SCHED_DRR:  return sn_drr_class_add(s->u.drr, class_id, weight, lmax);
	case SN_SCHED_FIFO: return sn_fifo_class_add(s->u.fifo, class_id, weight, lmax);
	}
	return -EINVAL;
}

int sn_sched_class_change(struct sn_sched *s, uint32_t class_id, uint32_t weight, uint32_t lmax)
{
	switch (s->algo) {
	case SN_SCHED_QFQ:  return sn_qfq_class_change(s->u.qfq, class_id, weight, lmax);
	case SN_SCHED_DRR:  return sn_drr_class_change(s->u.drr, class_id, weight, lmax);
	case SN_SCHED_FIFO: return sn_fifo_class_change(s->u.fifo, class_id, weight, lmax);
	}
	return -EINVAL;
}

int sn_sched_class_del(struct sn_sched *s, uint32_t class_id,
		       void (*drop)(void *item, uint32_t len, void *arg), void *arg)
{
	switch (s->algo) {
	case SN_SCHED_QFQ:  return sn_qfq_class_del(s->u.qfq, class_id, drop, arg);
	case SN_SCHED_DRR:  return sn_drr_class_del(s->u.drr, class_id, drop, arg);
	case SN_SCHED_FIFO: return sn_fifo_class_del(s->u.fifo, class_id, drop, arg);
	}
	return -EINVAL;
}

uint32_t sn_sched_class_purge(struct sn_sched *s, uint32_t class_id,
			      bool (*take)(void *item, uint32_t len, void *arg), void *arg)
{
	switch (s->algo) {
	case SN_SCHED_QFQ:  return sn_qfq_class_purge(s->u.qfq, class_id, take, arg);
	case SN_SCHED_DRR:  return sn_drr_class_purge(s->u.drr, class_id, take, arg);
	case SN_SCHED_FIFO: return sn_fifo_class_purge(s->u.fifo, class_id, take, arg);
	}
	return 0;
}

int sn_sched_enqueue(struct sn_sched *s, uint32_t class_id, void *item, uint32_t len)
{
	return s->enqueue(s->u.any, class_id, item, len);
}

#define ENQ_LOOP(fn, q)                                                  \
	for (i = 0; i < n; i++) {                                        \
		r = fn(q, class_id, items[i], lens[i]);                  \
		if (sn_unlikely(r != 0))                                 \
			break;                                           \
	}

uint32_t sn_sched_enqueue_burst(struct sn_sched *s, uint32_t class_id, void *const *items,
				const uint32_t *lens, uint32_t n, int *err)
{
	uint32_t i = 0;
	int r = 0;

	switch (s->algo) {
	case SN_SCHED_QFQ:  return sn_qfq_enqueue_burst(s->u.qfq, class_id, items, lens, n, err);
	case SN_SCHED_DRR:  ENQ_LOOP(sn_drr_enqueue, s->u.drr); break;
	case SN_SCHED_FIFO: ENQ_LOOP(sn_fifo_enqueue, s->u.fifo); break;
	default:            r = -EINVAL; break;
	}
	if (r)
		*err = r;
	return i;
}

void *sn_sched_dequeue(struct sn_sched *s, uint32_t *len, uint32_t *class_id)
{
	return s->dequeue(s->u.any, len, class_id);
}

uint32_t sn_sched_dequeue_burst(struct sn_sched *s, void **items, uint32_t *lens, uint32_t n,
				uint64_t budget, uint32_t overhead, uint64_t *bytes)
{
	uint64_t taken = 0;
	uint32_t i;

	if (s->algo == SN_SCHED_QFQ)
		return sn_qfq_dequeue_burst(s->u.qfq, items, lens, n, budget, overhead, bytes);
	for (i = 0; i < n && taken < budget; i++) {
		items[i] = s->dequeue(s->u.any, &lens[i], NULL);
		if (!items[i])
			break;
		taken += (uint64_t)lens[i] + overhead;
	}
	*bytes = taken;
	return i;
}

bool sn_sched_has_pass(const struct sn_sched *s)
{
	return s->algo == SN_SCHED_QFQ;
}

bool sn_sched_pass_ok(const struct sn_sched *s, uint32_t class_id, uint32_t n,
		      uint32_t min_len, uint32_t max_len)
{
	return s->algo == SN_SCHED_QFQ && sn_qfq_pass_ok(s->u.qfq, class_id, n, min_len, max_len);
}

uint32_t sn_sched_pass_burst(struct sn_sched *s, uint32_t class_id, void *const *items,
			     const uint32_t *lens, uint32_t n, uint32_t room, uint64_t budget,
			     uint32_t overhead, uint64_t *bytes)
{
	SN_VERIFY(s->algo == SN_SCHED_QFQ);
	return sn_qfq_pass_burst(s->u.qfq, class_id, items, lens, n, room, budget, overhead,
				 bytes);
}

int sn_sched_peek_len(struct sn_sched *s, uint32_t *len)
{
	return s->peek_len(s->u.any, len);
}

uint64_t sn_sched_backlog(const struct sn_sched *s)
{
	switch (s->algo) {
	case SN_SCHED_QFQ:  return sn_qfq_backlog(s->u.qfq);
	case SN_SCHED_DRR:  return sn_drr_backlog(s->u.drr);
	case SN_SCHED_FIFO: return sn_fifo_backlog(s->u.fifo);
	}
	return 0;
}

uint32_t sn_sched_class_backlog(const struct sn_sched *s, uint32_t class_id)
{
	switch (s->algo) {
	case SN_SCHED_QFQ:  return sn_qfq_class_backlog(s->u.qfq, class_id);
	case SN_SCHED_DRR:  return sn_drr_class_backlog(s->u.drr, class_id);
	case SN_SCHED_FIFO: return sn_fifo_class_backlog(s->u.fifo, class_id);
	}
	return 0;
}

int sn_sched_check(const struct sn_sched *s)
{
	switch (s->algo) {
	case SN_SCHED_QFQ:  return sn_qfq_check(s->u.qfq);
	case SN_SCHED_DRR:  return sn_drr_check(s->u.drr);
	case SN_SCHED_FIFO: return sn_fifo_check(s->u.fifo);
	}
	return -EINVAL;
}

const char *sn_sched_algo_name(enum sn_sched_algo a)
{
	if ((unsigned)a >= SN_ARRAY_SIZE(algo_names))
		return "?";
	return algo_names[a];
}

int sn_sched_algo_parse(const char *name, enum sn_sched_algo *out)
{
	for (unsigned i = 0; name && i < SN_ARRAY_SIZE(algo_names); i++) {
		if (!strcmp(name, algo_names[i])) {
			*out = (enum sn_sched_algo)i;
			return 0;
		}
	}
	return -EINVAL;
}
