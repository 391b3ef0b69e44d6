/* SPDX-License-Identifier: BSD-3-Clause */
/* test_eal.c — EAL argument construction and pre-start host checks
 * (sn_eal.h) without EAL: configs parsed from JSON text (sn_config), the
 * argument vector compared word for word for each memory mode (no-huge,
 * hugepages with -m or --socket-mem) and uplink kind (vdev, PCI, AF_XDP,
 * none), the refusals of contradictory extra_args and layouts; the host
 * checks against fake sysfs/procfs trees built in a temp dir: hugetlbfs
 * mounts (one too long), free pages (eal.memory_mb or --socket-mem), a PCI
 * device missing, unbound, bound to a kernel driver, used as a kernel
 * interface, under vfio-pci without an IOMMU group, under a uio driver
 * without hugepages, and ready; an AF_XDP interface missing, without a
 * queue list, with too few queues, and ready. Exit status 1 if any check
 * failed.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sn_config.h"
#include "sn_eal.h"

#include "sn_check.h"

static char root[PATH_MAX];

static int parse(struct sn_config *cfg, const char *json)
{
	char err[SN_CONFIG_ERR_MAX];
	int rc = sn_config_parse(cfg, json, strlen(json), "test", err, sizeof(err));

	if (rc)
		fprintf(stderr, "parse: %s\n", err);
	return rc;
}

/* The argv of json (huge_dir for hugepage mode) joined by spaces, after
 * "schednicd", into out; or "REFUSED: <message>". */
static void args_of(const char *json, const char *huge_dir, char *out, size_t len)
{
	struct sn_config cfg;
	struct sn_eal_args a;
	char err[SN_CONFIG_ERR_MAX];
	size_t o = 0;

	out[0] = '\0';
	if (parse(&cfg, json)) {
		snprintf(out, len, "PARSE FAILED");
		return;
	}
	snprintf(cfg.eal.file_prefix, sizeof(cfg.eal.file_prefix), "p");
	if (sn_eal_args_build(&cfg, huge_dir, &a, err, sizeof(err))) {
		snprintf(out, len, "REFUSED: %s", err);
	} else {
		CHECK(a.argc > 0 && !strcmp(a.argv[0], "schednicd") && a.argv[a.argc] == NULL);
		for (int i = 1; i < a.argc && o < len; i++)
			o += (size_t)snprintf(out + o, len - o, "%s%s", i > 1 ? " " : "", a.argv[i]);
	}
	sn_config_fini(&cfg);
}

static void expect_args(const char *json, const char *huge_dir, const char *want)
{
	char got[2048];

	args_of(json, huge_dir, got, sizeof(got));
	if (strcmp(got, want))
		fprintf(stderr, "config %s\n  got:  %s\n  want: %s\n", json, got, want);
	CHECK(!strcmp(got, want));
}

static void expect_refused(const char *json, const char *needle)
{
	char got[2048];

	args_of(json, "/mnt/huge", got, sizeof(got));
	if (strncmp(got, "REFUSED: ", 9) || !strstr(got, needle))
		fprintf(stderr, "config %s\n  got:  %s\n  want a refusal with: %s\n", json, got, needle);
	CHECK(!strncmp(got, "REFUSED: ", 9) && strstr(got, needle));
}

