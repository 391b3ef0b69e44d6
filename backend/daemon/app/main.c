/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c — schednicd: command line, EAL, lifecycle.
 *
 * Threads (doc/threads.md): the main lcore runs the control plane —
 * sn_rpc_poll() with a 50 ms timeout, so signals and "shutdown" are
 * noticed within 50 ms; worker lcores (one; layout ncore: W) run
 * sn_switch_worker(), the busy-polling datapath (layouts 2core/ncore:
 * plus the arbiter lcore); DPDK's vhost-events thread runs the vhost-user
 * callbacks (sn_port_vhost.c). Start order: config, host checks and EAL
 * arguments (sn_eal.h), EAL, mempool,
 * registry, switch, uplink, RPC, ports, worker. Stop order is the
 * reverse, with the worker stopped first so that port teardown never
 * races the datapath; finally rte_eal_cleanup() and the DPDK runtime
 * directory is removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_version.h>

#include "sn_classify.h"
#include "sn_config.h"
#include "sn_cpufair.h"
#include "sn_ctl.h"
#include "sn_eal.h"
#include "sn_eal_log.h"
#include "sn_fdlimit.h"
#include "sn_pipeline.h"
#include "sn_policy.h"
#include "sn_log.h"
#include "sn_port.h"
#include "sn_port_quota.h"
#include "sn_reload.h"
#include "sn_rpc.h"
#include "sn_sdnotify.h"
#include "sn_switch.h"
#include "sn_uplink.h"

#ifndef SN_VERSION
#define SN_VERSION "0.0.0"
#endif

extern const char sn_rpc_api_json[];

static volatile sig_atomic_t g_stop, g_reload;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

/* SIGHUP: the main loop reloads the config (serve), not the handler. */
static void on_hup(int sig)
{
	(void)sig;
	g_reload = 1;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: schednicd [--config FILE] [--check-config] [--print-default-config]\n"
		"                 [--version] [--help]\n"
		"\n"
		"schednicd is the schednic host software NIC: a vhost-user backend that\n"
		"switches VM traffic (L2 learning switch) between vhost-user ports and an\n"
		"uplink ethdev, controlled over JSON-RPC on a unix socket (schednicctl).\n"
		"\n"
		"  --config FILE           JSON configuration (keys missing take the defaults)\n"
		"  --check-config          parse and validate the configuration and check the\n"
		"                          host for it (hugepages, uplink device), exit 0/1\n"
		"  --print-default-config  print the embedded default configuration\n"
		"  --version               print versions and exit\n"
		"  --help                  this text\n"
		"\n"
		"Stops cleanly on SIGINT, SIGTERM or the RPC method \"shutdown\". SIGHUP (or\n"
		"the RPC method \"config.reload\") re-reads the --config file and applies\n"
		"its ports and policy.\n");
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

/* The state directory (records of deferred TX queues) for this process
 * alone: an exclusive flock(2) on dir/schednicd.lock, which holds the
 * owner's pid; a second daemon on the same directory would overwrite the
 * first one's records. The lock goes with the process (exit or kill).
 * The lock file's fd (open while the daemon runs), or -1 after a log line
 * naming the owner or the cause. */
static int lock_state_dir(const char *dir)
{
	char path[PATH_MAX], pid[24] = "";
	ssize_t n;
	int fd, rc;

	if (snprintf(path, sizeof(path), "%s/schednicd.lock", dir) >= (int)sizeof(path))
		return sn_log_err("control.state_dir %s: path too long", dir), -1;
	rc = sn_ports_mkdir_parents(path);
	if (rc)
		return sn_log_err("control.state_dir %s: cannot create it: %s", dir, strerror(-rc)), -1;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return sn_log_err("control.state_dir %s: cannot open %s: %s", dir, path,
			      strerror(errno)), -1;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		rc = errno;
		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		if (rc == EWOULDBLOCK)
			sn_log_err("control.state_dir %s is in use by another schednicd (pid %s, lock "
			       "%s): give each daemon its own state_dir", dir,
			       pid[0] ? pid : "unknown", path);
		else
			sn_log_err("control.state_dir %s: cannot lock %s: %s", dir, path, strerror(rc));
		close(fd);
		return -1;
	}
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) || pwrite(fd, pid, (size_t)n, 0) != n)
		sn_log_err("control.state_dir %s: cannot write the pid to %s: %s", dir, path,
		       strerror(errno));
	return fd;
}

