/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_rpc_dispatch.c — one JSON-RPC 2.0 request line in, its response out.
 *
 * Requests follow the JSON-RPC 2.0 specification exactly: the id (string,
 * number or null) is echoed; a request without "id" is a notification and
 * gets no response, even on error, except when it is not a valid request
 * at all (parse error, invalid request), which is answered with id null as
 * the specification requires; batches (arrays) are rejected with -32600.
 * A valid request's method is looked up in the schema and its params
 * validated (sn_rpc_params.c) before the handler runs. Every rejected
 * request is counted once, by cause (struct sn_rpc_stats).
 */
#include "sn_rpc_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *sn_rpc_fail(struct sn_rpc_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return NULL;
}

/* The message as a JSON string. Messages quote client strings cut to a
 * byte length (%.64s, the 256-byte sn_rpc_error buffer), which can split a
 * UTF-8 sequence, and jansson refuses such a string: the request would go
 * unanswered. A split tail is cut; should anything else be
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

json_t *sn_rpc_error_response(json_t *id, int code, const char *msg)
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

static void count_error(struct sn_rpc_stats *st, int code)
{
	switch (code) {
	case SN_RPC_PARSE_ERROR:
		st->parse_errors++;
		break;
	case SN_RPC_INVALID_REQUEST:
		st->invalid_requests++;
		break;
	case SN_RPC_METHOD_NOT_FOUND:
		st->method_not_found++;
		break;
	case SN_RPC_INVALID_PARAMS:
		st->invalid_params++;
		break;
	default:
		st->failed++;
	}
}

/* An error answer (counted); NULL for a notification (!id), which gets none. */
static json_t *reject(struct sn_rpc_stats *st, json_t *id, bool respond, int code,
		      const char *msg)
{
	count_error(st, code);
	return respond ? sn_rpc_error_response(id, code, msg) : NULL;
}

/* Returns the response to send (new reference) or NULL for none. */
static json_t *dispatch(struct sn_rpc_api *api, struct sn_rpc_stats *st, json_t *req)
{
	struct sn_rpc_error err = { 0 };
	json_t *id, *ver, *mname, *params, *result, *resp, *v;
	struct sn_rpc_method *m;
	const char *key;
	char msg[300];

	if (json_is_array(req))
		return reject(st, NULL, true, SN_RPC_INVALID_REQUEST,
				      "batch requests are not supported");
	if (!json_is_object(req))
		return reject(st, NULL, true, SN_RPC_INVALID_REQUEST,
				      "request must be a JSON object");
	id = json_object_get(req, "id");
	if (id && !json_is_string(id) && !json_is_number(id) && !json_is_null(id))
		return reject(st, NULL, true, SN_RPC_INVALID_REQUEST,
				      "id: must be a string, a number or null");
	ver = json_object_get(req, "jsonrpc");
	if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0)
		return reject(st, id, true, SN_RPC_INVALID_REQUEST, "jsonrpc: must be \"2.0\"");
	json_object_foreach(req, key, v) {
		if (!request_member(key)) {
			snprintf(msg, sizeof(msg), "request: unknown member \"%.64s\"", key);
			return reject(st, id, true, SN_RPC_INVALID_REQUEST, msg);
		}
	}
	mname = json_object_get(req, "method");
	if (!json_is_string(mname))
		return reject(st, id, true, SN_RPC_INVALID_REQUEST, "method: must be a string");
	params = json_object_get(req, "params");
	if (params && !json_is_object(params) && !json_is_array(params))
		return reject(st, id, true, SN_RPC_INVALID_REQUEST,
				      "params: must be an object or an array");

	/* A valid request from here on: notifications get no response. */
	m = sn_rpc_method_find(api, json_string_value(mname));
	if (!m || !m->fn) {
		snprintf(msg, sizeof(msg), "method %s: %.64s",
			 m ? "not implemented" : "not found", json_string_value(mname));
		return reject(st, id, id != NULL, SN_RPC_METHOD_NOT_FOUND, msg);
	}
	if (params && json_is_array(params)) {
		sn_rpc_fail(&err, SN_RPC_INVALID_PARAMS,
			    "params: must be an object (named parameters)");
		return reject(st, id, id != NULL, err.code, err.message);
	}
	params = params ? json_incref(params) : json_object();
	if (!params)
		return reject(st, id, id != NULL, SN_RPC_INTERNAL_ERROR, "out of memory");
	if (sn_rpc_params_validate(m->params, params, &err)) {
		json_decref(params);
		return reject(st, id, id != NULL, err.code, err.message);
	}
	result = m->fn(params, m->arg, &err);
	json_decref(params);
	if (!result)
		return reject(st, id, id != NULL, err.code ? err.code : SN_RPC_INTERNAL_ERROR,
			      err.message[0] ? err.message : "internal error");
	if (!id) {
		json_decref(result);
		return NULL;
	}
	resp = json_pack("{s:s, s:o, s:O}", "jsonrpc", "2.0", "result", result, "id", id);
	return resp ? resp : sn_rpc_error_response(id, SN_RPC_INTERNAL_ERROR, "out of memory");
}


