/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_reload.c — config.reload and SIGHUP (sn_reload.h): a plan built and
 * checked against the running state first, then applied.
 *
 * The plan gives each port of the new file one action against the
 * registry: add (no such port), unchanged, holds (hold limits only:
 * changed in place) or recreate (any other field: deleted and added
 * again); file ports of the registry the new file no longer names are
 * removed. Applied in that order: removals and recreations' deletions
 * first (their names and socket paths become free for the file's other
 * entries), in-place changes, then additions, then the policy.
 */
#include "sn_reload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_ctl.h"
#include "sn_log.h"
#include "sn_policy.h"
#include "sn_policy_rpc.h"
#include "sn_port.h"

#define MSG_MAX 256   /* sizeof(struct sn_rpc_error.message) */

struct sn_reload {
	char *path;                /* NULL: started on the embedded default */
	struct sn_config *cur;     /* the file as last applied ("auto" unresolved) */
	struct sn_ctl *ctl;
};

enum action { A_ADD, A_UNCHANGED, A_HOLDS, A_RECREATE };

/* What one reload does and did: indexes into the new config's ports for
 * the file's entries, names of the registry's file ports it removes. */
struct plan {
	const struct sn_config *next;
	enum action act[SN_CONFIG_PORTS_MAX];
	unsigned n_removed;
	char removed[SN_CONFIG_PORTS_MAX][SN_CONFIG_NAME_MAX + 1];
	bool has_policy, policy_same;
	struct sn_policy pol;
};

/* A deep copy of src (policy_json left out: the running policy is the
 * store's), or NULL. */
static struct sn_config *config_dup(const struct sn_config *src)
{
	struct sn_config *c = malloc(sizeof(*c));

	if (!c)
		return NULL;
	*c = *src;
	c->policy_json = NULL;
	for (unsigned i = 0; i < c->eal.n_extra; i++)
		c->eal.extra_args[i] = NULL;
	for (unsigned i = 0; i < src->eal.n_extra; i++) {
		c->eal.extra_args[i] = strdup(src->eal.extra_args[i]);
		if (!c->eal.extra_args[i]) {
			sn_config_fini(c);
			free(c);
			return NULL;
		}
	}
	return c;
}

static void config_free(struct sn_config *c)
{
	if (c) {
		sn_config_fini(c);
		free(c);
	}
}

struct sn_reload *sn_reload_create(const char *path, const struct sn_config *cfg,
				   struct sn_ctl *ctl)
{
	struct sn_reload *rl = calloc(1, sizeof(*rl));

	if (!rl)
		goto err;
	rl->ctl = ctl;
	if (path && !(rl->path = strdup(path)))
		goto err_rl;
	rl->cur = config_dup(cfg);
	if (!rl->cur)
		goto err_path;
	return rl;

err_path:
	free(rl->path);
err_rl:
	free(rl);
err:
	errno = ENOMEM;
	return NULL;
}

void sn_reload_destroy(struct sn_reload *rl)
{
	if (!rl)
		return;
	config_free(rl->cur);
	free(rl->path);
	free(rl);
}

static const struct sn_config_port *config_port(const struct sn_config *c, const char *name)
{
	for (unsigned i = 0; i < c->n_ports; i++)
		if (!strcmp(c->ports[i].name, name))
			return &c->ports[i];
	return NULL;
}

/* How the entry a (as applied) becomes b. */
static enum action port_action(const struct sn_config_port *a, const struct sn_config_port *b)
{
	if (strcmp(a->path, b->path) || a->client != b->client || a->deferred != b->deferred ||
	    a->queues != b->queues || a->has_workers != b->has_workers ||
	    (a->has_workers && memcmp(a->workers, b->workers, a->queues)) ||
	    memcmp(&a->bind, &b->bind, sizeof(a->bind)))
		return A_RECREATE;
	if (a->max_hold_us != b->max_hold_us || a->unmarked_max_hold_us != b->unmarked_max_hold_us)
		return a->deferred ? A_HOLDS : A_UNCHANGED;   /* immediate: not used */
	return A_UNCHANGED;
}

/* A registry port that stays through the plan (not removed, not
 * recreated). */
static bool port_stays(const struct plan *pl, const struct sn_port *p)
{
	if (p->type != SN_PORT_VHOST || p->owner != SN_PORT_OWNER_FILE)
		return true;
	for (unsigned i = 0; i < pl->next->n_ports; i++)
		if (!strcmp(pl->next->ports[i].name, p->name))
			return pl->act[i] != A_RECREATE;
	return false;
}

