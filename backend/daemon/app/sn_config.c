/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_config.c — parse and validate the schednicd JSON configuration.
 *
 * Design: the embedded default (default-config.json) and the user text are
 * both parsed with jansson; each scalar key is then decoded from the user
 * object when present, else from the default object, through one table per
 * section (key, kind, range, destination offset). The same table rejects
 * unknown keys, so the accepted keys, their defaults and their ranges are
 * written down exactly once. Cross-key rules (unique names and paths,
 * reserved "uplink", mempool cache vs size) are checked after decoding.
 * Messages always start with "config: <key path>: ".
 */
#include "sn_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sn_policy.h"

enum kind { K_UINT, K_STR, K_BOOL, K_AUTO };   /* K_AUTO: "auto" (0) or K_UINT */

struct key_spec {
	const char *key;
	enum kind kind;
	unsigned long long min, max; /* K_UINT: value range; K_STR: length range */
	size_t off;                  /* into struct sn_config */
	size_t size;                 /* destination size */
};

#define U(k, lo, hi, field) { k, K_UINT, lo, hi, offsetof(struct sn_config, field), sizeof(((struct sn_config *)0)->field) }
#define B(k, field) { k, K_BOOL, 0, 1, offsetof(struct sn_config, field), sizeof(((struct sn_config *)0)->field) }
#define A(k, lo, hi, field) { k, K_AUTO, lo, hi, offsetof(struct sn_config, field), sizeof(((struct sn_config *)0)->field) }
#define S(k, lo, hi, field) { k, K_STR, lo, hi, offsetof(struct sn_config, field), sizeof(((struct sn_config *)0)->field) }

static const struct key_spec eal_keys[] = {
	U("memory_mb", 64, 65536, eal.memory_mb),
	S("file_prefix", 1, 63, eal.file_prefix),
	U("main_cpu", 0, 1023, eal.main_cpu),
	U("worker_cpu", 0, 1023, eal.worker_cpu),
	U("arbiter_cpu", 0, 1023, eal.arbiter_cpu),
	{ "extra_args", K_STR, 0, 0, 0, 0 },   /* decoded by hand */
	{ "worker_cpus", K_UINT, 0, 0, 0, 0 }, /* decoded by hand (layout ncore) */
	B("hugepages", eal.hugepages),
	S("huge_dir", 0, SN_CONFIG_HUGE_DIR_MAX, eal.huge_dir),
	{ NULL, K_UINT, 0, 0, 0, 0 },
};

static const struct key_spec control_keys[] = {
	S("socket", 1, SN_CONFIG_PATH_MAX, control.socket),
	S("state_dir", 0, SN_CONFIG_STATE_DIR_MAX, control.state_dir),
	U("max_request_bytes", 256, 16u << 20, control.max_request_bytes),
	U("max_clients", 1, 1024, control.max_clients),
	{ NULL, K_UINT, 0, 0, 0, 0 },
};

static const struct key_spec datapath_keys[] = {
	A("mbufs", 255, 1u << 24, datapath.mbufs),
	U("mbuf_cache", 0, 512, datapath.mbuf_cache),
	U("burst", 1, SN_CONFIG_BURST_MAX, datapath.burst),
	U("mac_table_size", 16, 1u << 22, datapath.mac_table_size),
	U("mac_aging_s", 1, 86400, datapath.mac_aging_s),
	U("max_flows", 8, 1u << 22, datapath.max_flows),
	S("layout", 1, 15, datapath.layout_name),
	U("idle_sleep_us", 0, 100000, datapath.idle_sleep_us),
	U("cpu_fair_pct", 0, 100, datapath.cpu_fair_pct),
	U("workers", 0, SN_CONFIG_WORKERS_MAX, datapath.workers),
	U("max_ports", 1, SN_CONFIG_PORTS_MAX, datapath.max_ports),
	S("mac_move", 1, 15, datapath.mac_move_name),
	{ NULL, K_UINT, 0, 0, 0, 0 },
};

static const struct key_spec uplink_keys[] = {
	S("name", 1, SN_CONFIG_NAME_MAX, uplink.name),
	S("devargs", 0, 255, uplink.devargs),
	U("rx_desc", 32, 16384, uplink.rx_desc),
	U("tx_desc", 32, 16384, uplink.tx_desc),
	S("pci", 0, SN_CONFIG_PCI_MAX, uplink.pci),
	S("af_xdp", 0, SN_CONFIG_IFNAME_MAX, uplink.af_xdp),
	U("af_xdp_start_queue", 0, 1023, uplink.af_xdp_start_queue),
	U("af_xdp_queues", 0, SN_CONFIG_AF_XDP_QMAX, uplink.af_xdp_queues),
	U("af_xdp_busy_budget", 0, 4096, uplink.af_xdp_busy_budget),
	{ "rx_queues", K_UINT, 0, 0, 0, 0 },   /* decoded by hand: "auto" or 1..8 */
	{ NULL, K_UINT, 0, 0, 0, 0 },
};

const char *const sn_config_quota_keys[SN_QK_MAX] = {
	"mbufs", "held", "backlog", "wheel", "flows", "macs",
};

