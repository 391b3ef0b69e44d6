/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port.c — the port registry: slots, RCU publication, adding and
 * deleting vhost-user ports and the uplink, counters, and the delivery
 * of frames to a vhost-user port's RX queues.
 *
 * Ports live in 64 slots. The main thread owns the registry (a slot array
 * under reg->lock, which the vhost thread also takes to find a port by
 * socket path) and publishes a fresh immutable snapshot after every
 * change (copy, rcu_assign_pointer, synchronize_rcu, free the old one):
 * the worker never takes a lock (liburcu QSBR). A vhost-user port is a
 * DPDK vhost driver on a unix socket: server mode creates the socket,
 * client mode (RTE_VHOST_USER_CLIENT) connects to it and the library
 * reconnects by itself when the peer comes back. Port state follows the
 * library callbacks (sn_port_vhost.c); sn_port.h says who writes what.
 */
#include "sn_port_internal.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <linux/virtio_net.h>

#include <netinet/in.h>

#include <rte_eth_vhost.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_jhash.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_vhost.h>
#include <urcu-qsbr.h>

#include "sn_log.h"
#include "sn_mac.h"
#include "sn_uplink.h"
#include "sn_vqtx.h"

const char *const sn_port_owner_names[SN_PORT_OWNER_MAX] = {
	[SN_PORT_OWNER_RPC] = "rpc",
	[SN_PORT_OWNER_FILE] = "file",
};

const char *const sn_drop_names[SN_DROP_MAX] = {
	[SN_DROP_NO_MBUF] = "no_mbuf",
	[SN_DROP_RING_FULL] = "ring_full",
	[SN_DROP_UNKNOWN_DST] = "unknown_dst",
	[SN_DROP_MALFORMED] = "malformed",
	[SN_DROP_PORT_DOWN] = "port_down",
	[SN_DROP_HAIRPIN] = "hairpin",
	[SN_DROP_GSO_FAILED] = "gso_failed",
	[SN_DROP_SPOOFED] = "spoofed",
	[SN_DROP_SPOOFED_ARP] = "spoofed_arp",
	[SN_DROP_SPOOFED_ND] = "spoofed_nd",
	[SN_DROP_QUOTA_BACKLOG] = "quota_backlog",
};

/* Worker-written counters start their own cache line (no false sharing with
 * the read-mostly and vhost-thread-written fields above them). */
static_assert(offsetof(struct sn_port, st) % RTE_CACHE_LINE_SIZE == 0, "sn_port.st not cache aligned");
static_assert(sizeof(struct sn_port) % RTE_CACHE_LINE_SIZE == 0, "sn_port size");
static_assert(SN_PORT_QMAX == SN_CONFIG_QUEUES_MAX, "config \"queues\" range");
static_assert(2 * SN_PORT_QMAX <= 32, "vring_on is a 32-bit mask");

/* See sn_port_internal.h. */
struct sn_ports *sn_ports_global;


/* Publish a snapshot of reg->slot[] and free the previous one once the
 * worker has passed a quiescent state. Main thread. */
static int publish(struct sn_ports *reg)
{
	static uint64_t seq;   /* main thread only, over every registry */
	const unsigned n = sn_config_port_slots;
	struct sn_port_table *t = calloc(1, sizeof(*t) + 2 * n * sizeof(t->mem[0])), *old;

	if (!t)
		return -ENOMEM;
	t->seq = ++seq;
	t->list = t->mem;
	t->by_slot = t->mem + n;
	for (unsigned i = 0; i < sn_config_port_slots; i++) {
		t->by_slot[i] = reg->slot[i];
		if (reg->slot[i])
			t->list[t->n++] = reg->slot[i];
	}
	old = reg->table;
	rcu_assign_pointer(reg->table, t); /* release; pairs with rcu_dereference in the worker */
	synchronize_rcu();
	free(old);
	return 0;
}

struct sn_ports *sn_ports_create(void)
{
	struct sn_ports *reg = calloc(1, sizeof(*reg));

	if (!reg) {
		errno = ENOMEM;
		return NULL;
	}
	reg->slot = calloc(sn_config_port_slots, sizeof(reg->slot[0]));
	reg->hook = calloc(sn_config_port_slots, sizeof(reg->hook[0]));
	if (!reg->slot || !reg->hook)
		goto free_reg;
	for (unsigned i = 0; i < sn_config_port_slots; i++)
		reg->hook[i].vid = -1;
	pthread_mutex_init(&reg->lock, NULL);
	pthread_mutex_init(&reg->hook_lock, NULL);
	reg->next_gen = 1;
	reg->n_workers = 1;
	if (publish(reg)) {
		pthread_mutex_destroy(&reg->lock);
		pthread_mutex_destroy(&reg->hook_lock);
free_reg:
		free(reg->slot);
		free(reg->hook);
		free(reg);
		errno = ENOMEM;
		return NULL;
	}
	sn_ports_global = reg;
	return reg;
}

