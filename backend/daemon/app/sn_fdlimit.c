/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_fdlimit.c — RLIMIT_NOFILE for the configured ports (sn_fdlimit.h). */
#include "sn_fdlimit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

static unsigned long port_need(unsigned queues, bool deferred)
{
	return SN_FDLIMIT_PORT_FIXED + (unsigned long)queues * SN_FDLIMIT_PER_QUEUE +
	       (deferred ? queues : 0);
}

/* The descriptors of the configured ports (and the base). */
static unsigned long need_configured(const struct sn_config *cfg)
{
	unsigned long n = SN_FDLIMIT_BASE + cfg->control.max_clients;

	for (unsigned i = 0; i < cfg->n_ports; i++)
		n += port_need(cfg->ports[i].queues ? cfg->ports[i].queues : 1,
			       cfg->ports[i].deferred);
	return n;
}

unsigned long sn_fdlimit_need(const struct sn_config *cfg)
{
	unsigned long n = need_configured(cfg);

	if (cfg->datapath.max_ports > cfg->n_ports)
		n += (cfg->datapath.max_ports - cfg->n_ports) * port_need(1, true);
	return n;
}

int sn_fdlimit_raise(const struct sn_config *cfg, char *err, size_t errlen)
{
	const unsigned long need = sn_fdlimit_need(cfg), need_cfg = need_configured(cfg);
	struct rlimit rl;
	int rc = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl)) {
		snprintf(err, errlen, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
		return -errno;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need_cfg) {
		snprintf(err, errlen, "the %u configured ports need %lu file descriptors, the "
			 "hard limit is %llu: raise it (ulimit -n %lu, or LimitNOFILE=%lu in the "
			 "systemd unit) or configure fewer ports", cfg->n_ports, need_cfg,
			 (unsigned long long)rl.rlim_max, need, need);
		return -EMFILE;
	}
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
		snprintf(err, errlen, "warning: datapath.max_ports %u needs %lu file descriptors, "
			 "the hard limit is %llu: ports added by port.add may fail to connect; "
			 "raise it (ulimit -n %lu, or LimitNOFILE=%lu in the systemd unit) or lower "
			 "datapath.max_ports", cfg->datapath.max_ports, need,
			 (unsigned long long)rl.rlim_max, need, need);
		rc = 1;
	}
	if (rl.rlim_cur == rl.rlim_max)
		return rc;
	rl.rlim_cur = rl.rlim_max;   /* the hard limit: room beyond the estimate */
	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		int e = errno;

		snprintf(err, errlen, "setrlimit(RLIMIT_NOFILE, %llu): %s",
			 (unsigned long long)rl.rlim_cur, strerror(e));
		return -e;
	}
	return rc;
}
