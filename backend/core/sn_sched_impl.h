/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_sched_impl.h — pieces shared by the scheduler algorithms behind
 * sn_sched.h (sn_qfq.c, sn_drr.c, sn_fifo.c). Internal: not part of the
 * public API.
 *
 * - sn_sched_check_class(): the one validation of class parameters, so
 *   every algorithm rejects the same inputs with the same errno.
 * - struct sn_sched_q: a per-class FIFO of (item, len) in a power-of-two
 *   ring. Single-threaded like the schedulers that own it: no barriers.
 */
#ifndef SN_SCHED_IMPL_H
#define SN_SCHED_IMPL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "sn_common.h"
#include "sn_sched.h"

#define SN_SCHED_MIN_LMAX 64u

/* Largest per-class ring accepted (items); keeps index math in 32 bits. */
#define SN_SCHED_MAX_QUEUE_LEN (1u << 24)

static inline int sn_sched_check_class(uint32_t max_classes, uint32_t id,
				       uint32_t weight, uint32_t lmax)
{
	if (id >= max_classes || weight < 1 || weight > SN_SCHED_MAX_WEIGHT ||
	    lmax < SN_SCHED_MIN_LMAX || lmax > SN_SCHED_MAX_LMAX)
		return -EINVAL;
	return 0;
}

static inline int sn_sched_check_params(uint32_t max_classes, uint32_t queue_len)
{
	if (max_classes == 0 || max_classes > (1u << 24) || queue_len == 0 ||
	    queue_len > SN_SCHED_MAX_QUEUE_LEN)
		return -EINVAL;
	return 0;
}

struct sn_sched_qent {
	void *item;
	uint32_t len;
};

/* head counts dequeues, tail counts enqueues; both wrap freely (u32).
 * lmax (the class's admission limit, 0 = no class) lives here so that an
 * enqueue touches one cache line of class state. */
struct sn_sched_q {
	struct sn_sched_qent *v;
	uint32_t head;
	uint32_t tail;
	uint32_t mask;
	uint32_t lmax;
};

static_assert(sizeof(struct sn_sched_q) == 24, "sn_sched_q layout");

static inline int sn_sched_q_init(struct sn_sched_q *q, uint32_t queue_len)
{
	uint32_t cap = (uint32_t)sn_align_pow2(queue_len);

	q->v = calloc(cap, sizeof(*q->v));
	if (!q->v)
		return -ENOMEM;
	q->head = q->tail = 0;
	q->mask = cap - 1;
	q->lmax = 0;
	return 0;
}

static inline void sn_sched_q_fini(struct sn_sched_q *q)
{
	free(q->v);
	q->v = NULL;
	q->lmax = 0;
}

static inline uint32_t sn_sched_q_count(const struct sn_sched_q *q)
{
	return q->tail - q->head;
}

static inline int sn_sched_q_full(const struct sn_sched_q *q)
{
	return q->tail - q->head > q->mask;
}

static inline void sn_sched_q_push(struct sn_sched_q *q, void *item, uint32_t len)
{
	struct sn_sched_qent *e = &q->v[q->tail & q->mask];

	e->item = item;
	e->len = len;
	q->tail++;
}

/* Caller guarantees the queue is not empty. */
static inline uint32_t sn_sched_q_head_len(const struct sn_sched_q *q)
{
	return q->v[q->head & q->mask].len;
}

static inline void *sn_sched_q_pop(struct sn_sched_q *q, uint32_t *len)
{
	struct sn_sched_qent *e = &q->v[q->head & q->mask];

	q->head++;
	*len = e->len;
	return e->item;
}

/* Hand every queued item to drop (may be NULL), leaving the queue empty. */
static inline void sn_sched_q_flush(struct sn_sched_q *q,
				    void (*drop)(void *item, uint32_t len, void *arg),
				    void *arg)
{
	while (q->head != q->tail) {
		uint32_t len;
		void *item = sn_sched_q_pop(q, &len);

		if (drop)
			drop(item, len, arg);
	}
}

/* Offer every queued item, oldest first, to take(); the ones it takes
 * (ownership passes to it) leave the queue, the others stay in their
 * order. Returns how many were taken. */
static inline uint32_t sn_sched_q_purge(struct sn_sched_q *q,
					bool (*take)(void *item, uint32_t len, void *arg),
					void *arg)
{
	uint32_t w = q->head;

	for (uint32_t r = q->head; r != q->tail; r++) {
		struct sn_sched_qent e = q->v[r & q->mask];

		if (!take(e.item, e.len, arg))
			q->v[w++ & q->mask] = e;
	}
	w = q->tail - w;
	q->tail -= w;
	return w;
}

#endif /* SN_SCHED_IMPL_H */