int sn_ports_set_workers(struct sn_ports *reg, unsigned n)
{
	for (unsigned i = 0; i < sn_config_port_slots; i++)
		if (reg->slot[i] && reg->slot[i]->type == SN_PORT_VHOST)
			return -EBUSY;
	if (n == 0 || n > SN_PORT_WORKERS_MAX)
		return -EINVAL;
	reg->n_workers = n;
	return 0;
}

int sn_ports_set_state_dir(struct sn_ports *reg, const char *dir)
{
	for (unsigned i = 0; i < sn_config_port_slots; i++)
		if (reg->slot[i] && reg->slot[i]->type == SN_PORT_VHOST)
			return -EBUSY;
	if (dir && strlen(dir) > SN_PORT_STATE_DIR_MAX)
		return -EINVAL;
	snprintf(reg->state_dir, sizeof(reg->state_dir), "%s", dir ? dir : "");
	return 0;
}

/* Main: queue i's durable record under the state directory (none without
 * one; a queue whose file cannot be made runs without, logged). */
static void queue_record(const struct sn_ports *reg, const struct sn_port *p, uint16_t i)
{
	char path[SN_CONFIG_PATH_MAX + 1];
	int rc;

	if (!reg->state_dir[0])
		return;
	if (snprintf(path, sizeof(path), "%s/%s.txq%u.rec", reg->state_dir, p->name,
		     (unsigned)i % SN_PORT_QMAX) >= (int)sizeof(path))
		return;   /* cannot happen: SN_PORT_STATE_DIR_MAX + name + 10 < sizeof(path) */
	rc = sn_ports_mkdir_parents(path);
	if (rc)
		sn_log_err("port %s: cannot create %s: %s", p->name, reg->state_dir, strerror(-rc));
	else
		sn_vqtx_set_record(p->q[i].vq, path);
}

unsigned sn_ports_workers(const struct sn_ports *reg)
{
	return reg->n_workers;
}

const struct sn_port_table *sn_ports_table_main(const struct sn_ports *reg)
{
	return reg->table;
}

struct sn_port_table *sn_ports_table_rcu(struct sn_ports *reg)
{
	return rcu_dereference(reg->table);
}

struct sn_port *sn_ports_find(const struct sn_ports *reg, const char *name)
{
	for (unsigned i = 0; i < sn_config_port_slots; i++)
		if (reg->slot[i] && !strcmp(reg->slot[i]->name, name))
			return reg->slot[i];
	return NULL;
}

static unsigned vhost_count(const struct sn_ports *reg)
{
	unsigned n = 0;

	for (unsigned i = 0; i < sn_config_port_slots; i++)
		n += reg->slot[i] && reg->slot[i]->type == SN_PORT_VHOST;
	return n;
}


static struct sn_port *port_new(struct sn_ports *reg, const char *name, enum sn_port_type type)
{
	struct sn_port *p = rte_zmalloc("sn_port", sizeof(*p), RTE_CACHE_LINE_SIZE);

	if (!p)
		return NULL;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->type = type;
	p->vid = -1;
	p->uplink_vid = -1;
	p->nq = 1;
	p->gen = reg->next_gen++;
	return p;
}

static void port_free(struct sn_port *p)
{
	if (sn_ports_global)
		sn_port_memhook_set(sn_ports_global, -1, p);   /* no hook entry outlives p */
	for (unsigned i = 0; i < SN_PORT_QMAX; i++)
		sn_vqtx_free(p->q[i].vq);
	sn_vqtx_gmap_free(p->rxmap);
	rte_free(p);
}

int sn_ports_mkdir_parents(const char *path)
{
	char buf[SN_CONFIG_PATH_MAX + 1];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0700) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

/* A server port's path must be free before rte_vhost_driver_start():
 * when its bind() fails, our error path's rte_vhost_driver_unregister()
 * unlinks the path (DPDK 22.11 lib/vhost/socket.c does so for every
 * server socket), which would delete whatever was there: a regular file, a
 * live socket of another process, the daemon's own control socket. A
 * leftover socket nobody listens on (a dead process's) is removed;
 * anything else is refused: -ENOTSOCK (not a socket), -EADDRINUSE (a live
 * socket). */
