/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_policy_rpc.c — the JSON-RPC methods of the policy store: policy.get,
 * policy.set (a whole policy, parsed and checked by sn_policy_parse()),
 * policy.put (one port's entry, the whole checked again) and
 * policy.del (one port's entry). Each change is published with
 * sn_policy_publish() and answered with the new generation. config.reload
 * replaces the policy through the same two steps (sn_policy_rpc.h).
 *
 * Main thread only (sn_ctl.h), the policy store's only writer.
 */
#include "sn_policy_rpc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "sn_ctl.h"
#include "sn_policy.h"
#include "sn_port.h"
#include "sn_port_quota.h"
#include "sn_rpc.h"

static json_t *h_policy_get(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	const struct sn_policy *pol = sn_policy_main(ctl->policy);
	json_t *r = sn_policy_to_json(pol);

	(void)params;
	if (!r || json_object_set_new(r, "generation", json_integer((json_int_t)pol->gen))) {
		json_decref(r);
		return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "out of memory");
	}
	return r;
}

int sn_policy_rpc_check(const struct sn_ctl *ctl, const json_t *j, struct sn_policy *pol,
			char *msg, size_t len)
{
	const struct sn_port_table *t = sn_ports_table_main(ctl->reg);

	if (sn_policy_parse(j, pol, msg, len))
		return -EINVAL;
	for (unsigned i = 0; i < t->n; i++)
		if (t->list[i]->type == SN_PORT_UPLINK && sn_policy_port_find(pol, t->list[i]->name)) {
			snprintf(msg, len, "policy.ports.%s: the uplink is shaped by policy.uplink, "
				 "not by a port entry", t->list[i]->name);
			return -EINVAL;
		}
	return 0;
}

int sn_policy_rpc_publish(struct sn_ctl *ctl, const struct sn_policy *pol)
{
	int rc = sn_policy_publish(ctl->policy, pol);

	if (!rc)
		sn_ports_quota_apply(ctl->reg);   /* the ports' budgets under the new entries */
	return rc;
}

/* Publish pol as the policy in force; {generation} or -32603. */
static json_t *publish(struct sn_ctl *ctl, const struct sn_policy *pol, struct sn_rpc_error *err)
{
	int rc = sn_policy_rpc_publish(ctl, pol);

	if (rc)
		return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "policy: %s", strerror(-rc));
	return json_pack("{s:I}", "generation", (json_int_t)sn_policy_main(ctl->policy)->gen);
}

static json_t *h_policy_set(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	struct sn_policy pol;
	char msg[sizeof(err->message)];

	if (sn_policy_rpc_check(ctl, json_object_get(params, "policy"), &pol, msg, sizeof(msg)))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "%s", msg);
	return publish(ctl, &pol, err);
}

/* One port's entry replaced in the policy in force and the result checked
 * as a whole, as policy.set would check it: the minimums' admission
 * control sees every other entry. */
static json_t *h_policy_put(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	const char *name = sn_rpc_param_str(params, "port", NULL);
	json_t *entry = json_object_get(params, "entry");
	struct sn_policy pol;
	char msg[sizeof(err->message)];
	json_t *j, *ports;
	int rc;

	if (!name)
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "port: required");
	if (!sn_config_port_name_ok(name))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "port: must match "
				   "[A-Za-z0-9_.-]{1,32}");
	if (!json_is_object(entry))
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "entry: required, an object");
	j = sn_policy_to_json(sn_policy_main(ctl->policy));
	ports = j ? json_object_get(j, "ports") : NULL;
	/* Checked last (jansson keeps insertion order): an error of the
	 * policy as a whole, e.g. the minimums' sum, names this port. */
	if (ports)
		json_object_del(ports, name);
	if (!ports || json_object_set(ports, name, entry)) {
		json_decref(j);
		return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "out of memory");
	}
	rc = sn_policy_rpc_check(ctl, j, &pol, msg, sizeof(msg));
	json_decref(j);
	if (rc)
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "%s", msg);
	return publish(ctl, &pol, err);
}

static json_t *h_policy_del(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_ctl *ctl = arg;
	const char *name = sn_rpc_param_str(params, "port", NULL);
	struct sn_policy pol = *sn_policy_main(ctl->policy);

	if (!name)
		return sn_rpc_fail(err, SN_RPC_INVALID_PARAMS, "port: required");
	if (sn_policy_port_del(&pol, name))
		return sn_rpc_fail(err, SN_RPC_ERR_NOT_FOUND, "policy has no entry for port %s", name);
	return publish(ctl, &pol, err);
}

int sn_policy_rpc_register(struct sn_rpc_server *srv, struct sn_ctl *ctl)
{
	int rc = sn_rpc_register(srv, "policy.get", h_policy_get, ctl);

	if (!rc)
		rc = sn_rpc_register(srv, "policy.set", h_policy_set, ctl);
	if (!rc)
		rc = sn_rpc_register(srv, "policy.put", h_policy_put, ctl);
	if (!rc)
		rc = sn_rpc_register(srv, "policy.del", h_policy_del, ctl);
	return rc;
}