/* The ports' part of the plan against the registry; 0, or -1 with msg. */
static int plan_ports(const struct sn_reload *rl, struct plan *pl, char *msg)
{
	const struct sn_config *next = pl->next;
	const struct sn_port_table *t = sn_ports_table_main(rl->ctl->reg);
	unsigned n_rpc = 0;

	for (unsigned i = 0; i < next->n_ports; i++) {
		const struct sn_config_port *np = &next->ports[i];
		const struct sn_port *p = sn_ports_find(rl->ctl->reg, np->name);
		const struct sn_config_port *old;

		if (!p) {
			pl->act[i] = A_ADD;
			continue;
		}
		if (p->type != SN_PORT_VHOST || p->owner != SN_PORT_OWNER_FILE) {
			snprintf(msg, MSG_MAX, "config: ports[%u].name: %s is a port added at run "
				 "time (port.add), not the file's: delete it (port.del) or rename "
				 "the file's entry", i, np->name);
			return -1;
		}
		old = config_port(rl->cur, np->name);
		pl->act[i] = old ? port_action(old, np) : A_RECREATE;
	}
	for (unsigned k = 0; k < t->n; k++) {
		const struct sn_port *p = t->list[k];

		if (p->type != SN_PORT_VHOST)
			continue;
		if (p->owner != SN_PORT_OWNER_FILE)
			n_rpc++;
		else if (!config_port(next, p->name))
			snprintf(pl->removed[pl->n_removed++], SN_CONFIG_NAME_MAX + 1, "%s", p->name);
	}
	if (n_rpc + next->n_ports > next->datapath.max_ports) {
		snprintf(msg, MSG_MAX, "config: ports: %u ports and %u added at run time, more than "
			 "datapath.max_ports %u", next->n_ports, n_rpc, next->datapath.max_ports);
		return -1;
	}
	/* A socket an added port would take from a port that stays. */
	for (unsigned i = 0; i < next->n_ports; i++) {
		if (pl->act[i] != A_ADD && pl->act[i] != A_RECREATE)
			continue;
		for (unsigned k = 0; k < t->n; k++) {
			const struct sn_port *p = t->list[k];

			if (p->type == SN_PORT_VHOST && port_stays(pl, p) &&
			    !strcmp(p->path, next->ports[i].path)) {
				snprintf(msg, MSG_MAX, "config: ports[%u].path: %s is the socket of "
					 "port %s (owner %s)", i, next->ports[i].path, p->name,
					 sn_port_owner_names[p->owner]);
				return -1;
			}
		}
	}
	return 0;
}

/* The policy's part: parsed and checked as policy.set does; same as the
 * one in force or not. 0, or -1 with msg. */
static int plan_policy(const struct sn_reload *rl, struct plan *pl, char *msg)
{
	json_t *j, *now, *want;
	int rc;

	pl->has_policy = pl->next->policy_json != NULL;
	if (!pl->has_policy)
		return 0;
	j = json_loads(pl->next->policy_json, 0, NULL);
	if (!j) {
		snprintf(msg, MSG_MAX, "config: policy: out of memory");
		return -1;
	}
	rc = sn_policy_rpc_check(rl->ctl, j, &pl->pol, msg, MSG_MAX);
	json_decref(j);
	if (rc)
		return -1;
	now = sn_policy_to_json(sn_policy_main(rl->ctl->policy));
	want = sn_policy_to_json(&pl->pol);
	pl->policy_same = now && want && json_equal(now, want);
	json_decref(now);
	json_decref(want);
	return 0;
}

int sn_reload_port_add(struct sn_ports *reg, const struct sn_config_port *p)
{
	return sn_ports_add_vhost(reg, p->name, p->path, &(struct sn_vhost_opts){
		.client = p->client, .deferred = p->deferred,
		.max_hold_us = p->max_hold_us,
		.unmarked_max_hold_us = p->unmarked_max_hold_us,
		.queues = (uint16_t)p->queues,
		.workers = p->has_workers ? p->workers : NULL,
		.bind = &p->bind, .owner = SN_PORT_OWNER_FILE });
}

/* Append name to the array member key of r. */
static void note(json_t *r, const char *key, const char *name)
{
	json_array_append_new(json_object_get(r, key), json_string(name));
}

/* Carry out pl; the result object, its "failed" member listing the steps
 * that failed (each logged). */
