/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_fifo.c — first-in first-out behind sn_sched.h.
 *
 * The baseline every fair scheduler is compared with: one ring of
 * (item, len, class) in arrival order. Weights are accepted and ignored;
 * the class bounds how many items it may hold (queue_len, as for QFQ/DRR)
 * and lets a class be deleted with its items handed to the drop callback
 * (the ring is compacted, keeping the order of the rest). Sizing: see
 * sn_fifo.h.
 */
#include "sn_fifo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_sched_impl.h"

#define FIFO_INIT_CAP 1024u
#define FIFO_MAX_CAP  (1u << 26)

struct fifo_ent {
	void *item;
	uint32_t len;
	uint32_t class_id;
};

struct fifo_class {
	uint32_t count;
	uint32_t lmax;
	uint32_t weight;
	uint32_t present;
};

struct sn_fifo {
	struct fifo_ent *ring;
	uint32_t head;               /* dequeues, wraps */
	uint32_t tail;               /* enqueues, wraps */
	uint32_t mask;
	uint32_t max_cap;
	uint32_t class_cap;          /* per-class limit: pow2(queue_len) */
	uint32_t max_classes;
	uint32_t wsum;
	struct fifo_class *classes;
};

struct sn_fifo *sn_fifo_create(uint32_t max_classes, uint32_t queue_len)
{
	struct sn_fifo *f;
	uint64_t max_cap;

