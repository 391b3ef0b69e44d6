/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_rpc_params.c — the API schema (rpc_api.json) and params validation.
 *
 * The schema maps each method to its params: {type, required, enum,
 * default}. sn_rpc_api_load() checks the schema itself once at start (a
 * bad one stops the daemon with a message naming the member); afterwards
 * every request's params are validated against it before its handler
 * runs, and absent optional params get their schema default, so handlers
 * see only well-typed, known keys. Messages name the field
 * ("params.name: must be a string").
 */
#include "sn_rpc_internal.h"
#include "sn_log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	sn_log_err("rpc: schema: methods.%s%s%s: %s", method,
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

int sn_rpc_api_load(struct sn_rpc_api *api, const char *text)
{
	json_error_t jerr;
	json_t *methods, *m, *params, *spec;
	const char *name, *pname;
	size_t i = 0;
	int rc;

	api->doc = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!api->doc) {
		sn_log_err("rpc: schema: line %d: %s", jerr.line, jerr.text);
		return -EINVAL;
	}
	methods = json_object_get(api->doc, "methods");
	if (!json_is_object(methods) || json_object_size(methods) == 0) {
		sn_log_err("rpc: schema: methods: must be a non-empty object");
		return -EINVAL;
	}
	api->nmethods = json_object_size(methods);
	api->methods = calloc(api->nmethods, sizeof(*api->methods));
	if (!api->methods)
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
		api->methods[i].name = name;
		api->methods[i].params = params;
		i++;
	}
	return 0;
}

struct sn_rpc_method *sn_rpc_method_find(struct sn_rpc_api *api, const char *name)
{
	for (size_t i = 0; i < api->nmethods; i++)
		if (strcmp(api->methods[i].name, name) == 0)
			return &api->methods[i];
	return NULL;
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

/* See sn_rpc_internal.h. */
int sn_rpc_params_validate(const json_t *spec, json_t *params, struct sn_rpc_error *err)
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

void sn_rpc_api_free(struct sn_rpc_api *api)
{
	json_decref(api->doc);
	free(api->methods);
	api->doc = NULL;
	api->methods = NULL;
	api->nmethods = 0;
}
