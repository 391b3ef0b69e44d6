/* SPDX-License-Identifier: BSD-3-Clause */
/* trace_util.h — line parsing shared by the sn-trace drivers.
 *
 * Header-only, no state; any thread. Traces are whitespace-separated text
 * lines of unsigned decimal integers and keywords.
 */
#ifndef SN_TRACE_UTIL_H
#define SN_TRACE_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Split line in place at whitespace into at most max tokens; returns the
 * count (extra tokens are left unsplit in the last one's tail). */
static inline int trace_split(char *line, char **tok, int max)
{
	int n = 0;
	char *p = line;

	while (*p && n < max) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			*p++ = '\0';
		if (!*p)
			break;
		tok[n++] = p;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			p++;
	}
	return n;
}

/* Unsigned decimal, the whole string: 0 or -EINVAL (sign, junk, overflow). */
static inline int trace_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

static inline int trace_parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;

	if (trace_parse_u64(s, &v) || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

#endif /* SN_TRACE_UTIL_H */
