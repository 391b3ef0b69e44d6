/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_rpc.c — libFuzzer target for the JSON-RPC dispatch and params
 * validation (sn_rpc_dispatch.c, sn_rpc_params.c) with the real schema
 * (control/rpc_api.json) and stub handlers, no daemon, as
 * tests/control/rpc_harness.c serves it without DPDK.
 *
 * Input: one byte of handler behaviour (succeed, echoing its params, or
 * fail with one of the handler error codes and a message quoting a param
 * cut at 64 bytes), then request lines split at '\n' as the transport
 * does (blank lines are skipped). For each line sn_rpc_answer() must
 * return what JSON-RPC 2.0 and sn_rpc_dispatch.c say: a response object
 * with "jsonrpc": "2.0", an "id", exactly one of "result" / "error"; an
 * error has a known code and a non-empty message; the id is the
 * request's (null for a line that does not parse, a batch, a non-object
 * or a bad id); no response exactly for a well-formed notification (an
 * integer beyond 64 bits anywhere changes nothing in that); the
 * structural errors in the documented order; a handler only ever sees an
 * object that passes validation again (defaults added, nothing removed),
 * and a success echoes it as the result. The counters move by one
 * request and at most one error per line, the error's own counter. Any
 * failure aborts.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sn_rpc.h"
#include "sn_rpc_internal.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_rpc: " __VA_ARGS__); abort(); } while (0)

extern const char sn_rpc_api_json[];

static struct sn_rpc_api api;
static struct sn_rpc_method *called;   /* the method whose stub ran last */
static json_t *seen_params;           /* a copy of what it got */
static uint8_t mode;                  /* handler behaviour */

static json_t *stub(json_t *params, void *arg, struct sn_rpc_error *err)
{
	static const int codes[] = { SN_RPC_ERR_EXISTS, SN_RPC_ERR_NOT_FOUND, SN_RPC_ERR_RESOURCE,
				     SN_RPC_ERR_BUSY, SN_RPC_INTERNAL_ERROR, 0 };
	struct sn_rpc_error again = { 0 };
	json_t *copy;
	const char *key;
	json_t *v;

	called = arg;
	if (!json_is_object(params))
		FAIL("a handler got params that are not an object\n");
	copy = json_deep_copy(params);
	if (!copy || sn_rpc_params_validate(called->params, copy, &again) != 0)
		FAIL("%s: params given to the handler fail validation: %s\n", called->name,
		     again.message);
	if (!json_equal(copy, params))
		FAIL("%s: validating validated params changed them\n", called->name);
	json_decref(copy);
	json_decref(seen_params);
	seen_params = json_deep_copy(params);
	if (!(mode & 1))
		return json_deep_copy(params);
	/* Fail, quoting a string param cut at 64 bytes (may split UTF-8). */
	json_object_foreach(params, key, v)
		if (json_is_string(v))
			return sn_rpc_fail(err, codes[(mode >> 1 & 7) % 6], "%s: %.64s", key,
					   json_string_value(v));
	if (mode & 2)
		return NULL;   /* no code, no message: -32603 "internal error" */
	return sn_rpc_fail(err, codes[(mode >> 2) % 6], "params: refused");
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	if (sn_rpc_api_load(&api, sn_rpc_api_json) != 0 || api.nmethods == 0)
		FAIL("the schema does not load\n");
	for (size_t i = 0; i < api.nmethods; i++) {
		api.methods[i].fn = stub;
		api.methods[i].arg = &api.methods[i];
	}
	return 0;
}

static uint64_t errors(const struct sn_rpc_stats *s)
{
	return s->parse_errors + s->invalid_requests + s->method_not_found + s->invalid_params +
	       s->failed;
}

static uint64_t counter_of(const struct sn_rpc_stats *s, int code)
{
	switch (code) {
	case SN_RPC_PARSE_ERROR: return s->parse_errors;
	case SN_RPC_INVALID_REQUEST: return s->invalid_requests;
	case SN_RPC_METHOD_NOT_FOUND: return s->method_not_found;
	case SN_RPC_INVALID_PARAMS: return s->invalid_params;
	default: return s->failed;
	}
}

static bool known_code(json_int_t c)
{
	return c == SN_RPC_PARSE_ERROR || c == SN_RPC_INVALID_REQUEST ||
	       c == SN_RPC_METHOD_NOT_FOUND || c == SN_RPC_INVALID_PARAMS ||
	       c == SN_RPC_INTERNAL_ERROR || (c <= SN_RPC_ERR_EXISTS && c >= SN_RPC_ERR_BUSY);
}

static bool member_ok(const char *k)
{
	return !strcmp(k, "jsonrpc") || !strcmp(k, "method") || !strcmp(k, "params") ||
	       !strcmp(k, "id");
}

/* The structural verdict of JSON-RPC 2.0 as sn_rpc_dispatch.c orders its
 * checks: 0 for a well-formed request, else the -32600 it must get;
 * *rid: the id the response must carry (NULL: null). */