/* The policy table (from the config's "policy") and the
 * scheduled stage of the worker. 0, or 1 after a log line. */
static int policy_setup(const struct sn_config *cfg, struct rte_mempool *mp,
			struct sn_ports *reg, struct sn_policy_store **store,
			struct sn_pipeline **pl)
{
	struct sn_policy pol;
	char err[SN_CONFIG_ERR_MAX];
	json_t *j = NULL;

	if (cfg->policy_json) {
		j = json_loads(cfg->policy_json, 0, NULL);
		if (!j) {
			sn_log_err("policy: out of memory");
			return 1;
		}
	}
	if (sn_policy_parse(j, &pol, err, sizeof(err))) {
		json_decref(j);
		sn_log_err("config: %s", err);
		return 1;
	}
	json_decref(j);
	*store = sn_policy_store_create(&pol);
	if (!*store) {
		sn_log_err("policy: %s", strerror(errno));
		return 1;
	}
	/* The NBA splits aggregates over the worker lcores. */
	if (sn_policy_store_set_workers(*store, cfg->datapath.workers)) {
		sn_log_err("policy: cannot split aggregates over %u workers", cfg->datapath.workers);
		return 1;
	}
	/* Wheel: 4 us slots, 65536 of them (262 ms horizon: the most queueing
	 * delay a rate limit adds); one pool node per mbuf covers the worst
	 * case of one frame per node. Link emulation may catch up after the
	 * worker was descheduled for up to 100 ms (shared 2-core hosts); a
	 * longer stall resets the link clock and is counted (link_resets).
	 * After the arbiter found its scheduler empty, the link restarts at
	 * that scan (PSPAT Fig. 5 line 14), at most one wheel slot (4 us, the
	 * shaping's time resolution) before the scan that finds traffic: a
	 * burst that arrived between two scans leaves in one. */
	*pl = sn_pipeline_create(&(struct sn_pipeline_config){
		.granularity_ns = 4000, .slots = 65536,
		.pool_nodes = mp->size, .mbox_size = 512, .queue_len = 1024,
		.slack_ns = 100000000, .idle_credit_ns = 4000, .max_flows = cfg->datapath.max_flows,
		.split = cfg->datapath.layout != SN_LAYOUT_1CORE, .reg = reg,
		.workers = cfg->datapath.workers, .burst = cfg->datapath.burst,
		.idle_sleep_us = cfg->datapath.idle_sleep_us }, *store);
	if (!*pl) {
		sn_log_err("pipeline: %s", strerror(errno));
		return 1;
	}
	return 0;
}

/* sn_port_quota_policy_fn: port name's quota overrides in the policy in
 * force (store: the policy store). */
static const uint32_t *policy_quota(void *store, const char *name)
{
	const struct sn_policy_port *pp = sn_policy_port_find(sn_policy_main(store), name);

	return pp ? pp->quota : NULL;
}

/* The ports' budgets (sn_port_quota.h): the mbuf quota covers the pool
 * but for the uplink's RX share (uplink_rxq RX queues, 0 = no uplink),
 * the lcores' mempool caches and the workers' recycle stashes. 0, or 1
 * after a log line. */