static void test_args(void)
{
	/* Memory modes, vdev uplink (the default config). */
	expect_args("{}", NULL, "--no-huge -m 1024 --no-pci --file-prefix p --lcores 0@0,1@1 "
		    "--vdev net_tap0,iface=sn-uplink0");
	expect_args("{\"eal\": {\"hugepages\": true, \"memory_mb\": 64}}", "/mnt/huge",
		    "--huge-dir /mnt/huge --huge-unlink=always -m 64 --no-pci --file-prefix p "
		    "--lcores 0@0,1@1 --vdev net_tap0,iface=sn-uplink0");
	expect_args("{\"eal\": {\"hugepages\": true, \"extra_args\": [\"--socket-mem=512,0\"]}}",
		    "/mnt/huge", "--huge-dir /mnt/huge --huge-unlink=always --no-pci --file-prefix p "
		    "--lcores 0@0,1@1 --vdev net_tap0,iface=sn-uplink0 --socket-mem=512,0");
	/* No uplink: still --no-pci. */
	expect_args("{\"uplink\": null}", NULL, "--no-huge -m 1024 --no-pci --file-prefix p "
		    "--lcores 0@0,1@1");
	/* Layouts in --lcores. */
	expect_args("{\"datapath\": {\"layout\": \"ncore\"}, \"eal\": {\"worker_cpus\": [1, 0], "
		    "\"arbiter_cpu\": 1}, \"uplink\": {\"devargs\": \"net_null0,no-rx=1\"}}", NULL,
		    "--no-huge -m 1024 --no-pci --file-prefix p --lcores 0@0,1@1,2@0,3@1 "
		    "--vdev net_null0,no-rx=1");
	/* PCI: -a instead of --no-pci; short address normalized; devargs appended. */
	expect_args("{\"uplink\": {\"pci\": \"0000:03:00.0\"}}", NULL,
		    "--no-huge -m 1024 --file-prefix p --lcores 0@0,1@1 -a 0000:03:00.0");
	expect_args("{\"uplink\": {\"pci\": \"AF:1F.7\", \"devargs\": \"rx_low_latency=1\"}, "
		    "\"eal\": {\"hugepages\": true}}", "/dev/hugepages",
		    "--huge-dir /dev/hugepages --huge-unlink=always -m 1024 --file-prefix p "
		    "--lcores 0@0,1@1 -a 0000:af:1f.7,rx_low_latency=1");
	/* AF_XDP. */
	expect_args("{\"uplink\": {\"af_xdp\": \"eth1\"}}", NULL,
		    "--no-huge -m 1024 --no-pci --file-prefix p --lcores 0@0,1@1 "
		    "--vdev net_af_xdp0,iface=eth1,start_queue=0,queue_count=1,busy_budget=64");
	expect_args("{\"uplink\": {\"af_xdp\": \"veth-a\", \"af_xdp_start_queue\": 2, "
		    "\"af_xdp_queues\": 1, \"af_xdp_busy_budget\": 0, \"devargs\": \"force_copy=1\"}}",
		    NULL, "--no-huge -m 1024 --no-pci --file-prefix p --lcores 0@0,1@1 --vdev "
		    "net_af_xdp0,iface=veth-a,start_queue=2,queue_count=1,busy_budget=0,force_copy=1");
	/* Extra args come last. */
	expect_args("{\"eal\": {\"extra_args\": [\"--log-level=lib.eal:notice\"]}}", NULL,
		    "--no-huge -m 1024 --no-pci --file-prefix p --lcores 0@0,1@1 "
		    "--vdev net_tap0,iface=sn-uplink0 --log-level=lib.eal:notice");

	/* Refusals. */
	expect_refused("{\"eal\": {\"hugepages\": true, \"extra_args\": [\"--no-huge\"]}}",
		       "--no-huge contradicts eal.hugepages");
	expect_refused("{\"eal\": {\"extra_args\": [\"--socket-mem\", \"64\"]}}",
		       "--socket-mem needs eal.hugepages");
	expect_refused("{\"uplink\": {\"pci\": \"0000:03:00.0\"}, \"eal\": {\"extra_args\": "
		       "[\"--no-pci\"]}}", "--no-pci contradicts uplink.pci");
	expect_refused("{\"eal\": {\"extra_args\": [\"-m\", \"64\"]}}", "-m is set from the config");
	expect_refused("{\"eal\": {\"extra_args\": [\"--file-prefix=x\"]}}",
		       "--file-prefix is set from the config");
	expect_refused("{\"eal\": {\"extra_args\": [\"-c\", \"0x3\"]}}",
		       "eal.extra_args: -c contradicts the --lcores list");
	expect_refused("{\"eal\": {\"extra_args\": [\"--main-lcore=1\"]}}",
		       "eal.extra_args: --main-lcore contradicts the --lcores list");
	expect_refused("{\"eal\": {\"hugepages\": true, \"extra_args\": "
		       "[\"--huge-unlink=never\"]}}", "eal.extra_args: --huge-unlink is set from");
	expect_refused("{\"eal\": {\"extra_args\": [\"--in-memory\"]}}",
		       "eal.extra_args: --in-memory: schednicd uses the EAL runtime directory");
	/* The config refuses it first (the same message, "config: " before). */
	{
		const char *j = "{\"uplink\": {\"af_xdp\": \"eth1\"}, "
				"\"datapath\": {\"layout\": \"2core\"}}";
		struct sn_config cfg;
		char err[SN_CONFIG_ERR_MAX];

		CHECK(sn_config_parse(&cfg, j, strlen(j), "test", err, sizeof(err)) != 0);
		CHECK(strstr(err, "uplink.af_xdp: datapath.layout \"1core\" only") != NULL);
	}
	{
		char got[256];

		args_of("{\"eal\": {\"hugepages\": true}}", "", got, sizeof(got));
		CHECK(!strncmp(got, "REFUSED: eal.hugepages: no hugetlbfs directory", 47));
	}
}

