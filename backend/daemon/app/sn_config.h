/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_config.h — schednicd configuration: JSON text -> validated struct.
 *
 * The default configuration is backend/daemon/app/default-config.json compiled
 * in (sn_default_config). A user file replaces it key by key: every key is
 * optional, a missing key takes its default, an unknown key is an error.
 * "uplink": null means no uplink; "ports" replaces the default port list as
 * a whole.
 *
 * Every error message names the key path and the reason, e.g.
 *   config: ports[1].mode: must be "server" or "client"
 *
 * Concurrency: none; called by the main thread once before the EAL starts,
 * and again by config.reload (sn_config_load_again, sn_reload.h).
 * The helpers sn_config_port_name_ok() and sn_config_socket_path_ok() are
 * pure and also used by the RPC handlers (main thread).
 */
#ifndef SN_CONFIG_H
#define SN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sn_bind.h"

#define SN_CONFIG_NAME_MAX   32   /* port name length, without NUL */
#define SN_CONFIG_PATH_MAX   107  /* sockaddr_un.sun_path minus NUL */
#define SN_CONFIG_STATE_DIR_MAX 64 /* dir + "/<port>.txq<i>.rec" fits PATH_MAX */
/* The hard upper bound of vhost-user ports, set by DPDK 22.11's vhost
 * library: it polls every listening and connected vhost-user socket of the
 * process from one fd set of 1024 entries (lib/vhost/fd_man.h MAX_FDS),
 * one of which is the set's own notification pipe. A server-mode port
 * holds two (its listening socket and the connection), a client-mode port
 * one, so 511 server-mode ports is what the library can serve at once
 * (doc/configuration.md, "Port limit"). datapath.max_ports, 1..this,
 * sizes every per-port table at start. */
#define SN_CONFIG_PORTS_MAX  511
#define SN_CONFIG_MAX_PORTS_DEF 64 /* datapath.max_ports default */
#define SN_CONFIG_EXTRA_MAX  32   /* eal.extra_args entries */
#define SN_CONFIG_BURST_MAX  64
#define SN_CONFIG_ERR_MAX    512

struct sn_config_port {
	char name[SN_CONFIG_NAME_MAX + 1];
	char path[SN_CONFIG_PATH_MAX + 1];
	bool client;                       /* mode "client" */
	bool deferred;                     /* completion "deferred" */
	uint32_t max_hold_us;              /* deferred: 0 = no limit */
	uint32_t unmarked_max_hold_us;     /* deferred: limit without opt-in, 1.. */
	unsigned queues;                   /* queue pairs (VIRTIO_NET_F_MQ), 1..8 */
	bool has_workers;                  /* "workers" given, else balanced */
	uint8_t workers[8];                /* [queues]: owner worker of TX queue i */
	struct sn_bind bind;               /* allowed_macs / allowed_ips */
};

#define SN_CONFIG_MAX_HOLD_US_MAX 10000000u /* 10 s */
/* Hold limit of frames from a guest that did not opt in (sn_vqtx.h): 1 ms
 * is far below any guest TX watchdog (5 s stock) and bounds the stall of a
 * stock driver whose queue waits for completions, yet absorbs a burst:
 * a full 256-entry ring of 1500 B frames drains in 0.3 ms at 10 Gbit/s. */
#define SN_CONFIG_UNMARKED_HOLD_US_DEF 1000u
#define SN_CONFIG_QUEUES_MAX 8u            /* == SN_PORT_QMAX */
#define SN_CONFIG_WORKERS_MAX 8u           /* worker lcores (layout ncore) */
#define SN_CONFIG_UPLINK_RXQ_MAX 8          /* uplink RX queues, == SN_PORT_QMAX */

#define SN_CONFIG_HUGE_DIR_MAX 107   /* eal.huge_dir, without NUL */
#define SN_CONFIG_PCI_MAX 12         /* "DDDD:BB:DD.F" */
#define SN_CONFIG_IFNAME_MAX 15      /* IFNAMSIZ - 1 */
#define SN_CONFIG_AF_XDP_QMAX 8      /* uplink.af_xdp_queues: SN_UPLINK_RXQ_MAX */
#define SN_CONFIG_ETHNAME_MAX 63     /* a vdev's name: RTE_ETH_NAME_MAX_LEN - 1 */