/* Integers beyond int64, which jansson refuses, are found in the text, not
 * in a re-parse with every number a double: a double cannot tell
 * INT64_MAX (which rounds to 2^63) from 2^63, nor INT64_MIN - 1 from
 * INT64_MIN, so an id of INT64_MAX next to an overflowing parameter would
 * be taken for an out-of-range id. Each integer token beyond int64
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

/* Valid JSON holding an integer beyond 64 bits, which jansson
 * refuses (json_error_numeric_overflow). Parsed again with those integers
 * marked (mark_overflows), it is answered like any out-of-range value:
 * -32602 naming the parameter (-32600 if it is the id or outside params),
 * the id echoed exactly. NULL with *answered false: not a request object,
 * a -32700 after all. */
/* The checks dispatch() makes before it looks the method up, on a request
 * parsed with its overflowing integers marked (an OVF method is an
 * integer, not a string). */
static bool well_formed(json_t *req)
{
	json_t *id = json_object_get(req, "id"), *ver = json_object_get(req, "jsonrpc");
	json_t *m = json_object_get(req, "method"), *p = json_object_get(req, "params"), *v;
	const char *key;

	if ((id && !json_is_string(id) && !json_is_number(id) && !json_is_null(id)) ||
	    !json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0)
		return false;
	json_object_foreach(req, key, v)
		if (!request_member(key))
			return false;
	return json_is_string(m) && !out_of_int64(m) && (!p || json_is_object(p) || json_is_array(p));
}

static json_t *overflow_response(struct sn_rpc_stats *st, const char *line, size_t len,
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
		resp = reject(st, NULL, true, SN_RPC_INVALID_REQUEST, "id: integer out of range");
	} else if (well_formed(req) &&
		   find_overflow(json_object_get(req, "params"), path, sizeof(path), 0)) {
		snprintf(msg, sizeof(msg), "params%s: integer out of range (beyond 64 bits)", path);
		resp = reject(st, id, id != NULL, SN_RPC_INVALID_PARAMS, msg);
	} else {
		/* Not a valid request (answered without an id too), or the
		 * overflow is outside params; a bad id is answered as null. */
		if (id && !json_is_string(id) && !json_is_number(id) && !json_is_null(id))
			id = NULL;
		resp = reject(st, id, true, SN_RPC_INVALID_REQUEST,
			      "request: integer out of range (beyond 64 bits)");
	}
	json_decref(req);
	return resp;
}

/* See sn_rpc_internal.h. */
json_t *sn_rpc_answer(struct sn_rpc_api *api, struct sn_rpc_stats *st,
		      const char *line, size_t len)
{
	json_error_t jerr;
	json_t *req, *resp = NULL;
	bool answered = false;
	char msg[300];

	req = json_loadb(line, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	st->requests++;
	if (!req && json_error_code(&jerr) == json_error_numeric_overflow)
		resp = overflow_response(st, line, len, &answered);
	if (!req && !answered) {
		snprintf(msg, sizeof(msg), "parse error at column %d: %s", jerr.column, jerr.text);
		resp = reject(st, NULL, true, SN_RPC_PARSE_ERROR, msg);
	} else if (req) {
		resp = dispatch(api, st, req);
		json_decref(req);
	}
	return resp;
}
