/* SPDX-License-Identifier: BSD-3-Clause */
/* test_policy_class.c — the flow class keys of the policy parser
 * (sn_policy.h): a table of classes that must parse into a given match
 * and read back (sn_policy_to_json) as the same JSON, and of classes the
 * parser must refuse with a message naming the field. Exit status 1 if
 * any check failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sn_policy.h"

#include "sn_check.h"

#define PATH "policy.ports.vm0.classes[0]"

/* A class (JSON text) and the match it must give. */
struct ok_row {
	const char *cls;
	struct sn_policy_match m;
	const char *back;          /* its policy.get form's match keys, NULL: as written */
};

#define ANY_PORTS .sport_hi = 65535, .dport_hi = 65535
#define V6 SN_POLICY_FAMILY_IPV6
#define V4 SN_POLICY_FAMILY_IPV4

static const struct ok_row ok_rows[] = {
	{ "{\"src\": \"2001:db8::/32\"}",
	  { .src = { 0x20010db8 }, .src_len = 32, .family = V6, ANY_PORTS }, NULL },
	{ "{\"dst\": \"2001:db8:0:1::7\", \"proto\": \"udp\", \"dst_port\": [53, 53]}",
	  { .dst = { 0x20010db8, 1, 0, 7 }, .dst_len = 128, .family = V6, .proto = 17,
	    .sport_hi = 65535, .dport_lo = 53, .dport_hi = 53 },
	  "{\"dst\": \"2001:db8:0:1::7/128\", \"proto\": \"udp\", \"dst_port\": [53, 53]}" },
	{ "{\"src\": \"::/0\", \"dst\": \"fe80::/10\"}",
	  { .dst = { 0xfe800000 }, .dst_len = 10, .family = V6, ANY_PORTS },
	  "{\"dst\": \"fe80::/10\"}" },
	{ "{\"src\": \"::/0\"}", { .family = V6, ANY_PORTS }, "{\"family\": \"ipv6\"}" },
	{ "{\"src\": \"10.0.0.0/8\", \"dst\": \"192.0.2.1/32\"}",
	  { .src = { 0x0a000000 }, .src_len = 8, .dst = { 0xc0000201 }, .dst_len = 32,
	    .family = V4, ANY_PORTS }, NULL },
	{ "{\"family\": \"ipv4\"}", { .family = V4, ANY_PORTS }, NULL },
	{ "{\"family\": \"ipv6\", \"proto\": 58}", { .family = V6, .proto = 58, ANY_PORTS }, NULL },
	{ "{\"family\": \"ipv6\", \"src\": \"2001:db8::/32\"}",
	  { .src = { 0x20010db8 }, .src_len = 32, .family = V6, ANY_PORTS },
	  "{\"src\": \"2001:db8::/32\"}" },
	{ "{\"flow_label\": 1048575}",
	  { .family = V6, .keys = SN_POLICY_M_FLOW_LABEL, .flow_label = 0xfffff, ANY_PORTS },
	  "{\"family\": \"ipv6\", \"flow_label\": 1048575}" },
	{ "{\"flow_label\": 0, \"dst\": \"2001:db8::/64\"}",
	  { .dst = { 0x20010db8 }, .dst_len = 64, .family = V6, .keys = SN_POLICY_M_FLOW_LABEL,
	    ANY_PORTS }, NULL },
	{ "{\"vlan\": 4095, \"pcp\": 7}",
	  { .keys = SN_POLICY_M_VLAN | SN_POLICY_M_PCP, .vlan = 4095, .pcp = 7, ANY_PORTS }, NULL },
	{ "{\"vlan\": 0}", { .keys = SN_POLICY_M_VLAN, ANY_PORTS }, NULL },
	{ "{\"dscp\": 46, \"src\": \"10.1.0.0/16\"}",
	  { .src = { 0x0a010000 }, .src_len = 16, .family = V4, .keys = SN_POLICY_M_DSCP,
	    .dscp = 46, ANY_PORTS }, NULL },
	{ "{\"dscp\": 0, \"family\": \"ipv6\"}",
	  { .family = V6, .keys = SN_POLICY_M_DSCP, ANY_PORTS }, NULL },
};

/* A class (JSON text) and the start of the parser's message (NULL: a
 * boundary case the parser accepts). */
