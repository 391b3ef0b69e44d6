/* sn_policy.c — policy model: JSON <-> struct sn_policy, validation, and
 * the liburcu QSBR publication of the table the datapath reads.
 *
 * Design. The datapath never sees JSON nor a partially built table: the
 * control thread parses a complete candidate (every field range-checked,
 * the sum of weights checked against the scheduler's limit, so the worker
 * can apply any published table without failing), then publishes it as
 * one pointer swap (DESIGN.md "Control plane": liburcu QSBR, each poll
 * loop iteration is a quiescent state). The worker derives its own
 * per-port timestamping state (Carousel §5.1.1, sn_tstamp) and QFQ classes
 * (PSPAT §3.4) from the table it sees; see sn_pipeline.c.
 */
#define _LGPL_SOURCE
#include "sn_policy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu-qsbr.h>

#include "sn_arbiter.h"
#include "sn_tstamp.h"

struct sn_policy_store {
	struct sn_policy *cur;   /* RCU-protected; main is the only writer */
	uint64_t next_gen;
};

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* An unsigned integer member in [lo, hi] (0 also allowed if zero_ok). */
static int get_uint(const json_t *obj, const char *key, const char *path, uint64_t lo,
		    uint64_t hi, int zero_ok, uint64_t *out, char *err, size_t errlen)
{
	const json_t *v = json_object_get(obj, key);
	json_int_t x;

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return fail(err, errlen, "%s.%s: must be an integer", path, key);
	x = json_integer_value(v);
	if (x < 0 || ((uint64_t)x < lo && !(zero_ok && x == 0)) || (uint64_t)x > hi) {
		if (zero_ok)
			return fail(err, errlen, "%s.%s: must be 0 or %llu..%llu", path, key,
				    (unsigned long long)lo, (unsigned long long)hi);
		return fail(err, errlen, "%s.%s: must be %llu..%llu", path, key,
			    (unsigned long long)lo, (unsigned long long)hi);
	}
	*out = (uint64_t)x;
	return 0;
}

static int check_keys(const json_t *obj, const char *const *keys, const char *path,
		      char *err, size_t errlen)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)obj, key, v) {
		const char *const *k;

		for (k = keys; *k && strcmp(*k, key); k++)
			;
		if (!*k)
			return fail(err, errlen, "%s.%s: unknown key", path, key);
	}
	return 0;
}

static int parse_uplink(const json_t *u, struct sn_policy *out, char *err, size_t errlen)
{
	static const char *const keys[] = { "rate_bps", "algorithm", "overhead_bytes", NULL };
	const json_t *a;
	uint64_t v;
	int rc;

	if (!json_is_object(u))
		return fail(err, errlen, "policy.uplink: must be an object");
	if ((rc = check_keys(u, keys, "policy.uplink", err, errlen)))
		return rc;
	if ((rc = get_uint(u, "rate_bps", "policy.uplink", 1000, SN_ARBITER_MAX_LINK_BPS, 1,
			   &out->uplink.rate_bps, err, errlen)))
		return rc;
	v = out->uplink.overhead_bytes;
	if ((rc = get_uint(u, "overhead_bytes", "policy.uplink", 0, SN_ARBITER_MAX_OVERHEAD, 0,
			   &v, err, errlen)))
		return rc;
	out->uplink.overhead_bytes = (uint32_t)v;
	a = json_object_get(u, "algorithm");
	if (a && (!json_is_string(a) || sn_sched_algo_parse(json_string_value(a), &out->uplink.algo)))
		return fail(err, errlen, "policy.uplink.algorithm: must be \"qfq\", \"drr\" or \"fifo\"");
	return 0;
}

static int parse_port(const char *name, const json_t *o, struct sn_policy_port *pp,
		      char *err, size_t errlen)
{
	static const char *const keys[] = { "rate_bps", "burst_bytes", "weight", NULL };
	char path[64];
	uint64_t v;
	int rc;

	if (!sn_config_port_name_ok(name))
		return fail(err, errlen, "policy.ports: \"%.40s\": port name must match "
			    "[A-Za-z0-9_.-]{1,32}", name);
	snprintf(path, sizeof(path), "policy.ports.%s", name);
	if (!json_is_object(o))
		return fail(err, errlen, "%s: must be an object", path);
	if ((rc = check_keys(o, keys, path, err, errlen)))
		return rc;
	memset(pp, 0, sizeof(*pp));
	snprintf(pp->name, sizeof(pp->name), "%s", name);
	pp->weight = 1;
	if ((rc = get_uint(o, "rate_bps", path, SN_TSTAMP_RATE_MIN, SN_TSTAMP_RATE_MAX, 1,
			   &pp->rate_bps, err, errlen)))
		return rc;
	v = 0;
	if ((rc = get_uint(o, "burst_bytes", path, 0, SN_TSTAMP_BURST_MAX, 0, &v, err, errlen)))
		return rc;
	pp->burst_bytes = (uint32_t)v;
	v = 1;
	if ((rc = get_uint(o, "weight", path, 1, SN_SCHED_MAX_WEIGHT, 0, &v, err, errlen)))
		return rc;
	pp->weight = (uint32_t)v;
	return 0;
}