static int claim_server_path(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc = 0;

	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -ENOTSOCK;
	/* Non-blocking: a Unix-socket connect() to a listener whose backlog
	 * is full would otherwise block the control thread; it fails with
	 * EAGAIN instead (a live listener: refused below). */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		rc = -EADDRINUSE;
	} else if (errno == ECONNREFUSED) {
		sn_log("port: removing stale socket %s", path);
		if (unlink(path) && errno != ENOENT)
			rc = -errno;
	} else {
		rc = -EADDRINUSE; /* e.g. EAGAIN: a live listener with a full backlog */
	}
	close(fd);
	return rc;
}

/* Main: the worker owning the fewest TX queues of the registered ports
 * and of the first nq queues of `np`, the port being added (lowest index
 * on a tie): round-robin while no port is deleted. */
static unsigned least_loaded(const struct sn_ports *reg, const struct sn_port *np, unsigned nq)
{
	unsigned load[SN_PORT_WORKERS_MAX] = { 0 }, best = 0;

	for (unsigned s = 0; s < sn_config_port_slots; s++) {
		const struct sn_port *p = reg->slot[s];

		for (unsigned i = 0; p && p->type == SN_PORT_VHOST && i < p->nq; i++)
			load[p->q[i].owner]++;
	}
	for (unsigned i = 0; i < nq; i++)
		load[np->q[i].owner]++;
	for (unsigned k = 1; k < reg->n_workers; k++)
		if (load[k] < load[best])
			best = k;
	return best;
}

