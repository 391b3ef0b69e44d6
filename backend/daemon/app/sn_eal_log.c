/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_eal_log.c — DPDK's own log through sn_log (see sn_eal_log.h). */
#include "sn_eal_log.h"

#include <stdio.h>
#include <string.h>

#include <rte_log.h>

#include "sn_log.h"

/* Two limits per log type (errors and warnings; the rest), hashed into a
 * fixed table: types that collide share a limit. */
#define NRL 256u
static struct sn_log_rl rl[NRL][2];

/* The DPDK prefix of a line ("VHOST_CONFIG" of "VHOST_CONFIG: ..."),
 * at most 32 characters, for the suppression report. */
static int prefix_len(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len && i < 32 && s[i] != ':' && s[i] != ' ')
		i++;
	return i < len && s[i] == ':' ? (int)i : 0;
}

void sn_eal_log_message(int type, int level, const char *buf, size_t len)
{
	const int prio = level >= 1 && level <= 8 ? level - 1 : SN_LOG_INFO;
	struct sn_log_rl *r = &rl[(unsigned)type % NRL][prio > SN_LOG_WARNING];
	const uint64_t now = sn_log_now_s();

	while (len) {
		const char *nl = memchr(buf, '\n', len);
		const size_t l = nl ? (size_t)(nl - buf) : len;
		uint64_t sup;

		if (l && sn_log_rl_allow(r, now, SN_EAL_LOG_BURST, SN_LOG_RL_WINDOW_S, &sup)) {
			if (sup) {
				const int pl = prefix_len(buf, l);

				sn_log_prio(prio, "dpdk: %llu lines of log type %d%s%.*s%s "
					    "suppressed (at most %u per %u s)",
					    (unsigned long long)sup, type, pl ? " (" : "", pl, buf,
					    pl ? ")" : "", SN_EAL_LOG_BURST, SN_LOG_RL_WINDOW_S);
			}
			sn_log_write(prio, "", buf, l);
		}
		if (!nl)
			break;
		len -= l + 1;
		buf = nl + 1;
	}
}

static ssize_t stream_write(void *cookie, const char *buf, size_t size)
{
	(void)cookie;
	sn_eal_log_message(rte_log_cur_msg_logtype(), rte_log_cur_msg_loglevel(), buf, size);
	return (ssize_t)size;
}

int sn_eal_log_init(void)
{
	static const cookie_io_functions_t io = { .write = stream_write };
	FILE *f = fopencookie(NULL, "w", io);

	if (!f)
		return -1;
	/* unbuffered: one write hook call per message, on the logging
	 * thread (see sn_eal_log.h) */
	if (setvbuf(f, NULL, _IONBF, 0) || rte_openlog_stream(f)) {
		fclose(f);
		return -1;
	}
	return 0;
}