static int quota_setup(const struct sn_config *cfg, struct sn_ports *reg,
		       const struct rte_mempool *mp, struct sn_policy_store *store,
		       unsigned uplink_rxq)
{
	struct sn_port_quota_env env = {
		.mbufs_reserve = cfg->quota.mbufs_reserve,
		.max_ports = cfg->datapath.max_ports, .burst = cfg->datapath.burst,
		.auto_backlog = sn_switch_backlog_quota_auto(sn_config_port_slots, cfg->datapath.burst),
		.auto_wheel = sn_pipeline_wheel_quota_auto(mp->size, sn_config_port_slots,
							   cfg->datapath.burst),
		.auto_flows = sn_classify_flows_quota_auto(cfg->datapath.max_flows,
							   sn_config_port_slots, cfg->datapath.burst),
		.auto_macs = sn_mac_quota_auto(cfg->datapath.mac_table_size, cfg->datapath.max_ports),
		.mac_table_size = cfg->datapath.mac_table_size,
	};
	/* a cache holds up to 1.5 times its size before it flushes */
	const uint64_t caches = (uint64_t)rte_lcore_count() * (mp->cache_size * 3 / 2 + 1);
	const uint64_t stashes = (uint64_t)cfg->datapath.workers * 2 * SN_CONFIG_BURST_MAX;
	uint64_t kept;
	int rc;

	memcpy(env.limit, cfg->quota.limit, sizeof(env.limit));
	env.uplink_mbufs = uplink_rxq ? sn_config_uplink_mbufs(cfg, uplink_rxq) : 0;
	kept = env.uplink_mbufs + caches + stashes;
	if (mp->size <= kept + (uint64_t)cfg->datapath.burst * 2) {
		sn_log_err("datapath.mbufs: %u mbufs leave no guest share: the uplink's RX share (%u), "
		       "the mempool caches (%llu) and the recycle stashes (%llu) take %llu "
		       "(raise datapath.mbufs or use \"auto\")", mp->size, env.uplink_mbufs,
		       (unsigned long long)caches, (unsigned long long)stashes,
		       (unsigned long long)kept);
		return 1;
	}
	env.mbuf_total = (uint32_t)(mp->size - kept);
	rc = sn_ports_quota_setup(reg, &env, policy_quota, store);
	if (rc) {
		sn_log_err("quota: %s", strerror(-rc));
		return 1;
	}
	sn_log("quota: %u mbufs shared by the ports (pool %u, uplink RX share %u, "
	       "caches and stashes %llu)", env.mbuf_total, mp->size, env.uplink_mbufs,
	       (unsigned long long)(caches + stashes));
	sn_log("quota: auto per port: %u backlog entries, %u wheel nodes and %u flow entries "
	       "per worker, %u MAC entries (%u port slots)", env.auto_backlog, env.auto_wheel,
	       env.auto_flows, env.auto_macs, sn_config_port_slots);
	return 0;
}

/* The host checks of cfg (sn_eal.h; root from SN_HOST_ROOT, a test
 * hook) and the hugetlbfs directory they resolve into huge_dir[len].
 * 0, or 1 after printing the refusal. */
static int host_check(const struct sn_config *cfg, char *huge_dir, size_t len)
{
	char err[SN_CONFIG_ERR_MAX];
	const char *root = getenv(SN_EAL_HOST_ROOT_ENV);

	if (root && root[0])
		fprintf(stderr, "schednicd: %s=%s: host checks read that tree, not this host's\n",
			SN_EAL_HOST_ROOT_ENV, root);
	if (sn_eal_host_check(cfg, root, huge_dir, len, err, sizeof(err))) {
		fprintf(stderr, "schednicd: %s\n", err);   /* may exceed sn_log's line */
		return 1;
	}
	return 0;
}

/* EAL init with the arguments built from cfg into *a (the caller's, alive
 * while the EAL runs); the runtime directory's path in
 * runtime_dir[PATH_MAX]. 0, or -1 after a log line (EAL not running). */
static int eal_start(struct sn_config *cfg, struct sn_eal_args *a, char *runtime_dir)
{
	char huge_dir[SN_CONFIG_HUGE_DIR_MAX + 1], err[SN_CONFIG_ERR_MAX];

	if (!strcmp(cfg->eal.file_prefix, "auto"))
		snprintf(cfg->eal.file_prefix, sizeof(cfg->eal.file_prefix), "schednic-%ld", (long)getpid());
	if (host_check(cfg, huge_dir, sizeof(huge_dir)))
		return -1;
	if (sn_eal_args_build(cfg, huge_dir, a, err, sizeof(err))) {
		fprintf(stderr, "schednicd: %s\n", err);
		return -1;
	}
	if (cfg->eal.hugepages)
		sn_log("memory: %u MB of hugepages from %s", cfg->eal.memory_mb, huge_dir);
	if (sn_eal_log_init())
		sn_log_warn("dpdk: cannot route its log through schednicd's (it goes to stdout)");
	if (rte_eal_init(a->argc, a->argv) < 0) {
		const char *dir = rte_eal_get_runtime_dir();
		size_t dl = dir ? strlen(dir) : 0, pl = strlen(cfg->eal.file_prefix);

		sn_log_err("EAL init failed: %s", rte_strerror(rte_errno));
		/* A failed init may already have created our runtime dir. */
		if (dl > pl && !strcmp(dir + dl - pl, cfg->eal.file_prefix) && dir[dl - pl - 1] == '/')
			nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
		return -1;
	}
	snprintf(runtime_dir, PATH_MAX, "%s", rte_eal_get_runtime_dir());
	return 0;
}