static const struct {
	const char *cls, *err;
} bad_rows[] = {
	{ "{\"src\": \"2001:db8::/129\"}", PATH ".src: bad prefix length" },
	{ "{\"src\": \"2001:db8::1/32\"}", PATH ".src: bad prefix (host bits set after /32)" },
	{ "{\"dst\": \"2001:db8::1:0/96\"}", PATH ".dst: bad prefix (host bits set after /96)" },
	{ "{\"dst\": \"2001:db8::1:0/112\"}", NULL },
	{ "{\"dst\": \"2001:db8:::1\"}", PATH ".dst: bad prefix (want" },
	{ "{\"dst\": \"2001:db8::/\"}", PATH ".dst: bad prefix length" },
	{ "{\"dst\": \"10.0.0.0/40\"}", PATH ".dst: bad prefix length" },
	{ "{\"src\": \"10.0.0.0/8\", \"dst\": \"2001:db8::/32\"}",
	  PATH ".dst: an IPv6 prefix in a class of IPv4 src" },
	{ "{\"src\": \"2001:db8::/32\", \"dst\": \"10.0.0.1\"}",
	  PATH ".dst: an IPv4 prefix in a class of IPv6 src" },
	{ "{\"family\": \"ipv4\", \"src\": \"2001:db8::/32\"}",
	  PATH ".family: \"ipv4\" in a class of IPv6 prefixes" },
	{ "{\"family\": \"ipv6\", \"dst\": \"10.0.0.1\"}",
	  PATH ".family: \"ipv6\" in a class of IPv4 prefixes" },
	{ "{\"family\": \"inet6\"}", PATH ".family: must be \"ipv4\" or \"ipv6\"" },
	{ "{\"family\": 6}", PATH ".family: must be \"ipv4\" or \"ipv6\"" },
	{ "{\"flow_label\": 1048576}", PATH ".flow_label: must be 0..1048575" },
	{ "{\"flow_label\": -1}", PATH ".flow_label: must be 0..1048575" },
	{ "{\"flow_label\": \"1\"}", PATH ".flow_label: must be an integer" },
	{ "{\"flow_label\": 1, \"src\": \"10.0.0.0/8\"}", PATH ".flow_label: IPv6 only" },
	{ "{\"flow_label\": 1, \"family\": \"ipv4\"}", PATH ".flow_label: IPv6 only" },
	{ "{\"vlan\": 4096}", PATH ".vlan: must be 0..4095" },
	{ "{\"vlan\": true}", PATH ".vlan: must be an integer" },
	{ "{\"pcp\": 8}", PATH ".pcp: must be 0..7" },
	{ "{\"dscp\": 64}", PATH ".dscp: must be 0..63" },
	{ "{\"dscp\": 1.5}", PATH ".dscp: must be an integer" },
	{ "{\"tos\": 1}", PATH ".tos: unknown key" },
};

static json_t *policy_of(const char *cls)
{
	char text[512];
	json_t *j;

	snprintf(text, sizeof(text), "{\"ports\": {\"vm0\": {\"classes\": [%s]}}}", cls);
	j = json_loads(text, 0, NULL);
	CHECK(j != NULL);
	return j;
}

/* The class's match keys in its policy.get form (the keys the class
 * always shows dropped). */
static json_t *match_keys(json_t *cls)
{
	static const char *const always[] = { "name", "rate_bps", "burst_bytes", "scope",
					      "horizon" };
	json_t *c = json_deep_copy(cls);

	for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
		json_object_del(c, always[i]);
	return c;
}

static void test_ok(void)
{
	static struct sn_policy p, q;

	for (size_t i = 0; i < sizeof(ok_rows) / sizeof(ok_rows[0]); i++) {
		const struct ok_row *r = &ok_rows[i];
		json_t *j = policy_of(r->cls), *back, *want, *got;
		char err[256] = "";

		if (sn_policy_parse(j, &p, err, sizeof(err))) {
			fprintf(stderr, "%s: %s\n", r->cls, err);
			CHECK(!"parses");
			json_decref(j);
			continue;
		}
		if (memcmp(&p.ports[0].classes[0].m, &r->m, sizeof(r->m))) {
			fprintf(stderr, "%s: match\n", r->cls);
			CHECK(!"the match as expected");
		}
		/* policy.get shows the keys back; its output parses into the
		 * same table. */
		back = sn_policy_to_json(&p);
		CHECK(back != NULL);
		want = json_loads(r->back ? r->back : r->cls, 0, NULL);
		got = match_keys(json_array_get(json_object_get(json_object_get(
			json_object_get(back, "ports"), "vm0"), "classes"), 0));
		if (!json_equal(want, got)) {
			char *g = json_dumps(got, JSON_SORT_KEYS);

			fprintf(stderr, "%s: reads back as %s\n", r->cls, g ? g : "?");
			free(g);
			CHECK(!"the class reads back");
		}
		CHECK(sn_policy_parse(back, &q, err, sizeof(err)) == 0);
		CHECK(!memcmp(&q.ports[0].classes[0], &p.ports[0].classes[0],
			      sizeof(p.ports[0].classes[0])));
		json_decref(got);
		json_decref(want);
		json_decref(back);
		json_decref(j);
	}
}

static void test_bad(void)
{
	static struct sn_policy p;

	for (size_t i = 0; i < sizeof(bad_rows) / sizeof(bad_rows[0]); i++) {
		json_t *j = policy_of(bad_rows[i].cls);
		char err[256] = "";

		if (!bad_rows[i].err) {
			/* the boundary case next to a refused one: accepted */
			CHECK(sn_policy_parse(j, &p, err, sizeof(err)) == 0);
			json_decref(j);
			continue;
		}
		if (sn_policy_parse(j, &p, err, sizeof(err)) == 0 ||
		    strncmp(err, bad_rows[i].err, strlen(bad_rows[i].err))) {
			fprintf(stderr, "%s: \"%s\", want \"%s...\"\n", bad_rows[i].cls, err,
				bad_rows[i].err);
			CHECK(!"refused, naming the field");
		}
		json_decref(j);
	}
}

int main(void)
{
	test_ok();
	test_bad();
	return sn_check_exit("test_policy_class");
}
