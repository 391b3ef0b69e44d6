/* SPDX-License-Identifier: BSD-3-Clause */
/* test_reload.c — what config.reload decides before it touches anything
 * (sn_reload.h), without EAL: sn_config_static_differs() names the first
 * key fixed at start that a file changes (decoded values: a key left out
 * and written at its default agree; ports and policy never count);
 * sn_config_load_again() leaves sn_config_port_slots alone where
 * sn_config_load() sets it; a daemon on the embedded default answers
 * -32003 naming it. Exit status 1 if any check failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sn_config.h"
#include "sn_ctl.h"
#include "sn_reload.h"
#include "sn_rpc.h"

#include "sn_check.h"

static const char base_json[] =
	"{\"eal\": {\"main_cpu\": 0, \"worker_cpu\": 1, \"extra_args\": [\"--log-level=5\"]},"
	" \"control\": {\"socket\": \"/tmp/ctl.sock\"}, \"uplink\": null,"
	" \"ports\": [{\"name\": \"vm0\", \"path\": \"/tmp/vm0.sock\"}]}";

static int parse(struct sn_config *c, const char *json)
{
	char err[SN_CONFIG_ERR_MAX];
	int rc = sn_config_parse(c, json, strlen(json), "test", err, sizeof(err));

	if (rc)
		fprintf(stderr, "parse: %s\n", err);
	return rc;
}

/* The key base and json differ in ("" = none), into key. */
static void differs(const char *base, const char *json, char *key, size_t len)
{
	static struct sn_config a, b;   /* large */

	key[0] = '\0';
	CHECK(parse(&a, base) == 0);
	CHECK(parse(&b, json) == 0);
	if (!sn_config_static_differs(&a, &b, key, len))
		key[0] = '\0';
	sn_config_fini(&a);
	sn_config_fini(&b);
}

static void check_pair(const char *base, const char *json, const char *want)
{
	char key[64];

	differs(base, json, key, sizeof(key));
	if (strcmp(key, want))
		fprintf(stderr, "  %s: got \"%s\", want \"%s\"\n", json, key, want);
	CHECK(!strcmp(key, want));
}

static void check_differs(const char *json, const char *want)
{
	check_pair(base_json, json, want);
}

static void test_static_differs(void)
{
	check_differs(base_json, "");
	/* ports and policy are the reload's to apply */
	check_differs("{\"eal\": {\"main_cpu\": 0, \"worker_cpu\": 1, \"extra_args\": "
		      "[\"--log-level=5\"]}, \"control\": {\"socket\": \"/tmp/ctl.sock\"}, "
		      "\"uplink\": null, \"ports\": [], \"policy\": {\"ports\": {\"vm9\": "
		      "{\"weight\": 2}}}}", "");
	/* a key written at its default is the same setting */
	check_differs("{\"eal\": {\"main_cpu\": 0, \"worker_cpu\": 1, \"extra_args\": "
		      "[\"--log-level=5\"], \"memory_mb\": 1024}, \"control\": {\"socket\": "
		      "\"/tmp/ctl.sock\"}, \"datapath\": {\"max_ports\": 64, \"layout\": \"1core\"}, "
		      "\"uplink\": null}", "");
	check_differs("{\"eal\": {\"main_cpu\": 1, \"worker_cpu\": 1, \"extra_args\": "
		      "[\"--log-level=5\"]}, \"control\": {\"socket\": \"/tmp/ctl.sock\"}, "
		      "\"uplink\": null}", "eal.main_cpu");
	check_differs("{\"eal\": {\"main_cpu\": 0, \"worker_cpu\": 1}, \"control\": {\"socket\": "
		      "\"/tmp/ctl.sock\"}, \"uplink\": null}", "eal.extra_args");
	check_differs("{\"eal\": {\"main_cpu\": 0, \"worker_cpu\": 1, \"extra_args\": "
		      "[\"--log-level=5\"]}, \"control\": {\"socket\": \"/tmp/ctl2.sock\"}, "
		      "\"uplink\": null}", "control.socket");
	check_differs("{\"eal\": {\"main_cpu\": 0, \"worker_cpu\": 1, \"extra_args\": "
		      "[\"--log-level=5\"]}, \"control\": {\"socket\": \"/tmp/ctl.sock\"}, "
		      "\"datapath\": {\"max_ports\": 32}, \"uplink\": null}", "datapath.max_ports");
	check_differs("{\"eal\": {\"main_cpu\": 0, \"worker_cpu\": 1, \"extra_args\": "
		      "[\"--log-level=5\"]}, \"control\": {\"socket\": \"/tmp/ctl.sock\"}, "
		      "\"quota\": {\"macs\": 8}, \"uplink\": null}", "quota.macs");
	check_differs("{\"eal\": {\"main_cpu\": 0, \"worker_cpu\": 1, \"extra_args\": "
		      "[\"--log-level=5\"]}, \"control\": {\"socket\": \"/tmp/ctl.sock\"}}", "uplink");
	/* the uplink's RX descriptors, not the pool size "auto" derives from them */
	check_pair("{\"uplink\": {\"devargs\": \"net_null0\"}}",
		   "{\"uplink\": {\"devargs\": \"net_null0\", \"rx_desc\": 512}}", "uplink.rx_desc");
	check_pair("{\"uplink\": {\"devargs\": \"net_null0\"}}",
		   "{\"uplink\": {\"devargs\": \"net_null0\", \"rx_queues\": 2}}",
		   "uplink.rx_queues");
}

static void test_load_again_keeps_slots(void)
{
	char path[] = "/tmp/sn-test-reload-XXXXXX", err[SN_CONFIG_ERR_MAX];
	static const char text[] = "{\"datapath\": {\"max_ports\": 8}, \"uplink\": null}";
	static struct sn_config c;
	const unsigned slots = sn_config_port_slots;
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, text, sizeof(text) - 1) == (ssize_t)(sizeof(text) - 1));
	close(fd);
	CHECK(slots != 9);
	CHECK(sn_config_load_again(&c, path, err, sizeof(err)) == 0);
	CHECK(c.datapath.max_ports == 8 && sn_config_port_slots == slots);
	sn_config_fini(&c);
	CHECK(sn_config_load(&c, path, err, sizeof(err)) == 0);
	CHECK(sn_config_port_slots == 9);
	sn_config_fini(&c);
	unlink(path);
	CHECK(sn_config_set_port_slots(slots - 1) == 0);
}

static void test_embedded_default(void)
{
	static struct sn_config c;
	struct sn_ctl ctl = { 0 };
	struct sn_rpc_error err = { 0 };
	struct sn_reload *rl;

	CHECK(sn_config_parse(&c, sn_default_config, sn_default_config_len, "(default)", err.message,
			      sizeof(err.message)) == 0);
	rl = sn_reload_create(NULL, &c, &ctl);
	CHECK(rl != NULL);
	if (rl) {
		CHECK(sn_reload_run(rl, &err) == NULL);
		CHECK(err.code == SN_RPC_ERR_BUSY);
		CHECK(strstr(err.message, "embedded default") != NULL);
		CHECK(strstr(err.message, "--config") != NULL);
	}
	sn_reload_destroy(rl);
	sn_config_fini(&c);
}

int main(void)
{
	test_static_differs();
	test_load_again_keeps_slots();
	test_embedded_default();
	return sn_check_exit("test_reload");
}
