/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_policy.c — libFuzzer target for the policy model (sn_policy.h):
 * sn_policy_parse() on arbitrary JSON text and the sn_policy_to_json()
 * round trip.
 *
 * The first byte picks the port slots (datapath.max_ports 1..8, so the
 * entry limit is reached); the rest is JSON text. A refused policy must
 * give a one-line "policy...: <reason>" message. An accepted one must
 * respect every documented bound (fuzz_check.h), and its to_json must
 * parse again into a policy whose to_json is the same JSON (and that
 * respects the bounds): the RPC policy.get output is always a valid
 * policy.set input that means the same. Any failure aborts.
 */
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sn_policy p, p2;
	char err[512];
	json_error_t je;
	json_t *j, *out, *out2;

	if (size < 1)
		return 0;
	if (sn_config_set_port_slots((unsigned)(data[0] % 8) + 1))
		abort();
	j = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!j)
		return 0;
	err[0] = 0;
	if (sn_policy_parse(j, &p, err, sizeof(err)) != 0) {
		fuzz_check_error(err, sizeof(err), "policy");
		json_decref(j);
		return 0;
	}
	fuzz_check_policy(&p);
	out = sn_policy_to_json(&p);
	FCHECK(out != NULL, "to_json failed");
	err[0] = 0;
	FCHECK(sn_policy_parse(out, &p2, err, sizeof(err)) == 0, "to_json output refused: %s", err);
	fuzz_check_policy(&p2);
	out2 = sn_policy_to_json(&p2);
	FCHECK(out2 != NULL, "to_json failed");
	if (!json_equal(out, out2)) {
		char *a = json_dumps(out, JSON_SORT_KEYS), *b = json_dumps(out2, JSON_SORT_KEYS);

		FCHECK(0, "round trip changed the policy:\n%s\n%s", a, b);
	}
	FCHECK(p2.n_ports == p.n_ports && p2.n_aggs == p.n_aggs &&
	       p2.uplink.rate_bps == p.uplink.rate_bps && p2.uplink.algo == p.uplink.algo &&
	       p2.uplink.fair_drop == p.uplink.fair_drop &&
	       p2.uplink.overhead_bytes == p.uplink.overhead_bytes, "round trip changed the uplink or counts");
	for (unsigned i = 0; i < p.n_ports; i++) {
		const struct sn_policy_port *a = &p.ports[i], *b = sn_policy_port_find(&p2, a->name);

		FCHECK(b && a->rate_bps == b->rate_bps && a->burst_bytes == b->burst_bytes &&
		       a->weight == b->weight && a->n_classes == b->n_classes,
		       "round trip changed port %s", a->name);
		for (unsigned c = 0; c < a->n_classes; c++)
			FCHECK(!memcmp(&a->classes[c].m, &b->classes[c].m, sizeof(a->classes[c].m)) &&
			       a->classes[c].rate_bps == b->classes[c].rate_bps &&
			       a->classes[c].burst_bytes == b->classes[c].burst_bytes &&
			       a->classes[c].scope == b->classes[c].scope &&
			       a->classes[c].horizon == b->classes[c].horizon &&
			       a->classes[c].agg == b->classes[c].agg &&
			       !strcmp(a->classes[c].name, b->classes[c].name),
			       "round trip changed port %s class %u", a->name, c);
	}
	json_decref(out2);
	json_decref(out);
	json_decref(j);
	return 0;
}
