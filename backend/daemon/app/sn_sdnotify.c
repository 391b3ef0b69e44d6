/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_sdnotify.c — readiness, reload, stop and watchdog notifications to the
 * service manager (sn_sdnotify.h). */
#include <string.h>

#include <systemd/sd-daemon.h>

#include "sn_log.h"
#include "sn_sdnotify.h"

int sn_sdnotify_init(struct sn_sdnotify *n)
{
	uint64_t usec = 0;
	int rc;

	memset(n, 0, sizeof(*n));
	rc = sd_watchdog_enabled(0, &usec);
	if (rc < 0)
		return rc;
	if (rc > 0 && usec > 0) {
		n->period_ns = usec * 1000u / 2u;
		sn_log("watchdog: every %llu ms while every datapath thread loops "
		       "(WatchdogSec %llu ms)", (unsigned long long)(n->period_ns / 1000000u),
		       (unsigned long long)(usec / 1000u));
	}
	return 0;
}

void sn_sdnotify_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void sn_sdnotify_reloading(void)
{
	sd_notify(0, "RELOADING=1\nSTATUS=reloading the config");
}

void sn_sdnotify_stopping(void)
{
	sd_notify(0, "STOPPING=1\nSTATUS=stopping");
}

void sn_sdnotify_tick(struct sn_sdnotify *n, uint64_t now_ns, const uint64_t *loops,
		      const char *const *name, unsigned nloops)
{
	const bool compare = n->n == nloops;
	int still = -1;

	if (!sn_sdnotify_due(n, now_ns))
		return;
	n->next_ns = now_ns + n->period_ns;
	if (nloops > SN_SDNOTIFY_MAX_THREADS)
		nloops = SN_SDNOTIFY_MAX_THREADS;
	for (unsigned i = 0; compare && i < nloops; i++)
		if (loops[i] == n->last[i]) {
			still = (int)i;
			break;
		}
	memcpy(n->last, loops, nloops * sizeof(loops[0]));
	n->n = nloops;
	if (still >= 0) {
		if (!n->stalled)
			sn_log_warn("watchdog: %s made no progress in %llu ms: no WATCHDOG=1 until it "
			       "does", name[still], (unsigned long long)(n->period_ns / 1000000u));
		n->stalled = true;
		return;
	}
	if (n->stalled)
		sn_log("watchdog: every datapath thread loops again");
	n->stalled = false;
	sd_notify(0, "WATCHDOG=1");
}
