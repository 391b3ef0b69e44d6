/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_rpc.h — JSON-RPC 2.0 server on a unix stream socket (control plane).
 *
 * Framing: each request is one JSON text terminated by '\n'; each response
 * is one JSON text terminated by '\n'. Batches (JSON arrays) are rejected
 * with -32600. A request longer than max_request_bytes gets -32600 and the
 * connection is closed.
 *
 * The method table (names, params with types/required, errors) is the API
 * schema control/rpc_api.json, compiled into the daemon. Before a
 * handler runs, sn_rpc validates params against it: unknown method ->
 * -32601; params not an object, missing required, wrong type or unknown
 * key -> -32602 with a message naming the field. A method in the schema
 * with no registered handler answers -32601 too, so the test that compares
 * the schema with the daemon catches it.
 *
 * Concurrency: struct sn_rpc_server is single-threaded.
 *
 *   who                 may call                        note
 *   ------------------  ------------------------------  -------------------------------
 *   MAIN (the control   every function here             the server takes no lock; its
 *   thread)                                             state, clients and counters
 *                                                       are MAIN's alone
 *   a handler (on MAIN  sn_rpc_fail, sn_rpc_param_str,  never sn_rpc_server_destroy()
 *   inside              sn_rpc_stats_read               or sn_rpc_poll() (no re-entry)
 *   sn_rpc_poll)
 *   any other thread    nothing
 *
 * Sockets are non-blocking: a slow or hung client never blocks the daemon
 * (idle/partial clients are dropped after a timeout).
 */
#ifndef SN_RPC_H
#define SN_RPC_H

#include <stdint.h>

#include <jansson.h>

/* Error codes: JSON-RPC 2.0 standard ones, then schednic's (documented in
 * rpc_api.json "errors"). */
#define SN_RPC_PARSE_ERROR      (-32700)
#define SN_RPC_INVALID_REQUEST  (-32600)
#define SN_RPC_METHOD_NOT_FOUND (-32601)
#define SN_RPC_INVALID_PARAMS   (-32602)
#define SN_RPC_INTERNAL_ERROR   (-32603)
#define SN_RPC_ERR_EXISTS       (-32000) /* e.g. port name already used */
#define SN_RPC_ERR_NOT_FOUND    (-32001) /* e.g. no such port */
#define SN_RPC_ERR_RESOURCE     (-32002) /* limit reached, socket/EAL failure */
#define SN_RPC_ERR_BUSY         (-32003) /* operation not possible now */
#define SN_RPC_ERR_CONFIG       (-32004) /* config.reload: file refused, nothing changed */

struct sn_rpc_server;

struct sn_rpc_error {
	int code;           /* one of the codes above */
	char message[256];  /* human readable, names the field/object */
};

/* A handler gets validated params (an object, never NULL; borrowed) and
 * returns a new reference to the result (any JSON value), or NULL after
 * filling *err. */
typedef json_t *(*sn_rpc_handler_t)(json_t *params, void *arg, struct sn_rpc_error *err);

struct sn_rpc_config {
	const char *path;           /* socket path; created with mode 0600, replaced if stale */
	size_t max_request_bytes;   /* e.g. 65536 */
	unsigned max_clients;       /* concurrent connections; extra ones are closed */
	const char *api_json;       /* the schema text (rpc_api.json) */
};

/* NULL + errno on failure (bad schema is EINVAL with a message on stderr). */
struct sn_rpc_server *sn_rpc_server_create(const struct sn_rpc_config *cfg);
/* Register the handler of a method that the schema defines: -ENOENT if the
 * schema does not have it, -EEXIST if registered twice. */
int sn_rpc_register(struct sn_rpc_server *srv, const char *method,
		    sn_rpc_handler_t fn, void *arg);
/* Serve ready clients, waiting at most timeout_ms for activity. Returns the
 * number of requests served, or -errno on a fatal listener error. */
int sn_rpc_poll(struct sn_rpc_server *srv, int timeout_ms);
/* Control-plane counters: every refused connection, dropped client and
 * rejected request is counted once, by cause (stats.get "control").
 * Cumulative since create; read on the main thread like every call here. */
struct sn_rpc_stats {
	uint64_t accepted;          /* connections accepted */
	uint64_t refused;           /* closed at accept: max_clients reached (-32002) or no memory */
	uint64_t requests;          /* non-blank lines served, valid or not (oversize ones too) */
	uint64_t parse_errors;      /* -32700 */
	uint64_t invalid_requests;  /* -32600 other than oversize */
	uint64_t oversize;          /* longer than max_request_bytes: -32600, connection closed */
	uint64_t method_not_found;  /* -32601 (notifications included) */
	uint64_t invalid_params;    /* -32602 (notifications included) */
	uint64_t failed;            /* a handler's error: -32000..-32003, -32603 */
	uint64_t idle_timeouts;     /* clients dropped after IDLE_MS without a byte moved */
	uint64_t output_overflow;   /* clients dropped: over 16 MiB of responses unread */
	uint64_t partial_hangups;   /* peer hung up with an unfinished request (discarded) */
};
void sn_rpc_stats_read(const struct sn_rpc_server *srv, struct sn_rpc_stats *st);

/* Close every client and the listener; unlink the socket path. */
void sn_rpc_server_destroy(struct sn_rpc_server *srv);

/* Helper for handlers: fill err and return NULL. */
json_t *sn_rpc_fail(struct sn_rpc_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Helper for handlers: the string param key, or def when absent (its type
 * was checked against the schema before the handler runs). */
static inline const char *sn_rpc_param_str(json_t *params, const char *key, const char *def)
{
	json_t *v = json_object_get(params, key);

	return json_is_string(v) ? json_string_value(v) : def;
}

#endif /* SN_RPC_H */