static json_t *apply(struct sn_reload *rl, struct plan *pl)
{
	const struct sn_config *next = pl->next;
	json_t *ports = json_pack("{s:[], s:[], s:[], s:[], s:[], s:[]}", "added", "changed",
				  "recreated", "removed", "unchanged", "kept");
	json_t *failed = json_array(), *r;
	const struct sn_port_table *t;
	const char *policy = "kept";
	int rc;

	if (!ports || !failed)
		goto oom;
	for (unsigned k = 0; k < pl->n_removed; k++) {
		rc = sn_ports_remove(rl->ctl->reg, pl->removed[k]);
		if (rc) {
			sn_log_err("reload: port %s: cannot delete it: %s", pl->removed[k], strerror(-rc));
			json_array_append_new(failed, json_pack("{s:s, s:s}", "port", pl->removed[k],
								"error", strerror(-rc)));
		} else
			note(ports, "removed", pl->removed[k]);
	}
	for (unsigned i = 0; i < next->n_ports; i++) {
		const struct sn_config_port *np = &next->ports[i];

		if (pl->act[i] != A_RECREATE)
			continue;
		rc = sn_ports_remove(rl->ctl->reg, np->name);
		if (rc) {
			sn_log_err("reload: port %s: cannot delete it: %s", np->name, strerror(-rc));
			pl->act[i] = A_UNCHANGED;   /* left as it was */
			json_array_append_new(failed, json_pack("{s:s, s:s}", "port", np->name,
								"error", strerror(-rc)));
		}
	}
	for (unsigned i = 0; i < next->n_ports; i++) {
		const struct sn_config_port *np = &next->ports[i];

		if (pl->act[i] == A_HOLDS) {
			rc = sn_ports_set_holds(rl->ctl->reg, np->name, np->max_hold_us,
						np->unmarked_max_hold_us);
			if (rc) {
				sn_log_err("reload: port %s: cannot change its hold limits: %s", np->name,
				       strerror(-rc));
				json_array_append_new(failed, json_pack("{s:s, s:s}", "port", np->name,
									"error", strerror(-rc)));
			} else
				note(ports, "changed", np->name);
		} else if (pl->act[i] == A_UNCHANGED)
			note(ports, "unchanged", np->name);
	}
	for (unsigned i = 0; i < next->n_ports; i++) {
		const struct sn_config_port *np = &next->ports[i];

		if (pl->act[i] != A_ADD && pl->act[i] != A_RECREATE)
			continue;
		rc = sn_reload_port_add(rl->ctl->reg, np);
		if (rc) {
			sn_log_err("reload: ports[%u] (%s, %s): %s", i, np->name, np->path, strerror(-rc));
			json_array_append_new(failed, json_pack("{s:s, s:s}", "port", np->name,
								"error", strerror(-rc)));
		} else
			note(ports, pl->act[i] == A_ADD ? "added" : "recreated", np->name);
	}
	t = sn_ports_table_main(rl->ctl->reg);
	for (unsigned k = 0; k < t->n; k++)
		if (t->list[k]->type == SN_PORT_VHOST && t->list[k]->owner != SN_PORT_OWNER_FILE)
			note(ports, "kept", t->list[k]->name);
	if (pl->has_policy && pl->policy_same)
		policy = "unchanged";
	else if (pl->has_policy) {
		rc = sn_policy_rpc_publish(rl->ctl, &pl->pol);
		if (rc) {
			sn_log_err("reload: policy: %s", strerror(-rc));
			json_array_append_new(failed, json_pack("{s:s, s:s}", "policy", "replace",
								"error", strerror(-rc)));
			policy = "kept";
		} else
			policy = "replaced";
	}
	r = json_pack("{s:s, s:o, s:s, s:I, s:o}", "config", rl->path, "ports", ports,
		      "policy", policy,
		      "generation", (json_int_t)sn_policy_main(rl->ctl->policy)->gen,
		      "failed", failed);
	if (r)
		return r;
	ports = failed = NULL;   /* consumed by json_pack even on failure */
oom:
	json_decref(ports);
	json_decref(failed);
	return NULL;
}

/* "a, b" of the names in array a, or "-". */
static void names(char *buf, size_t len, const json_t *a)
{
	size_t n = 0, i;
	json_t *v;

	buf[0] = '\0';
	json_array_foreach(a, i, v) {
		int k = snprintf(buf + n, len - n, "%s%s", i ? "," : "", json_string_value(v));

		if (k < 0 || (size_t)k >= len - n)
			break;
		n += (size_t)k;
	}
	if (!buf[0])
		snprintf(buf, len, "-");
}