	if (sn_sched_check_params(max_classes, queue_len)) {
		errno = EINVAL;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		goto fail;
	f->class_cap = (uint32_t)sn_align_pow2(queue_len);
	max_cap = sn_align_pow2((uint64_t)f->class_cap * max_classes);
	f->max_cap = (uint32_t)SN_MIN(max_cap, (uint64_t)FIFO_MAX_CAP);
	f->mask = SN_MIN(f->max_cap, FIFO_INIT_CAP) - 1;
	f->ring = calloc(f->mask + 1, sizeof(*f->ring));
	if (!f->ring)
		goto free_f;
	f->classes = calloc(max_classes, sizeof(*f->classes));
	if (!f->classes)
		goto free_ring;
	f->max_classes = max_classes;
	return f;

free_ring:
	free(f->ring);
free_f:
	free(f);
fail:
	errno = ENOMEM;
	return NULL;
}

void sn_fifo_free(struct sn_fifo *f)
{
	if (!f)
		return;
	free(f->classes);
	free(f->ring);
	free(f);
}

static struct fifo_class *lookup(const struct sn_fifo *f, uint32_t id)
{
	if (id >= f->max_classes || !f->classes[id].present)
		return NULL;
	return &f->classes[id];
}

int sn_fifo_class_add(struct sn_fifo *f, uint32_t id, uint32_t weight, uint32_t lmax)
{
	int rc = sn_sched_check_class(f->max_classes, id, weight, lmax);

	if (rc)
		return rc;
	if (f->classes[id].present)
		return -EEXIST;
	if ((uint64_t)f->wsum + weight > SN_SCHED_MAX_WSUM)
		return -ENOSPC;
	f->classes[id] = (struct fifo_class){ .lmax = lmax, .weight = weight, .present = 1 };
	f->wsum += weight;
	return 0;
}

int sn_fifo_class_change(struct sn_fifo *f, uint32_t id, uint32_t weight, uint32_t lmax)
{
	struct fifo_class *cl = lookup(f, id);
	int rc;

	if (!cl)
		return -ENOENT;
	rc = sn_sched_check_class(f->max_classes, id, weight, lmax);
	if (rc)
		return rc;
	if ((uint64_t)f->wsum - cl->weight + weight > SN_SCHED_MAX_WSUM)
		return -ENOSPC;
	f->wsum = f->wsum - cl->weight + weight;
	cl->weight = weight;
	cl->lmax = lmax;
	return 0;
}

int sn_fifo_class_del(struct sn_fifo *f, uint32_t id,
		      void (*drop)(void *item, uint32_t len, void *arg), void *arg)
{
	struct fifo_class *cl = lookup(f, id);
	uint32_t w;

	if (!cl)
		return -ENOENT;
	if (cl->count) {
		w = f->head;
		for (uint32_t r = f->head; r != f->tail; r++) {
			struct fifo_ent e = f->ring[r & f->mask];

			if (e.class_id == id) {
				if (drop)
					drop(e.item, e.len, arg);
			} else {
				f->ring[w++ & f->mask] = e;
			}
		}
		f->tail = w;
	}
	f->wsum -= cl->weight;
	memset(cl, 0, sizeof(*cl));
	return 0;
}

uint32_t sn_fifo_class_purge(struct sn_fifo *f, uint32_t id,
			     bool (*take)(void *item, uint32_t len, void *arg), void *arg)
{
	struct fifo_class *cl = lookup(f, id);
	uint32_t w, n;

	if (!cl || !cl->count)
		return 0;
	w = f->head;
	for (uint32_t r = f->head; r != f->tail; r++) {
		struct fifo_ent e = f->ring[r & f->mask];

		if (e.class_id != id || !take(e.item, e.len, arg))
			f->ring[w++ & f->mask] = e;
	}
	n = f->tail - w;
	f->tail = w;
	cl->count -= n;
	return n;
}

static int grow(struct sn_fifo *f)
{
	uint32_t cap = f->mask + 1, n = f->tail - f->head;
	struct fifo_ent *ring;

	if (cap >= f->max_cap)
		return -ENOBUFS;
	ring = calloc((size_t)cap * 2, sizeof(*ring));
	if (!ring)
		return -ENOBUFS;
	for (uint32_t i = 0; i < n; i++)
		ring[i] = f->ring[(f->head + i) & f->mask];
	free(f->ring);
	f->ring = ring;
	f->head = 0;
	f->tail = n;
	f->mask = cap * 2 - 1;
	return 0;
}

int sn_fifo_enqueue(struct sn_fifo *f, uint32_t id, void *item, uint32_t len)
{
	struct fifo_class *cl = lookup(f, id);
	struct fifo_ent *e;

	if (sn_unlikely(!cl))
		return -ENOENT;
	if (sn_unlikely(len == 0 || len > cl->lmax))
		return -EMSGSIZE;
	if (sn_unlikely(cl->count >= f->class_cap))
		return -ENOBUFS;
	if (sn_unlikely(f->tail - f->head > f->mask)) {
		int rc = grow(f);

		if (rc)
			return rc;
	}
	e = &f->ring[f->tail++ & f->mask];
	e->item = item;
	e->len = len;
	e->class_id = id;
	cl->count++;
	return 0;
}

void *sn_fifo_dequeue(struct sn_fifo *f, uint32_t *len, uint32_t *id)
{
	struct fifo_ent *e;

	if (f->head == f->tail)
		return NULL;
	e = &f->ring[f->head++ & f->mask];
	f->classes[e->class_id].count--;
	if (len)
		*len = e->len;
	if (id)
		*id = e->class_id;
	return e->item;
}

int sn_fifo_peek_len(struct sn_fifo *f, uint32_t *len)
{
	if (f->head == f->tail)
		return -ENOENT;
	*len = f->ring[f->head & f->mask].len;
	return 0;
}

uint64_t sn_fifo_backlog(const struct sn_fifo *f)
{
	return f->tail - f->head;
}

uint32_t sn_fifo_class_backlog(const struct sn_fifo *f, uint32_t id)
{
	const struct fifo_class *cl = lookup(f, id);

	return cl ? cl->count : 0;
}

int sn_fifo_check(const struct sn_fifo *f)
{
	uint64_t total = 0;
	uint32_t *count = calloc(f->max_classes, sizeof(*count));
	int rc = 0;

	if (!count)
		return -ENOMEM;
	if (f->tail - f->head > f->mask + 1)
		rc = -EFAULT;
	for (uint32_t r = f->head; !rc && r != f->tail; r++) {
		uint32_t id = f->ring[r & f->mask].class_id;

		if (id >= f->max_classes || !f->classes[id].present)
			rc = -EFAULT;
		else
			count[id]++;
	}
	for (uint32_t i = 0; !rc && i < f->max_classes; i++) {
		if (count[i] != f->classes[i].count || count[i] > f->class_cap)
			rc = -EFAULT;
		total += count[i];
	}
	if (!rc && total != (uint64_t)(f->tail - f->head))
		rc = -EFAULT;
	free(count);
	if (rc)
		fprintf(stderr, "sn_fifo_check: ring and class counts disagree\n");
	return rc;
}
