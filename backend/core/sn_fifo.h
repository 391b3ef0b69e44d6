/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_fifo.h — one first-in first-out queue behind sn_sched.h; weights are
 * ignored, classes only label items and bound them.
 *
 * Capacity: each class may hold at most queue_len items (rounded up to a
 * power of two), exactly as with QFQ/DRR, so -ENOBUFS means the same thing
 * for every algorithm. All items share one ring that grows on demand (by
 * doubling, starting at 1024 entries) up to queue_len * max_classes
 * (capped at 2^26 entries), so the shared ring never refuses an item the
 * per-class limit admits below that cap.
 *
 * Concurrency: single-threaded like sn_sched.h. Errors: create returns
 * NULL + errno, the rest 0 / -errno as documented in sn_sched.h.
 */
#ifndef SN_FIFO_H
#define SN_FIFO_H

#include <stdbool.h>
#include <stdint.h>

struct sn_fifo;

struct sn_fifo *sn_fifo_create(uint32_t max_classes, uint32_t queue_len);
void sn_fifo_free(struct sn_fifo *f);

int sn_fifo_class_add(struct sn_fifo *f, uint32_t id, uint32_t weight, uint32_t lmax);
int sn_fifo_class_change(struct sn_fifo *f, uint32_t id, uint32_t weight, uint32_t lmax);
int sn_fifo_class_del(struct sn_fifo *f, uint32_t id,
		      void (*drop)(void *item, uint32_t len, void *arg), void *arg);
/* sn_sched_class_purge for FIFO (same contract). */
uint32_t sn_fifo_class_purge(struct sn_fifo *f, uint32_t id,
			      bool (*take)(void *item, uint32_t len, void *arg), void *arg);

int sn_fifo_enqueue(struct sn_fifo *f, uint32_t id, void *item, uint32_t len);
void *sn_fifo_dequeue(struct sn_fifo *f, uint32_t *len, uint32_t *id);
int sn_fifo_peek_len(struct sn_fifo *f, uint32_t *len);

uint64_t sn_fifo_backlog(const struct sn_fifo *f);
uint32_t sn_fifo_class_backlog(const struct sn_fifo *f, uint32_t id);

/* Per-class counts agree with the ring: 0 or -EFAULT. Tests only. */
int sn_fifo_check(const struct sn_fifo *f);

#endif /* SN_FIFO_H */
