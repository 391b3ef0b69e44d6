/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_rpc_internal.h — what the three files of the JSON-RPC server share:
 * sn_rpc.c (transport: listener, clients, poll loop), sn_rpc_params.c (the
 * API schema and params validation) and sn_rpc_dispatch.c (one request
 * line in, one response out). Not for handlers: they see sn_rpc.h only.
 *
 * Concurrency: as sn_rpc.h, single-threaded (the control thread).
 */
#ifndef SN_RPC_INTERNAL_H
#define SN_RPC_INTERNAL_H

#include <stddef.h>

#include <jansson.h>

#include "sn_rpc.h"

struct sn_rpc_method {
	const char *name;    /* key in api->doc (borrowed) */
	json_t *params;      /* schema params object (borrowed) */
	sn_rpc_handler_t fn; /* NULL = not implemented -> -32601 */
	void *arg;
};

/* The loaded schema: the method table every request is looked up in. */
struct sn_rpc_api {
	json_t *doc;                   /* the parsed rpc_api.json */
	struct sn_rpc_method *methods; /* one per doc.methods member */
	size_t nmethods;
};

/* sn_rpc_params.c. Parse and check the schema text: 0, or -EINVAL (the
 * reason logged) / -ENOMEM; on failure the caller still calls
 * sn_rpc_api_free(). */
int sn_rpc_api_load(struct sn_rpc_api *api, const char *text);
void sn_rpc_api_free(struct sn_rpc_api *api);
struct sn_rpc_method *sn_rpc_method_find(struct sn_rpc_api *api, const char *name);
/* 0 if params (an object) satisfies spec, after adding the defaults of
 * absent optional params; else -1 with err filled (-32602, or -32603 when
 * out of memory). */
int sn_rpc_params_validate(const json_t *spec, json_t *params, struct sn_rpc_error *err);

/* sn_rpc_dispatch.c. The response to one non-blank request line (new
 * reference), or NULL when none is due (a notification); counts the
 * request and its error, if any, in st. */
json_t *sn_rpc_answer(struct sn_rpc_api *api, struct sn_rpc_stats *st,
		      const char *line, size_t len);
/* An error response object {jsonrpc, error: {code, message}, id}. */
json_t *sn_rpc_error_response(json_t *id, int code, const char *msg);

#endif /* SN_RPC_INTERNAL_H */
