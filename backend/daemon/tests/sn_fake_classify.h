/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_fake_classify.h — the classifier's environment without EAL, for its
 * unit test and its fuzz target: heap memory in place of rte_malloc
 * (rte_zmalloc_socket, rte_free) and a small linear flow table in place
 * of rte_hash (create, free, lookup, add, del, iterate, count,
 * max_key_id). sn_fake_classify.c defines those DPDK symbols; an
 * executable linking it gets them in preference to libdpdk's.
 *
 * The table keeps the positions rte_hash promises the classifier: a key
 * keeps its position until deleted, a deleted position may be reused at
 * once, and iteration visits the used positions in order. Single thread;
 * out of memory aborts.
 */
#ifndef SN_FAKE_CLASSIFY_H
#define SN_FAKE_CLASSIFY_H

#include <stdint.h>

struct rte_hash;

/* The table rte_hash_create made last (the classifier's), NULL before. */
struct rte_hash *sn_fake_classify_table(void);
/* Entries in use in table h. */
uint32_t sn_fake_classify_entries(const struct rte_hash *h);
/* Lookups (rte_hash_lookup) of any table that found no entry, since the
 * process started: a caller's lookup of a new key. */
uint64_t sn_fake_classify_misses(void);

#endif /* SN_FAKE_CLASSIFY_H */
