/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_eal.h — the EAL's argument vector from the configuration, and the
 * host checks that run before rte_eal_init.
 *
 * Two steps, both before the EAL exists:
 *   sn_eal_host_check()  reads the host (hugetlbfs mounts and free pages,
 *                        the PCI device's driver binding, the AF_XDP
 *                        interface and its queues; on the live host also
 *                        its combined channels, read by ETHTOOL_GCHANNELS
 *                        as net_af_xdp reads them) under a root directory
 *                        and refuses, with the fix in the message, what
 *                        would make rte_eal_init or the uplink fail
 *                        obscurely; it resolves the hugetlbfs directory;
 *   sn_eal_args_build()  is pure: config (and that directory) in, argv out,
 *                        or a refusal for contradictory settings.
 * Memory modes: eal.hugepages false gives `--no-huge -m MB`; true gives
 * `--huge-dir DIR --huge-unlink=always -m MB` (every hugepage file is
 * unlinked as soon as it is mapped: the pages go back to the kernel when
 * the process ends, however it ends). Uplink kinds: vdev (`--vdev
 * devargs`), PCI (`-a BDF[,devargs]`; every other kind gets `--no-pci`),
 * AF_XDP (`--vdev net_af_xdp0,iface=..,start_queue=..,queue_count=..,
 * busy_budget=..`).
 *
 * Nothing here ever writes to sysfs: schednicd never binds or unbinds a
 * device. The root of sn_eal_host_check is "/" in the daemon; the
 * environment variable SN_HOST_ROOT replaces it (a test hook: tests point
 * it at a fake sysfs/procfs tree; not an operator setting).
 *
 * Concurrency: none; the main thread before rte_eal_init. The functions
 * keep no state.
 */
#ifndef SN_EAL_H
#define SN_EAL_H

#include <stddef.h>

#include "sn_config.h"

#define SN_EAL_ARGV_MAX (24 + SN_CONFIG_EXTRA_MAX)
#define SN_EAL_LCORES_LEN 160
#define SN_EAL_DEV_LEN 512
#define SN_EAL_HOST_ROOT_ENV "SN_HOST_ROOT"

/* An argument vector and the strings it points to (besides the config's,
 * which must outlive it). rte_eal_init may permute argv; the strings stay. */
struct sn_eal_args {
	int argc;
	char *argv[SN_EAL_ARGV_MAX + 1];       /* NULL-terminated */
	char mem[16];
	char lcores[SN_EAL_LCORES_LEN];
	char huge_dir[SN_CONFIG_HUGE_DIR_MAX + 1];
	char dev[SN_EAL_DEV_LEN];              /* the uplink's -a or --vdev argument */
};

/* Check the host for cfg under root ("" or NULL: "/"). When eal.hugepages,
 * the hugetlbfs directory to pass (eal.huge_dir, or the first hugetlbfs
 * mount) goes to huge_dir[huge_len]; else huge_dir is "". 0, or -EINVAL
 * (-ENOENT for a missing device or interface) with a one-line message in
 * err that says what to do. Reads files only. */
int sn_eal_host_check(const struct sn_config *cfg, const char *root, char *huge_dir,
		      size_t huge_len, char *err, size_t errlen);

/* The EAL arguments of cfg into *a (huge_dir: from sn_eal_host_check,
 * ignored without eal.hugepages; cfg->eal.file_prefix already resolved).
 * 0, or -EINVAL with a message in err (extra_args contradicting the
 * memory mode or the uplink kind, a list too long). Pure. */
int sn_eal_args_build(const struct sn_config *cfg, const char *huge_dir,
		      struct sn_eal_args *a, char *err, size_t errlen);

/* The name the uplink's ethdev gets for cfg's kind (vdev: the devargs up
 * to the first comma; PCI: the normalized address; AF_XDP: net_af_xdp0),
 * into name[len]. 0, or -EINVAL if it does not fit. Pure. */
int sn_eal_uplink_name(const struct sn_config *cfg, char *name, size_t len);

#endif /* SN_EAL_H */