static const struct key_spec quota_keys[] = {
	A("mbufs", 4, SN_CONFIG_QUOTA_MAX, quota.limit[SN_QK_MBUFS]),
	A("held", 2, SN_CONFIG_QUOTA_MAX, quota.limit[SN_QK_HELD]),
	A("backlog", 2, SN_CONFIG_QUOTA_MAX, quota.limit[SN_QK_BACKLOG]),
	A("wheel", 2, SN_CONFIG_QUOTA_MAX, quota.limit[SN_QK_WHEEL]),
	A("flows", 2, SN_CONFIG_QUOTA_MAX, quota.limit[SN_QK_FLOWS]),
	A("macs", 1, SN_CONFIG_QUOTA_MAX, quota.limit[SN_QK_MACS]),
	A("mbufs_reserve", 2, SN_CONFIG_QUOTA_MAX, quota.mbufs_reserve),
	{ NULL, K_UINT, 0, 0, 0, 0 },
};

static const char *const port_keys[] = { "name", "type", "path", "mode", "completion",
					 "max_hold_us", "unmarked_max_hold_us", "queues", "workers",
					 "allowed_macs", "allowed_ips", NULL };
static const char *const root_keys[] = { "eal", "control", "datapath", "uplink", "ports",
					  "policy", "quota", NULL };

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "config: ");

	if (n < 0 || (size_t)n >= errlen)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - n, fmt, ap);
	va_end(ap);
	/* One line: the input quoted (keys, JSON text near a syntax error)
	 * may hold control characters. */
	for (char *c = err + n; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return -EINVAL;
}

bool sn_config_port_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n < 1 || n > SN_CONFIG_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

bool sn_config_socket_path_ok(const char *path)
{
	size_t n = strlen(path);

	return n >= 1 && n <= SN_CONFIG_PATH_MAX && path[n - 1] != '/';
}

static bool key_known_spec(const struct key_spec *specs, const char *key)
{
	for (; specs->key; specs++)
		if (!strcmp(specs->key, key))
			return true;
	return false;
}

static bool key_known_list(const char *const *keys, const char *key)
{
	for (; *keys; keys++)
		if (!strcmp(*keys, key))
			return true;
	return false;
}

static int decode_one(struct sn_config *cfg, const struct key_spec *ks, json_t *v,
		      const char *path, char *err, size_t errlen)
{
	char *dst = (char *)cfg + ks->off;

	if (ks->kind == K_AUTO && json_is_string(v) && !strcmp(json_string_value(v), "auto")) {
		if (ks->size != sizeof(uint32_t))
			return fail(err, errlen, "%s.%s: internal: bad field size", path, ks->key);
		*(uint32_t *)dst = 0;
		return 0;
	}
	if (ks->kind == K_UINT || ks->kind == K_AUTO) {
		json_int_t x;

		if (!json_is_integer(v) && ks->kind == K_AUTO)
			return fail(err, errlen, "%s.%s: must be \"auto\" or an integer in [%llu, %llu]",
				    path, ks->key, ks->min, ks->max);
		if (!json_is_integer(v))
			return fail(err, errlen, "%s.%s: must be an integer", path, ks->key);
		x = json_integer_value(v);
		if (x < 0 || (unsigned long long)x < ks->min || (unsigned long long)x > ks->max)
			return fail(err, errlen, "%s.%s: must be an integer in [%llu, %llu], got %lld",
				    path, ks->key, ks->min, ks->max, (long long)x);
		if (ks->size == sizeof(unsigned))
			*(unsigned *)dst = (unsigned)x;
		else if (ks->size == sizeof(size_t))
			*(size_t *)dst = (size_t)x;
		else
			return fail(err, errlen, "%s.%s: internal: bad field size", path, ks->key);
		return 0;
	}
	if (ks->kind == K_BOOL) {
		if (!json_is_boolean(v))
			return fail(err, errlen, "%s.%s: must be true or false", path, ks->key);
		*(bool *)dst = json_is_true(v);
		return 0;
	}
	if (!json_is_string(v))
		return fail(err, errlen, "%s.%s: must be a string", path, ks->key);
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	if (n < ks->min || n > ks->max || n >= ks->size)
		return fail(err, errlen, "%s.%s: length must be in [%llu, %llu], got %zu",
			    path, ks->key, ks->min, ks->max, n);
	if (strlen(s) != n)
		return fail(err, errlen, "%s.%s: must not contain NUL", path, ks->key);
	memcpy(dst, s, n + 1);
	return 0;
}

