/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_tap.h — the fail-fast, TAP-style assertion of the C unit tests that
 * print one "ok N - ..." line per property (test_cffs, test_tstamp,
 * test_twheel): CHECK(cond, fmt, ...) prints "not ok" with the file, line,
 * condition and a printf-style message and exits 1 at the first failure
 * (their randomized runs would only cascade after one); n_test counts the
 * "ok" lines for the final "1..N". Single-threaded use. The counting,
 * keep-going variant is sn_check.h.
 */
#ifndef SN_TAP_H
#define SN_TAP_H

#include <stdio.h>
#include <stdlib.h>

static int n_test;

#define CHECK(cond, ...) do {                                              \
	if (!(cond)) {                                                     \
		printf("not ok - %s:%d: %s: ", __FILE__, __LINE__, #cond); \
		printf(__VA_ARGS__);                                       \
		printf("\n");                                              \
		exit(1);                                                   \
	}                                                                  \
} while (0)

#endif /* SN_TAP_H */
