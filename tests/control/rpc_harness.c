/* SPDX-License-Identifier: BSD-3-Clause */
/* rpc_harness.c — the JSON-RPC server (sn_rpc*.c) served alone, without
 * DPDK (tests only).
 *
 * usage: rpc_harness SOCKET SCHEMA_FILE MAX_REQUEST_BYTES MAX_CLIENTS
 *
 * Registers mock handlers for the methods of rpc_api.json (a port table in
 * memory that behaves like schednicd's: same validation, same error codes)
 * plus test-only methods when the schema given defines them:
 *   test.big  {"size": integer}  -> a string of that many 'x' (write buffering)
 *   test.echo {...}              -> its params (validation of every type)
 *   test.fail {}                 -> handler failure without a message (-32603)
 * A schema method left without handler must answer -32601.
 * Prints "ready" once listening; exits 0 after `shutdown` or SIGTERM, after
 * freeing everything (the tests build it with ASan/UBSan, leaks included).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_rpc.h"

#define MAX_PORTS 64

struct port {
	char name[33];
	char path[108];
	char mode[8];
	json_t *allowed_macs;   /* as given (schednicd validates them), or [] */
};

static struct port ports[MAX_PORTS];
static unsigned nports;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static struct port *port_find(const char *name)
{
	for (unsigned i = 0; i < nports; i++)
		if (strcmp(ports[i].name, name) == 0)
			return &ports[i];
	return NULL;
}

static int name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 32)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("_.-", s[i])))
			return 0;
	return 1;
}

static json_t *h_version(json_t *params, void *arg, struct sn_rpc_error *err)
{
	(void)params; (void)arg; (void)err;
	return json_pack("{s:s, s:s, s:i}", "version", "0.1.0", "dpdk", "mock", "api", 1);
}

static json_t *h_port_add(json_t *params, void *arg, struct sn_rpc_error *err)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	const char *path = json_string_value(json_object_get(params, "path"));
	json_t *m = json_object_get(params, "mode");
	struct port *p;

	(void)arg;
	if (!name_ok(name) || strcmp(name, "uplink") == 0)
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
				   "params.name: must match [A-Za-z0-9_.-]{1,32} and not be \"uplink\"");
	if (strlen(path) == 0 || strlen(path) >= sizeof(p->path))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "params.path: bad length");
	for (unsigned i = 0; i < nports; i++)
		if (strcmp(ports[i].name, name) == 0 || strcmp(ports[i].path, path) == 0)
			return sn_rpc_fail(err, SN_RPC_ERR_EXISTS, "port %s: name or path in use", name);
	if (nports == MAX_PORTS)
		return sn_rpc_fail(err, SN_RPC_ERR_RESOURCE, "port limit (%d) reached", MAX_PORTS);
	p = &ports[nports++];
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->path, sizeof(p->path), "%s", path);
	snprintf(p->mode, sizeof(p->mode), "%s", m ? json_string_value(m) : "server");
	m = json_object_get(params, "allowed_macs");
	p->allowed_macs = m ? json_deep_copy(m) : json_array();
	return json_pack("{s:s}", "name", name);
}

static json_t *h_port_del(json_t *params, void *arg, struct sn_rpc_error *err)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	struct port *p;

	(void)arg;
	if (strcmp(name, "uplink") == 0)
		return sn_rpc_fail(err, SN_RPC_ERR_BUSY, "the uplink cannot be deleted");
	p = port_find(name);
	if (!p)
		return sn_rpc_fail(err, SN_RPC_ERR_NOT_FOUND, "no such port: %s", name);
	json_decref(p->allowed_macs);
	*p = ports[--nports];
	return json_object();
}

static json_t *port_json(const struct port *p, int with_stats)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:O, s:[]}", "name", p->name,
			      "type", "vhost-user", "owner", "rpc", "path", p->path, "mode", p->mode,
			      "state", "down", "completion_mode", "immediate",
			      "allowed_macs", p->allowed_macs, "allowed_ips");

	if (o && with_stats) {
		json_object_del(o, "path");
		json_object_del(o, "mode");
		json_t *c = json_pack("{s:i, s:i, s:i, s:i, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, "
			"s:i, s:i, s:i, s:i}}",
			"rx_packets", 0, "rx_bytes", 0, "tx_packets", 0, "tx_bytes", 0,
			"drops", "no_mbuf", 0, "ring_full", 0, "unknown_dst", 0,
			"malformed", 0, "port_down", 0, "hairpin", 0, "gso_failed", 0,
			"spoofed", 0, "spoofed_arp", 0, "spoofed_nd", 0, "quota_backlog", 0);

		json_object_update(o, c);
		json_decref(c);
	}
	return o;
}

static json_t *h_port_list(json_t *params, void *arg, struct sn_rpc_error *err)
{
	json_t *a = json_array();

	(void)params; (void)arg; (void)err;
	for (unsigned i = 0; i < nports; i++)
		json_array_append_new(a, port_json(&ports[i], 0));
	return json_pack("{s:o}", "ports", a);
}