/* The worker lcores (workers[nw]) and, in layouts 2core/ncore, the
 * arbiter's (else RTE_MAX_LCORE), in EAL order. 0, or -1 after a log line. */
static int find_lcores(const struct sn_config *cfg, const char *lcores, unsigned *workers,
		       unsigned *arbiter)
{
	const unsigned nw = cfg->datapath.workers;

	for (unsigned k = 0; k < nw; k++) {
		workers[k] = rte_get_next_lcore(k ? workers[k - 1] : (unsigned)-1, 1, 0);
		if (workers[k] >= RTE_MAX_LCORE) {
			sn_log_err("no worker lcore %u (EAL --lcores %s)", k, lcores);
			return -1;
		}
	}
	*arbiter = RTE_MAX_LCORE;
	if (cfg->datapath.layout != SN_LAYOUT_1CORE) {
		*arbiter = rte_get_next_lcore(workers[nw - 1], 1, 0);
		if (*arbiter >= RTE_MAX_LCORE) {
			sn_log_err("no arbiter lcore (EAL --lcores %s)", lcores);
			return -1;
		}
	}
	return 0;
}

/* Per worker: its CPU fair dropping instance (cfs[k], cpu_fair_pct > 0)
 * and its switch (sws[k]; worker 0's owns the shared MAC table). 0, or
 * -1 after a log line with what was made left in cfs/sws for the
 * caller to free. */
static int workers_create(const struct sn_config *cfg, struct sn_ports *reg,
			  struct rte_mempool *mp, struct sn_pipeline *pl,
			  struct sn_cpufair **cfs, struct sn_switch **sws)
{
	const unsigned nw = cfg->datapath.workers;

