/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_test_policy.h — for the daemon's C unit tests: a policy from JSON
 * text through the daemon's own parser, a failure counted (sn_check.h)
 * with the parser's message when it refuses the text. */
#ifndef SN_TEST_POLICY_H
#define SN_TEST_POLICY_H

#include <stdio.h>

#include <jansson.h>

#include "sn_policy.h"
#include "sn_check.h"

static inline void sn_test_policy_parse(const char *text, struct sn_policy *p)
{
	char err[256] = "";
	json_t *j = json_loads(text, 0, NULL);

	CHECK(j != NULL);
	if (sn_policy_parse(j, p, err, sizeof(err))) {
		fprintf(stderr, "FAIL parse: %s\n", err);
		failures++;
	}
	json_decref(j);
}

#endif /* SN_TEST_POLICY_H */