static void test_names(void)
{
	static const struct { const char json[64], name[16]; } cases[] = {
		{ "{}", "net_tap0" },
		{ "{\"uplink\": {\"devargs\": \"net_null0\"}}", "net_null0" },
		{ "{\"uplink\": {\"pci\": \"3:0.1\"}}", "0000:03:00.1" },
		{ "{\"uplink\": {\"af_xdp\": \"eth0\"}}", "net_af_xdp0" },
	};
	struct sn_config cfg;
	char name[64] = "";

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (parse(&cfg, cases[i].json)) {
			CHECK(0);
			continue;
		}
		CHECK(sn_eal_uplink_name(&cfg, name, sizeof(name)) == 0);
		if (strcmp(name, cases[i].name))
			fprintf(stderr, "uplink name of %s: %s, want %s\n", cases[i].json, name,
				cases[i].name);
		CHECK(!strcmp(name, cases[i].name));
		CHECK(sn_eal_uplink_name(&cfg, name, 4) == -EINVAL);
		sn_config_fini(&cfg);
	}
}

/* Config parser refusals of the new keys. */
static void test_config(void)
{
	static const char *const bad[] = {
		"{\"uplink\": {\"pci\": \"0000:03:00.0\", \"af_xdp\": \"eth0\"}}",
		"{\"uplink\": {\"pci\": \"03:00\"}}",
		"{\"uplink\": {\"pci\": \"0000:03:20.0\"}}",
		"{\"uplink\": {\"pci\": \"0000:03:00.8\"}}",
		"{\"uplink\": {\"af_xdp\": \"a,b\"}}",
		"{\"uplink\": {\"devargs\": \"\"}}",
		"{\"eal\": {\"hugepages\": 1}}",
	};
	struct sn_config cfg;
	char err[SN_CONFIG_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = sn_config_parse(&cfg, bad[i], strlen(bad[i]), "t", err, sizeof(err));

		if (rc != -EINVAL)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK(rc == -EINVAL && !strncmp(err, "config: ", 8));
		if (!rc)
			sn_config_fini(&cfg);
	}
	CHECK(parse(&cfg, "{\"uplink\": {\"af_xdp\": \"eth0\"}}") == 0);
	CHECK(cfg.uplink.kind == SN_UPLINK_AF_XDP && cfg.uplink.devargs[0] == '\0');
	sn_config_fini(&cfg);
	CHECK(parse(&cfg, "{}") == 0);
	CHECK(cfg.uplink.kind == SN_UPLINK_VDEV && !cfg.eal.hugepages && !cfg.eal.huge_dir[0]);
	sn_config_fini(&cfg);
}

/* ---- fake host trees ---- */

static void put(const char *rel, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void put(const char *rel, const char *fmt, ...)
{
	char path[PATH_MAX], cmd[PATH_MAX + 32];
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	if (system(cmd)) {
		fprintf(stderr, "%s failed\n", cmd);
		exit(1);
	}
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

static void mkdirs(const char *rel)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s%s'", root, rel);
	CHECK(system(cmd) == 0);
}

static void lnk(const char *target, const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s%s", root, rel);
	unlink(path);
	CHECK(symlink(target, path) == 0);
}

static void clean(void)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	CHECK(system(cmd) == 0);
	CHECK(mkdir(root, 0700) == 0);
}

/* The host check of json under root: 0 or the rc, the message in err. */
static int host(const char *json, char *huge_dir, char *err, size_t errlen)
{
	struct sn_config cfg;
	char dummy[SN_CONFIG_HUGE_DIR_MAX + 1];
	int rc;

	err[0] = '\0';
	if (parse(&cfg, json))
		return -999;
	rc = sn_eal_host_check(&cfg, root, huge_dir ? huge_dir : dummy, SN_CONFIG_HUGE_DIR_MAX + 1,
			       err, errlen);
	sn_config_fini(&cfg);
	return rc;
}

static void expect_host(const char *json, int want_rc, const char *needle)
{
	char err[SN_CONFIG_ERR_MAX];
	int rc = host(json, NULL, err, sizeof(err));

	if (rc != want_rc || (needle && !strstr(err, needle)))
		fprintf(stderr, "host check %s: rc %d (want %d), \"%s\" (want \"%s\")\n", json, rc,
			want_rc, err, needle ? needle : "");
	CHECK(rc == want_rc);
	CHECK(!needle || strstr(err, needle));
}