	/* CPU fair dropping: one instance per worker lcore, owned by it (its
	 * own CPU time, the flows of the queues it polls; sn_cpufair.h). */
	for (unsigned k = 0; cfg->datapath.cpu_fair_pct && k < nw; k++) {
		cfs[k] = sn_cpufair_create(&(struct sn_cpufair_cfg){
			.budget_pct = cfg->datapath.cpu_fair_pct,
			.max_flows = cfg->datapath.max_flows,
			.n_slots = sn_config_port_slots });
		if (!cfs[k]) {
			sn_log_err("cpu fair dropping: %s", strerror(errno));
			return -1;
		}
	}
	for (unsigned k = 0; k < nw; k++) {
		sws[k] = sn_switch_create(&(struct sn_switch_config){
			.burst = cfg->datapath.burst,
			.mac_table_size = cfg->datapath.mac_table_size,
			.mac_aging_s = cfg->datapath.mac_aging_s,
			.idle_sleep_us = cfg->datapath.idle_sleep_us,
			.pipeline = sn_pipeline_worker(pl, k), .worker = k,
			.cpufair = cfs[k],
			.mac_move = cfg->datapath.mac_move_any ? SN_MAC_MOVE_ANY
							       : SN_MAC_MOVE_VM_STICKY,
			.share = k ? sws[0] : NULL }, reg, mp);
		if (!sws[k]) {
			sn_log_err("switch: %s", strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* sn_port_announce_fn: the shared MAC table learns the guest's MAC on p. */
static int announce(void *sw, const struct sn_port *p, const uint8_t mac[6])
{
	return sn_switch_learn(sw, p, mac);
}

/* sn_port_mac_hooks: static entries and MAC budgets follow the ports. */
static void mac_port_added(void *sw, const struct sn_port *p)
{
	sn_switch_port_added(sw, p);
}

static void mac_port_deleted(void *sw, uint16_t slot)
{
	sn_switch_port_deleted(sw, slot);
}

static const struct sn_port_mac_hooks mac_hooks = {
	.added = mac_port_added, .deleted = mac_port_deleted,
};

/* The control server on cfg's socket with every method registered
 * (handler context ctl); NULL after a log line. */
static struct sn_rpc_server *control_start(const struct sn_config *cfg, struct sn_ctl *ctl)
{
	struct sn_rpc_server *srv;

	if (sn_ports_mkdir_parents(cfg->control.socket)) {
		sn_log_err("control.socket: cannot create the directory of %s", cfg->control.socket);
		return NULL;
	}
	srv = sn_rpc_server_create(&(struct sn_rpc_config){
		.path = cfg->control.socket,
		.max_request_bytes = cfg->control.max_request_bytes,
		.max_clients = cfg->control.max_clients,
		.api_json = sn_rpc_api_json });
	if (!srv) {
		sn_log_err("control socket %s: %s", cfg->control.socket, strerror(errno));
		return NULL;
	}
	if (sn_ctl_register(srv, ctl)) {
		sn_log_err("control: handler registration failed");
		sn_rpc_server_destroy(srv);
		return NULL;
	}
	return srv;
}

/* The config's vhost-user ports (owned by the file: config.reload
 * changes them). 0, or -1 after a log line. */
static int config_ports_add(const struct sn_config *cfg, struct sn_ports *reg)
{
	for (unsigned i = 0; i < cfg->n_ports; i++) {
		const struct sn_config_port *p = &cfg->ports[i];
		int err = sn_reload_port_add(reg, p);

		if (err) {
			sn_log_err("config: ports[%u] (%s, %s): %s", i, p->name, p->path, strerror(-err));
			return -1;
		}
	}
	return 0;
}

/* Launch worker k's loop on lcore workers[k] (counted in *n_running) and
 * the arbiter's, if any (*arbiter_running). 0, or -1 after a log line:
 * the caller stops whatever runs (workers that started must all stop
 * together, sn_pipeline_drain). */
static int launch(const struct sn_config *cfg, struct sn_switch **sws, const unsigned *workers,
		  struct sn_pipeline *pl, unsigned arbiter, unsigned *n_running,
		  bool *arbiter_running)
{
	for (unsigned k = 0; k < cfg->datapath.workers; k++) {
		if (rte_eal_remote_launch(sn_switch_worker, sws[k], workers[k])) {
			sn_log_err("cannot launch worker %u on lcore %u", k, workers[k]);
			return -1;
		}
		(*n_running)++;
	}
	if (arbiter != RTE_MAX_LCORE) {
		if (rte_eal_remote_launch(sn_pipeline_arbiter_main, pl, arbiter)) {
			sn_log_err("cannot launch the arbiter on lcore %u", arbiter);
			return -1;
		}
		*arbiter_running = true;
		sn_log("layout %s: arbiter lcore %u on cpu %u", cfg->datapath.layout_name, arbiter,
		       cfg->eal.arbiter_cpu);
	}
	return 0;
}

/* The watchdog's view of the datapath: each worker's loop counter, then
 * the arbiter's when it has a lcore of its own. */
static void watchdog_tick(struct sn_sdnotify *sd, const struct sn_pipeline *pl, unsigned nw,
			  bool arbiter_running, uint64_t now)
{
	static char names[SN_SDNOTIFY_MAX_THREADS][16];   /* MAIN only */
	uint64_t loops[SN_SDNOTIFY_MAX_THREADS];
	const char *name[SN_SDNOTIFY_MAX_THREADS];
	struct sn_pipeline_thread_stats t, at;
	unsigned n = 0;

	if (!sn_sdnotify_due(sd, now))
		return;
	for (unsigned k = 0; k < nw && n < SN_SDNOTIFY_MAX_THREADS - 1; k++) {
		sn_pipeline_worker_thread_stats(pl, k, &t);
		snprintf(names[n], sizeof(names[n]), "worker %u", k);
		name[n] = names[n];
		loops[n++] = t.loops;
	}
	if (arbiter_running) {
		sn_pipeline_thread_stats(pl, &t, &at);
		name[n] = "the arbiter";
		loops[n++] = at.loops;
	}
	sn_sdnotify_tick(sd, now, loops, name, n);
}

/* The control loop until a signal or "shutdown" (SIGHUP: a reload, in
 * this loop): 0, or 1 when the control socket failed (logged). */
static int serve(struct sn_rpc_server *srv, struct sn_policy_store *pol_store,
		 struct sn_reload *rl, struct sn_sdnotify *sd, const struct sn_pipeline *pl,
		 unsigned nw, bool arbiter_running, const char *status)
{
	while (!g_stop) {
		if (g_reload) {
			g_reload = 0;
			sn_sdnotify_reloading();
			sn_reload_signal(rl);
			sn_sdnotify_ready(status);
		}
		/* 10 ms: the NBA periods (update_ms) are met within that. */
		int n = sn_rpc_poll(srv, 10);
		const uint64_t now = sn_ctl_now_ns();

		sn_policy_tick(pol_store, now);   /* aggregates (NBA) */
		watchdog_tick(sd, pl, nw, arbiter_running, now);

		if (n < 0 && n != -EINTR) {
			sn_log_err("control socket failed: %s", strerror(-n));
			return 1;
		}
	}
	return 0;
}

static int run(struct sn_config *cfg, const char *config_path)
{
	struct sn_eal_args eal;
	char runtime_dir[PATH_MAX] = "", uplink_name[64];
	struct rte_mempool *mp = NULL;
	struct sn_ports *reg = NULL;
	const unsigned nw = cfg->datapath.workers;
	struct sn_switch *sws[SN_CONFIG_WORKERS_MAX] = { NULL };
	unsigned workers[SN_CONFIG_WORKERS_MAX];
	unsigned n_running = 0;
	struct sn_policy_store *pol_store = NULL;
	struct sn_pipeline *pl = NULL;
	struct sn_cpufair *cfs[SN_CONFIG_WORKERS_MAX] = { NULL };   /* one per worker */
	struct sn_rpc_server *srv = NULL;
	struct sn_ctl ctl = { .stop = &g_stop };
	struct sn_reload *rl = NULL;
	struct sn_sdnotify sd;
	char status[160];
	bool uplink_open = false, arbiter_running = false;
	unsigned arbiter = RTE_MAX_LCORE;
	uint16_t uplink_port = 0;
	int rc = 1, state_lock = -1;

	if (cfg->control.state_dir[0]) {
		state_lock = lock_state_dir(cfg->control.state_dir);
		if (state_lock < 0)
			return 1;
	}
	rc = sn_sdnotify_init(&sd);
	if (rc < 0) {
		sn_log_err("watchdog: WATCHDOG_USEC: %s", strerror(-rc));
		if (state_lock >= 0)
			close(state_lock);
		return 1;
	}
	rc = 1;
	/* The file as given, before eal_start resolves "auto" in it. */
	rl = sn_reload_create(config_path, cfg, &ctl);
	if (!rl) {
		sn_log_err("reload: %s", strerror(errno));
		if (state_lock >= 0)
			close(state_lock);
		return 1;
	}
	if (eal_start(cfg, &eal, runtime_dir)) {
		sn_reload_destroy(rl);
		if (state_lock >= 0)
			close(state_lock);
		return 1;
	}
	ctl.start_ns = sn_ctl_now_ns();
	if (find_lcores(cfg, eal.lcores, workers, &arbiter))
		goto out_eal;
	mp = rte_pktmbuf_pool_create("sn_mbufs", cfg->datapath.mbufs, cfg->datapath.mbuf_cache,
				     0, RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (!mp) {
		sn_log_err("mempool of %u mbufs: %s (raise eal.memory_mb?)", cfg->datapath.mbufs,
		       rte_strerror(rte_errno));
		goto out_eal;
	}
	reg = sn_ports_create();
	if (!reg) {
		sn_log_err("port registry: %s", strerror(errno));
		goto out_mp;
	}
	if (sn_ports_set_workers(reg, nw)) {
		sn_log_err("port registry: %u workers refused", nw);
		goto out_ports;
	}
	static_assert(SN_CONFIG_STATE_DIR_MAX == SN_PORT_STATE_DIR_MAX, "one state_dir bound");
	if (sn_ports_set_state_dir(reg, cfg->control.state_dir)) {
		sn_log_err("port registry: state_dir %s refused", cfg->control.state_dir);
		goto out_ports;
	}
	if (policy_setup(cfg, mp, reg, &pol_store, &pl))
		goto out_ports;
	if (workers_create(cfg, reg, mp, pl, cfs, sws))
		goto out_switch;
	/* A migrated guest's MAC follows it (sn_port_migrate.c); the ports,
	 * hence the hook, go before the switches. */
	sn_ports_set_announce(reg, announce, sws[0]);
	sn_ports_set_mac_hooks(reg, &mac_hooks, sws[0]);
	ctl.reg = reg;
	ctl.control_socket = cfg->control.socket;
	ctl.sw = sws[0];
	ctl.mp = mp;
	ctl.policy = pol_store;
	ctl.pipeline = pl;
	ctl.cpufair = cfs;
	ctl.n_cpufair = cfg->datapath.cpu_fair_pct ? nw : 0;
	if (cfg->uplink.enabled) {
		struct sn_uplink_info up;
		const uint16_t n_txq =
			(uint16_t)(cfg->datapath.layout == SN_LAYOUT_1CORE ? 1 : nw + 1);

		/* The ethdev's name for the uplink kind (a PCI one: its address). */
		if (sn_eal_uplink_name(cfg, uplink_name, sizeof(uplink_name))) {
			/* sn_config refuses an empty or too long vdev name */
			sn_log_err("uplink: no ethdev name for the uplink (uplink.devargs \"%s\")",
			       cfg->uplink.devargs);
			goto out_switch;
		}
		if (sn_uplink_open(&(struct sn_uplink_params){
				.devargs = uplink_name, .mp = mp,
				.rx_desc = (uint16_t)cfg->uplink.rx_desc,
				.tx_desc = (uint16_t)cfg->uplink.tx_desc,
				/* TX queue k: worker k; nw: the arbiter */
				.n_txq = n_txq,
				.workers = (uint16_t)nw,
				.rx_queues = (uint16_t)cfg->uplink.rx_queues,
				.pci = cfg->uplink.kind == SN_UPLINK_PCI }, &up))
			goto out_switch;
		uplink_port = up.port_id;
		uplink_open = true;
		ctl.uplink_txq_used = n_txq;
		if (quota_setup(cfg, reg, mp, pol_store, up.n_rxq))
			goto out_switch;
		if (sn_ports_add_uplink(reg, cfg->uplink.name, uplink_port, up.n_rxq))
			goto out_switch;
	}
	if (!cfg->uplink.enabled && quota_setup(cfg, reg, mp, pol_store, 0))
		goto out_switch;
	srv = control_start(cfg, &ctl);
	if (!srv)
		goto out_switch;
	if (sn_reload_register(srv, rl)) {
		sn_log_err("control: config.reload registration failed");
		goto out_rpc;
	}
	if (config_ports_add(cfg, reg))
		goto out_rpc;
	if (launch(cfg, sws, workers, pl, arbiter, &n_running, &arbiter_running))
		goto out_rpc;
	sn_log("running: control socket %s, %u worker lcore%s (--lcores %s), %u mbufs",
	       cfg->control.socket, nw, nw > 1 ? "s" : "", eal.lcores, cfg->datapath.mbufs);
	/* Ready: the EAL, the ports of the file and the control socket are up. */
	snprintf(status, sizeof(status), "running: control socket %s, %u worker%s",
		 cfg->control.socket, nw, nw > 1 ? "s" : "");
	sn_sdnotify_ready(status);

	if (serve(srv, pol_store, rl, &sd, pl, nw, arbiter_running, status)) {
		sn_sdnotify_stopping();
		goto out_rpc;
	}
	rc = 0;
	sn_sdnotify_stopping();
	sn_log("stopping");

out_rpc:
	/* The arbiter first: the worker's drain then frees, on the worker,
	 * every frame the arbiter held (sn_pipeline.h). */
	if (arbiter_running) {
		sn_pipeline_arbiter_stop(pl);
		rte_eal_wait_lcore(arbiter);
	}
	/* Every worker is told first: in ncore their drains meet. */
	for (unsigned k = 0; k < n_running; k++)
		sn_switch_stop(sws[k]);
	for (unsigned k = 0; k < n_running; k++)
		rte_eal_wait_lcore(workers[k]);
	sn_rpc_server_destroy(srv);
out_switch:
	/* Worker stopped: ports (uplink included) can go in any order. */
	sn_ports_destroy(reg);
	reg = NULL;
	if (uplink_open)
		sn_uplink_close(uplink_port);
	for (unsigned k = nw; k-- > 0;)   /* sws[0] (the MAC table) last */
		sn_switch_destroy(sws[k]);
out_ports:
	sn_ports_destroy(reg);
	/* Worker stopped: frees the frames the shaper still held. */
	sn_pipeline_destroy(pl);
	for (unsigned k = 0; k < nw; k++)
		sn_cpufair_free(cfs[k]);
	sn_policy_store_destroy(pol_store);
out_mp:
	rte_mempool_free(mp);
out_eal:
	rte_eal_cleanup();
	if (runtime_dir[0])
		nftw(runtime_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	if (state_lock >= 0)
		close(state_lock);
	sn_reload_destroy(rl);
	sn_log("stopped (exit %d)", rc);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", no_argument, NULL, 'k' },
		{ "print-default-config", no_argument, NULL, 'p' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL;
	bool check = false;
	struct sn_config cfg;
	char err[SN_CONFIG_ERR_MAX];
	struct sigaction sa;
	int c, rc;

	while ((c = getopt_long(argc, argv, "c:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config_path = optarg;
			break;
		case 'k':
			check = true;
			break;
		case 'p':
			fwrite(sn_default_config, 1, sn_default_config_len, stdout);
			return fflush(stdout) ? 1 : 0;
		case 'V':
			printf("schednicd %s (%s, API 1)%s\n", SN_VERSION, rte_version(),
			       sn_switch_test_hooks());
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "schednicd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (config_path)
		rc = sn_config_load(&cfg, config_path, err, sizeof(err));
	else
		rc = sn_config_parse(&cfg, sn_default_config, sn_default_config_len,
				     "(default)", err, sizeof(err));
	if (!rc && (rc = sn_fdlimit_raise(&cfg, err, sizeof(err))) > 0) {
		fprintf(stderr, "schednicd: %s\n", err);   /* a warning: runs */
		rc = 0;
	}
	if (rc)
		sn_config_fini(&cfg);
	if (rc) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (check) {
		/* What eal_start() checks before rte_eal_init(), EAL not started. */
		char huge_dir[SN_CONFIG_HUGE_DIR_MAX + 1];
		static struct sn_eal_args a;   /* large */

		if (!strcmp(cfg.eal.file_prefix, "auto"))
			snprintf(cfg.eal.file_prefix, sizeof(cfg.eal.file_prefix), "schednic-%ld",
				 (long)getpid());
		rc = host_check(&cfg, huge_dir, sizeof(huge_dir));
		if (!rc && sn_eal_args_build(&cfg, huge_dir, &a, err, sizeof(err))) {
			fprintf(stderr, "schednicd: %s\n", err);
			rc = 1;
		}
		if (rc) {
			sn_config_fini(&cfg);
			return 1;
		}
		fprintf(stderr, "config: ok (%s)\n", config_path ? config_path : "embedded default");
		sn_config_fini(&cfg);
		return 0;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;   /* no SA_RESTART: poll() returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_hup;
	sigaction(SIGHUP, &sa, NULL);   /* reload (systemd ExecReload) */
	signal(SIGPIPE, SIG_IGN);

	rc = run(&cfg, config_path);
	sn_config_fini(&cfg);
	return rc;
}