/* How the uplink ethdev is created (doc/deploy.md). */
enum sn_uplink_kind {
	SN_UPLINK_VDEV = 0,    /* uplink.devargs is an EAL --vdev string */
	SN_UPLINK_PCI,         /* uplink.pci: a device bound to vfio-pci or uio */
	SN_UPLINK_AF_XDP,      /* uplink.af_xdp: net_af_xdp on a kernel interface */
};

/* Lcore layouts (thread model and layouts: doc/threads.md). */
enum sn_layout {
	SN_LAYOUT_1CORE = 0,   /* one worker: switch + shaper + arbiter + dispatch */
	SN_LAYOUT_2CORE,       /* worker (switch + shaper) | arbiter (+ dispatch) */
	SN_LAYOUT_NCORE,       /* W workers (switch + shaper, each its queues) | arbiter */
};

/* The shared pools a port draws from and its budget on each (config
 * section "quota", policy.ports.<name>.quota; struct sn_port_quota,
 * doc/isolation.md), in this order; sn_config_quota_keys names them. */
enum sn_quota_kind {
	SN_QK_MBUFS = 0,   /* mbufs and extbuf wrappers its frames hold */
	SN_QK_HELD,        /* deferred: descriptors held per TX queue */
	SN_QK_BACKLOG,     /* switch backlog entries */
	SN_QK_WHEEL,       /* timing-wheel nodes per worker */
	SN_QK_FLOWS,       /* flow-table entries per worker */
	SN_QK_MACS,        /* MAC table entries */
	SN_QK_MAX
};
extern const char *const sn_config_quota_keys[SN_QK_MAX];
#define SN_CONFIG_QUOTA_MAX (1u << 24)   /* any budget, when given */

struct sn_config {
	struct {
		unsigned memory_mb;
		char file_prefix[64];          /* "auto" resolved by the caller */
		unsigned main_cpu, worker_cpu;
		unsigned arbiter_cpu;          /* layouts 2core, ncore: the arbiter lcore's cpu */
		unsigned n_worker_cpus;        /* ncore: worker k on worker_cpus[k] */
		unsigned worker_cpus[SN_CONFIG_WORKERS_MAX];
		unsigned n_extra;
		char *extra_args[SN_CONFIG_EXTRA_MAX]; /* owned (strdup) */
		bool hugepages;                /* hugetlbfs memory, else --no-huge */
		char huge_dir[SN_CONFIG_HUGE_DIR_MAX + 1]; /* "": the first hugetlbfs mount */
	} eal;
	struct {
		char socket[SN_CONFIG_PATH_MAX + 1];
		/* durable records of deferred TX queues ("": none) */
		char state_dir[SN_CONFIG_STATE_DIR_MAX + 1];
		size_t max_request_bytes;
		unsigned max_clients;
	} control;
	struct {
		unsigned mbufs;                /* pool size; 0 = "auto" (resolved
		                                * by sn_config_mbufs_auto at parse) */
		unsigned mbuf_cache, burst;
		unsigned mac_table_size;       /* entries, power of two */
		unsigned mac_aging_s;
		unsigned max_flows;            /* flow states per worker */
		char layout_name[16];          /* "1core" | "2core" | "ncore" */
		enum sn_layout layout;         /* decoded from layout_name */
		unsigned idle_sleep_us;        /* 0 = busy poll; else spin-then-sleep */
		unsigned cpu_fair_pct;         /* CPU fair dropping budget, 0 = off */
		unsigned workers;              /* worker lcores: 1, ncore 2..8 (resolved) */
		unsigned max_ports;            /* vhost-user ports the tables hold */
		char mac_move_name[16];        /* "vm_sticky" | "any" */
		bool mac_move_any;             /* decoded: "any" */
	} datapath;
	struct {
		bool enabled;
		char name[SN_CONFIG_NAME_MAX + 1];
		char devargs[256];             /* vdev: the --vdev string; pci, af_xdp: extra args */
		unsigned rx_desc, tx_desc;
		enum sn_uplink_kind kind;      /* from which of pci / af_xdp is set */
		char pci[SN_CONFIG_PCI_MAX + 1];   /* normalized DDDD:BB:DD.F */
		char af_xdp[SN_CONFIG_IFNAME_MAX + 1]; /* kernel interface */
		unsigned af_xdp_start_queue;
		unsigned af_xdp_queues;        /* 0: 1; at most SN_CONFIG_AF_XDP_QMAX */
		unsigned af_xdp_busy_budget;   /* 0: no preferred busy polling */
		unsigned rx_queues;            /* 0 = "auto" (sn_uplink.h) */
	} uplink;
	struct {
		/* per-port budgets, 0 = "auto" (sn_port_quota.c derives it) */
		uint32_t limit[SN_QK_MAX];
		uint32_t mbufs_reserve;        /* per port, 0 = "auto" */
	} quota;
	unsigned n_ports;
	struct sn_config_port ports[SN_CONFIG_PORTS_MAX];
	char *policy_json;   /* "policy" (validated by sn_policy_parse), owned; NULL = none */
};

