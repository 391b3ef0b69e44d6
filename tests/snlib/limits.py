# SPDX-License-Identifier: BSD-3-Clause
"""Limits of schednicd that tests and benchmarks size themselves by.

PORTS_MAX is the number of vhost-user ports one daemon accepts in its
config (backend/daemon/app/sn_config.h SN_CONFIG_PORTS_MAX); the idle-port
test and scripts/bench/idle_ports.py configure and connect that many.
Raise it here together with the daemon's limit.
"""

PORTS_MAX = 63


def ports_max_config():
    """Config sections a daemon needs to accept PORTS_MAX ports (none while
    the limit is compiled in)."""
    return {}
