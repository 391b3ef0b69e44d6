/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_rpc.c — JSON-RPC 2.0 server on a unix stream socket.
 *
 * Design. The control plane must never be the reason the daemon dies or
 * stalls, so every client is treated as hostile: one poll() loop owns the
 * listener and all clients, every socket is non-blocking, and each client
 * has exactly two bounded buffers.
 *
 *  - Input: at most max_request_bytes + 1 bytes (one request and its '\n').
 *    Complete lines are served in order; a partial line stays buffered
 *    across polls. A line that cannot fit gets -32600 and the connection is
 *    closed (after the error is flushed and the peer had a short chance to
 *    stop sending, so it can read the error instead of getting a reset).
 *  - Output: responses are appended as compact JSON + '\n' and flushed with
 *    send(MSG_NOSIGNAL) (a vanished peer is EPIPE, never SIGPIPE). While
 *    more than OUT_HIGH bytes are unread the client's further requests wait
 *    (back-pressure); past OUT_MAX the client is dropped.
 *  - Time: a client that moves no byte for IDLE_MS (never finishes a line,
 *    never reads its answers, or just sits there) is dropped, so max_clients
 *    slots cannot be held forever. Clients reconnect per command.
 *  - Connections beyond max_clients get -32002 and are closed. When accept()
 *    runs out of fds the listener is left alone for PAUSE_MS instead of
 *    being polled readable in a spin; refusals are logged at most once per
 *    LOG_EVERY_MS, so a connection flood cannot flood the log either.
 *
 * Requests follow the JSON-RPC 2.0 specification exactly: the id (string,
 * number or null) is echoed; a request without "id" is a notification and
 * gets no response, even on error, except when it is not a valid request at
 * all (parse error, invalid request), which is answered with id null as
 * the specification requires; batches (arrays) are rejected with -32600.
 *
 * The method table is the API schema rpc_api.json (methods -> params ->
 * {type, required, enum, default}). Params are validated against it before
 * a handler runs, and absent optional params get their schema default, so
 * handlers see only well-typed, known keys.
 *
 * Concurrency: single-threaded, see sn_rpc.h. Handlers run inside
 * sn_rpc_poll() on the caller's thread and must not call
 * sn_rpc_server_destroy().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif
#include "sn_rpc.h"
#include "sn_log.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define IDLE_MS       10000               /* drop a client silent this long */
#define LINGER_MS     2000                /* after an oversize error */
#define OUT_HIGH      (256u * 1024)       /* pause reading above this */
#define OUT_MAX       (16u * 1024 * 1024) /* drop the client above this */
#define ACCEPT_BURST  256                 /* accepts per poll */
#define PAUSE_MS      100                 /* accept pause when out of fds */
#define LOG_EVERY_MS  1000                /* rate of "refused" log lines */

struct method {
	const char *name;    /* key in srv->schema (borrowed) */
	json_t *params;      /* schema params object (borrowed) */
	sn_rpc_handler_t fn; /* NULL = not implemented -> -32601 */
	void *arg;
};

struct client {
	int fd;
	bool eof;          /* peer shut its write side */
	bool dead;         /* close at the end of this poll */
	bool overflow;     /* dropped for OUT_MAX (counted at free) */
	uint64_t last_ms;  /* last byte moved either way */
	uint64_t close_at; /* nonzero: lingering after an oversize error */
	char *in;          /* cap = max_request_bytes + 1 */
	size_t in_len;
	size_t scan;       /* in[0..scan) holds no '\n' */
	char *out;
	size_t out_off, out_len, out_cap;
};

