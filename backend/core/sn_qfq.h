/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_qfq.h — Quick Fair Queueing (Checconi, Rizzo, Valente, "QFQ:
 * Efficient Packet Scheduling With Tight Guarantees", IEEE/ACM ToN 2013;
 * see sn_qfq.c). Reached through sn_sched.h; this header exists so tests and the
 * fuzz target can call the self-check directly.
 *
 * Concurrency: single-threaded, exactly like sn_sched.h: one thread owns an
 * instance; no locking, no barriers.
 * Errors: sn_qfq_create returns NULL + errno; the rest 0 / -errno with the
 * meanings documented in sn_sched.h.
 */
#ifndef SN_QFQ_H
#define SN_QFQ_H

#include <stdbool.h>
#include <stdint.h>

struct sn_qfq;

struct sn_qfq *sn_qfq_create(uint32_t max_classes, uint32_t queue_len);
void sn_qfq_free(struct sn_qfq *q);

int sn_qfq_class_add(struct sn_qfq *q, uint32_t id, uint32_t weight, uint32_t lmax);
int sn_qfq_class_change(struct sn_qfq *q, uint32_t id, uint32_t weight, uint32_t lmax);
int sn_qfq_class_del(struct sn_qfq *q, uint32_t id,
		     void (*drop)(void *item, uint32_t len, void *arg), void *arg);
/* sn_sched_class_purge for QFQ (same contract). */
uint32_t sn_qfq_class_purge(struct sn_qfq *q, uint32_t id,
			      bool (*take)(void *item, uint32_t len, void *arg), void *arg);

int sn_qfq_enqueue(struct sn_qfq *q, uint32_t id, void *item, uint32_t len);
/* sn_sched_enqueue_burst for QFQ (same contract). */
uint32_t sn_qfq_enqueue_burst(struct sn_qfq *q, uint32_t id, void *const *items,
			      const uint32_t *lens, uint32_t n, int *err);
void *sn_qfq_dequeue(struct sn_qfq *q, uint32_t *len, uint32_t *id);
/* sn_sched_dequeue_burst for QFQ (same contract). */
uint32_t sn_qfq_dequeue_burst(struct sn_qfq *q, void **items, uint32_t *lens, uint32_t n,
			      uint64_t budget, uint32_t overhead, uint64_t *bytes);
int sn_qfq_peek_len(struct sn_qfq *q, uint32_t *len);
/* sn_sched_pass_ok / sn_sched_pass_burst for QFQ (same contracts). */
bool sn_qfq_pass_ok(const struct sn_qfq *q, uint32_t id, uint32_t n, uint32_t min_len,
		    uint32_t max_len);
uint32_t sn_qfq_pass_burst(struct sn_qfq *q, uint32_t id, void *const *items,
			   const uint32_t *lens, uint32_t n, uint32_t room, uint64_t budget,
			   uint32_t overhead, uint64_t *bytes);
/* Tests: the virtual time V and class id's S and F (0 for an
 * unknown class), to compare two schedulers' states exactly. */
void sn_qfq_times(const struct sn_qfq *q, uint32_t id, uint64_t *V, uint64_t *S, uint64_t *F);

uint64_t sn_qfq_backlog(const struct sn_qfq *q);
uint32_t sn_qfq_class_backlog(const struct sn_qfq *q, uint32_t id);

/* Times a timestamp had to be clamped to keep a class inside its group's
 * bucket list (packets longer than a lowered lmax; see sn_qfq.c). */
uint64_t sn_qfq_clamps(const struct sn_qfq *q);

/* Full consistency check of bitmaps, bucket lists, timestamps and counts.
 * 0 if consistent; otherwise prints the first violation to stderr and
 * returns -EFAULT. O(classes + groups * slots): tests and fuzzing only. */
int sn_qfq_check(const struct sn_qfq *q);

#endif /* SN_QFQ_H */
