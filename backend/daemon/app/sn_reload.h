/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_reload.h — config.reload and SIGHUP: re-read the configuration file
 * the daemon was started with and apply the difference.
 *
 * Ownership (doc/configuration.md, "Reload"): the file owns the ports it
 * names (owner "file") and, when it has one, the policy. A reload adds,
 * changes and removes file ports only; ports added at run time (port.add,
 * the libvirt hook: owner "rpc") stay as they are. A file port whose hold
 * limits (max_hold_us, unmarked_max_hold_us) changed is changed in place;
 * any other change to a port entry deletes and re-adds it (its guest
 * reconnects). The file's policy replaces the running one through
 * policy.set's path (sn_policy_rpc.h); without one the running policy stays.
 *
 * All or nothing before anything changes: the file is parsed and validated
 * as at start (sn_config_load_again: same messages, key path first), a
 * setting that is fixed at start (sn_config_static_differs) refuses the
 * reload naming its key, and so do a file port that names a run-time port
 * or its socket and more ports than datapath.max_ports. Only then are the
 * ports deleted, changed and added and the policy published; a step that
 * still fails then (a socket path taken meanwhile, no memory) is reported
 * with what was applied.
 *
 * Main thread only, like every RPC handler (sn_ctl.h): the reload changes
 * the port registry and the policy store, whose only writer is MAIN.
 */
#ifndef SN_RELOAD_H
#define SN_RELOAD_H

#include <jansson.h>

#include "sn_config.h"
#include "sn_rpc.h"

struct sn_ctl;
struct sn_ports;
struct sn_reload;

/* MAIN: add the vhost-user port of config entry p, owned by the file
 * (at start and by a reload). 0 or -errno, as sn_ports_add_vhost(). */
int sn_reload_port_add(struct sn_ports *reg, const struct sn_config_port *p);

/* MAIN, before the EAL starts (cfg as parsed, before "auto" settings are
 * resolved in it): the reload state of a daemon started from the file at
 * path (NULL: the embedded default; a reload then answers an error). ctl:
 * the handler context, filled by the caller before the first reload.
 * NULL + errno (ENOMEM). */
struct sn_reload *sn_reload_create(const char *path, const struct sn_config *cfg,
				   struct sn_ctl *ctl);
void sn_reload_destroy(struct sn_reload *rl);

/* MAIN: register config.reload on srv (0 or sn_rpc_register()'s error). */
int sn_reload_register(struct sn_rpc_server *srv, struct sn_reload *rl);

/* MAIN: one reload. Its result (config.reload's: what changed), or NULL
 * with err filled (nothing changed unless the message says what was). */
json_t *sn_reload_run(struct sn_reload *rl, struct sn_rpc_error *err);

/* MAIN, from the main loop after SIGHUP: sn_reload_run() with its outcome
 * logged (one line). */
void sn_reload_signal(struct sn_reload *rl);

#endif /* SN_RELOAD_H */
