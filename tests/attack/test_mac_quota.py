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


def bucket(mac: str, entries: int) -> int:
    """The MAC table's bucket of mac (sn_mac_impl.h sn_mac_bucket: the key,
    the MAC's bytes as a little-endian word | SN_MAC_VALID, times the
    golden-ratio constant, top log2(buckets) bits)."""
    key = int.from_bytes(bytes.fromhex(mac.replace(":", "")), "little") | 1 << 63
    shift = 64 - ((entries // 4).bit_length() - 1)
    return ((key * 0x9E3779B97F4A7C15) & (1 << 64) - 1) >> shift


def macs_in_bucket(b: int, entries: int, n: int, base: int) -> list:
    out, i = [], 0
    while len(out) < n:
        mac = "02:67:%02x:%02x:%02x:%02x" % ((base + i) >> 24 & 0xff, (base + i) >> 16 & 0xff,
                                              (base + i) >> 8 & 0xff, (base + i) & 0xff)
        if bucket(mac, entries) == b:
            out.append(mac)
        i += 1
    return out


def test_bucket_targeted_spray_leaves_the_victim_room(schednicd, sngen):
    """vm1 sprays source MACs chosen to hash into the bucket of vm0's MAC
    and into that of a MAC vm0 starts using after the spray: the attacker
    holds at most SN_MAC_BUCKET_PORT_MAX (2) ways of each (the rest count
    quota_macs), vm0's entry stays, its new MAC is learned, and vm2's
    unicast to either reaches vm0 alone, none flooded to the attacker."""
    entries, per_bucket = 1024, 12
    names = ["vm0", "vm1", "vm2"]
    taken = {bucket(peer_mac(i), entries) for i in range(3)}
    new = next(m for m in ("02:53:47:00:bb:%02x" % i for i in range(256))
               if bucket(m, entries) not in taken)
    spray = (macs_in_bucket(bucket(peer_mac(0), entries), entries, per_bucket, 0) +
             macs_in_bucket(bucket(new, entries), entries, per_bucket, 1 << 20))
    d = schednicd(ports=names, datapath={"mac_table_size": entries, "max_ports": 4})
    flows = [f"src=1,smac={m},dst=2,count=1,phase=0" for m in spray]
    flows += [f"src=0,smac={new},dst=2,count=10,phase=1",
              f"src=2,dst=0,count={N},phase=2",
              f"src=2,dst={new},count={N},phase=3"]
    g = sngen([d.vhost_path(n) for n in names], *[a for f in flows for a in ("--flow", f)])
    g.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    g.go("learn")
    t0 = wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 for n in names))
    t1 = run_phase(d, g, 0, "vm1", len(spray), t0)
    mt1 = d.stats()["mac_table"]
    t2 = run_phase(d, g, 1, "vm0", 10, t1)
    t3 = run_phase(d, g, 2, "vm2", N, t2)
    t4 = run_phase(d, g, 3, "vm2", N, t3)
    mt4 = d.stats()["mac_table"]
    r = g.finish()
    a = t4["vm1"]["mac"]
    hits = a["quota_macs"] - t0["vm1"]["mac"]["quota_macs"]
    f_old, f_new = r["flows"][len(spray) + 1], r["flows"][len(spray) + 2]
    print(f"attacker entries {a['entries']}, quota_macs +{hits} of {len(spray)} sprayed; "
          f"full delta {mt4['full'] - mt1['full']}; vm2->vm0 rx_by_port {f_old['rx_by_port']}, "
          f"vm2->new MAC rx_by_port {f_new['rx_by_port']}")
    assert hits == len(spray) - 2 * 2, (hits, a)
    assert a["entries"] == 1 + 2 * 2, a
    assert mt4["full"] == mt1["full"], (mt1, mt4)
    assert t4["vm0"]["mac"]["entries"] == 2, t4["vm0"]["mac"]
    for f, (ta, tb) in ((f_old, (t2, t3)), (f_new, (t3, t4))):
        lost = egress_drops(tb["vm0"]) - egress_drops(ta["vm0"])
        assert f["rx_by_port"][1] == 0, f
        assert f["rx_by_port"][0] > 0 and f["rx_by_port"][0] + lost == N, (f, lost)
