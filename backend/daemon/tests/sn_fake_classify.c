/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_fake_classify.c — heap memory and a linear flow table in place of
 * rte_malloc and rte_hash for the classifier without EAL
 * (sn_fake_classify.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rte_hash.h>
#include <rte_malloc.h>

#include "sn_fake_classify.h"

#define FAKE_KEY_MAX 48   /* struct sn_flowkey */

struct rte_hash {
	uint32_t n, key_len, count;
	uint8_t (*keys)[FAKE_KEY_MAX];
	uint8_t *used;
};

/* Test-process state, one thread: the last table made, the missed
 * lookups. */
static struct rte_hash *last_table;
static uint64_t misses;

void *rte_zmalloc_socket(const char *type, size_t size, unsigned align, int socket)
{
	void *p;

	(void)type, (void)socket;
	if (posix_memalign(&p, align ? align : 64, size ? size : 1))
		return NULL;
	memset(p, 0, size);
	return p;
}

void rte_free(void *p)
{
	free(p);
}

struct rte_hash *rte_hash_create(const struct rte_hash_parameters *p)
{
	struct rte_hash *h = calloc(1, sizeof(*h));

	if (!h || p->key_len > FAKE_KEY_MAX)
		abort();
	h->n = p->entries;
	h->key_len = p->key_len;
	h->keys = calloc(h->n, FAKE_KEY_MAX);
	h->used = calloc(h->n, 1);
	if (!h->keys || !h->used)
		abort();
	last_table = h;
	return h;
}

void rte_hash_free(struct rte_hash *h)
{
	if (!h)
		return;
	if (h == last_table)
		last_table = NULL;
	free(h->keys);
	free(h->used);
	free(h);
}

int32_t rte_hash_max_key_id(const struct rte_hash *h)
{
	return (int32_t)h->n - 1;
}

int32_t rte_hash_count(const struct rte_hash *h)
{
	return (int32_t)h->count;
}

static int32_t find(const struct rte_hash *h, const void *key)
{
	for (uint32_t i = 0; i < h->n; i++)
		if (h->used[i] && !memcmp(h->keys[i], key, h->key_len))
			return (int32_t)i;
	return -ENOENT;
}

int32_t rte_hash_lookup(const struct rte_hash *h, const void *key)
{
	int32_t pos = find(h, key);

	if (pos < 0)
		misses++;
	return pos;
}

int32_t rte_hash_add_key(const struct rte_hash *hc, const void *key)
{
	struct rte_hash *h = (struct rte_hash *)hc;
	int32_t pos = find(h, key);

	if (pos >= 0)
		return pos;
	for (uint32_t i = 0; i < h->n; i++)
		if (!h->used[i]) {
			h->used[i] = 1;
			memcpy(h->keys[i], key, h->key_len);
			h->count++;
			return (int32_t)i;
		}
	return -ENOSPC;
}

int32_t rte_hash_del_key(const struct rte_hash *hc, const void *key)
{
	struct rte_hash *h = (struct rte_hash *)hc;
	int32_t pos = find(h, key);

	if (pos >= 0) {
		h->used[pos] = 0;
		h->count--;
	}
	return pos;
}

int32_t rte_hash_iterate(const struct rte_hash *h, const void **key, void **data, uint32_t *next)
{
	for (; *next < h->n; (*next)++)
		if (h->used[*next]) {
			*key = h->keys[*next];
			*data = NULL;
			return (int32_t)(*next)++;
		}
	return -ENOENT;
}

struct rte_hash *sn_fake_classify_table(void)
{
	return last_table;
}

uint32_t sn_fake_classify_entries(const struct rte_hash *h)
{
	return h->count;
}

uint64_t sn_fake_classify_misses(void)
{
	return misses;
}