/* Decode one section: user object u (may be NULL) over default object d. */
static int decode_section(struct sn_config *cfg, const struct key_spec *specs,
			  json_t *u, json_t *d, const char *path, char *err, size_t errlen)
{
	const char *key;
	json_t *v;
	int rc;

	if (u && !json_is_object(u))
		return fail(err, errlen, "%s: must be an object", path);
	if (u) {
		json_object_foreach(u, key, v) {
			if (!key_known_spec(specs, key))
				return fail(err, errlen, "%s.%.64s: unknown key", path, key);
		}
	}
	for (const struct key_spec *ks = specs; ks->key; ks++) {
		if (ks->size == 0)
			continue;
		v = u ? json_object_get(u, ks->key) : NULL;
		if (!v)
			v = json_object_get(d, ks->key);
		if (!v)
			return fail(err, errlen, "%s.%s: required", path, ks->key);
		rc = decode_one(cfg, ks, v, path, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

static int decode_extra_args(struct sn_config *cfg, json_t *u, json_t *d, char *err, size_t errlen)
{
	json_t *a = u ? json_object_get(u, "extra_args") : NULL, *v;
	size_t i;

	if (!a)
		a = json_object_get(d, "extra_args");
	if (!a)
		return 0;
	if (!json_is_array(a))
		return fail(err, errlen, "eal.extra_args: must be an array of strings");
	if (json_array_size(a) > SN_CONFIG_EXTRA_MAX)
		return fail(err, errlen, "eal.extra_args: at most %d entries", SN_CONFIG_EXTRA_MAX);
	json_array_foreach(a, i, v) {
		if (!json_is_string(v) || json_string_length(v) == 0)
			return fail(err, errlen, "eal.extra_args[%zu]: must be a non-empty string", i);
		cfg->eal.extra_args[i] = strdup(json_string_value(v));
		if (!cfg->eal.extra_args[i])
			return fail(err, errlen, "eal.extra_args[%zu]: out of memory", i);
		cfg->eal.n_extra = (unsigned)i + 1;
	}
	return 0;
}

/* uplink.rx_queues: "auto" (0) or a queue count 1..SN_CONFIG_UPLINK_RXQ_MAX. */
static int decode_rx_queues(struct sn_config *cfg, json_t *u, json_t *d, char *err, size_t errlen)
{
	json_t *v = u ? json_object_get(u, "rx_queues") : NULL;

	if (!v)
		v = json_object_get(d, "rx_queues");
	if (!v || (json_is_string(v) && !strcmp(json_string_value(v), "auto"))) {
		cfg->uplink.rx_queues = 0;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > SN_CONFIG_UPLINK_RXQ_MAX)
		return fail(err, errlen, "uplink.rx_queues: must be \"auto\" or an integer 1..%d",
			    SN_CONFIG_UPLINK_RXQ_MAX);
	cfg->uplink.rx_queues = (unsigned)json_integer_value(v);
	return 0;
}

/* Layout ncore: eal.worker_cpus, one CPU per worker lcore (default: none,
 * every worker on eal.worker_cpu); the count is checked in check_rules. */
static int decode_worker_cpus(struct sn_config *cfg, json_t *u, json_t *d, char *err, size_t errlen)
{
	json_t *a = u ? json_object_get(u, "worker_cpus") : NULL, *v;
	size_t i;

	if (!a)
		a = json_object_get(d, "worker_cpus");
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > SN_CONFIG_WORKERS_MAX)
		return fail(err, errlen, "eal.worker_cpus: must be an array of at most %u CPU numbers",
			    SN_CONFIG_WORKERS_MAX);
	json_array_foreach(a, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1023)
			return fail(err, errlen, "eal.worker_cpus[%zu]: must be an integer 0..1023", i);
		cfg->eal.worker_cpus[i] = (unsigned)json_integer_value(v);
		cfg->eal.n_worker_cpus = (unsigned)i + 1;
	}
	return 0;
}

/* "DDDD:BB:DD.F" or "BB:DD.F" (domain 0) into the form DPDK names PCI
 * ethdevs by: lower case, 4-digit domain. */
static bool pci_addr_normalize(char *addr)
{
	unsigned dom = 0, bus, dev, fn;
	char tail;

	if (sscanf(addr, "%4x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &tail) != 4) {
		dom = 0;
		if (sscanf(addr, "%2x:%2x.%1x%c", &bus, &dev, &fn, &tail) != 3)
			return false;
	}
	if (dev > 0x1f || fn > 7 || strchr(addr, '+') || strchr(addr, '-') || strchr(addr, ' '))
		return false;
	snprintf(addr, SN_CONFIG_PCI_MAX + 1, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	return true;
}

/* The uplink's kind from which of "pci" / "af_xdp" is set (u: the user's
 * uplink object, may be NULL); "devargs" then defaults to no extra
 * arguments instead of the default vdev string. The af_xdp_* keys are
 * refused for the other kinds unless at their default (def: the default
 * uplink section), a vdev name (devargs up to the first ',')
 * must be an ethdev name. */
static int decode_uplink_kind(struct sn_config *cfg, json_t *u, json_t *def, char *err,
			      size_t errlen)
{
	static const char *const xdp_keys[] = { "af_xdp_start_queue", "af_xdp_queues",
						"af_xdp_busy_budget" };
	const bool pci = cfg->uplink.pci[0], xdp = cfg->uplink.af_xdp[0];

	if (pci && xdp)
		return fail(err, errlen, "uplink: give one of uplink.pci and uplink.af_xdp, not both");
	cfg->uplink.kind = pci ? SN_UPLINK_PCI : xdp ? SN_UPLINK_AF_XDP : SN_UPLINK_VDEV;
	if (pci && !pci_addr_normalize(cfg->uplink.pci))
		return fail(err, errlen, "uplink.pci: must be a PCI address DDDD:BB:DD.F "
			    "(as lspci -D shows it), got \"%s\"", cfg->uplink.pci);
	if (cfg->uplink.kind != SN_UPLINK_VDEV && !(u && json_object_get(u, "devargs")))
		cfg->uplink.devargs[0] = '\0';
	if (cfg->uplink.kind == SN_UPLINK_VDEV && !cfg->uplink.devargs[0])
		return fail(err, errlen, "uplink.devargs: must name a --vdev device "
			    "(or set uplink.pci or uplink.af_xdp)");
	for (const char *c = cfg->uplink.af_xdp; *c; c++)
		if (*c == ',' || *c == '/' || *c == '=' || *c == ' ')
			return fail(err, errlen, "uplink.af_xdp: not an interface name: \"%s\"",
				    cfg->uplink.af_xdp);
	if (xdp && (!strcmp(cfg->uplink.af_xdp, ".") || !strcmp(cfg->uplink.af_xdp, "..")))
		return fail(err, errlen, "uplink.af_xdp: not an interface name: \"%s\"",
			    cfg->uplink.af_xdp);
	for (size_t i = 0; u && !xdp && i < sizeof(xdp_keys) / sizeof(xdp_keys[0]); i++) {
		json_t *v = json_object_get(u, xdp_keys[i]);

		/* The default value is accepted (--print-default-config has it). */
		if (v && !json_equal(v, json_object_get(def, xdp_keys[i])))
			return fail(err, errlen, "uplink.%s: only with uplink.af_xdp", xdp_keys[i]);
	}
	if (cfg->uplink.kind == SN_UPLINK_VDEV) {
		const size_t n = strcspn(cfg->uplink.devargs, ",");

		if (n == 0)
			return fail(err, errlen, "uplink.devargs: must start with the device name "
				    "(\"net_tap0,iface=...\"), got \"%s\"", cfg->uplink.devargs);
		if (n > SN_CONFIG_ETHNAME_MAX)
			return fail(err, errlen, "uplink.devargs: device name \"%.*s\" is too long "
				    "(%zu characters, at most %d)", (int)n, cfg->uplink.devargs, n,
				    SN_CONFIG_ETHNAME_MAX);
	}
	return 0;
}

/* The AF_XDP uplink's layout (sn_eal.c refuses it again when building the
 * EAL arguments): here so that the error names the uplink key. */
static int check_uplink_rules(const struct sn_config *cfg, char *err, size_t errlen)
{
	if (cfg->uplink.enabled && cfg->uplink.kind == SN_UPLINK_AF_XDP &&
	    cfg->datapath.layout != SN_LAYOUT_1CORE)
		return fail(err, errlen, "uplink.af_xdp: datapath.layout \"1core\" only (a "
			    "net_af_xdp TX queue shares its XDP socket with an RX queue: one lcore "
			    "must both poll and transmit), got \"%s\"", cfg->datapath.layout_name);
	return 0;
}

static int decode_port(struct sn_config_port *p, json_t *o, size_t i, char *err, size_t errlen)
{
	const char *key;
	json_t *v;

	if (!json_is_object(o))
		return fail(err, errlen, "ports[%zu]: must be an object", i);
	json_object_foreach(o, key, v) {
		if (!key_known_list(port_keys, key))
			return fail(err, errlen, "ports[%zu].%.64s: unknown key", i, key);
	}
	v = json_object_get(o, "name");
	if (!v)
		return fail(err, errlen, "ports[%zu].name: required", i);
	if (!json_is_string(v) || !sn_config_port_name_ok(json_string_value(v)) ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return fail(err, errlen, "ports[%zu].name: must match [A-Za-z0-9_.-]{1,32}", i);
	snprintf(p->name, sizeof(p->name), "%s", json_string_value(v));

	v = json_object_get(o, "type");
	if (v && (!json_is_string(v) || strcmp(json_string_value(v), "vhost-user")))
		return fail(err, errlen, "ports[%zu].type: must be \"vhost-user\"", i);

	v = json_object_get(o, "path");
	if (!v)
		return fail(err, errlen, "ports[%zu].path: required", i);
	if (!json_is_string(v) || !sn_config_socket_path_ok(json_string_value(v)) ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return fail(err, errlen, "ports[%zu].path: must be a socket path of 1..%d bytes",
			    i, SN_CONFIG_PATH_MAX);
	snprintf(p->path, sizeof(p->path), "%s", json_string_value(v));

	v = json_object_get(o, "mode");
	p->client = false;
	if (v) {
		if (!json_is_string(v) || (strcmp(json_string_value(v), "server") &&
					   strcmp(json_string_value(v), "client")))
			return fail(err, errlen, "ports[%zu].mode: must be \"server\" or \"client\"", i);
		p->client = !strcmp(json_string_value(v), "client");
	}

	v = json_object_get(o, "completion");
	p->deferred = false;
	if (v) {
		if (!json_is_string(v) || (strcmp(json_string_value(v), "immediate") &&
					   strcmp(json_string_value(v), "deferred")))
			return fail(err, errlen,
				    "ports[%zu].completion: must be \"immediate\" or \"deferred\"", i);
		p->deferred = !strcmp(json_string_value(v), "deferred");
	}
	v = json_object_get(o, "max_hold_us");
	p->max_hold_us = 0;
	if (v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > SN_CONFIG_MAX_HOLD_US_MAX)
			return fail(err, errlen, "ports[%zu].max_hold_us: must be an integer 0..%u",
				    i, SN_CONFIG_MAX_HOLD_US_MAX);
		if (!p->deferred)
			return fail(err, errlen,
				    "ports[%zu].max_hold_us: only with \"completion\": \"deferred\"", i);
		p->max_hold_us = (uint32_t)json_integer_value(v);
	}
	v = json_object_get(o, "unmarked_max_hold_us");
	p->unmarked_max_hold_us = SN_CONFIG_UNMARKED_HOLD_US_DEF;
	if (v) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > SN_CONFIG_MAX_HOLD_US_MAX)
			return fail(err, errlen,
				    "ports[%zu].unmarked_max_hold_us: must be an integer 1..%u",
				    i, SN_CONFIG_MAX_HOLD_US_MAX);
		if (!p->deferred)
			return fail(err, errlen, "ports[%zu].unmarked_max_hold_us: only with "
				    "\"completion\": \"deferred\"", i);
		p->unmarked_max_hold_us = (uint32_t)json_integer_value(v);
	}
	v = json_object_get(o, "queues");
	p->queues = 1;
	if (v) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > SN_CONFIG_QUEUES_MAX)
			return fail(err, errlen, "ports[%zu].queues: must be an integer 1..%u",
				    i, SN_CONFIG_QUEUES_MAX);
		p->queues = (unsigned)json_integer_value(v);
	}
	/* Queue -> worker map (layout ncore); range checked in check_rules,
	 * which knows the number of workers. */
	v = json_object_get(o, "workers");
	p->has_workers = false;
	if (v) {
		json_t *w;
		size_t k;

		if (!json_is_array(v) || json_array_size(v) != p->queues)
			return fail(err, errlen, "ports[%zu].workers: must be an array of %u worker "
				    "indexes, one per queue", i, p->queues);
		json_array_foreach(v, k, w) {
			if (!json_is_integer(w) || json_integer_value(w) < 0 ||
			    json_integer_value(w) >= SN_CONFIG_WORKERS_MAX)
				return fail(err, errlen, "ports[%zu].workers[%zu]: must be an integer "
					    "0..%u", i, k, SN_CONFIG_WORKERS_MAX - 1);
			p->workers[k] = (uint8_t)json_integer_value(w);
		}
		p->has_workers = true;
	}
	{
		char field[32], msg[160];

		snprintf(field, sizeof(field), "ports[%zu].", i);
		if (sn_bind_from_json(&p->bind, json_object_get(o, "allowed_macs"),
				      json_object_get(o, "allowed_ips"), field, msg, sizeof(msg)))
			return fail(err, errlen, "%s", msg);
	}
	return 0;
}

