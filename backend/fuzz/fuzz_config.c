/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_config.c — libFuzzer target for sn_config_parse() (the daemon's
 * configuration file over the embedded defaults).
 *
 * The input is the file's text. A refused file must give a one-line
 * "config: <field>: <reason>" message (its parse errors "config: fuzz:
 * line:column: ..."). An accepted one must respect the bounds it
 * documents: port slots = datapath.max_ports + 1, at most max_ports
 * ports with valid, distinct names and socket paths, queues 1..8 each
 * owned by an existing worker, burst 1..64, a power-of-two MAC table,
 * NUL-terminated strings, a layout name that matches its enum, at most
 * SN_CONFIG_EXTRA_MAX extra EAL arguments, and a "policy" that
 * sn_policy_parse() accepts. sn_config_fini() must release everything
 * (the leak checker runs on every input). Any failure aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz_check.h"

static int terminated(const char *s, size_t size)
{
	return strnlen(s, size) < size;
}

static void check_config(const struct sn_config *c)
{
	static struct sn_policy pol;
	static const char *const layouts[] = { "1core", "2core", "ncore" };

	FCHECK(c->datapath.max_ports >= 1 && c->datapath.max_ports <= SN_CONFIG_PORTS_MAX,
	       "max_ports %u", c->datapath.max_ports);
	FCHECK(sn_config_port_slots == c->datapath.max_ports + 1, "port slots %u, max_ports %u",
	       sn_config_port_slots, c->datapath.max_ports);
	FCHECK(c->n_ports <= c->datapath.max_ports, "%u ports, max_ports %u", c->n_ports,
	       c->datapath.max_ports);
	FCHECK(c->datapath.burst >= 1 && c->datapath.burst <= SN_CONFIG_BURST_MAX, "burst %u",
	       c->datapath.burst);
	FCHECK(c->datapath.mac_table_size && !(c->datapath.mac_table_size & (c->datapath.mac_table_size - 1)),
	       "mac_table_size %u", c->datapath.mac_table_size);
	FCHECK((unsigned)c->datapath.layout <= SN_LAYOUT_NCORE &&
	       !strcmp(c->datapath.layout_name, layouts[c->datapath.layout]), "layout %s = %d",
	       c->datapath.layout_name, (int)c->datapath.layout);
	FCHECK(c->datapath.workers >= 1 && c->datapath.workers <= SN_CONFIG_WORKERS_MAX &&
	       (c->datapath.layout == SN_LAYOUT_NCORE || c->datapath.workers == 1),
	       "workers %u (layout %s)", c->datapath.workers, c->datapath.layout_name);
	FCHECK(c->eal.n_extra <= SN_CONFIG_EXTRA_MAX, "%u extra args", c->eal.n_extra);
	for (unsigned i = 0; i < c->eal.n_extra; i++)
		FCHECK(c->eal.extra_args[i] != NULL, "extra arg %u NULL", i);
	FCHECK(c->eal.n_worker_cpus <= SN_CONFIG_WORKERS_MAX, "%u worker cpus", c->eal.n_worker_cpus);
	FCHECK(terminated(c->eal.file_prefix, sizeof(c->eal.file_prefix)) &&
	       terminated(c->eal.huge_dir, sizeof(c->eal.huge_dir)) &&
	       terminated(c->control.socket, sizeof(c->control.socket)) &&
	       terminated(c->control.state_dir, sizeof(c->control.state_dir)) &&
	       terminated(c->uplink.name, sizeof(c->uplink.name)) &&
	       terminated(c->uplink.devargs, sizeof(c->uplink.devargs)) &&
	       terminated(c->uplink.pci, sizeof(c->uplink.pci)) &&
	       terminated(c->uplink.af_xdp, sizeof(c->uplink.af_xdp)), "an unterminated string");
	FCHECK(sn_config_socket_path_ok(c->control.socket), "control.socket %s", c->control.socket);
	FCHECK(c->uplink.af_xdp_queues <= SN_CONFIG_AF_XDP_QMAX &&
	       c->uplink.rx_queues <= SN_CONFIG_UPLINK_RXQ_MAX, "uplink queues %u %u",
	       c->uplink.af_xdp_queues, c->uplink.rx_queues);
	for (unsigned i = 0; i < c->n_ports; i++) {
		const struct sn_config_port *p = &c->ports[i];

		FCHECK(terminated(p->name, sizeof(p->name)) && sn_config_port_name_ok(p->name),
		       "port %u name", i);
		FCHECK(terminated(p->path, sizeof(p->path)) && sn_config_socket_path_ok(p->path),
		       "port %s path", p->name);
		FCHECK(!c->uplink.enabled || strcmp(p->name, c->uplink.name), "port %s is the uplink's name",
		       p->name);
		FCHECK(p->queues >= 1 && p->queues <= SN_CONFIG_QUEUES_MAX, "port %s queues %u",
		       p->name, p->queues);
		FCHECK(p->max_hold_us <= SN_CONFIG_MAX_HOLD_US_MAX, "port %s max_hold_us", p->name);
		for (unsigned q = 0; p->has_workers && q < p->queues; q++)
			FCHECK(p->workers[q] < c->datapath.workers, "port %s queue %u on worker %u of %u",
			       p->name, q, p->workers[q], c->datapath.workers);
		for (unsigned k = 0; k < i; k++)
			FCHECK(strcmp(c->ports[k].name, p->name) && strcmp(c->ports[k].path, p->path),
			       "ports %u and %u share a name or path", k, i);
	}
	if (c->policy_json) {
		char err[512] = "";
		json_t *j = json_loads(c->policy_json, JSON_DECODE_ANY, NULL);

		FCHECK(j != NULL, "policy_json is not JSON");
		FCHECK(sn_policy_parse(j, &pol, err, sizeof(err)) == 0, "accepted policy refused: %s",
		       err);
		fuzz_check_policy(&pol);
		json_decref(j);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sn_config cfg;
	char err[SN_CONFIG_ERR_MAX];

	err[0] = 0;
	if (sn_config_parse(&cfg, (const char *)data, size, "fuzz", err, sizeof(err)) != 0) {
		fuzz_check_error(err, sizeof(err), "config: ");
		sn_config_fini(&cfg);   /* a refused parse owns nothing, and fini must cope */
		return 0;
	}
	check_config(&cfg);
	sn_config_fini(&cfg);
	return 0;
}