int sn_ports_add_vhost(struct sn_ports *reg, const char *name, const char *path,
		       const struct sn_vhost_opts *opts)
{
	bool client = opts->client;
	struct sn_port *p;
	int slot, rc;

	if (!sn_config_port_name_ok(name) || !sn_config_socket_path_ok(path))
		return -EINVAL;
	for (unsigned i = 0; i < sn_config_port_slots; i++)
		if (reg->slot[i] && (!strcmp(reg->slot[i]->name, name) ||
				     !strcmp(reg->slot[i]->path, path)))
			return -EEXIST;
	if (vhost_count(reg) >= sn_config_port_slots - 1)
		return -ENOSPC;   /* the last slot stays for the uplink */
	slot = sn_ports_quota_pick_slot(reg);
	if (slot < 0)
		return slot;
	p = port_new(reg, name, SN_PORT_VHOST);
	if (!p)
		return -ENOMEM;
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->client = client;
	p->owner = opts->owner;
	p->slot = (uint16_t)slot;
	p->nq = opts->queues ? opts->queues : 1;
	if (opts->bind) {
		p->bind = *opts->bind;
		p->bound = sn_bind_active(&p->bind);
	}
	if (p->nq > SN_PORT_QMAX) {
		rc = -EINVAL;
		goto err_free;
	}
	rc = sn_ports_quota_admit(reg, p);   /* its reserve for p->nq queues */
	if (rc)
		goto err_free;
	/* Queue -> worker (layout ncore): as given, else balanced. */
	for (uint16_t i = 0; i < p->nq; i++) {
		if (opts->workers && opts->workers[i] >= reg->n_workers) {
			rc = -EINVAL;
			goto err_free;
		}
		p->q[i].owner = opts->workers ? opts->workers[i] : least_loaded(reg, p, i);
	}
	if (opts->deferred) {
		p->max_hold_us = opts->max_hold_us;
		for (uint16_t i = 0; i < p->nq; i++) {
			p->q[i].vq = sn_vqtx_create(opts->max_hold_us, i);
			if (!p->q[i].vq) {
				rc = -ENOMEM;
				goto err_free;
			}
			sn_vqtx_set_worker(p->q[i].vq, p->q[i].owner);
			queue_record(reg, p, i);
		}
		p->vq = p->q[0].vq;
		p->unmarked_max_hold_us = opts->unmarked_max_hold_us ?
			opts->unmarked_max_hold_us : SN_VQTX_UNMARKED_HOLD_US_DEFAULT;
		for (uint16_t i = 0; i < p->nq; i++)
			sn_vqtx_set_unmarked_hold(p->q[i].vq, p->unmarked_max_hold_us);
	}

	rc = sn_ports_mkdir_parents(path);
	if (rc) {
		sn_log_err("port %s: cannot create the directory of %s: %s", name, path, strerror(-rc));
		goto err_free;
	}
	if (!client && (rc = claim_server_path(path))) {
		sn_log_err("port %s: %s: %s", name, path, rc == -ENOTSOCK ? "exists and is not a socket"
		       : rc == -EADDRINUSE ? "a process listens on it" : strerror(-rc));
		goto err_free;
	}
	if (rte_vhost_driver_register(path, client ? RTE_VHOST_USER_CLIENT : 0)) {
		sn_log_err("port %s: rte_vhost_driver_register(%s) failed", name, path);
		rc = -EIO;
		goto err_free;
	}
	p->registered = true;
	/* Trim, never set, features: set_features would make this an external
	 * backend and disable the builtin RX enqueue (DPDK lib/vhost/socket.c).
	 * Immediate ports: guest GSO the switch can segment for the uplink is
	 * TCP/IPv4 only (librte_gso, see sn_switch.c): don't offer TSO over
	 * IPv6 or UFO, so guests segment those themselves; TSO4 stays (VM<->VM
	 * keeps 64 KiB frames). Deferred ports: sn_vqtx_features_off(), the
	 * same offloads plus the ring features sn_vqtx cannot honour. A
	 * single-queue port does not offer MQ, so a driver configured for
	 * more queue pairs uses one; DPDK 22.11 cannot announce a smaller
	 * maximum than its own (no rte_vhost_driver_set_max_queue_num), so a
	 * multiqueue port serves queue pairs [0, queues) and logs a driver
	 * that enables more. */
	if (rte_vhost_driver_disable_features(path, (p->vq ? sn_vqtx_features_off() :
					      (1ULL << VIRTIO_NET_F_HOST_TSO6) |
					      (1ULL << VIRTIO_NET_F_HOST_UFO)) |
					      (p->nq == 1 ? 1ULL << VIRTIO_NET_F_MQ : 0))) {
		sn_log_err("port %s: rte_vhost_driver_disable_features failed", name);
		rc = -EIO;
		goto err_unregister;
	}
	if (rte_vhost_driver_callback_register(path, &sn_port_vhost_ops)) {
		sn_log_err("port %s: rte_vhost_driver_callback_register failed", name);
		rc = -EIO;
		goto err_unregister;
	}
	/* Budgets before the first poll: the workers see them with the
	 * table's publication (release). */
	sn_ports_quota_port(reg, p);
	for (uint16_t i = 0; p->vq && i < p->nq; i++)
		sn_vqtx_set_quota(p->q[i].vq, reg->mbufq, p->slot, &p->quota.held);
	/* Visible to the callbacks before the driver can produce any. */
	pthread_mutex_lock(&reg->lock);
	reg->slot[slot] = p;
	pthread_mutex_unlock(&reg->lock);
	if (rte_vhost_driver_start(path)) {
		sn_log_err("port %s: rte_vhost_driver_start(%s) failed", name, path);
		rc = -EIO;
		goto err_unslot;
	}
	rc = publish(reg);
	if (rc)
		goto err_unslot;
	sn_log("port %s: added (vhost-user %s, %s, %u queue%s)", name, path,
	       client ? "client" : "server", p->nq, p->nq > 1 ? "s" : "");
	if (reg->mac_hooks)
		reg->mac_hooks->added(reg->mac_hooks_arg, p);
	return 0;

err_unslot:
	pthread_mutex_lock(&reg->lock);
	reg->slot[slot] = NULL;
	pthread_mutex_unlock(&reg->lock);
	sn_ports_quota_release(reg, p);
err_unregister:
	rte_vhost_driver_unregister(path);
err_free:
	port_free(p);
	return rc;
}

bool sn_port_tx_sync(uint16_t eth_port)
{
	/* Not net_tap: DPDK 22.11's tap TX segfaulted on our external-buffer
	 * guest frames (deferred VM -> tap uplink with checksum/TSO requests,
	 * tests/vm/test_deferred_offload.py); its frames are copied. */
	static const char *const sync_pmds[] = { "net_vhost", "net_null" };
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(eth_port, &info) || !info.driver_name)
		return false;
	for (size_t i = 0; i < RTE_DIM(sync_pmds); i++)
		if (strcmp(info.driver_name, sync_pmds[i]) == 0)
			return true;
	return false;
}

/* The direct uplink path (sn_port_uplink_enqueue) for a net_vhost
 * uplink. The PMD calls this at the end of its new_device and
 * destroy_device (vhost thread, no PMD lock held), after setting the link
 * status. Link up: publish the peer's vid (release). Link down: withdraw
 * it and wait for a grace period, so that when destroy_device returns to
 * the vhost library (which then unmaps the guest memory and frees the
 * device) no datapath lcore still enqueues to it: pairs with the readers'
 * rcu_quiescent_state() (worker loop, arbiter loop), as cb_destroy_device
 * does for our own ports.
 * uplink_lsc_lock serializes the whole read-link / read-vid / exchange /
 * grace-period sequence between the vhost thread and the main thread's
 * initial call in sn_ports_add_uplink: without it the main thread could
 * read "up, vid V", the vhost thread's destroy_device withdraw nothing
 * (-1 -> -1) and return, and the main thread then publish the dead V. */