/* An allowed MAC belongs to one port: two would fight over its static
 * entry (doc/isolation.md "Static entries and the move policy"). */
static int unique_macs(const struct sn_config *cfg, char *err, size_t errlen)
{
	for (unsigned i = 1; i < cfg->n_ports; i++)
		for (unsigned k = 0; k < cfg->ports[i].bind.n_macs; k++)
			for (unsigned j = 0; j < i; j++)
				if (sn_bind_has_key(&cfg->ports[j].bind,
						    cfg->ports[i].bind.mac_key[k])) {
					const uint8_t *m = cfg->ports[i].bind.mac[k];

					return fail(err, errlen, "ports[%u].allowed_macs[%u]: "
						    "%02x:%02x:%02x:%02x:%02x:%02x is also in "
						    "ports[%u].allowed_macs (a MAC is bound to "
						    "one port)", i, k, m[0], m[1], m[2], m[3],
						    m[4], m[5], j);
				}
	return 0;
}

static int decode_ports(struct sn_config *cfg, json_t *a, char *err, size_t errlen)
{
	json_t *o;
	size_t i;
	int rc;

	if (!json_is_array(a))
		return fail(err, errlen, "ports: must be an array");
	if (json_array_size(a) > SN_CONFIG_PORTS_MAX)
		return fail(err, errlen, "ports: %zu ports, more than the vhost library's limit %d",
			    json_array_size(a), SN_CONFIG_PORTS_MAX);
	json_array_foreach(a, i, o) {
		rc = decode_port(&cfg->ports[i], o, i, err, errlen);
		if (rc)
			return rc;
		cfg->n_ports = (unsigned)i + 1;
	}
	return unique_macs(cfg, err, errlen);
}