/* The one-line summary of a result (SIGHUP's log line, the RPC's failure). */
static void summary(const json_t *r, char *buf, size_t len)
{
	const json_t *p = json_object_get(r, "ports");
	char a[96], c[96], re[96], rm[96];

	names(a, sizeof(a), json_object_get(p, "added"));
	names(c, sizeof(c), json_object_get(p, "changed"));
	names(re, sizeof(re), json_object_get(p, "recreated"));
	names(rm, sizeof(rm), json_object_get(p, "removed"));
	/* a long list is cut at len (the log line's limit) */
	if (snprintf(buf, len, "ports added %s, changed %s, recreated %s, removed %s; policy %s "
		     "(generation %lld)", a, c, re, rm,
		     json_string_value(json_object_get(r, "policy")),
		     (long long)json_integer_value(json_object_get(r, "generation"))) < 0)
		buf[0] = '\0';
}

static json_t *reload(struct sn_reload *rl, struct sn_rpc_error *err)
{
	char msg[MSG_MAX], key[64];
	struct sn_config *next;
	struct plan *pl;
	json_t *r = NULL;
	int rc;

	if (!rl->path)
		return sn_rpc_fail(err, SN_RPC_ERR_BUSY, "no configuration file to re-read: "
				   "schednicd runs on the embedded default configuration (start it "
				   "with --config FILE to reload)");
	next = malloc(sizeof(*next));
	pl = calloc(1, sizeof(*pl));
	if (!next || !pl) {
		free(next);
		free(pl);
		return sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "out of memory");
	}
	rc = sn_config_load_again(next, rl->path, msg, sizeof(msg));
	if (rc) {
		free(next);
		free(pl);
		return sn_rpc_fail(err, SN_RPC_ERR_CONFIG, "%s (nothing changed)", msg);
	}
	pl->next = next;
	if (sn_config_static_differs(rl->cur, next, key, sizeof(key))) {
		sn_rpc_fail(err, SN_RPC_ERR_CONFIG, "config: %s: cannot change at run time "
			    "(restart schednicd to apply it; nothing changed)", key);
		goto out;
	}
	if (plan_policy(rl, pl, msg) || plan_ports(rl, pl, msg)) {
		sn_rpc_fail(err, SN_RPC_ERR_CONFIG, "%s (nothing changed)", msg);
		goto out;
	}
	r = apply(rl, pl);
	if (!r) {
		sn_rpc_fail(err, SN_RPC_INTERNAL_ERROR, "out of memory (the reload may be partly "
			    "applied: see port.list)");
		goto out;
	}
	/* What was applied is the file now (its fixed settings are cur's). */
	config_free(rl->cur);
	rl->cur = next;
	next = NULL;
	if (!json_array_size(json_object_get(r, "failed")))
		json_object_del(r, "failed");
	else {
		summary(r, msg, sizeof(msg));
		sn_rpc_fail(err, SN_RPC_ERR_RESOURCE, "partly applied (%zu step(s) failed, "
			    "logged): %s", json_array_size(json_object_get(r, "failed")), msg);
		json_decref(r);
		r = NULL;
	}
out:
	config_free(next);
	free(pl);
	return r;
}

json_t *sn_reload_run(struct sn_reload *rl, struct sn_rpc_error *err)
{
	json_t *r;

	/* systemd: the lead adds sn_notify_reloading() here (sn_notify.h) */
	r = reload(rl, err);
	/* systemd: the lead adds sn_notify_ready() here (sn_notify.h) */
	return r;
}

void sn_reload_signal(struct sn_reload *rl)
{
	struct sn_rpc_error err = { 0 };
	char line[400];
	json_t *r;

	sn_log("reload: SIGHUP: re-reading %s", rl->path ? rl->path : "(embedded default)");
	r = sn_reload_run(rl, &err);
	if (!r) {
		sn_log_warn("reload: refused: %s", err.message);
		return;
	}
	summary(r, line, sizeof(line));
	sn_log("reload: %s", line);
	json_decref(r);
}

static json_t *h_config_reload(json_t *params, void *arg, struct sn_rpc_error *err)
{
	struct sn_reload *rl = arg;
	char line[400];
	json_t *r;

	(void)params;
	sn_log("reload: config.reload: re-reading %s", rl->path ? rl->path : "(embedded default)");
	r = sn_reload_run(rl, err);
	if (r) {
		summary(r, line, sizeof(line));
		sn_log("reload: %s", line);
	} else
		sn_log_warn("reload: refused: %s", err->message);
	return r;
}

int sn_reload_register(struct sn_rpc_server *srv, struct sn_reload *rl)
{
	return sn_rpc_register(srv, "config.reload", h_config_reload, rl);
}