static pthread_mutex_t uplink_lsc_lock = PTHREAD_MUTEX_INITIALIZER;

static int uplink_lsc_cb(uint16_t port_id, enum rte_eth_event_type ev, void *arg, void *ret)
{
	struct sn_port *p = arg;
	struct rte_eth_link link;
	int vid = -1, old;

	(void)ret;
	if (ev != RTE_ETH_EVENT_INTR_LSC)
		return 0;
	pthread_mutex_lock(&uplink_lsc_lock);
	if (rte_eth_link_get_nowait(port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP)
		vid = rte_eth_vhost_get_vid_from_port_id(port_id);
	old = __atomic_exchange_n(&p->uplink_vid, vid < 0 ? -1 : vid, __ATOMIC_RELEASE);
	if (old >= 0 && old != vid)
		synchronize_rcu();
	pthread_mutex_unlock(&uplink_lsc_lock);
	if (old != (vid < 0 ? -1 : vid))
		sn_log("port %s: %s", p->name, vid >= 0 ? "direct vhost enqueue on (peer connected)"
							: "direct vhost enqueue off (peer gone)");
	return 0;
}

static bool uplink_is_net_vhost(uint16_t eth_port)
{
	struct rte_eth_dev_info info;

	return rte_eth_dev_info_get(eth_port, &info) == 0 && info.driver_name &&
	       strcmp(info.driver_name, "net_vhost") == 0;
}

static void uplink_lsc_unregister(struct sn_port *p)
{
	/* -EAGAIN while the callback runs: wait for it. */
	while (rte_eth_dev_callback_unregister(p->eth_port, RTE_ETH_EVENT_INTR_LSC, uplink_lsc_cb,
					       p) == -EAGAIN)
		usleep(1000);
	__atomic_store_n(&p->uplink_vid, -1, __ATOMIC_RELEASE);
}

uint16_t sn_port_uplink_enqueue(int vid, uint16_t txq, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t k = 0;

	/* A peer with fewer queue pairs than our TX queue: nothing sent
	 * (counted ring_full by the caller, as the PMD's closed queue gate
	 * did), without rte_vhost_enqueue_burst's error log per burst. The
	 * peer may add vrings after new_device, so this is not cached. */
	if (2u * txq >= rte_vhost_get_vring_num(vid))
		return 0;
	while (k < n) {
		uint16_t want = (uint16_t)RTE_MIN(n - k, 32), got;

		got = rte_vhost_enqueue_burst(vid, (uint16_t)(2 * txq), pkts + k, want);
		k = (uint16_t)(k + got);
		if (got < want)
			break;
	}
	return k;
}

int sn_ports_add_uplink(struct sn_ports *reg, const char *name, uint16_t eth_port,
			uint16_t n_rxq)
{
	struct sn_port *p;
	int slot, rc;

	static_assert(SN_UPLINK_RXQ_MAX == SN_PORT_QMAX, "one uplink RX queue per q[]");
	if (n_rxq == 0 || n_rxq > SN_PORT_QMAX)
		return -EINVAL;
	if (sn_ports_find(reg, name))
		return -EEXIST;
	slot = sn_ports_quota_pick_slot(reg);
	if (slot < 0)
		return slot;
	p = port_new(reg, name, SN_PORT_UPLINK);
	if (!p)
		return -ENOMEM;
	p->slot = (uint16_t)slot;
	p->owner = SN_PORT_OWNER_FILE;
	p->eth_port = eth_port;
	p->tx_sync = sn_port_tx_sync(eth_port);
	p->nq = n_rxq;
	for (uint16_t q = 0; q < n_rxq; q++)
		p->q[q].owner = q % reg->n_workers;   /* RX queue q: its worker */
	/* Registered before the first read of the vid, so that no
	 * link change falls between them. */
	if (uplink_is_net_vhost(eth_port) &&
	    rte_eth_dev_callback_register(eth_port, RTE_ETH_EVENT_INTR_LSC, uplink_lsc_cb, p) == 0)
		uplink_lsc_cb(eth_port, RTE_ETH_EVENT_INTR_LSC, p, NULL);
	p->running = 1;
	p->up = 1;      /* started ethdev; published below (release) */
	sn_ports_quota_port(reg, p);
	pthread_mutex_lock(&reg->lock);
	reg->slot[slot] = p;
	pthread_mutex_unlock(&reg->lock);
	rc = publish(reg);
	if (rc) {
		pthread_mutex_lock(&reg->lock);
		reg->slot[slot] = NULL;
		pthread_mutex_unlock(&reg->lock);
		uplink_lsc_unregister(p);
		rte_free(p);
		return rc;
	}
	sn_log("port %s: added (uplink, ethdev %u, %u RX queue%s, %s)", name, eth_port, n_rxq,
	       n_rxq > 1 ? "s" : "", p->tx_sync ? "zero-copy for deferred frames" : "deferred frames copied");
	return 0;
}

static void unregister_driver(struct sn_port *p)
{
	for (int tries = 0; rte_vhost_driver_unregister(p->path) != 0; tries++) {
		if (tries == 200) {
			sn_log_err("port %s: rte_vhost_driver_unregister failed", p->name);
			break;
		}
		usleep(10000);
	}
}

int sn_ports_del(struct sn_ports *reg, const char *name, bool force)
{
	struct sn_port *p = sn_ports_find(reg, name);
	int rc;

	if (!p)
		return -ENOENT;
	if (p->type == SN_PORT_UPLINK && !force)
		return -EBUSY;
	/* 0. Deferred: stop the driver while the port is still visible, so that
	 * destroy_device finds it and the worker (which still polls it)
	 * completes every held descriptor before the guest memory goes. */
	if (p->vq && p->registered) {
		unregister_driver(p);
		p->registered = false;
	}
	/* 1. Out of the worker's sight: new snapshot + grace period. */
	pthread_mutex_lock(&reg->lock);
	reg->slot[p->slot] = NULL;
	pthread_mutex_unlock(&reg->lock);
	rc = publish(reg);
	if (rc) {
		/* Cannot allocate a snapshot: keep the port, stay consistent. */
		pthread_mutex_lock(&reg->lock);
		reg->slot[p->slot] = p;
		pthread_mutex_unlock(&reg->lock);
		return rc;
	}
	/* 2. Stop the vhost driver: closes the connection (destroy_device runs,
	 * finds no port and returns) and unlinks a server socket. */
	if (p->type == SN_PORT_VHOST && p->registered)
		unregister_driver(p);
	if (p->type == SN_PORT_UPLINK)
		uplink_lsc_unregister(p);   /* before p goes */
	if (reg->mac_hooks)
		reg->mac_hooks->deleted(reg->mac_hooks_arg, p->slot);
	sn_ports_quota_release(reg, p);
	sn_log("port %s: deleted", name);
	port_free(p);
	return 0;
}

int sn_ports_set_holds(struct sn_ports *reg, const char *name, uint32_t max_hold_us,
		       uint32_t unmarked_max_hold_us)
{
	struct sn_port *p = sn_ports_find(reg, name);

	if (!p)
		return -ENOENT;
	if (p->type != SN_PORT_VHOST || !p->vq || max_hold_us > SN_CONFIG_MAX_HOLD_US_MAX ||
	    unmarked_max_hold_us > SN_CONFIG_MAX_HOLD_US_MAX)
		return -EINVAL;
	if (!unmarked_max_hold_us)
		unmarked_max_hold_us = SN_VQTX_UNMARKED_HOLD_US_DEFAULT;
	for (unsigned i = 0; i < p->nq; i++)
		sn_vqtx_set_holds(p->q[i].vq, max_hold_us, unmarked_max_hold_us);
	p->max_hold_us = max_hold_us;
	p->unmarked_max_hold_us = unmarked_max_hold_us;
	/* Every worker's keep bound is recomputed with the new limits. */
	synchronize_rcu();
	return 0;
}

int sn_ports_remove(struct sn_ports *reg, const char *name)
{
	struct sn_port *p = sn_ports_find(reg, name);

	/* Unlinked while still mapped: the stop in sn_ports_del updates a
	 * file nobody will read. */
	for (unsigned i = 0; p && p->type == SN_PORT_VHOST && i < p->nq; i++)
		sn_vqtx_rec_remove(p->q[i].vq);
	return sn_ports_del(reg, name, false);
}

void sn_ports_destroy(struct sn_ports *reg)
{
	if (!reg)
		return;
	for (unsigned i = 0; i < sn_config_port_slots; i++)
		if (reg->slot[i])
			sn_ports_del(reg, reg->slot[i]->name, true);
	sn_ports_global = NULL;
	synchronize_rcu();
	free(reg->table);
	pthread_mutex_destroy(&reg->lock);
	pthread_mutex_destroy(&reg->hook_lock);
	sn_ports_quota_fini(reg);
	free(reg->slot);
	free(reg->hook);
	free(reg);
}

void sn_port_stats_read(const struct sn_port *p, struct sn_port_stats *out)
{
	out->rx_packets = __atomic_load_n(&p->st.rx_packets, __ATOMIC_RELAXED);
	out->rx_bytes = __atomic_load_n(&p->st.rx_bytes, __ATOMIC_RELAXED);
	out->tx_packets = __atomic_load_n(&p->st.tx_packets, __ATOMIC_RELAXED);
	out->tx_bytes = __atomic_load_n(&p->st.tx_bytes, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < SN_DROP_MAX; i++)
		out->drop[i] = __atomic_load_n(&p->st.drop[i], __ATOMIC_RELAXED);
	out->quota_macs = __atomic_load_n(&p->st.quota_macs, __ATOMIC_RELAXED);
	out->move_refused = __atomic_load_n(&p->st.move_refused, __ATOMIC_RELAXED);
}

void sn_ports_set_mac_hooks(struct sn_ports *reg, const struct sn_port_mac_hooks *h, void *arg)
{
	reg->mac_hooks = h;
	reg->mac_hooks_arg = arg;
}

void sn_portq_stats_read(const struct sn_port *p, unsigned qi, struct sn_portq_stats *out)
{
	const struct sn_portq_stats *st = &p->q[qi].st;

	out->rx_packets = __atomic_load_n(&st->rx_packets, __ATOMIC_RELAXED);
	out->rx_bytes = __atomic_load_n(&st->rx_bytes, __ATOMIC_RELAXED);
	out->rx_bursts = __atomic_load_n(&st->rx_bursts, __ATOMIC_RELAXED);
	out->tx_packets = __atomic_load_n(&st->tx_packets, __ATOMIC_RELAXED);
	out->tx_bytes = __atomic_load_n(&st->tx_bytes, __ATOMIC_RELAXED);
	out->ring_full = __atomic_load_n(&st->ring_full, __ATOMIC_RELAXED);
	out->quota_mbufs_dropped = __atomic_load_n(&st->quota_mbufs_dropped, __ATOMIC_RELAXED);
}

/* ---- Queue pairs on the datapath (worker). ---- */

static inline void q_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, *c + v, __ATOMIC_RELAXED);   /* sole writer: the owner */
}