static bool prefix_ok(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

unsigned sn_config_uplink_mbufs(const struct sn_config *cfg, unsigned n_rxq)
{
	if (!cfg->uplink.enabled)
		return 0;
	if (n_rxq == 0)
		n_rxq = cfg->uplink.rx_queues ? cfg->uplink.rx_queues : SN_CONFIG_UPLINK_RXQ_MAX;
	return n_rxq * (cfg->uplink.rx_desc + cfg->datapath.burst);
}

unsigned sn_config_mbufs_auto(const struct sn_config *cfg)
{
	unsigned long long q = 1, n;

	for (unsigned i = 0; i < cfg->n_ports; i++)
		if (cfg->ports[i].queues > q)
			q = cfg->ports[i].queues;
	/* four bursts per queue of every port (a reserve of two and as much
	 * again shared) */
	n = sn_config_uplink_mbufs(cfg, 0) +
	    (unsigned long long)cfg->datapath.max_ports * q * 4 * cfg->datapath.burst;
	if (n < 16383)
		n = 16383;
	return n > (1u << 24) ? 1u << 24 : (unsigned)n;
}

unsigned sn_config_pool_mb(unsigned n)
{
	/* object: mbuf header (128) + headroom + data room, cache aligned,
	 * plus the mempool's header per object (64) */
	const unsigned long long obj = 128 + 2048 + 128 + 64;

	return (unsigned)((n * obj + (1u << 20) - 1) >> 20);
}

unsigned sn_config_port_slots = SN_CONFIG_MAX_PORTS_DEF + 1;

int sn_config_set_port_slots(unsigned max_ports)
{
	if (max_ports == 0 || max_ports > SN_CONFIG_PORTS_MAX)
		return -EINVAL;
	sn_config_port_slots = max_ports + 1;
	return 0;
}

static int check_rules(struct sn_config *cfg, char *err, size_t errlen)
{
	if (cfg->n_ports > cfg->datapath.max_ports)
		return fail(err, errlen, "ports: %u ports, more than datapath.max_ports %u",
			    cfg->n_ports, cfg->datapath.max_ports);
	/* a net_vhost uplink is a server-mode socket of the same vhost fd set */
	if (cfg->uplink.enabled && !strncmp(cfg->uplink.devargs, "net_vhost", 9) &&
	    cfg->datapath.max_ports > SN_CONFIG_PORTS_MAX - 1)
		return fail(err, errlen, "datapath.max_ports: at most %d with a net_vhost uplink "
			    "(the uplink is one of the vhost library's %d server-mode ports)", SN_CONFIG_PORTS_MAX - 1,
			    SN_CONFIG_PORTS_MAX);
	if (!prefix_ok(cfg->eal.file_prefix) || cfg->eal.file_prefix[0] == '.')
		return fail(err, errlen, "eal.file_prefix: must match [A-Za-z0-9_.-]+ (not starting with '.')");
	if (cfg->datapath.mbufs == 0) {
		cfg->datapath.mbufs = sn_config_mbufs_auto(cfg);
		/* The pool must fit the EAL's memory with room to spare for
		 * the rings, tables and the vhost library (a quarter). A
		 * number given by hand is left to the mempool's own check. */
		if (sn_config_pool_mb(cfg->datapath.mbufs) > cfg->eal.memory_mb * 3 / 4)
			return fail(err, errlen, "datapath.mbufs: \"auto\" sizes the pool for "
				    "datapath.max_ports %u: %u mbufs, %u MB, more than 3/4 of "
				    "eal.memory_mb %u (raise eal.memory_mb to %u or lower "
				    "datapath.max_ports)", cfg->datapath.max_ports,
				    cfg->datapath.mbufs, sn_config_pool_mb(cfg->datapath.mbufs),
				    cfg->eal.memory_mb,
				    sn_config_pool_mb(cfg->datapath.mbufs) * 4 / 3 + 1);
	}
	if ((unsigned long long)cfg->datapath.mbuf_cache * 3 / 2 > cfg->datapath.mbufs)
		return fail(err, errlen, "datapath.mbuf_cache: must be at most mbufs / 1.5 (%u)",
			    cfg->datapath.mbufs * 2 / 3);
	if (!strcmp(cfg->datapath.layout_name, "1core"))
		cfg->datapath.layout = SN_LAYOUT_1CORE;
	else if (!strcmp(cfg->datapath.layout_name, "2core"))
		cfg->datapath.layout = SN_LAYOUT_2CORE;
	else if (!strcmp(cfg->datapath.layout_name, "ncore"))
		cfg->datapath.layout = SN_LAYOUT_NCORE;
	else
		return fail(err, errlen, "datapath.layout: must be \"1core\", \"2core\" or \"ncore\", "
			    "got \"%s\"", cfg->datapath.layout_name);
	/* Workers: 0 = the layout's default (1; ncore 2). */
	if (cfg->datapath.layout == SN_LAYOUT_NCORE) {
		if (cfg->datapath.workers == 0)
			cfg->datapath.workers = cfg->eal.n_worker_cpus ? cfg->eal.n_worker_cpus : 2;
		if (cfg->datapath.workers < 2)
			return fail(err, errlen, "datapath.workers: layout \"ncore\" needs 2..%u workers",
				    SN_CONFIG_WORKERS_MAX);
	} else {
		if (cfg->datapath.workers > 1)
			return fail(err, errlen, "datapath.workers: layout \"%s\" has 1 worker; "
				    "use \"ncore\" for more", cfg->datapath.layout_name);
		cfg->datapath.workers = 1;
		if (cfg->eal.n_worker_cpus)
			return fail(err, errlen, "eal.worker_cpus: only with layout \"ncore\" "
				    "(use eal.worker_cpu)");
	}
	if (cfg->eal.n_worker_cpus && cfg->eal.n_worker_cpus != cfg->datapath.workers)
		return fail(err, errlen, "eal.worker_cpus: %u CPUs for %u workers (one per worker)",
			    cfg->eal.n_worker_cpus, cfg->datapath.workers);
	if (!strcmp(cfg->datapath.mac_move_name, "vm_sticky"))
		cfg->datapath.mac_move_any = false;
	else if (!strcmp(cfg->datapath.mac_move_name, "any"))
		cfg->datapath.mac_move_any = true;
	else
		return fail(err, errlen, "datapath.mac_move: must be \"vm_sticky\" or \"any\", "
			    "got \"%s\"", cfg->datapath.mac_move_name);
	if (cfg->datapath.mac_table_size & (cfg->datapath.mac_table_size - 1))
		return fail(err, errlen, "datapath.mac_table_size: must be a power of two");
	if (cfg->uplink.enabled && !sn_config_port_name_ok(cfg->uplink.name))
		return fail(err, errlen, "uplink.name: must match [A-Za-z0-9_.-]{1,32}");
	for (unsigned i = 0; i < cfg->n_ports; i++) {
		const struct sn_config_port *p = &cfg->ports[i];

		if (!strcmp(p->name, "uplink") ||
		    (cfg->uplink.enabled && !strcmp(p->name, cfg->uplink.name)))
			return fail(err, errlen, "ports[%u].name: \"%s\" is reserved for the uplink", i, p->name);
		if (!strcmp(p->path, cfg->control.socket))
			return fail(err, errlen, "ports[%u].path: same as control.socket", i);
		for (unsigned k = 0; p->has_workers && k < p->queues; k++)
			if (p->workers[k] >= cfg->datapath.workers)
				return fail(err, errlen, "ports[%u].workers[%u]: worker %u does not exist "
					    "(datapath.workers %u: 0..%u)", i, k, p->workers[k],
					    cfg->datapath.workers, cfg->datapath.workers - 1);
		for (unsigned j = 0; j < i; j++) {
			if (!strcmp(p->name, cfg->ports[j].name))
				return fail(err, errlen, "ports[%u].name: \"%s\" already used by ports[%u]",
					    i, p->name, j);
			if (!strcmp(p->path, cfg->ports[j].path))
				return fail(err, errlen, "ports[%u].path: already used by ports[%u]", i, j);
		}
	}
	return 0;
}

/* sn_config_parse(); set_slots: also set sn_config_port_slots. */
static int parse(struct sn_config *cfg, const char *text, size_t len, const char *origin,
		 bool set_slots, char *err, size_t errlen)
{
	json_t *def = NULL, *user = NULL, *u, *v;
	json_error_t je;
	const char *key;
	int rc = -EINVAL;

	memset(cfg, 0, sizeof(*cfg));
	def = json_loadb(sn_default_config, sn_default_config_len, JSON_REJECT_DUPLICATES, &je);
	if (!def) {
		fail(err, errlen, "(embedded default): %d:%d: %s", je.line, je.column, je.text);
		goto out;
	}
	user = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!user) {
		fail(err, errlen, "%s:%d:%d: %s", origin, je.line, je.column, je.text);
		goto out;
	}
	if (!json_is_object(user)) {
		fail(err, errlen, "(root): must be an object");
		goto out;
	}
	json_object_foreach(user, key, v) {
		if (!key_known_list(root_keys, key)) {
			fail(err, errlen, "%.64s: unknown key", key);
			goto out;
		}
	}
	u = json_object_get(user, "eal");
	if ((rc = decode_section(cfg, eal_keys, u, json_object_get(def, "eal"), "eal", err, errlen)))
		goto out;
	if ((rc = decode_extra_args(cfg, u, json_object_get(def, "eal"), err, errlen)))
		goto out;
	if ((rc = decode_worker_cpus(cfg, u, json_object_get(def, "eal"), err, errlen)))
		goto out;
	if ((rc = decode_section(cfg, control_keys, json_object_get(user, "control"),
				 json_object_get(def, "control"), "control", err, errlen)))
		goto out;
	if ((rc = decode_section(cfg, datapath_keys, json_object_get(user, "datapath"),
				 json_object_get(def, "datapath"), "datapath", err, errlen)))
		goto out;
	if (set_slots && (rc = sn_config_set_port_slots(cfg->datapath.max_ports)))
		goto out;   /* cannot happen: the key's range is checked */
	u = json_object_get(user, "uplink");
	if (!u || !json_is_null(u)) {
		cfg->uplink.enabled = true;
		if ((rc = decode_section(cfg, uplink_keys, u, json_object_get(def, "uplink"),
					 "uplink", err, errlen)))
			goto out;
		if ((rc = decode_uplink_kind(cfg, u, json_object_get(def, "uplink"), err, errlen)))
			goto out;
		if ((rc = decode_rx_queues(cfg, u, json_object_get(def, "uplink"), err, errlen)))
			goto out;
	}
	if ((rc = decode_section(cfg, quota_keys, json_object_get(user, "quota"),
				 json_object_get(def, "quota"), "quota", err, errlen)))
		goto out;
	u = json_object_get(user, "ports");
	if ((rc = decode_ports(cfg, u ? u : json_object_get(def, "ports"), err, errlen)))
		goto out;
	if (!sn_config_socket_path_ok(cfg->control.socket)) {
		rc = fail(err, errlen, "control.socket: must be a socket path of 1..%d bytes",
			  SN_CONFIG_PATH_MAX);
		goto out;
	}
	rc = check_rules(cfg, err, errlen);
	if (!rc)
		rc = check_uplink_rules(cfg, err, errlen);
	u = json_object_get(user, "policy");
	if (!rc && u && !json_is_null(u)) {
		/* Validated here so a bad file fails at startup with
		 * the field named; sn_policy_parse runs again at publication. */
		struct sn_policy pol;
		char perr[SN_CONFIG_ERR_MAX - 16];

		if (sn_policy_parse(u, &pol, perr, sizeof(perr))) {
			rc = fail(err, errlen, "%s", perr);
			goto out;
		}
		if (cfg->uplink.enabled && sn_policy_port_find(&pol, cfg->uplink.name)) {
			rc = fail(err, errlen, "policy.ports.%s: the uplink is shaped by "
				  "policy.uplink, not by a port entry", cfg->uplink.name);
			goto out;
		}
		cfg->policy_json = json_dumps(u, JSON_COMPACT);
		if (!cfg->policy_json)
			rc = fail(err, errlen, "policy: out of memory");
	}
out:
	json_decref(user);
	json_decref(def);
	if (rc)
		sn_config_fini(cfg);
	return rc;
}

