/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_drr.c — Deficit Round Robin.
 *
 * Follows M. Shreedhar, G. Varghese, "Efficient fair queuing using deficit
 * round-robin", IEEE/ACM ToN 4(3), 1996, in the form Linux sch_drr uses:
 * backlogged classes sit in a round-robin list; a class joining the list
 * gets a deficit of one quantum; the head class sends while its head packet
 * fits in its deficit, otherwise it gets another quantum and goes to the
 * tail. Quantum_k = drr_quantum * weight_k, so shares follow weights. O(1)
 * per packet when quantum >= lmax; T-WFI (PSPAT eq. 3) is
 * (1/phi_min + 1/phi_k + N - 1) L/B, linear in the number of classes.
 *
 * peek_len runs the same selection as dequeue (it may hand out quanta and
 * rotate the list); the selection is idempotent, so a dequeue after a peek
 * returns exactly the peeked packet.
 *
 * Change while backlogged only updates the quantum (position and deficit
 * kept); delete unlinks the class and hands its items to the drop callback.
 */
#include "sn_drr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_sched_impl.h"

#define DRR_DEFAULT_QUANTUM 1514u

struct drr_class {
	/* First cache line: enqueue / dequeue path. */
	struct drr_class *next;      /* active list, NULL-terminated */
	struct drr_class *prev;
	uint64_t deficit;
	uint64_t quantum;
	struct sn_sched_q q;         /* q.lmax != 0 <=> class exists */
	uint32_t weight;
} SN_CACHE_ALIGNED;

static_assert(sizeof(struct drr_class) == SN_CACHE_LINE, "drr_class is one line");

struct sn_drr {
	struct drr_class *head;
	struct drr_class *tail;
	uint64_t backlog;
	struct drr_class *classes;
	uint32_t max_classes;
	uint32_t queue_len;
	uint32_t quantum;
	uint32_t wsum;
};

static void active_add_tail(struct sn_drr *d, struct drr_class *cl)
{
	cl->next = NULL;
	cl->prev = d->tail;
	if (d->tail)
		d->tail->next = cl;
	else
		d->head = cl;
	d->tail = cl;
}

static void active_del(struct sn_drr *d, struct drr_class *cl)
{
	if (cl->prev)
		cl->prev->next = cl->next;
	else
		d->head = cl->next;
	if (cl->next)
		cl->next->prev = cl->prev;
	else
		d->tail = cl->prev;
	cl->next = cl->prev = NULL;
}

/* Head class after handing out quanta until its head packet fits. */
static struct drr_class *select_class(struct sn_drr *d)
{
	struct drr_class *cl;

	while ((cl = d->head) != NULL) {
		if (sn_sched_q_head_len(&cl->q) <= cl->deficit)
			return cl;
		cl->deficit += cl->quantum;
		if (cl != d->tail) {
			active_del(d, cl);
			active_add_tail(d, cl);
		}
	}
	return NULL;
}

struct sn_drr *sn_drr_create(uint32_t max_classes, uint32_t queue_len, uint32_t quantum)
{
	struct sn_drr *d;

	if (sn_sched_check_params(max_classes, queue_len)) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		goto fail;
	d->classes = aligned_alloc(SN_CACHE_LINE, sizeof(*d->classes) * max_classes);
	if (!d->classes)
		goto free_d;
	memset(d->classes, 0, sizeof(*d->classes) * max_classes);
	d->max_classes = max_classes;
	d->queue_len = queue_len;
	d->quantum = quantum ? quantum : DRR_DEFAULT_QUANTUM;
	return d;

free_d:
	free(d);
fail:
	errno = ENOMEM;
	return NULL;
}

void sn_drr_free(struct sn_drr *d)
{
	if (!d)
		return;
	for (uint32_t i = 0; i < d->max_classes; i++)
		sn_sched_q_fini(&d->classes[i].q);
	free(d->classes);
	free(d);
}

static struct drr_class *lookup(const struct sn_drr *d, uint32_t id)
{
	if (id >= d->max_classes || !d->classes[id].q.lmax)
		return NULL;
	return &d->classes[id];
}

int sn_drr_class_add(struct sn_drr *d, uint32_t id, uint32_t weight, uint32_t lmax)
{
	struct drr_class *cl;
	int rc = sn_sched_check_class(d->max_classes, id, weight, lmax);

	if (rc)
		return rc;
	cl = &d->classes[id];
	if (cl->q.lmax)
		return -EEXIST;
	if ((uint64_t)d->wsum + weight > SN_SCHED_MAX_WSUM)
		return -ENOSPC;
	memset(cl, 0, sizeof(*cl));
	rc = sn_sched_q_init(&cl->q, d->queue_len);
	if (rc)
		return rc;
	cl->weight = weight;
	cl->q.lmax = lmax;
	cl->quantum = (uint64_t)d->quantum * weight;
	d->wsum += weight;
	return 0;
}

