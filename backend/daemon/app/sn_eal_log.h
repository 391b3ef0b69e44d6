/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_eal_log.h — DPDK's own log (rte_log) through sn_log.
 *
 * sn_eal_log_init() points rte_openlog_stream() at a stream whose every
 * message becomes sn_log lines: each line of it on stderr with the
 * message's priority (DPDK's level less one: RTE_LOG_ERR is syslog's
 * LOG_ERR), as "<N>" when stderr is the journal (sn_log.h), the text as
 * DPDK formats it ("VHOST_CONFIG: ..."). A guest drives much of DPDK's
 * vhost log (every vhost-user message of every connection is a line), so
 * the lines are rate-limited per DPDK log type and severity:
 * SN_EAL_LOG_BURST lines per SN_LOG_RL_WINDOW_S seconds for the errors
 * and warnings of a type, as many again for its notices, info and debug;
 * the first line of a later window says how many were suppressed.
 *
 * Threads: DPDK logs from any thread. The stream is unbuffered: glibc
 * formats each message in a helper buffer of BUFSIZ (8 KiB) and hands it
 * to the write hook in one call on the thread that logs it (the one
 * rte_log_cur_msg_loglevel() describes); a longer message arrives in
 * pieces, each split into lines of its own. The limits are sn_log_rl
 * (compare-and-swap, any thread).
 */
#ifndef SN_EAL_LOG_H
#define SN_EAL_LOG_H

#include <stddef.h>

#define SN_EAL_LOG_BURST 400u

/* Main thread, before rte_eal_init(): 0, or -1 when the stream cannot be
 * made (DPDK then logs to its default, stdout and syslog). */
int sn_eal_log_init(void);

/* What the stream does with one message of DPDK log type `type` at DPDK
 * level `level` (1..8), buf/len (any number of lines, the last one
 * possibly without a newline); exposed for the unit test. */
void sn_eal_log_message(int type, int level, const char *buf, size_t len);

#endif /* SN_EAL_LOG_H */