int sn_config_parse(struct sn_config *cfg, const char *text, size_t len,
		    const char *origin, char *err, size_t errlen)
{
	return parse(cfg, text, len, origin, true, err, errlen);
}

static int load(struct sn_config *cfg, const char *path, bool set_slots, char *err,
		size_t errlen)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	FILE *f = fopen(path, "rb");
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "config: %s: %s", path, strerror(-rc));
		return rc;
	}
	for (;;) {
		if (len == cap) {
			char *nb;

			cap = cap ? cap * 2 : 4096;
			if (cap > (16u << 20)) {
				rc = fail(err, errlen, "%s: larger than 16 MiB", path);
				goto out;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				rc = fail(err, errlen, "%s: out of memory", path);
				goto out;
			}
			buf = nb;
		}
		errno = 0;
		size_t n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) { /* e.g. EISDIR: fopen() opens a directory */
		rc = fail(err, errlen, "%s: %s", path, errno ? strerror(errno) : "read error");
		goto out;
	}
	rc = parse(cfg, buf, len, path, set_slots, err, errlen);
out:
	free(buf);
	fclose(f);
	return rc;
}

int sn_config_load(struct sn_config *cfg, const char *path, char *err, size_t errlen)
{
	return load(cfg, path, true, err, errlen);
}