#define LONG20 "hhhhhhhhhhhhhhhhhhhh"
#define LONG120 LONG20 LONG20 LONG20 LONG20 LONG20 LONG20

static void test_hugepages(void)
{
	const char *hp = "{\"eal\": {\"hugepages\": true, \"memory_mb\": 64}}";
	char dir[SN_CONFIG_HUGE_DIR_MAX + 1], err[SN_CONFIG_ERR_MAX];

	clean();
	put("/proc/mounts", "proc /proc proc rw 0 0\n");
	put("/proc/meminfo", "MemTotal: 1 kB\nHugepagesize:       2048 kB\n");
	expect_host(hp, -EINVAL, "no hugetlbfs mount in /proc/mounts");
	expect_host("{\"eal\": {\"hugepages\": true, \"huge_dir\": \"/mnt/h\"}}", -EINVAL,
		    "eal.huge_dir: /mnt/h is not on a hugetlbfs mount");
	/* No hugepages at all: no mount needed, no check. */
	expect_host("{}", 0, NULL);
	/* The first mount's path does not fit eal.huge_dir's 107 bytes. */
	put("/proc/mounts", "nodev /mnt/" LONG120 " hugetlbfs rw,pagesize=2M 0 0\n");
	expect_host(hp, -EINVAL, "eal.hugepages: hugetlbfs mount /mnt/" LONG120 ": longer than "
		    "107 bytes (EAL --huge-dir): set eal.huge_dir to a shorter one");

	put("/proc/mounts", "proc /proc proc rw 0 0\n"
	    "nodev /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n"
	    "nodev /mnt/huge1g hugetlbfs rw,relatime,pagesize=1024M 0 0\n"
	    "nodev /mnt/hdef hugetlbfs rw,relatime 0 0\n");
	put("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "10\n");
	expect_host(hp, -EINVAL, "10 free 2048 kB hugepages (20 MB) for hugetlbfs /dev/hugepages, "
		    "eal.memory_mb needs 64 MB: reserve at least 22 more (sysctl -w vm.nr_hugepages");
	put("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "32\n");
	CHECK(host(hp, dir, err, sizeof(err)) == 0 && !strcmp(dir, "/dev/hugepages"));
	/* --socket-mem replaces -m: its sum is what must be free. */
	expect_host("{\"eal\": {\"hugepages\": true, \"memory_mb\": 64, \"extra_args\": "
		    "[\"--socket-mem=64,32\"]}}", -EINVAL, "for hugetlbfs /dev/hugepages, "
		    "--socket-mem needs 96 MB: reserve at least 16 more");
	CHECK(host("{\"eal\": {\"hugepages\": true, \"memory_mb\": 4096, \"extra_args\": "
		   "[\"--socket-mem\", \"32,32\"]}}", dir, err, sizeof(err)) == 0);
	expect_host("{\"eal\": {\"hugepages\": true, \"extra_args\": [\"--socket-mem=64,x\"]}}",
		    -EINVAL, "--socket-mem: must be a list of MB per NUMA socket");
	/* A sub-directory of a mount; the 1 GB mount; a mount without pagesize=. */
	CHECK(host("{\"eal\": {\"hugepages\": true, \"memory_mb\": 64, \"huge_dir\": "
		   "\"/dev/hugepages/sn\"}}", dir, err, sizeof(err)) == 0);
	CHECK(!strcmp(dir, "/dev/hugepages/sn"));
	expect_host("{\"eal\": {\"hugepages\": true, \"huge_dir\": \"/mnt/huge1g\"}}", -EINVAL,
		    "the kernel has no 1048576 kB hugepages");
	put("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages", "1\n");
	expect_host("{\"eal\": {\"hugepages\": true, \"huge_dir\": \"/mnt/huge1g\", "
		    "\"memory_mb\": 1024}}", 0, NULL);
	expect_host("{\"eal\": {\"hugepages\": true, \"huge_dir\": \"/mnt/huge1g\", "
		    "\"memory_mb\": 2048}}", -EINVAL, "reserve at least 1 more");
	CHECK(host("{\"eal\": {\"hugepages\": true, \"memory_mb\": 64, \"huge_dir\": "
		   "\"/mnt/hdef\"}}", dir, err, sizeof(err)) == 0 && !strcmp(dir, "/mnt/hdef"));
	/* /mnt/huge1gx is not on /mnt/huge1g. */
	expect_host("{\"eal\": {\"hugepages\": true, \"huge_dir\": \"/mnt/huge1gx\"}}", -EINVAL,
		    "is not on a hugetlbfs mount");
}

#define DEV "/sys/bus/pci/devices/0000:03:00.0"

static void test_pci(void)
{
	const char *pci = "{\"uplink\": {\"pci\": \"0000:03:00.0\"}}";

	clean();
	expect_host(pci, -ENOENT, "uplink.pci: no PCI device 0000:03:00.0");
	mkdirs(DEV);
	mkdirs("/sys/bus/pci/drivers/ixgbe");
	mkdirs("/sys/bus/pci/drivers/vfio-pci");
	mkdirs("/sys/bus/pci/drivers/uio_pci_generic");
	mkdirs("/sys/kernel/iommu_groups/7");
	expect_host(pci, -EINVAL, "is bound to no driver: modprobe vfio-pci && "
		    "dpdk-devbind.py --bind=vfio-pci 0000:03:00.0");
	lnk("../../../../bus/pci/drivers/ixgbe", DEV "/driver");
	expect_host(pci, -EINVAL, "bound to the kernel driver ixgbe, not to vfio-pci or a uio "
		    "driver: dpdk-devbind.py --bind=vfio-pci 0000:03:00.0");
	mkdirs(DEV "/net/enp3s0f0");
	expect_host(pci, -EINVAL, "in use by the kernel as interface enp3s0f0 (driver ixgbe)");
	{
		char path[PATH_MAX + 64];

		snprintf(path, sizeof(path), "%s" DEV "/net/enp3s0f0", root);
		CHECK(rmdir(path) == 0);
		snprintf(path, sizeof(path), "%s" DEV "/net", root);
		CHECK(rmdir(path) == 0);
	}
	lnk("../../../../bus/pci/drivers/vfio-pci", DEV "/driver");
	expect_host(pci, -EINVAL, "has no IOMMU group: enable the IOMMU");
	expect_host(pci, -EINVAL, "enable_unsafe_noiommu_mode");
	lnk("../../../../kernel/iommu_groups/7", DEV "/iommu_group");
	expect_host(pci, 0, NULL);
	expect_host("{\"uplink\": {\"pci\": \"03:00.0\"}}", 0, NULL);
	lnk("../../../../bus/pci/drivers/uio_pci_generic", DEV "/driver");
	expect_host(pci, -EINVAL, "is bound to uio_pci_generic, a uio driver without IOMMU: "
		    "the NIC needs physical addresses, so set eal.hugepages true");
	/* Another address on the same host. */
	expect_host("{\"uplink\": {\"pci\": \"0000:03:00.1\"}}", -ENOENT, "no PCI device");
}

static void test_af_xdp(void)
{
	const char *x = "{\"uplink\": {\"af_xdp\": \"veth0\"}}";

	clean();
	expect_host(x, -ENOENT, "uplink.af_xdp: no network interface veth0");
	mkdirs("/sys/class/net/veth0");
	expect_host(x, -EINVAL, "uplink.af_xdp: veth0: no queue list (/sys/class/net/veth0/queues)");
	mkdirs("/sys/class/net/veth0/queues/rx-0");
	expect_host(x, -EINVAL, "veth0 has 1 RX and 0 TX queues");
	mkdirs("/sys/class/net/veth0/queues/tx-0");
	expect_host(x, 0, NULL);
	expect_host("{\"uplink\": {\"af_xdp\": \"veth0\", \"af_xdp_start_queue\": 1}}", -EINVAL,
		    "af_xdp_start_queue 1 + af_xdp_queues 1 needs 2 of each (ethtool -L veth0");
	mkdirs("/sys/class/net/veth0/queues/rx-1");
	mkdirs("/sys/class/net/veth0/queues/tx-1");
	expect_host("{\"uplink\": {\"af_xdp\": \"veth0\", \"af_xdp_start_queue\": 1}}", 0, NULL);
	/* A vdev uplink and no uplink check nothing. */
	expect_host("{\"uplink\": {\"devargs\": \"net_null0\"}}", 0, NULL);
	expect_host("{\"uplink\": null}", 0, NULL);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/sn-test-eal-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	test_args();
	test_names();
	test_config();
	test_hugepages();
	test_pci();
	test_af_xdp();
	{
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		CHECK(system(cmd) == 0);
	}
	return sn_check_exit("test_eal");
}