void sn_port_count_txq(struct sn_port *p, unsigned qi, uint16_t n, uint64_t bytes)
{
	q_add(&p->q[qi].st.rx_packets, n);
	q_add(&p->q[qi].st.rx_bytes, bytes);
	q_add(&p->q[qi].st.rx_bursts, 1);
}

void sn_port_count_txq_quota_dropped(struct sn_port *p, unsigned qi, uint16_t n)
{
	q_add(&p->q[qi].st.quota_mbufs_dropped, n);
}

uint32_t sn_port_flow_hash(const struct rte_mbuf *m)
{
	const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t len = m->data_len, off = RTE_ETHER_HDR_LEN, w[10];
	uint16_t type;
	unsigned nw = 0;
	uint8_t proto;

	if (len < RTE_ETHER_HDR_LEN)
		return 0;
	memcpy(&type, d + 12, 2);
	if (type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN) && len >= off + 4) {
		memcpy(&type, d + off + 2, 2);
		off += 4;
	}
	if (type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) && len >= off + 20) {
		const uint8_t *ip = d + off;
		uint32_t ihl = (ip[0] & 0xfu) * 4u;
		uint16_t frag;

		memcpy(&w[0], ip + 12, 8);          /* src, dst */
		proto = ip[9];
		w[2] = proto;
		nw = 3;
		memcpy(&frag, ip + 6, 2);
		if ((rte_be_to_cpu_16(frag) & 0x3fffu) == 0 && ihl >= 20)
			off += ihl;
		else
			proto = 0;                  /* fragment: no ports */
	} else if (type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6) && len >= off + 40) {
		const uint8_t *ip = d + off;

		memcpy(&w[0], ip + 8, 32);          /* src, dst */
		proto = ip[6];
		w[8] = proto;
		nw = 9;
		off += 40;
	} else {
		memcpy(&w[0], d, 12);               /* dst, src MAC */
		w[3] = type;
		return rte_jhash_32b(w, 4, 0);
	}
	if ((proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP) &&
	    len >= off + 4)
		memcpy(&w[nw++], d + off, 4);       /* ports */
	return rte_jhash_32b(w, nw, 0);
}

