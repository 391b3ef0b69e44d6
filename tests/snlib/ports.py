# SPDX-License-Identifier: BSD-3-Clause
"""Per-port views of a running schednicd's stats.get, shared by tests."""
from snlib.wait import wait_for


def ports(d):
    """stats.get's ports by name."""
    return {p["name"]: p for p in d.stats()["ports"]}


def wait_drained(d, port, n, what, timeout=60):
    """Ports once `port` popped all n frames and nothing of it is left held,
    in the wheel or in QFQ."""
    def drained():
        t = ports(d)
        v = t[port]
        return t if (v["rx_packets"] == n and v["completion"]["held_now"] == 0
                     and v["policy"]["wheel_depth"] == 0
                     and v["policy"]["qfq_backlog"] == 0) else None
    return wait_for(drained, what, timeout=timeout)