struct sn_rpc_server {
	int lfd;
	char *path;
	dev_t sock_dev;    /* to unlink only our own socket at destroy */
	ino_t sock_ino;
	size_t max_req;
	unsigned max_clients;
	unsigned nclients;
	struct client *clients;
	struct pollfd *pfds;
	json_t *schema;
	struct method *methods;
	size_t nmethods;
	uint64_t accept_resume; /* no accept before (after EMFILE/ENFILE) */
	uint64_t refused_log;   /* last "refused" log line */
	unsigned refused;       /* refused since that line */
	struct sn_rpc_stats st;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

json_t *sn_rpc_fail(struct sn_rpc_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return NULL;
}

/* ---- schema ------------------------------------------------------------ */

static const struct {
	const char *name, *phrase;
} param_types[] = {
	{ "string", "a string" }, { "integer", "an integer" }, { "number", "a number" },
	{ "boolean", "a boolean" }, { "object", "an object" }, { "array", "an array" },
};

/* "must be <phrase>" for a known type name, NULL for an unknown one. */
static const char *type_phrase(const char *t)
{
	for (size_t i = 0; i < sizeof(param_types) / sizeof(param_types[0]); i++)
		if (strcmp(t, param_types[i].name) == 0)
			return param_types[i].phrase;
	return NULL;
}

static bool type_matches(const char *t, const json_t *v)
{
	if (strcmp(t, "string") == 0)
		return json_is_string(v);
	if (strcmp(t, "integer") == 0)
		return json_is_integer(v);
	if (strcmp(t, "number") == 0)
		return json_is_number(v);
	if (strcmp(t, "boolean") == 0)
		return json_is_boolean(v);
	if (strcmp(t, "object") == 0)
		return json_is_object(v);
	return json_is_array(v);
}

static int schema_fail(const char *method, const char *param, const char *why)
{
	sn_log("rpc: schema: methods.%s%s%s: %s", method,
		param ? ".params." : "", param ? param : "", why);
	return -EINVAL;
}

static int check_param_spec(const char *m, const char *p, json_t *spec)
{
	json_t *type, *req, *en, *v, *e;
	size_t i;

	if (!json_is_object(spec))
		return schema_fail(m, p, "must be an object");
	type = json_object_get(spec, "type");
	if (!json_is_string(type) || !type_phrase(json_string_value(type)))
		return schema_fail(m, p, "type: must be string|integer|number|boolean|object|array");
	req = json_object_get(spec, "required");
	if (req && !json_is_boolean(req))
		return schema_fail(m, p, "required: must be a boolean");
	en = json_object_get(spec, "enum");
	if (en) {
		if (!json_is_array(en) || json_array_size(en) == 0)
			return schema_fail(m, p, "enum: must be a non-empty array");
		json_array_foreach(en, i, v)
			if (!type_matches(json_string_value(type), v))
				return schema_fail(m, p, "enum: value does not match type");
	}
	v = json_object_get(spec, "default");
	if (v) {
		bool in_enum = !en;

		json_array_foreach(en, i, e)
			in_enum = in_enum || json_equal(e, v);
		if (!type_matches(json_string_value(type), v) || !in_enum)
			return schema_fail(m, p, "default: does not match type/enum");
		if (json_is_true(req))
			return schema_fail(m, p, "default: a required parameter has none");
	}
	return 0;
}

static int schema_load(struct sn_rpc_server *srv, const char *text)
{
	json_error_t jerr;
	json_t *methods, *m, *params, *spec;
	const char *name, *pname;
	size_t i = 0;
	int rc;

	srv->schema = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!srv->schema) {
		sn_log("rpc: schema: line %d: %s", jerr.line, jerr.text);
		return -EINVAL;
	}
	methods = json_object_get(srv->schema, "methods");
	if (!json_is_object(methods) || json_object_size(methods) == 0) {
		sn_log("rpc: schema: methods: must be a non-empty object");
		return -EINVAL;
	}
	srv->nmethods = json_object_size(methods);
	srv->methods = calloc(srv->nmethods, sizeof(*srv->methods));
	if (!srv->methods)
		return -ENOMEM;
	json_object_foreach(methods, name, m) {
		params = json_is_object(m) ? json_object_get(m, "params") : NULL;
		if (!json_is_object(params))
			return schema_fail(name, NULL, "params: must be an object");
		json_object_foreach(params, pname, spec) {
			rc = check_param_spec(name, pname, spec);
			if (rc)
				return rc;
		}
		srv->methods[i].name = name;
		srv->methods[i].params = params;
		i++;
	}
	return 0;
}

static struct method *method_find(struct sn_rpc_server *srv, const char *name)
{
	for (size_t i = 0; i < srv->nmethods; i++)
		if (strcmp(srv->methods[i].name, name) == 0)
			return &srv->methods[i];
	return NULL;
}

int sn_rpc_register(struct sn_rpc_server *srv, const char *method,
		    sn_rpc_handler_t fn, void *arg)
{
	struct method *m;

	if (!srv || !method || !fn)
		return -EINVAL;
	m = method_find(srv, method);
	if (!m)
		return -ENOENT;
	if (m->fn)
		return -EEXIST;
	m->fn = fn;
	m->arg = arg;
	return 0;
}

/* Appends `"a", "b"` (the enum) to buf for an error message. */
static void enum_list(const json_t *en, char *buf, size_t size)
{
	size_t i, off = 0;
	json_t *v;
	int n;

	buf[0] = '\0';
	json_array_foreach(en, i, v) {
		if (json_is_string(v))
			n = snprintf(buf + off, size - off, "%s\"%s\"", i ? ", " : "",
				     json_string_value(v));
		else
			n = snprintf(buf + off, size - off, "%s%lld", i ? ", " : "",
				     (long long)json_integer_value(v));
		if (n < 0 || (size_t)n >= size - off)
			return;
		off += (size_t)n;
	}
}