int sn_policy_parse(const json_t *j, struct sn_policy *out, char *err, size_t errlen)
{
	static const char *const keys[] = { "uplink", "ports", NULL };
	const json_t *u, *ports, *o;
	const char *name;
	uint64_t wsum = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	out->uplink.algo = SN_SCHED_QFQ;
	out->uplink.overhead_bytes = SN_POLICY_OVERHEAD_DEF;
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_object(j))
		return fail(err, errlen, "policy: must be an object");
	if ((rc = check_keys(j, keys, "policy", err, errlen)))
		return rc;
	u = json_object_get(j, "uplink");
	if (u && (rc = parse_uplink(u, out, err, errlen)))
		return rc;
	ports = json_object_get(j, "ports");
	if (!ports)
		return 0;
	if (!json_is_object(ports))
		return fail(err, errlen, "policy.ports: must be an object");
	if (json_object_size(ports) > SN_POLICY_PORTS_MAX)
		return fail(err, errlen, "policy.ports: at most %d entries", SN_POLICY_PORTS_MAX);
	json_object_foreach((json_t *)ports, name, o) {
		struct sn_policy_port *pp = &out->ports[out->n_ports];

		if ((rc = parse_port(name, o, pp, err, errlen)))
			return rc;
		wsum += pp->weight;
		out->n_ports++;
	}
	if (wsum > SN_SCHED_MAX_WSUM)
		return fail(err, errlen, "policy.ports: sum of weights %llu exceeds %u",
			    (unsigned long long)wsum, SN_SCHED_MAX_WSUM);
	return 0;
}

json_t *sn_policy_to_json(const struct sn_policy *p)
{
	json_t *ports = json_object(), *r;

	if (!ports)
		return NULL;
	for (unsigned i = 0; i < p->n_ports; i++) {
		const struct sn_policy_port *pp = &p->ports[i];
		json_t *o = json_pack("{s:I, s:I, s:I}", "rate_bps", (json_int_t)pp->rate_bps,
				      "burst_bytes", (json_int_t)pp->burst_bytes,
				      "weight", (json_int_t)pp->weight);

		if (!o || json_object_set_new(ports, pp->name, o)) {
			json_decref(ports);
			return NULL;
		}
	}
	r = json_pack("{s:{s:I, s:s, s:I}, s:o}", "uplink",
		      "rate_bps", (json_int_t)p->uplink.rate_bps,
		      "algorithm", sn_sched_algo_name(p->uplink.algo),
		      "overhead_bytes", (json_int_t)p->uplink.overhead_bytes,
		      "ports", ports);
	return r;
}

const struct sn_policy_port *sn_policy_port_find(const struct sn_policy *p, const char *name)
{
	for (unsigned i = 0; i < p->n_ports; i++)
		if (!strcmp(p->ports[i].name, name))
			return &p->ports[i];
	return NULL;
}

int sn_policy_port_del(struct sn_policy *p, const char *name)
{
	for (unsigned i = 0; i < p->n_ports; i++) {
		if (strcmp(p->ports[i].name, name))
			continue;
		memmove(&p->ports[i], &p->ports[i + 1], (p->n_ports - i - 1) * sizeof(p->ports[0]));
		p->n_ports--;
		return 0;
	}
	return -ENOENT;
}

struct sn_policy_store *sn_policy_store_create(const struct sn_policy *initial)
{
	struct sn_policy_store *st = calloc(1, sizeof(*st));

	if (!st)
		goto fail;
	st->cur = malloc(sizeof(*st->cur));
	if (!st->cur)
		goto free_store;
	*st->cur = *initial;
	st->cur->gen = 1;
	st->next_gen = 2;
	return st;
free_store:
	free(st);
fail:
	errno = ENOMEM;
	return NULL;
}

void sn_policy_store_destroy(struct sn_policy_store *st)
{
	if (!st)
		return;
	free(st->cur);
	free(st);
}

const struct sn_policy *sn_policy_main(const struct sn_policy_store *st)
{
	return st->cur;
}

int sn_policy_publish(struct sn_policy_store *st, const struct sn_policy *p)
{
	struct sn_policy *n = malloc(sizeof(*n)), *old;

	if (!n)
		return -ENOMEM;
	*n = *p;
	n->gen = st->next_gen++;
	/* Release (inside rcu_xchg_pointer) pairs with rcu_dereference() in
	 * sn_policy_current(): the worker sees a fully written table. */
	old = rcu_xchg_pointer(&st->cur, n);
	/* Every datapath thread passes a quiescent state per loop iteration;
	 * after this no one reads `old`. */
	synchronize_rcu();
	free(old);
	return 0;
}

const struct sn_policy *sn_policy_current(struct sn_policy_store *st)
{
	return rcu_dereference(st->cur);
}
