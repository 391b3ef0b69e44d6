/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_common.h — small helpers shared by every scheduling-core module.
 *
 * Header-only; no state. Any thread may use any of it.
 */
#ifndef SN_COMMON_H
#define SN_COMMON_H

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SN_CACHE_LINE 64

#define sn_likely(x)   __builtin_expect(!!(x), 1)
#define sn_unlikely(x) __builtin_expect(!!(x), 0)

#define SN_ALIGNED(a)  __attribute__((aligned(a)))
#define SN_CACHE_ALIGNED SN_ALIGNED(SN_CACHE_LINE)

#define SN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SN_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Internal invariant violated: abort loudly with file and line (never used
 * for bad input, which is validated, counted and rejected instead). */
#define sn_die(...) do {                                                   \
	fprintf(stderr, "schednic: fatal: %s:%d: %s: ", __FILE__, __LINE__, \
		__func__);                                                 \
	fprintf(stderr, __VA_ARGS__);                                      \
	fputc('\n', stderr);                                               \
	abort();                                                           \
} while (0)

#define SN_VERIFY(cond) do {                                               \
	if (sn_unlikely(!(cond)))                                          \
		sn_die("invariant failed: %s", #cond);                     \
} while (0)

static inline int sn_is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static inline uint64_t sn_align_pow2(uint64_t x)
{
	if (x <= 1)
		return 1;
	return 1ULL << (64 - __builtin_clzll(x - 1));
}

/* Wrap-safe comparison of 64-bit virtual times / timestamps. */
static inline int sn_time_before(uint64_t a, uint64_t b) { return (int64_t)(a - b) < 0; }
static inline int sn_time_after(uint64_t a, uint64_t b)  { return (int64_t)(a - b) > 0; }

#endif /* SN_COMMON_H */
