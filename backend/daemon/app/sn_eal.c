/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_eal.c — EAL arguments and pre-start host checks (see sn_eal.h).
 *
 * The checks read what DPDK itself would read later (hugetlbfs entries of
 * /proc/mounts, /sys/kernel/mm/hugepages, /sys/bus/pci/devices,
 * /sys/class/net), so that a host that is not ready is refused before
 * rte_eal_init with the sysctl, mount or dpdk-devbind.py command that
 * fixes it, instead of an EAL error that names none. Everything is read
 * relative to a root so that tests can build a fake tree.
 */
#include "sn_eal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

__attribute__((format(printf, 4, 5)))
static int refuse(int rc, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* root + path into out[PATH_MAX]; false if it does not fit. */
static bool host_path(char *out, const char *root, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool host_path(char *out, const char *root, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(out, PATH_MAX, "%s", root && strcmp(root, "/") ? root : "");
	int m;

	if (n < 0 || n >= PATH_MAX)
		return false;
	va_start(ap, fmt);
	m = vsnprintf(out + n, PATH_MAX - (size_t)n, fmt, ap);
	va_end(ap);
	return m >= 0 && m < PATH_MAX - n;
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* The first line of a small file, as an unsigned number; -1 if unreadable. */
static long long read_ull(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned long long v;
	int ok;

	if (!f)
		return -1;
	ok = fscanf(f, "%llu", &v) == 1;
	fclose(f);
	return ok && v <= LLONG_MAX ? (long long)v : -1;
}

/* Entries of dir whose name starts with prefix (-1: no such dir); the
 * first such name in first[NAME_MAX + 1] if first is not NULL. */
static int count_entries(const char *dir, const char *prefix, char *first)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		if (first && n == 0)
			snprintf(first, NAME_MAX + 1, "%s", e->d_name);
		n++;
	}
	closedir(d);
	return n;
}

/* "pagesize=2M" / "pagesize=1G" / "pagesize=2048k" in a mount's options,
 * in kB; 0 if absent or malformed. */
static unsigned long opt_pagesize_kb(const char *opts)
{
	const char *p = strstr(opts, "pagesize=");
	unsigned long v;
	char unit = 0;

	if (!p || sscanf(p + 9, "%lu%c", &v, &unit) < 1)
		return 0;
	switch (unit) {
	case 'G': case 'g': return v << 20;
	case 'M': case 'm': return v << 10;
	case 'K': case 'k': return v;
	default: return 0;
	}
}

/* The kernel's default hugepage size (Hugepagesize in /proc/meminfo), kB. */
static unsigned long default_pagesize_kb(const char *root)
{
	char path[PATH_MAX], line[256];
	unsigned long kb = 0;
	FILE *f;

	if (!host_path(path, root, "/proc/meminfo") || !(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Hugepagesize: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* A hugetlbfs mount from /proc/mounts: the one huge_dir is on (its mount
 * point is huge_dir or a parent of it), or the first if want is "". */
static int find_mount(const char *root, const char *want, char *mnt, size_t mnt_len,
		      unsigned long *page_kb)
{
	char path[PATH_MAX], line[PATH_MAX + 256], dev[256], dir[PATH_MAX], type[64], opts[256];
	size_t best = 0;
	FILE *f;

	if (!host_path(path, root, "/proc/mounts") || !(f = fopen(path, "r")))
		return -errno;
	mnt[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		size_t n;

		if (sscanf(line, "%255s %4095s %63s %255s", dev, dir, type, opts) != 4 ||
		    strcmp(type, "hugetlbfs"))
			continue;
		n = strlen(dir);
		if (want[0]) {
			bool on = !strncmp(want, dir, n) &&
				  (want[n] == '\0' || want[n] == '/' || !strcmp(dir, "/"));

			if (!on || n < best)
				continue;
		} else if (mnt[0]) {
			continue;
		}
		best = n;
		snprintf(mnt, mnt_len, "%s", dir);
		*page_kb = opt_pagesize_kb(opts);
	}
	fclose(f);
	return mnt[0] ? 0 : -ENOENT;
}

/* The memory the EAL reserves in hugepage mode, in MB, into *mb and the
 * key that sets it into *key: the sum of eal.extra_args' --socket-mem
 * list ("--socket-mem=A,B" or "--socket-mem" "A,B"), which replaces -m,
 * else eal.memory_mb. 0, or -1 for a --socket-mem that is no list of
 * numbers. */
static int hugepage_mb(const struct sn_config *cfg, unsigned long long *mb, const char **key)
{
	static const char opt[] = "--socket-mem";
	const size_t n = sizeof(opt) - 1;

	*mb = cfg->eal.memory_mb;
	*key = "eal.memory_mb";
	for (unsigned i = 0; i < cfg->eal.n_extra; i++) {
		const char *a = cfg->eal.extra_args[i], *v;
		char *end;

		if (strncmp(a, opt, n) || (a[n] != '\0' && a[n] != '='))
			continue;
		v = a[n] == '=' ? a + n + 1 : i + 1 < cfg->eal.n_extra ? cfg->eal.extra_args[i + 1]
									: "";
		*mb = 0;
		*key = "--socket-mem";
		do {
			if (*v < '0' || *v > '9')
				return -1;
			*mb += strtoull(v, &end, 10);
			v = end;
		} while (*v == ',' && *++v);
		return *v ? -1 : 0;
	}
	return 0;
}

static int check_hugepages(const struct sn_config *cfg, const char *root, char *huge_dir,
			   size_t huge_len, char *err, size_t errlen)
{
	char mnt[PATH_MAX], path[PATH_MAX];
	unsigned long page_kb = 0;
	long long free_pages;
	unsigned long long free_mb;
	const char *want = cfg->eal.huge_dir, *key;
	unsigned long long mb;

	if (hugepage_mb(cfg, &mb, &key))
		return refuse(-EINVAL, err, errlen, "eal.extra_args: --socket-mem: must be a "
			      "list of MB per NUMA socket (\"--socket-mem=1024,0\")");
	if (find_mount(root, want, mnt, sizeof(mnt), &page_kb)) {
		if (want[0])
			return refuse(-EINVAL, err, errlen, "eal.huge_dir: %s is not on a hugetlbfs "
				      "mount (/proc/mounts): mount one there (mkdir -p %s && mount -t "
				      "hugetlbfs -o pagesize=2M nodev %s)", want, want, want);
		return refuse(-EINVAL, err, errlen, "eal.hugepages: no hugetlbfs mount in "
			      "/proc/mounts: mount one (mkdir -p /dev/hugepages && mount -t hugetlbfs "
			      "-o pagesize=2M nodev /dev/hugepages) or set eal.huge_dir to one");
	}
	if (!want[0] && strlen(mnt) >= huge_len)
		return refuse(-EINVAL, err, errlen, "eal.hugepages: hugetlbfs mount %s: longer than "
			      "%zu bytes (EAL --huge-dir): set eal.huge_dir to a shorter one", mnt,
			      huge_len ? huge_len - 1 : 0);
	if (!page_kb)
		page_kb = default_pagesize_kb(root);
	if (!page_kb)
		return refuse(-EINVAL, err, errlen, "eal.hugepages: hugetlbfs %s: page size unknown "
			      "(no pagesize= option, no Hugepagesize in /proc/meminfo)", mnt);
	if (!host_path(path, root, "/sys/kernel/mm/hugepages/hugepages-%lukB/free_hugepages",
		       page_kb))
		return refuse(-EINVAL, err, errlen, "eal.hugepages: path too long");
	free_pages = read_ull(path);
	if (free_pages < 0)
		return refuse(-EINVAL, err, errlen, "eal.hugepages: the kernel has no %lu kB "
			      "hugepages (/sys/kernel/mm/hugepages/hugepages-%lukB) for hugetlbfs %s",
			      page_kb, page_kb, mnt);
	free_mb = (unsigned long long)free_pages * page_kb / 1024;
	if (free_mb < mb) {
		unsigned long long need = (mb * 1024 + page_kb - 1) / page_kb;

		return refuse(-EINVAL, err, errlen, "eal.hugepages: %lld free %lu kB hugepages "
			      "(%llu MB) for hugetlbfs %s, %s needs %llu MB: reserve at "
			      "least %llu more (sysctl -w vm.nr_hugepages=N for the default size, or "
			      "echo N > /sys/kernel/mm/hugepages/hugepages-%lukB/nr_hugepages; at boot "
			      "hugepagesz=.. hugepages=N), or lower %s", free_pages, page_kb,
			      free_mb, mnt, key, mb, need - (unsigned long long)free_pages, page_kb,
			      key);
	}
	snprintf(huge_dir, huge_len, "%s", want[0] ? want : mnt);
	return 0;
}

/* The PCI uplink: present, not a kernel interface, bound to a DPDK
 * driver, with an IOMMU group under vfio-pci, and with hugepages under a
 * uio driver (no IOMMU: the device needs physical addresses, which the
 * EAL's --no-huge memory, IOVA as VA, does not give). */
static int check_pci(const char *root, const char *bdf, bool hugepages, char *err,
		     size_t errlen)
{
	static const char *const drivers[] = { "vfio-pci", "uio_pci_generic", "igb_uio", NULL };
	char dev[PATH_MAX], path[PATH_MAX], link[PATH_MAX], ifname[NAME_MAX + 1] = "";
	const char *drv = NULL;
	ssize_t n;
	bool ok = false;

	if (!host_path(dev, root, "/sys/bus/pci/devices/%s", bdf))
		return refuse(-EINVAL, err, errlen, "uplink.pci: path too long");
	if (!exists(dev))
		return refuse(-ENOENT, err, errlen, "uplink.pci: no PCI device %s "
			      "(/sys/bus/pci/devices/%s): check the address with lspci -D or "
			      "dpdk-devbind.py --status", bdf, bdf);
	if (host_path(path, root, "/sys/bus/pci/devices/%s/driver", bdf) &&
	    (n = readlink(path, link, sizeof(link) - 1)) > 0) {
		link[n] = '\0';
		drv = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
	}
	if (host_path(path, root, "/sys/bus/pci/devices/%s/net", bdf) &&
	    count_entries(path, "", ifname) > 0)
		return refuse(-EINVAL, err, errlen, "uplink.pci: %s is in use by the kernel as "
			      "interface %s (driver %s): take it down (ip link set %s down) and bind "
			      "the device to vfio-pci: dpdk-devbind.py --bind=vfio-pci %s", bdf,
			      ifname, drv ? drv : "?", ifname, bdf);
	if (!drv)
		return refuse(-EINVAL, err, errlen, "uplink.pci: %s is bound to no driver: "
			      "modprobe vfio-pci && dpdk-devbind.py --bind=vfio-pci %s", bdf, bdf);
	for (unsigned i = 0; drivers[i]; i++)
		ok |= !strcmp(drv, drivers[i]);
	if (!ok)
		return refuse(-EINVAL, err, errlen, "uplink.pci: %s is bound to the kernel driver "
			      "%s, not to vfio-pci or a uio driver: dpdk-devbind.py --bind=vfio-pci %s",
			      bdf, drv, bdf);
	if (!strcmp(drv, "vfio-pci") &&
	    (!host_path(path, root, "/sys/bus/pci/devices/%s/iommu_group", bdf) || !exists(path)))
		return refuse(-EINVAL, err, errlen, "uplink.pci: %s is bound to vfio-pci but has no "
			      "IOMMU group: enable the IOMMU (intel_iommu=on or amd_iommu=on on the "
			      "kernel command line) or, without one, vfio's no-IOMMU mode (echo 1 > "
			      "/sys/module/vfio/parameters/enable_unsafe_noiommu_mode), then rebind: "
			      "dpdk-devbind.py --bind=vfio-pci %s", bdf, bdf);
	if (strcmp(drv, "vfio-pci") && !hugepages)
		return refuse(-EINVAL, err, errlen, "uplink.pci: %s is bound to %s, a uio driver "
			      "without IOMMU: the NIC needs physical addresses, so set eal.hugepages "
			      "true (deploy.md), or bind it to vfio-pci: dpdk-devbind.py "
			      "--bind=vfio-pci %s", bdf, drv, bdf);
	return 0;
}

/* The AF_XDP uplink's queue count: uplink.af_xdp_queues, or 1. */
static unsigned xdp_queues(const struct sn_config *cfg)
{
	return cfg->uplink.af_xdp_queues ? cfg->uplink.af_xdp_queues : 1;
}

/* The combined channels of a real interface as net_af_xdp counts them
 * (ETHTOOL_GCHANNELS, read only; none reported: 1); -1 if unknown. */
static int combined_channels(const char *ifc)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifc);
	ifr.ifr_data = (void *)&ch;
	rc = ioctl(fd, SIOCETHTOOL, &ifr);
	close(fd);
	if (rc && errno != EOPNOTSUPP)
		return -1;
	return rc || ch.max_combined == 0 ? 1 : (int)ch.combined_count;
}

static int check_af_xdp(const struct sn_config *cfg, const char *root, char *err, size_t errlen)
{
	const char *ifc = cfg->uplink.af_xdp;
	const unsigned need = cfg->uplink.af_xdp_start_queue + xdp_queues(cfg);
	char path[PATH_MAX];
	int rx, tx;

	if (!host_path(path, root, "/sys/class/net/%s", ifc) || !exists(path))
		return refuse(-ENOENT, err, errlen, "uplink.af_xdp: no network interface %s "
			      "(/sys/class/net/%s; ip link show)", ifc, ifc);
	if (!host_path(path, root, "/sys/class/net/%s/queues", ifc))
		return refuse(-EINVAL, err, errlen, "uplink.af_xdp: path too long");
	rx = count_entries(path, "rx-", NULL);
	tx = count_entries(path, "tx-", NULL);
	if (rx < 0 || tx < 0)
		return refuse(-EINVAL, err, errlen, "uplink.af_xdp: %s: no queue list (/sys/class/"
			      "net/%s/queues): not a network interface with queues", ifc, ifc);
	if (rx < 0 || tx < 0 || (unsigned)rx < need || (unsigned)tx < need)
		return refuse(-EINVAL, err, errlen, "uplink.af_xdp: %s has %d RX and %d TX queues; "
			      "af_xdp_start_queue %u + af_xdp_queues %u needs %u of each (ethtool -L "
			      "%s combined N)", ifc, rx, tx, cfg->uplink.af_xdp_start_queue,
			      xdp_queues(cfg), need, ifc);
	/* The live interface (not a test's fake tree): the PMD's own count. */
	if (!root || !root[0] || !strcmp(root, "/")) {
		int c = combined_channels(ifc);

		if (c >= 0 && (unsigned)c < need)
			return refuse(-EINVAL, err, errlen, "uplink.af_xdp: %s has %d combined "
				      "channel%s (ethtool -l %s; none reported counts as 1, e.g. veth); "
				      "af_xdp_start_queue %u + af_xdp_queues %u needs %u: ethtool -L %s "
				      "combined %u", ifc, c, c == 1 ? "" : "s", ifc,
				      cfg->uplink.af_xdp_start_queue, xdp_queues(cfg), need, ifc, need);
	}
	return 0;
}

int sn_eal_host_check(const struct sn_config *cfg, const char *root, char *huge_dir,
		      size_t huge_len, char *err, size_t errlen)
{
	int rc;

	if (huge_len)
		huge_dir[0] = '\0';
	if (cfg->eal.hugepages &&
	    (rc = check_hugepages(cfg, root, huge_dir, huge_len, err, errlen)))
		return rc;
	if (!cfg->uplink.enabled)
		return 0;
	if (cfg->uplink.kind == SN_UPLINK_PCI)
		return check_pci(root, cfg->uplink.pci, cfg->eal.hugepages, err, errlen);
	if (cfg->uplink.kind == SN_UPLINK_AF_XDP)
		return check_af_xdp(cfg, root, err, errlen);
	return 0;
}

int sn_eal_uplink_name(const struct sn_config *cfg, char *name, size_t len)
{
	const char *s = cfg->uplink.devargs, *comma = strchr(s, ',');
	size_t n = comma ? (size_t)(comma - s) : strlen(s);

	switch (cfg->uplink.kind) {
	case SN_UPLINK_PCI:
		s = cfg->uplink.pci;
		n = strlen(s);
		break;
	case SN_UPLINK_AF_XDP:
		s = "net_af_xdp0";
		n = strlen(s);
		break;
	case SN_UPLINK_VDEV:
		break;
	}
	if (n == 0 || n >= len)
		return -EINVAL;
	memcpy(name, s, n);
	name[n] = '\0';
	return 0;
}

/* extra_args holding opt, alone or as "opt=value". */
static bool extra_has(const struct sn_config *cfg, const char *opt)
{
	size_t n = strlen(opt);

	for (unsigned i = 0; i < cfg->eal.n_extra; i++)
		if (!strncmp(cfg->eal.extra_args[i], opt, n) &&
		    (cfg->eal.extra_args[i][n] == '\0' || cfg->eal.extra_args[i][n] == '='))
			return true;
	return false;
}

/* Arguments that contradict what the config already decides. */
static int check_extra(const struct sn_config *cfg, char *err, size_t errlen)
{
	static const char *const owned[] = { "-m", "--file-prefix", "--lcores", "-l", "--huge-dir",
					     NULL };
	const bool pci = cfg->uplink.enabled && cfg->uplink.kind == SN_UPLINK_PCI;

	for (unsigned i = 0; owned[i]; i++)
		if (extra_has(cfg, owned[i]))
			return refuse(-EINVAL, err, errlen, "eal.extra_args: %s is set from the config "
				      "(eal.memory_mb, eal.file_prefix, eal.*_cpu, eal.huge_dir)",
				      owned[i]);
	if (cfg->eal.hugepages && extra_has(cfg, "--no-huge"))
		return refuse(-EINVAL, err, errlen, "eal.extra_args: --no-huge contradicts "
			      "eal.hugepages true");
	if (!cfg->eal.hugepages && extra_has(cfg, "--socket-mem"))
		return refuse(-EINVAL, err, errlen, "eal.extra_args: --socket-mem needs "
			      "eal.hugepages true");
	if (pci && extra_has(cfg, "--no-pci"))
		return refuse(-EINVAL, err, errlen, "eal.extra_args: --no-pci contradicts uplink.pci");
	if (extra_has(cfg, "-c") || extra_has(cfg, "--main-lcore"))
		return refuse(-EINVAL, err, errlen, "eal.extra_args: %s contradicts the --lcores "
			      "list set from eal.*_cpu (lcore 0, the main one, on eal.main_cpu)",
			      extra_has(cfg, "-c") ? "-c" : "--main-lcore");
	if (extra_has(cfg, "--huge-unlink"))
		return refuse(-EINVAL, err, errlen, "eal.extra_args: --huge-unlink is set from the "
			      "config (always, with eal.hugepages: no hugepage files left behind)");
	if (extra_has(cfg, "--in-memory"))
		return refuse(-EINVAL, err, errlen, "eal.extra_args: --in-memory: schednicd uses "
			      "the EAL runtime directory of eal.file_prefix");
	return 0;
}

/* --lcores: 0 = main, 1..W = workers, W+1 = arbiter (2core, ncore).
 * Several lcores may share one CPU (idle_sleep_us lets them yield). */
static int build_lcores(const struct sn_config *cfg, char *out, char *err, size_t errlen)
{
	size_t o = 0;
	int n = snprintf(out, SN_EAL_LCORES_LEN, "0@%u", cfg->eal.main_cpu);

	for (unsigned k = 0; n >= 0 && (o += (size_t)n) < SN_EAL_LCORES_LEN &&
	     k < cfg->datapath.workers; k++)
		n = snprintf(out + o, SN_EAL_LCORES_LEN - o, ",%u@%u", k + 1,
			     cfg->eal.n_worker_cpus ? cfg->eal.worker_cpus[k] : cfg->eal.worker_cpu);
	if (n >= 0 && o < SN_EAL_LCORES_LEN && cfg->datapath.layout != SN_LAYOUT_1CORE) {
		n = snprintf(out + o, SN_EAL_LCORES_LEN - o, ",%u@%u", cfg->datapath.workers + 1,
			     cfg->eal.arbiter_cpu);
		o += n >= 0 ? (size_t)n : 0;
	}
	if (n < 0 || o >= SN_EAL_LCORES_LEN)
		return refuse(-EINVAL, err, errlen, "eal: the --lcores list exceeds %d bytes",
			      SN_EAL_LCORES_LEN - 1);
	return 0;
}

/* The uplink's device argument into a->dev. */
static int build_dev(const struct sn_config *cfg, struct sn_eal_args *a, char *err, size_t errlen)
{
	const char *extra = cfg->uplink.devargs;
	int n;

	switch (cfg->uplink.kind) {
	case SN_UPLINK_PCI:
		n = snprintf(a->dev, sizeof(a->dev), "%s%s%s", cfg->uplink.pci, extra[0] ? "," : "",
			     extra);
		break;
	case SN_UPLINK_AF_XDP:
		if (cfg->datapath.layout != SN_LAYOUT_1CORE)
			return refuse(-EINVAL, err, errlen, "uplink.af_xdp: datapath.layout \"1core\" "
				      "only (a net_af_xdp TX queue shares its XDP socket with an RX "
				      "queue: one lcore must both poll and transmit)");
		n = snprintf(a->dev, sizeof(a->dev), "net_af_xdp0,iface=%s,start_queue=%u,"
			     "queue_count=%u,busy_budget=%u%s%s", cfg->uplink.af_xdp,
			     cfg->uplink.af_xdp_start_queue, xdp_queues(cfg),
			     cfg->uplink.af_xdp_busy_budget, extra[0] ? "," : "", extra);
		break;
	default:
		n = snprintf(a->dev, sizeof(a->dev), "%s", extra);
		break;
	}
	if (n < 0 || (size_t)n >= sizeof(a->dev))
		return refuse(-EINVAL, err, errlen, "uplink: device arguments longer than %zu bytes",
			      sizeof(a->dev) - 1);
	return 0;
}

int sn_eal_args_build(const struct sn_config *cfg, const char *huge_dir,
		      struct sn_eal_args *a, char *err, size_t errlen)
{
	const bool pci = cfg->uplink.enabled && cfg->uplink.kind == SN_UPLINK_PCI;
	int n = 0, rc;

	memset(a, 0, sizeof(*a));
	if ((rc = check_extra(cfg, err, errlen)) || (rc = build_lcores(cfg, a->lcores, err, errlen)))
		return rc;
	if (cfg->uplink.enabled && (rc = build_dev(cfg, a, err, errlen)))
		return rc;
	snprintf(a->mem, sizeof(a->mem), "%u", cfg->eal.memory_mb);
	a->argv[n++] = "schednicd";
	if (cfg->eal.hugepages) {
		if (!huge_dir || !huge_dir[0] || strlen(huge_dir) >= sizeof(a->huge_dir))
			return refuse(-EINVAL, err, errlen, "eal.hugepages: no hugetlbfs directory");
		snprintf(a->huge_dir, sizeof(a->huge_dir), "%s", huge_dir);
		a->argv[n++] = "--huge-dir";
		a->argv[n++] = a->huge_dir;
		a->argv[n++] = "--huge-unlink=always";
		if (!extra_has(cfg, "--socket-mem")) {
			a->argv[n++] = "-m";
			a->argv[n++] = a->mem;
		}
	} else {
		a->argv[n++] = "--no-huge";
		a->argv[n++] = "-m";
		a->argv[n++] = a->mem;
	}
	if (!pci)
		a->argv[n++] = "--no-pci";
	a->argv[n++] = "--file-prefix";
	a->argv[n++] = (char *)cfg->eal.file_prefix;
	a->argv[n++] = "--lcores";
	a->argv[n++] = a->lcores;
	if (cfg->uplink.enabled) {
		a->argv[n++] = pci ? "-a" : "--vdev";
		a->argv[n++] = a->dev;
	}
	for (unsigned i = 0; i < cfg->eal.n_extra; i++)
		a->argv[n++] = cfg->eal.extra_args[i];
	a->argv[n] = NULL;
	a->argc = n;
	return 0;
}