/* The RX queue for hash h among the enabled ones (mask of queue indexes,
 * non-empty). */
static inline unsigned rxq_pick(uint32_t mask, uint32_t h)
{
	unsigned k = (unsigned)(((uint64_t)h * (unsigned)__builtin_popcount(mask)) >> 32);

	while (k--)
		mask &= mask - 1;
	return (unsigned)__builtin_ctz(mask);
}

static uint32_t rxq_mask(const struct sn_port *p)
{
	uint32_t on = __atomic_load_n(&p->vring_on, __ATOMIC_RELAXED), mask = 0;

	for (unsigned i = 0; i < p->nq; i++)
		if (on & (1u << (2 * i)))
			mask |= 1u << i;
	return mask;
}

/* *sum += the bytes taken (the caller's port counters reuse the
 * queue's sum instead of a second pass over the frames). */
static uint16_t rxq_put(struct sn_port *p, unsigned qi, struct rte_mbuf **pkts, uint16_t n,
			uint64_t *sum)
{
	uint16_t k;
	uint64_t bytes = 0;

	/* The buffers this enqueue writes, asked for at once. */
	if (qi == 0 && __atomic_load_n(&p->rxview_on, __ATOMIC_RELAXED)) {
		uint16_t next, used;

		if (rte_vhost_get_vring_base(p->vid, 0, &next, &used) == 0)
			sn_vring_rx_prefetch(&p->rxview, next, n);
	}
	k = rte_vhost_enqueue_burst(p->vid, (uint16_t)(2 * qi), pkts, n);

	for (uint16_t j = 0; j < k; j++)
		bytes += pkts[j]->pkt_len;
	sn_port_ctr_add(&p->q[qi].st.tx_packets, k);   /* any worker (ncore) */
	sn_port_ctr_add(&p->q[qi].st.tx_bytes, bytes);
	*sum += bytes;
	return k;
}

