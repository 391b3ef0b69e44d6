# SPDX-License-Identifier: BSD-3-Clause
"""Limits of schednicd that tests and benchmarks size themselves by.

PORTS_MAX is the most vhost-user ports one daemon accepts
(`datapath.max_ports` at most 511: DPDK 22.11's vhost library keeps every
listening and connected socket in one fd set of 1024 entries, one of them
its own pipe, two per server-mode port; doc/configuration.md, "Port
limit"); the idle-port test and scripts/bench/idle_ports.py configure and
connect that many.
"""

PORTS_MAX = 511


def ports_max_config():
    """Config sections a daemon needs to accept PORTS_MAX ports."""
    return {"datapath": {"max_ports": PORTS_MAX}}
