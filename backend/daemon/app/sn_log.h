/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_log.h — schednicd's log: one line per event on stderr,
 * "schednicd: <event>", with a syslog priority.
 *
 * Priorities: sn_log_err() for a failure of schednicd itself (a start
 * that cannot go on, a request it cannot serve), sn_log_warn() for bad
 * input it refused or worked around (a guest's ring or message, a control
 * client, a config value it corrected), sn_log() for the events an
 * operator follows (ports up and down, start, reload, stop).
 *
 * Journal: when stderr is the systemd journal (JOURNAL_STREAM names its
 * device and inode, systemd.exec(5)) each line starts with the syslog
 * priority as "<N>" (sd-daemon(3)), which journald stores as the entry's
 * PRIORITY and strips; on a terminal, a file or a pipe the line is the
 * same without it. The check runs once per translation unit, at its first
 * line (an environment read and an fstat).
 *
 * Rate limit: SN_LOG_RL() is sn_log_prio() for a call site that a guest
 * or a control client can trigger at will: at most SN_LOG_RL_BURST lines
 * from that site per window of SN_LOG_RL_WINDOW_S seconds (windows of the
 * monotonic clock: a burst that straddles a boundary can pass twice); the
 * first line of a later window says how many were suppressed (" (N more
 * from here suppressed, ...)" at its end). SN_LOG_RL_ON() takes the limit
 * from the caller (a port's events share the port's).
 *
 * Any thread may call these: the line is formatted into a local buffer
 * and written with a single write(2), so lines from the main, vhost and
 * worker threads never interleave. The worker must not log per packet.
 * DPDK's own log comes through here too (sn_eal_log.h).
 */
#ifndef SN_LOG_H
#define SN_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* syslog(3) priorities */
#define SN_LOG_ERR     3
#define SN_LOG_WARNING 4
#define SN_LOG_NOTICE  5
#define SN_LOG_INFO    6
#define SN_LOG_DEBUG   7

#define SN_LOG_LINE_MAX 512

/* Pure: whether JOURNAL_STREAM's value js ("<dev>:<inode>", decimal)
 * names the file of st (NULL js: no). */
static inline bool sn_log_is_journal(const char *js, const struct stat *st)
{
	unsigned long long dev, ino;
	char end;

	if (!js || sscanf(js, "%llu:%llu%c", &dev, &ino, &end) != 2)
		return false;
	return (unsigned long long)st->st_dev == dev && (unsigned long long)st->st_ino == ino;
}

/* Whether stderr is the journal (see above), decided once per
 * translation unit (relaxed: every thread computes the same answer). */
static inline bool sn_log_to_journal(void)
{
	static int mode = -1;    /* -1 unknown, 0 plain, 1 journal */
	int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);

	if (m < 0) {
		struct stat st;

		m = fstat(STDERR_FILENO, &st) == 0 &&
		    sn_log_is_journal(getenv("JOURNAL_STREAM"), &st);
		__atomic_store_n(&mode, m, __ATOMIC_RELAXED);
	}
	return m == 1;
}

/* Write one line: text (len bytes, no newline) after the prefix for prio
 * ("<N>" to the journal) and tag ("schednicd: ", or "" for DPDK's lines,
 * which carry their own). */
static inline void sn_log_write(int prio, const char *tag, const char *text, size_t len)
{
	char buf[SN_LOG_LINE_MAX];
	int n = 0;

	if (sn_log_to_journal())
		n = snprintf(buf, sizeof(buf), "<%d>", prio & 7);
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s", tag);
	if (len > sizeof(buf) - (size_t)n - 1)
		len = sizeof(buf) - (size_t)n - 1;
	memcpy(buf + n, text, len);
	n += (int)len;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		return;
}