/* 0 if params (an object) satisfies spec, after adding the defaults of
 * absent optional params; else -1 with err filled. */
static int params_validate(const json_t *spec, json_t *params, struct sn_rpc_error *err)
{
	const char *key;
	json_t *v, *p, *en, *e;
	char list[160];
	size_t i;
	bool ok;

	json_object_foreach(params, key, v) {
		p = json_object_get(spec, key);
		if (!p) {
			sn_rpc_fail(err, SN_RPC_INVALID_PARAMS,
				    "params.%.64s: unknown parameter", key);
			return -1;
		}
		const char *t = json_string_value(json_object_get(p, "type"));
		if (!type_matches(t, v)) {
			sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "params.%s: must be %s",
				    key, type_phrase(t));
			return -1;
		}
		en = json_object_get(p, "enum");
		if (!en)
			continue;
		ok = false;
		json_array_foreach(en, i, e)
			ok = ok || json_equal(e, v);
		if (!ok) {
			enum_list(en, list, sizeof(list));
			sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "params.%s: must be one of %s",
				    key, list);
			return -1;
		}
	}
	json_object_foreach((json_t *)spec, key, p) {
		if (json_object_get(params, key))
			continue;
		if (json_is_true(json_object_get(p, "required"))) {
			sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "params.%s: required", key);
			return -1;
		}
		v = json_object_get(p, "default"); /* handlers see schema defaults */
		if (v && json_object_set(params, key, v)) {
			sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "out of memory");
			return -1;
		}
	}
	return 0;
}

/* ---- request dispatch ---------------------------------------------------- */

/* The message as a JSON string. Messages quote client strings cut to a
 * byte length (%.64s, the 256-byte sn_rpc_error buffer), which can split a
 * UTF-8 sequence; jansson refuses such a string, and the request used to
 * go unanswered (s13-R3). A split tail is cut; should anything else be
 * invalid, every non-ASCII byte becomes '?'. */
static json_t *message_string(const char *msg)
{
	char buf[512];
	size_t n, i, lead, need;
	json_t *s = json_string(msg);

	if (s)
		return s;
	n = strlen(msg);
	n = n < sizeof(buf) - 1 ? n : sizeof(buf) - 1;
	memcpy(buf, msg, n);
	buf[n] = '\0';
	for (lead = n, i = 0; lead > 0 && i < 4; i++) {   /* the last sequence's lead byte */
		lead--;
		if (((unsigned char)buf[lead] & 0xC0) != 0x80)
			break;
	}
	if (lead < n) {
		unsigned char c = (unsigned char)buf[lead];

		need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
		if (n - lead < need)
			buf[lead] = '\0';
	}
	s = json_string(buf);
	if (s)
		return s;
	for (i = 0; buf[i]; i++)
		if ((unsigned char)buf[i] >= 0x80)
			buf[i] = '?';
	return json_string(buf);
}

static json_t *error_response(json_t *id, int code, const char *msg)
{
	return json_pack("{s:s, s:{s:i, s:o}, s:O}", "jsonrpc", "2.0",
			 "error", "code", code, "message", message_string(msg),
			 "id", id ? id : json_null());
}

static bool request_member(const char *k)
{
	return strcmp(k, "jsonrpc") == 0 || strcmp(k, "method") == 0 ||
	       strcmp(k, "params") == 0 || strcmp(k, "id") == 0;
}

static void count_error(struct sn_rpc_server *srv, int code)
{
	switch (code) {
	case SN_RPC_PARSE_ERROR:
		srv->st.parse_errors++;
		break;
	case SN_RPC_INVALID_REQUEST:
		srv->st.invalid_requests++;
		break;
	case SN_RPC_METHOD_NOT_FOUND:
		srv->st.method_not_found++;
		break;
	case SN_RPC_INVALID_PARAMS:
		srv->st.invalid_params++;
		break;
	default:
		srv->st.failed++;
	}
}

/* An error answer (counted); NULL for a notification (!id), which gets none. */
static json_t *reject(struct sn_rpc_server *srv, json_t *id, bool respond, int code,
		      const char *msg)
{
	count_error(srv, code);
	return respond ? error_response(id, code, msg) : NULL;
}

