/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_drr.h — Deficit Round Robin (Shreedhar, Varghese, 1996), reached
 * through sn_sched.h. Quantum of class k = drr_quantum * weight_k bytes.
 *
 * Concurrency: single-threaded like sn_sched.h (one owning thread, no
 * locking, no barriers). Errors: create returns NULL + errno, the rest
 * 0 / -errno as documented in sn_sched.h.
 */
#ifndef SN_DRR_H
#define SN_DRR_H

#include <stdbool.h>
#include <stdint.h>

struct sn_drr;

struct sn_drr *sn_drr_create(uint32_t max_classes, uint32_t queue_len, uint32_t quantum);
void sn_drr_free(struct sn_drr *d);

int sn_drr_class_add(struct sn_drr *d, uint32_t id, uint32_t weight, uint32_t lmax);
int sn_drr_class_change(struct sn_drr *d, uint32_t id, uint32_t weight, uint32_t lmax);
int sn_drr_class_del(struct sn_drr *d, uint32_t id,
		     void (*drop)(void *item, uint32_t len, void *arg), void *arg);
/* sn_sched_class_purge for DRR (same contract). */
uint32_t sn_drr_class_purge(struct sn_drr *d, uint32_t id,
			      bool (*take)(void *item, uint32_t len, void *arg), void *arg);

int sn_drr_enqueue(struct sn_drr *d, uint32_t id, void *item, uint32_t len);
void *sn_drr_dequeue(struct sn_drr *d, uint32_t *len, uint32_t *id);
int sn_drr_peek_len(struct sn_drr *d, uint32_t *len);

uint64_t sn_drr_backlog(const struct sn_drr *d);
uint32_t sn_drr_class_backlog(const struct sn_drr *d, uint32_t id);

/* Consistency of the active list and counts: 0 or -EFAULT (message on
 * stderr). Tests and fuzzing only. */
int sn_drr_check(const struct sn_drr *d);

#endif /* SN_DRR_H */
