# SPDX-License-Identifier: BSD-3-Clause
"""MAC table aging (datapath.mac_aging_s): learned entries expire, unknown
unicast is flooded again afterwards, and the counters say so."""
import time

import pytest

from sngen import port_table, wait_settled

pytestmark = pytest.mark.functional


def test_mac_entries_age_out(schednicd, daemon_sngen):
    names = ["vm0", "vm1", "vm2"]
    d = schednicd(ports=names, datapath={"mac_aging_s": 1})
    g = daemon_sngen([d.vhost_path(n) for n in names], "--flow", "src=0,dst=1,count=10,phase=0")
    g.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    g.go("learn")
    wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 for n in names))
    mt = d.stats()["mac_table"]
    assert mt["learned"] == 3, mt
    # Expire: aging is 1 s and the scan runs every second.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and d.stats()["mac_table"]["entries"]:
        time.sleep(0.1)
    mt = d.stats()["mac_table"]
    assert mt["entries"] == 0 and mt["aged"] == 3, mt
    # vm1's MAC is forgotten: vm0 -> vm1 unicast is flooded to vm1 and vm2.
    t0 = port_table(d.stats())
    g.go(0)
    t = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == t0["vm0"]["rx_packets"] + 10)
    assert t["vm2"]["tx_packets"] - t0["vm2"]["tx_packets"] == 10, (t0, t)
    assert t["vm1"]["tx_packets"] - t0["vm1"]["tx_packets"] == 10, (t0, t)
    assert d.stats()["mac_table"]["learned"] == 4   # vm0 relearned