static json_t *h_stats_get(json_t *params, void *arg, struct sn_rpc_error *err)
{
	json_t *only = json_object_get(params, "port");
	json_t *a;
	struct port *p = NULL;
	struct sn_rpc_stats rs;

	sn_rpc_stats_read(arg, &rs);   /* arg: the server (the real sn_rpc counters) */
	if (only) {
		p = port_find(json_string_value(only));
		if (!p)
			return sn_rpc_fail(err, SN_RPC_ERR_NOT_FOUND, "no such port: %s",
					   json_string_value(only));
	}
	a = json_array();
	for (unsigned i = 0; i < nports; i++)
		if (!p || p == &ports[i])
			json_array_append_new(a, port_json(&ports[i], 1));
	return json_pack("{s:o, s:{s:i, s:i}, s:{s:i, s:i, s:i, s:i, s:i}, s:f, "
			 "s:{s:I, s:I, s:{s:I, s:I, s:I}}}",
			 "ports", a, "mempool", "size", 8191, "in_use", 0,
			 "mac_table", "entries", 0, "learned", 0, "aged", 0, "moves", 0,
			 "full", 0, "uptime_s", 1.0,
			 "control", "accepted", (json_int_t)rs.accepted,
			 "requests", (json_int_t)rs.requests,
			 "dropped", "idle_timeout", (json_int_t)rs.idle_timeouts,
			 "output_overflow", (json_int_t)rs.output_overflow,
			 "partial_hangup", (json_int_t)rs.partial_hangups);
}

static json_t *h_shutdown(json_t *params, void *arg, struct sn_rpc_error *err)
{
	(void)params; (void)arg; (void)err;
	stop = 1;
	return json_object();
}

static json_t *h_big(json_t *params, void *arg, struct sn_rpc_error *err)
{
	json_int_t n = json_integer_value(json_object_get(params, "size"));
	json_t *s;
	char *buf;

	(void)arg;
	if (n < 0 || n > (64 << 20))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "params.size: out of range");
	buf = malloc((size_t)n + 1);
	if (!buf)
		return NULL;
	memset(buf, 'x', (size_t)n);
	buf[n] = '\0';
	s = json_pack("{s:s}", "data", buf);
	free(buf);
	return s;
}

static json_t *h_echo(json_t *params, void *arg, struct sn_rpc_error *err)
{
	(void)arg; (void)err;
	return json_deep_copy(params);
}

static json_t *h_fail(json_t *params, void *arg, struct sn_rpc_error *err)
{
	(void)params; (void)arg; (void)err;
	return NULL;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return NULL;
	}
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		buf[n] = '\0';
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	static const struct { const char *name; sn_rpc_handler_t fn; } handlers[] = {
		{ "version", h_version }, { "port.add", h_port_add },
		{ "port.del", h_port_del }, { "port.list", h_port_list },
		{ "stats.get", h_stats_get }, { "shutdown", h_shutdown },
		{ "test.big", h_big }, { "test.echo", h_echo }, { "test.fail", h_fail },
	};
	struct sn_rpc_config cfg;
	struct sn_rpc_server *srv;
	struct sigaction sa = { .sa_handler = on_signal };
	char *schema, *end;
	int rc = 0;

	if (argc != 5) {
		fprintf(stderr, "usage: %s SOCKET SCHEMA MAX_REQUEST_BYTES MAX_CLIENTS\n", argv[0]);
		return 2;
	}
	schema = read_file(argv[2]);
	if (!schema) {
		perror(argv[2]);
		return 1;
	}
	cfg.path = argv[1];
	cfg.api_json = schema;
	cfg.max_request_bytes = strtoul(argv[3], &end, 10);
	cfg.max_clients = (unsigned)strtoul(argv[4], &end, 10);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	srv = sn_rpc_server_create(&cfg);
	if (!srv) {
		fprintf(stderr, "sn_rpc_server_create: %s\n", strerror(errno));
		free(schema);
		return 1;
	}
	for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++) {
		rc = sn_rpc_register(srv, handlers[i].name, handlers[i].fn, srv);
		if (rc && rc != -ENOENT) {
			fprintf(stderr, "register %s: %s\n", handlers[i].name, strerror(-rc));
			return 1;
		}
	}
	if (sn_rpc_register(srv, "version", h_version, NULL) != -EEXIST ||
	    sn_rpc_register(srv, "no.such.method", h_version, NULL) != -ENOENT) {
		fprintf(stderr, "sn_rpc_register: wrong duplicate/unknown handling\n");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		rc = sn_rpc_poll(srv, 50);
		if (rc < 0) {
			fprintf(stderr, "sn_rpc_poll: %s\n", strerror(-rc));
			break;
		}
	}
	sn_rpc_server_destroy(srv);
	for (unsigned i = 0; i < nports; i++)
		json_decref(ports[i].allowed_macs);
	free(schema);
	return rc < 0 ? 1 : 0;
}