static int structure(json_t *req, json_t **rid)
{
	json_t *id, *ver, *m, *p, *v;
	const char *k;

	*rid = NULL;
	if (!json_is_object(req))
		return SN_RPC_INVALID_REQUEST;
	id = json_object_get(req, "id");
	if (id && !json_is_string(id) && !json_is_number(id) && !json_is_null(id))
		return SN_RPC_INVALID_REQUEST;
	*rid = id;
	ver = json_object_get(req, "jsonrpc");
	if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0"))
		return SN_RPC_INVALID_REQUEST;
	json_object_foreach(req, k, v)
		if (!member_ok(k))
			return SN_RPC_INVALID_REQUEST;
	m = json_object_get(req, "method");
	p = json_object_get(req, "params");
	if (!json_is_string(m) || (p && !json_is_object(p) && !json_is_array(p)))
		return SN_RPC_INVALID_REQUEST;
	return 0;
}

static void one_line(const char *line, size_t len)
{
	struct sn_rpc_stats st0, st1;
	json_error_t je;
	json_t *req, *resp, *rid = NULL, *err, *res, *id;
	int want = 0;
	bool overflow = false, notification = false;
	struct sn_rpc_method *m = NULL;

	req = json_loadb(line, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
	if (!req && json_error_code(&je) == json_error_numeric_overflow) {
		/* An integer beyond int64: the structure is judged as if it
		 * were a number (the id is then not compared exactly). Not
		 * with a NUL byte in the line, invalid JSON that jansson
		 * reading numbers as reals may skip after a number. */
		overflow = true;
		if (!memchr(line, '\0', len))
			req = json_loadb(line, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES |
					 JSON_DECODE_INT_AS_REAL, &je);
	}
	memset(&st0, 0, sizeof(st0));
	st1 = st0;
	called = NULL;
	resp = sn_rpc_answer(&api, &st1, line, len);
	if (st1.requests != st0.requests + 1)
		FAIL("requests counted %llu times\n", (unsigned long long)st1.requests);
	if (errors(&st1) > 1)
		FAIL("one line counted %llu errors\n", (unsigned long long)errors(&st1));
	if (req && overflow && !json_is_object(req)) {
		want = SN_RPC_PARSE_ERROR;   /* not a request object: -32700 after all */
	} else if (req) {
		want = structure(req, &rid);
		if (!want) {
			notification = !json_object_get(req, "id");
			m = sn_rpc_method_find(&api, json_string_value(json_object_get(req, "method")));
		}
	} else if (!overflow) {
		want = SN_RPC_PARSE_ERROR;
	}
	if (called && (!m || called != m || overflow))
		FAIL("handler of %s ran for method %s\n", called->name, m ? m->name : "(none)");
	if (!resp) {
		if (!notification)
			FAIL("no response to a line that is not a notification: %.*s\n", (int)len, line);
		if (called && !(mode & 1) && errors(&st1))
			FAIL("a notification that succeeded was counted as an error\n");
		goto out;
	}
	if (notification)
		FAIL("a response to a notification\n");
	if (!json_is_object(resp) || !json_is_string(json_object_get(resp, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(resp, "jsonrpc")), "2.0"))
		FAIL("response without jsonrpc 2.0\n");
	id = json_object_get(resp, "id");
	err = json_object_get(resp, "error");
	res = json_object_get(resp, "result");
	if (!id || !err == !res || json_object_size(resp) != 3)
		FAIL("response members: id %p error %p result %p, %zu members\n", (void *)id,
		     (void *)err, (void *)res, json_object_size(resp));
	if (!overflow && !json_equal(id, rid ? rid : json_null()) &&
	    !(json_is_null(id) && !rid))
		FAIL("response id differs from the request's\n");
	if (err) {
		json_t *code = json_object_get(err, "code"), *msg = json_object_get(err, "message");

		if (!json_is_integer(code) || !known_code(json_integer_value(code)) ||
		    !json_is_string(msg) || json_string_length(msg) == 0 || json_object_size(err) != 2)
			FAIL("malformed error object\n");
		if (want && json_integer_value(code) != want)
			FAIL("error %lld, want %d, line: %.*s\n", (long long)json_integer_value(code),
			     want, (int)len, line);
		if (errors(&st1) != 1 || counter_of(&st1, (int)json_integer_value(code)) != 1)
			FAIL("error %lld not counted once in its own counter\n",
			     (long long)json_integer_value(code));
		if (called && !(mode & 1))
			FAIL("a handler that succeeded gave an error response\n");
	} else {
		if (want || overflow || !called || (mode & 1))
			FAIL("a result for a request the handler did not accept\n");
		if (!json_equal(res, seen_params))
			FAIL("the result is not what the handler returned\n");
		if (errors(&st1))
			FAIL("a success counted as an error\n");
	}
out:
	json_decref(resp);
	json_decref(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s, *end, *nl;

	if (size < 1)
		return 0;
	mode = data[0];
	s = (const char *)data + 1;
	end = (const char *)data + size;
	for (; s < end; s = nl + 1) {
		size_t len;
		bool blank = true;

		nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl)
			nl = end;
		len = (size_t)(nl - s);
		for (size_t i = 0; i < len && blank; i++)
			blank = s[i] == ' ' || s[i] == '\t' || s[i] == '\r';
		if (!blank)
			one_line(s, len);
	}
	json_decref(seen_params);
	seen_params = NULL;
	return 0;
}
