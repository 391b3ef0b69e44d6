/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_sdnotify.h — the service manager's side of schednicd: readiness,
 * reload and stop notifications and the watchdog, through sd_notify(3)
 * (libsystemd). Without NOTIFY_SOCKET in the environment (not started by
 * systemd) every call is a no-op.
 *
 * The watchdog. When the service manager asks for one (WatchdogSec=, seen
 * as WATCHDOG_USEC and WATCHDOG_PID by sd_watchdog_enabled(3)), MAIN's
 * control loop calls sn_sdnotify_tick() with each datapath thread's loop
 * counter; every half interval it sends WATCHDOG=1 only if every counter
 * advanced since the last check. A worker or the arbiter stuck in its loop
 * so stops the pings, and systemd restarts the daemon one interval later
 * (Restart=on-watchdog or always). A stalled MAIN stops them too.
 *
 * Threads: MAIN only (the counters are read relaxed: each has one writer,
 * its datapath thread).
 */
#ifndef SN_SDNOTIFY_H
#define SN_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#define SN_SDNOTIFY_MAX_THREADS 64   /* workers + arbiter */

struct sn_sdnotify {
	uint64_t period_ns;          /* half the watchdog interval; 0: no watchdog */
	uint64_t next_ns;            /* next check */
	uint64_t last[SN_SDNOTIFY_MAX_THREADS];
	unsigned n;                  /* counters at the last check */
	bool stalled;                /* the last check found a counter still */
};

/* Reads the watchdog interval from the environment: 0, or -errno of
 * sd_watchdog_enabled() (logged by the caller). */
int sn_sdnotify_init(struct sn_sdnotify *n);

/* READY=1 with a STATUS= line. */
void sn_sdnotify_ready(const char *status);

/* RELOADING=1 (before a reload), then sn_sdnotify_ready() after it. */
void sn_sdnotify_reloading(void);

/* STOPPING=1. */
void sn_sdnotify_stopping(void);

/* True when a watchdog check is due at now_ns (the caller then gathers
 * the counters for sn_sdnotify_tick()). */
static inline bool sn_sdnotify_due(const struct sn_sdnotify *n, uint64_t now_ns)
{
	return n->period_ns && (int64_t)(now_ns - n->next_ns) >= 0;
}

/* One check of the watchdog: loops[i] is datapath thread i's loop counter
 * (name[i] its name, for the log line when it stops). The first check
 * pings; each later one pings only if every counter moved since. */
void sn_sdnotify_tick(struct sn_sdnotify *n, uint64_t now_ns, const uint64_t *loops,
		      const char *const *name, unsigned nloops);

#endif /* SN_SDNOTIFY_H */