/* Returns the response to send (new reference) or NULL for none. */
static json_t *dispatch(struct sn_rpc_server *srv, json_t *req)
{
	struct sn_rpc_error err = { 0 };
	json_t *id, *ver, *mname, *params, *result, *resp, *v;
	struct method *m;
	const char *key;
	char msg[300];

	if (json_is_array(req))
		return reject(srv, NULL, true, SN_RPC_INVALID_REQUEST,
				      "batch requests are not supported");
	if (!json_is_object(req))
		return reject(srv, NULL, true, SN_RPC_INVALID_REQUEST,
				      "request must be a JSON object");
	id = json_object_get(req, "id");
	if (id && !json_is_string(id) && !json_is_number(id) && !json_is_null(id))
		return reject(srv, NULL, true, SN_RPC_INVALID_REQUEST,
				      "id: must be a string, a number or null");
	ver = json_object_get(req, "jsonrpc");
	if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0)
		return reject(srv, id, true, SN_RPC_INVALID_REQUEST, "jsonrpc: must be \"2.0\"");
	json_object_foreach(req, key, v) {
		if (!request_member(key)) {
			snprintf(msg, sizeof(msg), "request: unknown member \"%.64s\"", key);
			return reject(srv, id, true, SN_RPC_INVALID_REQUEST, msg);
		}
	}
	mname = json_object_get(req, "method");
	if (!json_is_string(mname))
		return reject(srv, id, true, SN_RPC_INVALID_REQUEST, "method: must be a string");
	params = json_object_get(req, "params");
	if (params && !json_is_object(params) && !json_is_array(params))
		return reject(srv, id, true, SN_RPC_INVALID_REQUEST,
				      "params: must be an object or an array");

	/* A valid request from here on: notifications get no response. */
	m = method_find(srv, json_string_value(mname));
	if (!m || !m->fn) {
		snprintf(msg, sizeof(msg), "method %s: %.64s",
			 m ? "not implemented" : "not found", json_string_value(mname));
		return reject(srv, id, id != NULL, SN_RPC_METHOD_NOT_FOUND, msg);
	}
	if (params && json_is_array(params)) {
		sn_rpc_fail(&err, SN_RPC_INVALID_PARAMS,
			    "params: must be an object (named parameters)");
		return reject(srv, id, id != NULL, err.code, err.message);
	}
	params = params ? json_incref(params) : json_object();
	if (!params)
		return reject(srv, id, id != NULL, SN_RPC_INTERNAL_ERROR, "out of memory");
	if (params_validate(m->params, params, &err)) {
		json_decref(params);
		return reject(srv, id, id != NULL, err.code, err.message);
	}
	result = m->fn(params, m->arg, &err);
	json_decref(params);
	if (!result)
		return reject(srv, id, id != NULL, err.code ? err.code : SN_RPC_INTERNAL_ERROR,
			      err.message[0] ? err.message : "internal error");
	if (!id) {
		json_decref(result);
		return NULL;
	}
	resp = json_pack("{s:s, s:o, s:O}", "jsonrpc", "2.0", "result", result, "id", id);
	return resp ? resp : error_response(id, SN_RPC_INTERNAL_ERROR, "out of memory");
}

/* ---- clients ------------------------------------------------------------- */

static size_t out_pending(const struct client *c)
{
	return c->out_len - c->out_off;
}

static void client_drop(struct client *c, const char *why)
{
	if (why && !c->dead)
		sn_log("rpc: client fd %d dropped: %s", c->fd, why);
	c->dead = true;
}

static void client_queue(struct client *c, json_t *resp)
{
	char *s, *n;
	size_t len, need, cap;

	s = json_dumps(resp, JSON_COMPACT);
	json_decref(resp);
	if (!s) {
		client_drop(c, "out of memory");
		return;
	}
	len = strlen(s);
	if (out_pending(c) + len + 1 > OUT_MAX) {
		free(s);
		client_drop(c, "too many unread responses");
		c->overflow = true;
		return;
	}
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, out_pending(c));
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	need = c->out_len + len + 1;
	if (need > c->out_cap) {
		cap = c->out_cap ? c->out_cap : 4096;
		while (cap < need)
			cap *= 2;
		n = realloc(c->out, cap);
		if (!n) {
			free(s);
			client_drop(c, "out of memory");
			return;
		}
		c->out = n;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, s, len);
	c->out[c->out_len + len] = '\n';
	c->out_len += len + 1;
	free(s);
}

static void client_flush(struct client *c, uint64_t now)
{
	ssize_t n;

	while (!c->dead && out_pending(c)) {
		n = send(c->fd, c->out + c->out_off, out_pending(c),
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			c->out_off += (size_t)n;
			c->last_ms = now;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return;
		} else {
			client_drop(c, NULL); /* EPIPE/ECONNRESET: peer is gone */
		}
	}
	if (!out_pending(c)) {
		c->out_off = c->out_len = 0;
		if (c->out_cap > OUT_HIGH) {
			free(c->out);
			c->out = NULL;
			c->out_cap = 0;
		}
	}
}

