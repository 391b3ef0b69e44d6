/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_sched.h — one interface over the packet schedulers (QFQ, DRR, FIFO).
 *
 * A scheduler holds opaque items (packet references) in per-class FIFO
 * queues and decides which class sends next. It knows nothing about time:
 * link emulation (when to dequeue) is the caller's job (sn_arbiter).
 *
 * Concurrency: a scheduler instance is single-threaded. Exactly one thread
 * (the arbiter) may call any function on it; no internal locking, no
 * barriers. Class changes (add/del/change) are made by that same thread,
 * between dequeues, and are allowed while classes are backlogged.
 *
 * Errors: constructors return NULL and set errno; everything else returns 0
 * or -errno.
 */
#ifndef SN_SCHED_H
#define SN_SCHED_H

#include <stdbool.h>
#include <stdint.h>

enum sn_sched_algo {
	SN_SCHED_QFQ = 0,  /* Quick Fair Queueing (Checconi, Rizzo, Valente) */
	SN_SCHED_DRR,      /* Deficit Round Robin */
	SN_SCHED_FIFO,     /* one queue, arrival order; weights ignored */
};

#define SN_SCHED_MAX_WEIGHT   (1u << 16)  /* per class */
#define SN_SCHED_MAX_WSUM     (1u << 20)  /* sum of weights of all classes */
#define SN_SCHED_MAX_LMAX     (1u << 16)  /* bytes: largest packet a class may send */

struct sn_sched_params {
	enum sn_sched_algo algo;
	uint32_t max_classes;   /* class ids are 0 .. max_classes-1 */
	uint32_t queue_len;     /* per-class queue capacity in items; rounded up to pow2 */
	uint32_t drr_quantum;   /* DRR: bytes per round per unit of weight (0 = default 1514) */
};

struct sn_sched;

/* Create / free. Free does not touch queued items. */
struct sn_sched *sn_sched_create(const struct sn_sched_params *p);
void sn_sched_free(struct sn_sched *s);

/* Classes. weight in 1..SN_SCHED_MAX_WEIGHT, lmax in 64..SN_SCHED_MAX_LMAX;
 * the sum of weights stays <= SN_SCHED_MAX_WSUM.
 * add:    -EINVAL (bad id/weight/lmax), -EEXIST, -ENOSPC (weight sum).
 * change: -ENOENT, -EINVAL, -ENOSPC; allowed while backlogged; packets
 *         already queued that are longer than a new lmax stay valid.
 * del:    -ENOENT; if backlogged, every queued item is handed to
 *         drop(item, len, arg) (drop may be NULL) before the class goes. */
int sn_sched_class_add(struct sn_sched *s, uint32_t class_id, uint32_t weight, uint32_t lmax);
int sn_sched_class_change(struct sn_sched *s, uint32_t class_id, uint32_t weight, uint32_t lmax);
int sn_sched_class_del(struct sn_sched *s, uint32_t class_id,
		       void (*drop)(void *item, uint32_t len, void *arg), void *arg);

/* Offer every queued item of class_id, oldest first, to take(item, len,
 * arg): an item it takes (returns true) leaves the scheduler and passes to
 * it; the others keep their order. A class left backlogged is scheduled
 * again as one that just became backlogged (QFQ: new start time from the
 * system virtual time; DRR: tail of the round, fresh quantum). Returns how
 * many were taken (0: no such class, or empty). take() must not call into
 * the scheduler. */
uint32_t sn_sched_class_purge(struct sn_sched *s, uint32_t class_id,
			      bool (*take)(void *item, uint32_t len, void *arg), void *arg);

/* Enqueue one item of `len` bytes (1..lmax of the class).
 * -ENOENT unknown class, -EMSGSIZE len > lmax or 0, -ENOBUFS class queue full
 * (the caller keeps the item and counts the drop). */
int sn_sched_enqueue(struct sn_sched *s, uint32_t class_id, void *item, uint32_t len);

/* Enqueue items[0..n) of lengths lens[] into one class, in order, as n
 * sn_sched_enqueue calls would (one dispatch instead of n). Stops at the
 * first refusal: returns how many went in; if that is < n, *err gets the
 * refusal's -errno for items[return value], which stays the caller's, as
 * do the items after it. */
uint32_t sn_sched_enqueue_burst(struct sn_sched *s, uint32_t class_id, void *const *items,
				const uint32_t *lens, uint32_t n, int *err);

/* Dequeue the next item per the algorithm; NULL when empty. *len and
 * *class_id (either may be NULL) receive its length and class. */
void *sn_sched_dequeue(struct sn_sched *s, uint32_t *len, uint32_t *class_id);

/* Dequeue up to n items in order, exactly as repeated sn_sched_dequeue
 * calls would, while the bytes taken so far in this call (each item counted
 * as its len + overhead) are below budget: the item that reaches budget is
 * the last one. items[i] / lens[i] receive them; *bytes gets the sum of
 * len + overhead over the items taken. Returns the count: fewer than n with
 * *bytes < budget means the scheduler ran empty. For link emulation
 * (sn_arbiter): one call per release batch instead of one per item. */
uint32_t sn_sched_dequeue_burst(struct sn_sched *s, void **items, uint32_t *lens, uint32_t n,
				uint64_t budget, uint32_t overhead, uint64_t *bytes);

/* One burst of one class through an empty scheduler, without its
 * class queue. sn_sched_pass_ok: would sn_sched_enqueue_burst(class_id,
 * n items whose lengths are in min_len .. max_len) into this scheduler,
 * empty (backlog 0), accept all n? (false for DRR and FIFO, which have no
 * pass: their callers enqueue.) If it said true and nothing touched the scheduler since,
 * sn_sched_pass_burst leaves it exactly as that enqueue followed by
 * sn_sched_dequeue_burst(s, .., room, budget, overhead, bytes) would:
 * returns k, the items that dequeue would return being items[0 .. k) with
 * lens[0 .. k), *bytes as it would set it; items[k .. n) stay queued in
 * the class. */
bool sn_sched_has_pass(const struct sn_sched *s);   /* QFQ only */
bool sn_sched_pass_ok(const struct sn_sched *s, uint32_t class_id, uint32_t n,
		      uint32_t min_len, uint32_t max_len);
uint32_t sn_sched_pass_burst(struct sn_sched *s, uint32_t class_id, void *const *items,
			     const uint32_t *lens, uint32_t n, uint32_t room, uint64_t budget,
			     uint32_t overhead, uint64_t *bytes);

/* Length of the item the next dequeue would return: 0 or -ENOENT if empty.
 * Lets link emulation decide before committing to a dequeue. */
int sn_sched_peek_len(struct sn_sched *s, uint32_t *len);

/* Items queued in total / in one class (0 for unknown classes). */
uint64_t sn_sched_backlog(const struct sn_sched *s);
uint32_t sn_sched_class_backlog(const struct sn_sched *s, uint32_t class_id);

/* Self-check of the algorithm's internal invariants (bitmaps, lists,
 * counts): 0, or -EFAULT with the first violation printed to stderr.
 * O(classes): for tests and fuzzing, not the datapath. */
int sn_sched_check(const struct sn_sched *s);

const char *sn_sched_algo_name(enum sn_sched_algo a);
/* "qfq" | "drr" | "fifo" -> algo; -EINVAL otherwise. */
int sn_sched_algo_parse(const char *name, enum sn_sched_algo *out);

#endif /* SN_SCHED_H */
