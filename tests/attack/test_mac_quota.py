# SPDX-License-Identifier: BSD-3-Clause
"""MAC-table exhaustion by a hostile tenant: one VM port sprays source MACs
while a victim's MAC must stay learnable and its unicast must not be
flooded to the attacker.

The table is small (1024 entries, 256 four-way buckets) so that the spray
(8000 distinct MACs) would fill every bucket many times over without the
per-port quota (quota.macs, default sn_mac_quota_auto: half the table
shared by datapath.max_ports) and the per-bucket share of a VM port
(doc/isolation.md, "MAC entries and source-address binding").
"""
import pytest

from sngen import egress_drops, peer_mac, port_table, wait_settled

pytestmark = [pytest.mark.attack, pytest.mark.functional]

SPRAY = 8000
N = 3000
VICTIM_MAC = "02:53:47:00:aa:01"     # the victim's second MAC, first used after the spray
SPRAY_BASE = "02:66:00:00:00:00"


def run_phase(d, g, ph, src, count, t):
    g.go(ph)
    want = t[src]["rx_packets"] + count
    return wait_settled(d, lambda t: t[src]["rx_packets"] == want)


def test_mac_spray_hits_the_attackers_quota_not_the_victim(schednicd, sngen):
    names = ["vm0", "vm1", "vm2"]       # victim, attacker, the victim's peer
    d = schednicd(ports=names, datapath={"mac_table_size": 1024, "max_ports": 4})
    g = sngen([d.vhost_path(n) for n in names],
              "--flow", f"src=1,smac={SPRAY_BASE},smacs={SPRAY},dst=2,count={SPRAY},phase=0",
              "--flow", f"src=0,smac={VICTIM_MAC},dst=2,count=10,phase=1",
              "--flow", f"src=2,dst={VICTIM_MAC},count={N},phase=2")
    g.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    g.go("learn")
    t0 = wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 for n in names))
    quota = t0["vm1"]["mac"]["quota"]
    t1 = run_phase(d, g, 0, "vm1", SPRAY, t0)
    mt1 = d.stats()["mac_table"]
    t2 = run_phase(d, g, 1, "vm0", 10, t1)
    t3 = run_phase(d, g, 2, "vm2", N, t2)
    mt3 = d.stats()["mac_table"]
    r = g.finish()
    a = t3["vm1"]["mac"]
    hits = a["quota_macs"] - t0["vm1"]["mac"]["quota_macs"]
    f = r["flows"][2]
    print(f"attacker: quota {quota}, entries {a['entries']}, quota_macs {hits}; "
          f"mac_table after spray {mt1}, full delta {mt3['full'] - mt1['full']}; "
          f"victim flow rx_by_port {f['rx_by_port']}")
    assert quota == 1024 // 2 // 4
    assert a["entries"] <= quota + 1          # + its own MAC from the learn phase
    assert hits >= SPRAY - quota
    # The victim learned its new MAC after the spray ...
    assert mt3["full"] == mt1["full"], (mt1, mt3)
    assert t2["vm0"]["mac"]["quota_macs"] == t1["vm0"]["mac"]["quota_macs"]
    assert t3["vm0"]["mac"]["entries"] == 2, t3["vm0"]["mac"]
    # ... so vm2's unicast to it went to it alone, not flooded to the attacker.
    lost = egress_drops(t3["vm0"]) - egress_drops(t2["vm0"])
    assert f["rx_by_port"][1] == 0, f
    assert f["rx_by_port"][0] > 0 and f["rx_by_port"][0] + lost == N, (f, lost)