static void client_read(struct sn_rpc_server *srv, struct client *c, uint64_t now)
{
	char sink[4096];
	ssize_t n;

	for (;;) {
		if (c->close_at) /* lingering: discard whatever still comes */
			n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
		else
			n = recv(c->fd, c->in + c->in_len, srv->max_req + 1 - c->in_len,
				 MSG_DONTWAIT);
		if (n > 0) {
			c->last_ms = now;
			if (!c->close_at)
				c->in_len += (size_t)n;
			if (!c->close_at && c->in_len == srv->max_req + 1)
				return;
		} else if (n == 0) {
			c->eof = true;
			return;
		} else if (errno == EINTR) {
			continue;
		} else {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				client_drop(c, NULL);
			return;
		}
	}
}

static bool is_blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return false;
	return true;
}

/* s14-R4: the overflowing integers are found in the text, not in a
 * re-parse with every number a double: a double cannot tell INT64_MAX
 * (which rounds to 2^63) from 2^63, nor INT64_MIN - 1 from INT64_MIN, so
 * an id of INT64_MAX next to an overflowing parameter was answered -32600
 * ("id out of range") instead of -32602. Each integer token beyond int64
 * is replaced by OVF, a JSON string shorter than any such token (>= 19
 * characters), and the copy parsed again exactly. A client string equal
 * to OVF in a parameter would be reported as an out-of-range integer too:
 * it is an invalid value either way. */
#define OVF "\"\\u0001sn-ovf\""
#define OVF_VALUE "\001sn-ovf"

/* True if v is an OVF marker: an integer token beyond int64. */
static bool out_of_int64(const json_t *v)
{
	return json_is_string(v) && !strcmp(json_string_value(v), OVF_VALUE);
}