int sn_config_load_again(struct sn_config *cfg, const char *path, char *err, size_t errlen)
{
	return load(cfg, path, false, err, errlen);
}

/* The first key of specs whose decoded value differs between a and b
 * (section path sec) into key[len]: true, or false when they agree. */
static bool section_differs(const struct key_spec *specs, const char *sec,
			    const struct sn_config *a, const struct sn_config *b, char *key,
			    size_t len)
{
	for (const struct key_spec *ks = specs; ks->key; ks++)
		if (ks->size && memcmp((const char *)a + ks->off, (const char *)b + ks->off,
				       ks->size)) {
			snprintf(key, len, "%s.%s", sec, ks->key);
			return true;
		}
	return false;
}

bool sn_config_static_differs(const struct sn_config *a, const struct sn_config *b, char *key,
			      size_t len)
{
	bool extra = a->eal.n_extra != b->eal.n_extra;

	for (unsigned i = 0; !extra && i < a->eal.n_extra; i++)
		extra = strcmp(a->eal.extra_args[i], b->eal.extra_args[i]) != 0;
	/* The uplink first: its RX share is part of what "auto" sizes become. */
	if (a->uplink.enabled != b->uplink.enabled) {
		snprintf(key, len, "uplink");
		return true;
	}
	if (a->uplink.enabled && section_differs(uplink_keys, "uplink", a, b, key, len))
		return true;
	if (a->uplink.enabled && a->uplink.rx_queues != b->uplink.rx_queues) {
		snprintf(key, len, "uplink.rx_queues");
		return true;
	}
	if (section_differs(eal_keys, "eal", a, b, key, len) ||
	    section_differs(control_keys, "control", a, b, key, len) ||
	    section_differs(datapath_keys, "datapath", a, b, key, len) ||
	    section_differs(quota_keys, "quota", a, b, key, len))
		return true;
	if (extra) {
		snprintf(key, len, "eal.extra_args");
		return true;
	}
	if (a->eal.n_worker_cpus != b->eal.n_worker_cpus ||
	    memcmp(a->eal.worker_cpus, b->eal.worker_cpus, sizeof(a->eal.worker_cpus))) {
		snprintf(key, len, "eal.worker_cpus");
		return true;
	}
	return false;
}

void sn_config_fini(struct sn_config *cfg)
{
	free(cfg->policy_json);
	cfg->policy_json = NULL;
	for (unsigned i = 0; i < cfg->eal.n_extra; i++) {
		free(cfg->eal.extra_args[i]);
		cfg->eal.extra_args[i] = NULL;
	}
	cfg->eal.n_extra = 0;
}