int sn_drr_class_change(struct sn_drr *d, uint32_t id, uint32_t weight, uint32_t lmax)
{
	struct drr_class *cl = lookup(d, id);
	int rc;

	if (!cl)
		return -ENOENT;
	rc = sn_sched_check_class(d->max_classes, id, weight, lmax);
	if (rc)
		return rc;
	if ((uint64_t)d->wsum - cl->weight + weight > SN_SCHED_MAX_WSUM)
		return -ENOSPC;
	d->wsum = d->wsum - cl->weight + weight;
	cl->weight = weight;
	cl->q.lmax = lmax;
	cl->quantum = (uint64_t)d->quantum * weight;
	return 0;
}

int sn_drr_class_del(struct sn_drr *d, uint32_t id,
		     void (*drop)(void *item, uint32_t len, void *arg), void *arg)
{
	struct drr_class *cl = lookup(d, id);

	if (!cl)
		return -ENOENT;
	if (sn_sched_q_count(&cl->q)) {
		active_del(d, cl);
		d->backlog -= sn_sched_q_count(&cl->q);
		sn_sched_q_flush(&cl->q, drop, arg);
	}
	d->wsum -= cl->weight;
	sn_sched_q_fini(&cl->q);
	return 0;
}

/* A class that keeps packets goes to the tail of the round with a fresh
 * quantum, as a class that just became backlogged. */
uint32_t sn_drr_class_purge(struct sn_drr *d, uint32_t id,
			    bool (*take)(void *item, uint32_t len, void *arg), void *arg)
{
	struct drr_class *cl = lookup(d, id);
	uint32_t n;

	if (!cl || !sn_sched_q_count(&cl->q))
		return 0;
	active_del(d, cl);
	n = sn_sched_q_purge(&cl->q, take, arg);
	d->backlog -= n;
	if (sn_sched_q_count(&cl->q)) {
		cl->deficit = cl->quantum;
		active_add_tail(d, cl);
	}
	return n;
}

int sn_drr_enqueue(struct sn_drr *d, uint32_t id, void *item, uint32_t len)
{
	struct drr_class *cl = lookup(d, id);

	if (sn_unlikely(!cl))
		return -ENOENT;
	if (sn_unlikely(len == 0 || len > cl->q.lmax))
		return -EMSGSIZE;
	if (sn_unlikely(sn_sched_q_full(&cl->q)))
		return -ENOBUFS;
	sn_sched_q_push(&cl->q, item, len);
	d->backlog++;
	if (sn_sched_q_count(&cl->q) == 1) {
		cl->deficit = cl->quantum;
		active_add_tail(d, cl);
	}
	return 0;
}

void *sn_drr_dequeue(struct sn_drr *d, uint32_t *len, uint32_t *id)
{
	struct drr_class *cl = select_class(d);
	uint32_t plen;
	void *item;

	if (!cl)
		return NULL;
	item = sn_sched_q_pop(&cl->q, &plen);
	cl->deficit -= plen;
	d->backlog--;
	if (!sn_sched_q_count(&cl->q))
		active_del(d, cl);
	if (len)
		*len = plen;
	if (id)
		*id = (uint32_t)(cl - d->classes);
	return item;
}

int sn_drr_peek_len(struct sn_drr *d, uint32_t *len)
{
	struct drr_class *cl = select_class(d);

	if (!cl)
		return -ENOENT;
	*len = sn_sched_q_head_len(&cl->q);
	return 0;
}

uint64_t sn_drr_backlog(const struct sn_drr *d)
{
	return d->backlog;
}

uint32_t sn_drr_class_backlog(const struct sn_drr *d, uint32_t id)
{
	const struct drr_class *cl = lookup(d, id);

	return cl ? sn_sched_q_count(&cl->q) : 0;
}

int sn_drr_check(const struct sn_drr *d)
{
	uint64_t backlog = 0, active = 0, linked = 0, wsum = 0;
	const struct drr_class *prev = NULL;

	for (const struct drr_class *cl = d->head; cl; cl = cl->next) {
		if (cl->prev != prev || !cl->q.lmax || !sn_sched_q_count(&cl->q) ||
		    ++linked > d->max_classes) {
			fprintf(stderr, "sn_drr_check: active list broken\n");
			return -EFAULT;
		}
		prev = cl;
	}
	if (d->tail != prev) {
		fprintf(stderr, "sn_drr_check: tail\n");
		return -EFAULT;
	}
	for (uint32_t i = 0; i < d->max_classes; i++) {
		const struct drr_class *cl = &d->classes[i];

		if (!cl->q.lmax)
			continue;
		backlog += sn_sched_q_count(&cl->q);
		active += sn_sched_q_count(&cl->q) > 0;
		wsum += cl->weight;
	}
	if (backlog != d->backlog || active != linked || wsum != d->wsum) {
		fprintf(stderr, "sn_drr_check: counts (backlog %llu/%llu active %llu/%llu)\n",
			(unsigned long long)backlog, (unsigned long long)d->backlog,
			(unsigned long long)active, (unsigned long long)linked);
		return -EFAULT;
	}
	return 0;
}