/* True if the integer token s[0..n) (JSON syntax: [-]digits) is beyond int64. */
static bool token_overflows(const char *s, size_t n)
{
	char buf[32];
	long long v;
	size_t d = n && s[0] == '-';

	/* Only a valid JSON integer, -?(0|[1-9][0-9]*), is marked: any other
	 * token (e.g. "99999999999999999999-1") is copied as it is, so that
	 * the re-parse fails as the original did (-32700). */
	if (d == n || (s[d] == '0' && n > d + 1))
		return false;
	for (size_t i = d; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	if (n >= sizeof(buf))
		return true;        /* > 30 digits: beyond int64 */
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	v = strtoll(buf, NULL, 10);
	(void)v;
	return errno == ERANGE;
}

/* line with every integer token beyond int64 replaced by OVF (malloc'd,
 * *olen bytes, never longer than line); NULL on ENOMEM. Tokens outside
 * strings only: a string is skipped with its escapes. */
static char *mark_overflows(const char *line, size_t len, size_t *olen)
{
	char *out = malloc(len ? len : 1);
	size_t i = 0, o = 0;

	if (!out)
		return NULL;
	while (i < len) {
		size_t t = i;

		if (line[i] == '"') {
			for (out[o++] = line[i++]; i < len && line[i] != '"'; out[o++] = line[i++])
				if (line[i] == '\\' && i + 1 < len)
					out[o++] = line[i++];
			if (i < len)
				out[o++] = line[i++];
			continue;
		}
		if (line[i] != '-' && (line[i] < '0' || line[i] > '9')) {
			out[o++] = line[i++];
			continue;
		}
		while (i < len && (line[i] == '-' || line[i] == '+' || line[i] == '.' ||
				   line[i] == 'e' || line[i] == 'E' || (line[i] >= '0' && line[i] <= '9')))
			i++;
		if (!memchr(line + t, '.', i - t) && !memchr(line + t, 'e', i - t) &&
		    !memchr(line + t, 'E', i - t) && token_overflows(line + t, i - t)) {
			static_assert(sizeof(OVF) - 1 < 19, "OVF shorter than any int64 overflow");
			memcpy(out + o, OVF, sizeof(OVF) - 1);
			o += sizeof(OVF) - 1;
		} else {
			memcpy(out + o, line + t, i - t);
			o += i - t;
		}
	}
	*olen = o;
	return out;
}

/* Path (".a.b[2]") of the first number beyond int64 under v into buf; false if none. */
static bool find_overflow(json_t *v, char *buf, size_t size, size_t off)
{
	const char *key;
	json_t *e;
	size_t i;
	int n;

	if (out_of_int64(v))
		return true;
	if (json_is_object(v)) {
		json_object_foreach(v, key, e) {
			n = snprintf(buf + off, size - off, ".%.64s", key);
			if (n > 0 && (size_t)n < size - off && find_overflow(e, buf, size, off + (size_t)n))
				return true;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, e) {
			n = snprintf(buf + off, size - off, "[%zu]", i);
			if (n > 0 && (size_t)n < size - off && find_overflow(e, buf, size, off + (size_t)n))
				return true;
		}
	}
	buf[off] = '\0';
	return false;
}

/* s13-R3: valid JSON holding an integer beyond 64 bits, which jansson
 * refuses (json_error_numeric_overflow). Parsed again with those integers
 * marked (mark_overflows), it is answered like any out-of-range value:
 * -32602 naming the parameter (-32600 if it is the id or outside params),
 * the id echoed exactly. NULL with *answered false: not a request object,
 * a -32700 after all. */
static json_t *overflow_response(struct sn_rpc_server *srv, const char *line, size_t len,
				 bool *answered)
{
	json_error_t jerr;
	json_t *req = NULL, *id, *resp;
	char path[200] = "", msg[300];
	size_t mlen = 0;
	char *marked = mark_overflows(line, len, &mlen);

	*answered = false;
	if (marked)
		req = json_loadb(marked, mlen, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	free(marked);
	if (!req || !json_is_object(req)) {
		json_decref(req);
		return NULL;
	}
	*answered = true;
	id = json_object_get(req, "id");
	if (id && out_of_int64(id)) {
		resp = reject(srv, NULL, true, SN_RPC_INVALID_REQUEST, "id: integer out of range");
	} else if (find_overflow(json_object_get(req, "params"), path, sizeof(path), 0)) {
		snprintf(msg, sizeof(msg), "params%s: integer out of range (beyond 64 bits)", path);
		resp = reject(srv, id, id != NULL, SN_RPC_INVALID_PARAMS, msg);
	} else {
		resp = reject(srv, id, true, SN_RPC_INVALID_REQUEST,
			      "request: integer out of range (beyond 64 bits)");
	}
	json_decref(req);
	return resp;
}

/* Serves one line; returns 1 if it was a request (even an invalid one). */
static int serve_line(struct sn_rpc_server *srv, struct client *c, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *req, *resp = NULL;
	bool answered = false;
	char msg[300];

	if (is_blank(line, len))
		return 0;
	req = json_loadb(line, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	srv->st.requests++;
	if (!req && json_error_code(&jerr) == json_error_numeric_overflow)
		resp = overflow_response(srv, line, len, &answered);
	if (!req && !answered) {
		snprintf(msg, sizeof(msg), "parse error at column %d: %s", jerr.column, jerr.text);
		resp = reject(srv, NULL, true, SN_RPC_PARSE_ERROR, msg);
	} else if (req) {
		resp = dispatch(srv, req);
		json_decref(req);
	}
	if (resp)
		client_queue(c, resp);
	return 1;
}

/* Serves the complete lines buffered (as long as the output is not backed
 * up), handles oversize and end of input; returns requests served. */
static int client_process(struct sn_rpc_server *srv, struct client *c, uint64_t now)
{
	size_t start = 0;
	char *nl;
	int served = 0;

	while (!c->dead && !c->close_at && out_pending(c) < OUT_HIGH) {
		nl = memchr(c->in + c->scan, '\n', c->in_len - c->scan);
		if (!nl) {
			c->scan = c->in_len;
			break;
		}
		served += serve_line(srv, c, c->in + start, (size_t)(nl - (c->in + start)));
		start = (size_t)(nl - c->in) + 1;
		c->scan = start;
	}
	if (start) {
		memmove(c->in, c->in + start, c->in_len - start);
		c->in_len -= start;
		c->scan -= start;
	}
	if (!c->dead && !c->close_at && c->scan == c->in_len) {
		if (c->in_len > srv->max_req) {
			char msg[96];

			snprintf(msg, sizeof(msg), "request exceeds max_request_bytes (%zu)",
				 srv->max_req);
			client_queue(c, error_response(NULL, SN_RPC_INVALID_REQUEST, msg));
			sn_log("rpc: client fd %d: %s, closing", c->fd, msg);
			srv->st.requests++;
			srv->st.oversize++;
			c->close_at = now + LINGER_MS;
			c->in_len = c->scan = 0;
			served++;
		} else if (c->eof) {
			if (c->in_len && !is_blank(c->in, c->in_len))
				srv->st.partial_hangups++;
			c->in_len = c->scan = 0; /* hung up mid-request: discard */
		}
	}
	client_flush(c, now);
	if (c->dead)
		return served;
	if (c->close_at && !out_pending(c))
		shutdown(c->fd, SHUT_WR); /* error delivered; wait for peer EOF */
	if ((c->eof || c->close_at) && !out_pending(c) && c->scan == c->in_len &&
	    (c->eof || now >= c->close_at))
		client_drop(c, NULL);
	return served;
}

static bool client_has_work(const struct client *c)
{
	return !c->dead && !c->close_at && c->scan < c->in_len && out_pending(c) < OUT_HIGH;
}

static bool client_wants_input(const struct sn_rpc_server *srv, const struct client *c)
{
	if (c->eof)
		return false;
	if (c->close_at)
		return true;
	return out_pending(c) < OUT_HIGH && c->in_len <= srv->max_req;
}

static uint64_t client_deadline(const struct client *c)
{
	uint64_t d = c->last_ms + IDLE_MS;

	return c->close_at && c->close_at < d ? c->close_at : d;
}

static void client_free(struct client *c)
{
	close(c->fd);
	free(c->in);
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

static void accept_clients(struct sn_rpc_server *srv, uint64_t now)
{
	static const char busy[] =
		"{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32002,"
		"\"message\":\"too many clients\"},\"id\":null}\n";
	struct client *c;
	int fd;

	for (int i = 0; i < ACCEPT_BURST; i++) {
		fd = accept4(srv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* the connection stays queued: retry later, not in a spin */
				if (!srv->accept_resume)
					sn_log("rpc: accept: %s, pausing", strerror(errno));
				srv->accept_resume = now + PAUSE_MS;
				return;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				sn_log("rpc: accept: %s", strerror(errno));
			break;
		}
		if (srv->nclients == srv->max_clients) {
			(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			close(fd);
			srv->refused++;
			srv->st.refused++;
			continue;
		}
		c = &srv->clients[srv->nclients];
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->last_ms = now;
		c->in = malloc(srv->max_req + 1);
		if (!c->in) {
			close(fd);
			srv->refused++;
			srv->st.refused++;
			continue;
		}
		srv->nclients++;
		srv->st.accepted++;
	}
	srv->accept_resume = 0;
}

static void log_refused(struct sn_rpc_server *srv, uint64_t now)
{
	if (!srv->refused || now < srv->refused_log + LOG_EVERY_MS)
		return;
	sn_log("rpc: refused %u connection(s): max_clients (%u) reached",
	       srv->refused, srv->max_clients);
	srv->refused = 0;
	srv->refused_log = now;
}

int sn_rpc_poll(struct sn_rpc_server *srv, int timeout_ms)
{
	uint64_t now = now_ms(), d;
	int served = 0, n, timeout = timeout_ms;
	unsigned i, j, nfds;

	for (i = 0; i < srv->nclients; i++) {
		struct client *c = &srv->clients[i];

		if (client_has_work(c)) {
			timeout = 0;
			continue;
		}
		d = client_deadline(c);
		d = d > now ? d - now : 0;
		if (timeout < 0 || d < (uint64_t)timeout)
			timeout = (int)d;
	}
	if (srv->accept_resume) {
		d = srv->accept_resume > now ? srv->accept_resume - now : 0;
		if (timeout < 0 || d < (uint64_t)timeout)
			timeout = (int)d;
	}
	if (srv->refused && (timeout < 0 || timeout > LOG_EVERY_MS))
		timeout = LOG_EVERY_MS;
	srv->pfds[0] = (struct pollfd){
		.fd = srv->lfd, .events = now < srv->accept_resume ? 0 : POLLIN };
	for (i = 0; i < srv->nclients; i++) {
		struct client *c = &srv->clients[i];
		short ev = 0;

		if (client_wants_input(srv, c))
			ev |= POLLIN;
		if (out_pending(c))
			ev |= POLLOUT;
		srv->pfds[i + 1] = (struct pollfd){ .fd = c->fd, .events = ev };
	}
	nfds = srv->nclients + 1;
	n = poll(srv->pfds, nfds, timeout);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	now = now_ms();

	for (i = 0; i < srv->nclients; i++) {
		struct client *c = &srv->clients[i];
		short re = srv->pfds[i + 1].revents;

		if (re & POLLNVAL) {
			client_drop(c, "invalid fd");
			continue;
		}
		if (re & POLLOUT)
			client_flush(c, now);
		if (!c->dead && (re & (POLLIN | POLLHUP | POLLERR)) && client_wants_input(srv, c))
			client_read(srv, c, now);
		if (!c->dead)
			served += client_process(srv, c, now);
		if (!c->dead && now >= c->last_ms + IDLE_MS) {
			client_drop(c, out_pending(c) ? "idle timeout, responses unread"
				    : c->in_len ? "idle timeout, request unfinished"
				    : NULL);
			srv->st.idle_timeouts++;
		}
		if (!c->dead && c->close_at && now >= c->close_at)
			client_drop(c, NULL);
		if (!c->dead && c->eof && (re & POLLHUP) && out_pending(c))
			client_drop(c, NULL); /* both directions gone */
	}
	for (i = j = 0; i < srv->nclients; i++) {
		if (srv->clients[i].dead) {
			srv->st.output_overflow += srv->clients[i].overflow;
			client_free(&srv->clients[i]);
			continue;
		}
		if (i != j)
			srv->clients[j] = srv->clients[i];
		j++;
	}
	srv->nclients = j;

	if (srv->pfds[0].revents & (POLLERR | POLLNVAL))
		return -EIO;
	if ((srv->pfds[0].revents & POLLIN) || (srv->accept_resume && now >= srv->accept_resume))
		accept_clients(srv, now);
	log_refused(srv, now);
	return served;
}

void sn_rpc_stats_read(const struct sn_rpc_server *srv, struct sn_rpc_stats *st)
{
	*st = srv->st;
}

/* ---- listener ------------------------------------------------------------ */

static int mkdir_parents(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	size_t len = strlen(path);

	memcpy(dir, path, len + 1);
	for (size_t i = 1; i < len; i++) {
		if (dir[i] != '/')
			continue;
		dir[i] = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return -errno;
		dir[i] = '/';
	}
	return 0;
}

/* Removes a stale socket at path; -EADDRINUSE if a server answers there,
 * -EEXIST if path is something other than a socket. */
static int remove_stale(const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, rc;

	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (rc == 0)
		return -EADDRINUSE;
	if (unlink(sa->sun_path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static int listen_on(struct sn_rpc_server *srv, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	rc = mkdir_parents(path);
	if (rc)
		return rc;
	rc = remove_stale(&sa);
	if (rc)
		return rc;
	srv->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (srv->lfd < 0)
		return -errno;
	old = umask(0177); /* the socket is created 0600, never wider */
	rc = bind(srv->lfd, (const struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0)
		return -errno;
	if (chmod(path, 0600) < 0 || listen(srv->lfd, 64) < 0 || stat(path, &st) < 0) {
		rc = -errno;
		unlink(path);
		return rc;
	}
	srv->sock_dev = st.st_dev;
	srv->sock_ino = st.st_ino;
	return 0;
}

/* The server's own memory (the listening socket and clients are closed
 * by the caller): shared by the create error path and destroy. */
static void server_free(struct sn_rpc_server *srv)
{
	json_decref(srv->schema);
	free(srv->methods);
	free(srv->pfds);
	free(srv->clients);
	free(srv->path);
	free(srv);
}

struct sn_rpc_server *sn_rpc_server_create(const struct sn_rpc_config *cfg)
{
	struct sn_rpc_server *srv;
	int rc = -EINVAL;

	if (!cfg || !cfg->path || !cfg->path[0] || !cfg->api_json ||
	    cfg->max_request_bytes < 64 || cfg->max_request_bytes > (64u << 20) ||
	    cfg->max_clients == 0 || cfg->max_clients > 4096) {
		errno = EINVAL;
		return NULL;
	}
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		errno = ENOMEM;
		return NULL;
	}
	srv->lfd = -1;
	srv->max_req = cfg->max_request_bytes;
	srv->max_clients = cfg->max_clients;
	srv->path = strdup(cfg->path);
	srv->clients = calloc(cfg->max_clients, sizeof(*srv->clients));
	srv->pfds = calloc(cfg->max_clients + 1, sizeof(*srv->pfds));
	if (!srv->path || !srv->clients || !srv->pfds) {
		rc = -ENOMEM;
		goto err_free;
	}
	rc = schema_load(srv, cfg->api_json);
	if (rc)
		goto err_free;
	rc = listen_on(srv, cfg->path);
	if (rc) {
		sn_log("rpc: %s: %s", cfg->path, rc == -EEXIST ? "exists and is not a socket (left alone)"
		       : rc == -EADDRINUSE ? "a process listens on this socket (another schednicd?)"
		       : strerror(-rc));
		goto err_free;
	}
	return srv;

err_free:
	if (srv->lfd >= 0)
		close(srv->lfd);
	server_free(srv);
	errno = -rc;
	return NULL;
}

void sn_rpc_server_destroy(struct sn_rpc_server *srv)
{
	struct stat st;

	if (!srv)
		return;
	for (unsigned i = 0; i < srv->nclients; i++) {
		client_flush(&srv->clients[i], now_ms()); /* best effort, no wait */
		client_free(&srv->clients[i]);
	}
	close(srv->lfd);
	if (stat(srv->path, &st) == 0 && st.st_dev == srv->sock_dev &&
	    st.st_ino == srv->sock_ino)
		unlink(srv->path);
	server_free(srv);
}
