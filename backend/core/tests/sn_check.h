/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_check.h — the failure-counting assertion of the C unit tests.
 *
 * CHECK(cond) reports a failed condition with its file and line and keeps
 * going (one run shows every broken property, not just the first);
 * sn_check_exit() ends main(): exit status 1 if any CHECK failed, which
 * meson's test() turns into a failed test. Single-threaded use, or from
 * worker threads that the test joins before sn_check_exit(): the counter
 * is an atomic so concurrent failures are never lost.
 */
#ifndef SN_CHECK_H
#define SN_CHECK_H

#include <stdatomic.h>
#include <stdio.h>

static atomic_int failures;

#define CHECK(cond) do {                                                   \
	if (!(cond)) {                                                     \
		fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
		failures++;                                                \
	}                                                                  \
} while (0)

/* End of main(): the summary line and the exit status. */
static inline int sn_check_exit(const char *test)
{
	int n = atomic_load(&failures);

	if (n) {
		fprintf(stderr, "%s: %d failure(s)\n", test, n);
		return 1;
	}
	printf("%s: all passed\n", test);
	return 0;
}

#endif /* SN_CHECK_H */