/* The embedded default-config.json (generated by embed.py). */
extern const char sn_default_config[];
extern const size_t sn_default_config_len;

/* Parse and validate `text` (origin names it in messages, e.g. the file
 * name) on top of the embedded defaults into *cfg. 0 on success; -EINVAL
 * with a one-line message in err otherwise. On success the caller owns
 * cfg and releases it with sn_config_fini(). */
int sn_config_parse(struct sn_config *cfg, const char *text, size_t len,
		    const char *origin, char *err, size_t errlen);
/* Same from a file (reads it; -errno with message if unreadable). */
int sn_config_load(struct sn_config *cfg, const char *path, char *err, size_t errlen);
void sn_config_fini(struct sn_config *cfg);
/* Main thread, at run time (config.reload): sn_config_load() that leaves
 * sn_config_port_slots alone, so a file naming another datapath.max_ports
 * never resizes the tables in use (sn_config_static_differs refuses it). */
int sn_config_load_again(struct sn_config *cfg, const char *path, char *err, size_t errlen);
/* Pure: whether a and b differ in a setting fixed at start (every key of
 * the sections eal, control, datapath, uplink and quota; not ports, not
 * policy), the first such key path written to key[len] (e.g.
 * "datapath.max_ports"). Compares decoded values, so a key left out and
 * the same key at its default agree. */
bool sn_config_static_differs(const struct sn_config *a, const struct sn_config *b, char *key,
			      size_t len);

/* Port slots of this process: datapath.max_ports vhost-user ports + the
 * uplink (default SN_CONFIG_MAX_PORTS_DEF + 1). Every per-port table
 * (registry, switch, pipeline, classifier, policy) is sized from it when
 * it is created, and a slot index is always below it. Process-wide
 * because all those modules must agree on one number: sn_config_parse()
 * sets it from datapath.max_ports (the main thread parses its
 * configuration once, before it creates any of them); read-only
 * afterwards (no synchronization needed: the datapath lcores start
 * later). */
extern unsigned sn_config_port_slots;
/* Main thread, before any port table exists (sn_config_parse, unit
 * tests): max_ports 1..SN_CONFIG_PORTS_MAX (0 or -EINVAL). */
int sn_config_set_port_slots(unsigned max_ports);

/* Pure: the mempool size "auto" gives (datapath.mbufs): the uplink's RX
 * share (sn_config_uplink_mbufs) plus, for each of max_ports ports, four
 * bursts per queue (the most queues a configured port offers), at least
 * 16383 and at most 1 << 24 (doc/isolation.md). */
unsigned sn_config_mbufs_auto(const struct sn_config *cfg);
/* Pure: the mbufs reserved for the uplink's RX rings and bursts (its RX
 * descriptors on every RX queue it may have, plus one burst each):
 * rx_queues, or SN_CONFIG_UPLINK_RXQ_MAX when "auto"; 0 without uplink. */
unsigned sn_config_uplink_mbufs(const struct sn_config *cfg, unsigned n_rxq);
/* Pure: the memory (MB) a pool of n mbufs of the default data room takes. */
unsigned sn_config_pool_mb(unsigned n);

/* [A-Za-z0-9_.-]{1,32} */
bool sn_config_port_name_ok(const char *name);
/* Absolute-or-relative, non-empty, fits sun_path. */
bool sn_config_socket_path_ok(const char *path);

#endif /* SN_CONFIG_H */