__attribute__((format(printf, 2, 0)))
static inline void sn_log_vprio(int prio, const char *fmt, va_list ap)
{
	char buf[SN_LOG_LINE_MAX];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);

	if (n < 0)
		return;
	sn_log_write(prio, "schednicd: ", buf,
		     (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

__attribute__((format(printf, 2, 3)))
static inline void sn_log_prio(int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sn_log_vprio(prio, fmt, ap);
	va_end(ap);
}

#define sn_log(...)      sn_log_prio(SN_LOG_INFO, __VA_ARGS__)
#define sn_log_warn(...) sn_log_prio(SN_LOG_WARNING, __VA_ARGS__)
#define sn_log_err(...)  sn_log_prio(SN_LOG_ERR, __VA_ARGS__)

/* ---- rate limit -------------------------------------------------------- */

#define SN_LOG_RL_BURST    20u
#define SN_LOG_RL_WINDOW_S 10u

/* One rate-limited source: window index and lines in it packed in one
 * word (updated with a compare-and-swap by any thread), and the lines
 * suppressed since the last report. */
struct sn_log_rl {
	uint64_t state;       /* window << 32 | lines logged in it */
	uint64_t suppressed;
};

/* Pure but for rl: whether a line at time now_s (seconds, any monotonic
 * origin) may go out under a limit of burst lines per window_s seconds;
 * when it may, *suppressed is the count of lines refused before it (to
 * report, then cleared), else it is counted. */
static inline bool sn_log_rl_allow(struct sn_log_rl *rl, uint64_t now_s, uint32_t burst,
				   uint32_t window_s, uint64_t *suppressed)
{
	const uint64_t win = now_s / (window_s ? window_s : 1);
	uint64_t cur = __atomic_load_n(&rl->state, __ATOMIC_RELAXED), next;

	do {
		const uint64_t lines = (cur >> 32) == (win & 0xffffffffu) ? cur & 0xffffffffu : 0;

		if (lines >= burst) {
			__atomic_fetch_add(&rl->suppressed, 1, __ATOMIC_RELAXED);
			return false;
		}
		next = (win & 0xffffffffu) << 32 | (lines + 1);
	} while (!__atomic_compare_exchange_n(&rl->state, &cur, next, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	*suppressed = __atomic_exchange_n(&rl->suppressed, 0, __ATOMIC_RELAXED);
	return true;
}

static inline uint64_t sn_log_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

/* sn_log_prio() of a rate-limited line that follows sup suppressed ones
 * (0: none): the count is appended to it. */
__attribute__((format(printf, 3, 4)))
static inline void sn_log_rl_line(int prio, uint64_t sup, const char *fmt, ...)
{
	char buf[SN_LOG_LINE_MAX];
	va_list ap;
	int n;

	/* with a count to report, the text leaves room for it */
	const size_t room = sup ? sizeof(buf) - 96 : sizeof(buf);

	va_start(ap, fmt);
	n = vsnprintf(buf, room, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= room)
		n = (int)room - 1;
	if (sup)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      " (%llu more from here suppressed, at most %u per %u s)",
			      (unsigned long long)sup, SN_LOG_RL_BURST, SN_LOG_RL_WINDOW_S);
	sn_log_write(prio, "schednicd: ", buf,
		     (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* sn_log_prio() limited by the limit *rlp (shared by the call sites that
 * pass it: e.g. one per port). */
#define SN_LOG_RL_ON(rlp, prio, ...)                                                      \
	do {                                                                              \
		uint64_t sup_;                                                            \
		if (sn_log_rl_allow((rlp), sn_log_now_s(), SN_LOG_RL_BURST,               \
				    SN_LOG_RL_WINDOW_S, &sup_))                           \
			sn_log_rl_line(prio, sup_, __VA_ARGS__);                          \
	} while (0)

/* sn_log_prio() limited per call site (see the top of this file). */
#define SN_LOG_RL(prio, ...)                                                              \
	do {                                                                              \
		static struct sn_log_rl rl_;                                              \
		SN_LOG_RL_ON(&rl_, prio, __VA_ARGS__);                                    \
	} while (0)

#endif /* SN_LOG_H */
