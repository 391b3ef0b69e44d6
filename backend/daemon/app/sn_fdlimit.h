/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_fdlimit.h — the file descriptors the configured ports need, and the
 * process limit (RLIMIT_NOFILE) raised to fit them at start.
 *
 * A connected vhost-user port holds, in DPDK 22.11's vhost library: its
 * listening socket (server mode) and the connection, one fd per guest
 * memory region (up to 8, VHOST_MEMORY_MAX_NREGIONS), the dirty log
 * during a live migration, and a kick and a call eventfd per vring (two
 * vrings per queue pair); a deferred port also keeps one durable record
 * file per TX queue. The configured ports are counted with their queues,
 * the rest of datapath.max_ports (ports port.add may add) with one queue
 * pair each, plus a base for the EAL, the uplink and the control clients.
 *
 * Concurrency: none; the main thread calls it once, before the EAL starts.
 */
#ifndef SN_FDLIMIT_H
#define SN_FDLIMIT_H

#include <stddef.h>

#include "sn_config.h"

#define SN_FDLIMIT_BASE        128u  /* EAL, mempool, uplink, logs, control socket */
#define SN_FDLIMIT_PORT_FIXED  11u   /* 2 sockets + 8 memory regions + 1 log */
#define SN_FDLIMIT_PER_QUEUE   4u    /* kick + call of the queue pair's 2 vrings */

/* Pure: the descriptors cfg needs at most. */
unsigned long sn_fdlimit_need(const struct sn_config *cfg);

/* Raise the soft RLIMIT_NOFILE toward the hard limit so that
 * sn_fdlimit_need(cfg) fits (never lowers it). 0; 1 with a warning in err
 * when the hard limit fits the configured ports but not datapath.max_ports
 * (ports port.add adds may then fail); -EMFILE with a message naming both
 * numbers, `ulimit -n` and LimitNOFILE when it does not fit the configured
 * ports; or -errno of setrlimit(). */
int sn_fdlimit_raise(const struct sn_config *cfg, char *err, size_t errlen);

#endif /* SN_FDLIMIT_H */