uint16_t sn_port_vhost_enqueue(struct sn_port *p, struct rte_mbuf **pkts, uint16_t n)
{
	uint64_t bytes = 0;

	return sn_port_vhost_enqueue_bytes(p, pkts, n, &bytes);
}

uint16_t sn_port_vhost_enqueue_bytes(struct sn_port *p, struct rte_mbuf **pkts, uint16_t n,
				     uint64_t *bytes)
{
	struct rte_mbuf *by_q[SN_PORT_QMAX][SN_CONFIG_BURST_MAX];
	uint16_t cnt[SN_PORT_QMAX] = { 0 }, took[SN_PORT_QMAX];
	struct rte_mbuf *rest[SN_CONFIG_BURST_MAX];
	uint32_t mask = rxq_mask(p);
	uint16_t k = 0, nrest = 0;

	if (__builtin_popcount(mask) <= 1)
		return rxq_put(p, mask ? (unsigned)__builtin_ctz(mask) : 0, pkts, n, bytes);
	if (n > SN_CONFIG_BURST_MAX) {   /* in slices, keeping the prefix rule */
		uint16_t a = sn_port_vhost_enqueue_bytes(p, pkts, SN_CONFIG_BURST_MAX, bytes);

		if (a < SN_CONFIG_BURST_MAX)
			return a;
		return (uint16_t)(a + sn_port_vhost_enqueue_bytes(p, pkts + a, (uint16_t)(n - a),
								  bytes));
	}
	for (uint16_t i = 0; i < n; i++) {
		unsigned qi = rxq_pick(mask, sn_port_flow_hash(pkts[i]));

		by_q[qi][cnt[qi]++] = pkts[i];
	}
	for (unsigned qi = 0; qi < SN_PORT_QMAX; qi++) {
		took[qi] = cnt[qi] ? rxq_put(p, qi, by_q[qi], cnt[qi], bytes) : 0;
		for (uint16_t j = 0; j < took[qi]; j++)
			pkts[k++] = by_q[qi][j];
		for (uint16_t j = took[qi]; j < cnt[qi]; j++)
			rest[nrest++] = by_q[qi][j];
	}
	memcpy(&pkts[k], rest, nrest * sizeof(rest[0]));
	return k;
}

void sn_port_count_rxq_full(struct sn_port *p, const struct rte_mbuf *m)
{
	uint32_t mask = rxq_mask(p);
	unsigned qi = __builtin_popcount(mask) <= 1 ? (mask ? (unsigned)__builtin_ctz(mask) : 0)
						    : rxq_pick(mask, sn_port_flow_hash(m));

	sn_port_ctr_add(&p->q[qi].st.ring_full, 1);
}
