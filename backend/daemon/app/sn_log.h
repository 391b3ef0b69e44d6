/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_log.h — one line per event on stderr, "schednicd: <event>".
 *
 * Any thread may call sn_log(): the line is formatted into a local buffer
 * and written with a single write(2), so lines from the main, vhost and
 * worker threads never interleave. The worker must not log per packet.
 */
#ifndef SN_LOG_H
#define SN_LOG_H

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((format(printf, 1, 2)))
static inline void sn_log(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "schednicd: ");

	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		return;
}

#endif /* SN_LOG_H */
