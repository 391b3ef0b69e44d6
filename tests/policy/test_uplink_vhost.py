# SPDX-License-Identifier: BSD-3-Clause
"""The scheduled release's direct vhost enqueue on a net_vhost uplink.

When the uplink is a net_vhost ethdev whose peer is connected, the arbiter
copies released frames into the peer's ring with rte_vhost_enqueue_burst on
the peer's vid (sn_port_uplink_enqueue) instead of going through the PMD;
the vid comes from the PMD's link-state callback, which withdraws it and
waits for a grace period before the vhost library unmaps the device. Here
the uplink's peer (an sn-gen sink) is killed while a shaped, deferred port
sends through it, and a new peer connects: the daemon must survive the
device going away under traffic, switch the direct path off and on again
(its log says so), deliver to the new peer, and account for every frame
(completed exactly once, sent or dropped, nothing leaked).
"""
import signal

import pytest

from snlib.ports import ports, wait_drained
from snlib.wait import wait_for

pytestmark = pytest.mark.functional

FRAME = 1000
SINK_MAC = "02:00:00:00:00:99"


def test_uplink_peer_gone_and_back_under_shaped_traffic(schednicd, sngen, sn_tmpdir):
    rate, n = 20_000_000, 12000          # 12 Mbyte at 20 Mbit/s: ~4.8 s
    up = sn_tmpdir / "uplink.sock"
    d = schednicd(ports=[{"name": "vm0", "type": "vhost-user", "mode": "server",
                          "path": str(sn_tmpdir / "vm0.sock"), "completion": "deferred"}],
                  uplink=f"net_vhost0,iface={up}",
                  policy={"uplink": {"rate_bps": 1_000_000_000, "algorithm": "qfq"},
                          "ports": {"vm0": {"rate_bps": rate, "weight": 1}}},
                  datapath={"mbufs": 16383})
    sink = sngen([str(up)], "--no-learn", "--echo-ip", "10.99.0.1", mode="echo")
    sink.wait("ready")
    wait_for(lambda: "direct vhost enqueue on" in d.log_tail(200), "direct path on")
    g = sngen([d.vhost_path("vm0")], "--marker", "--no-learn", "--size", str(FRAME),
              "--queue-size", "256", "--flow", f"src=0,dst={SINK_MAC},count={n}")
    g.wait("ready")
    d.wait_port_state("vm0", "up")
    base = d.stats()["mempool"]["in_use"]
    (g.sync / "go-0").touch()
    wait_for(lambda: ports(d)["uplink"]["tx_packets"] > 300, "frames on the uplink")

    sink.proc.send_signal(signal.SIGKILL)          # the device goes under traffic
    sink.proc.wait(10)
    wait_for(lambda: "direct vhost enqueue off" in d.log_tail(200), "direct path off")
    tx_gone = ports(d)["uplink"]["tx_packets"]
    sink2 = sngen([str(up)], "--no-learn", "--echo-ip", "10.99.0.1", mode="echo")
    sink2.wait("ready")
    wait_for(lambda: d.log_tail(400).count("direct vhost enqueue on") >= 2, "direct path on again")
    wait_for(lambda: ports(d)["uplink"]["tx_packets"] > tx_gone + 300, "frames to the new peer")

    g.wait("sent-0", timeout=120)

    t = wait_drained(d, "vm0", n, "everything sent or dropped")
    c, pol = t["vm0"]["completion"], t["vm0"]["policy"]
    assert c["popped"] == c["completed"] == n, c
    assert c["forced"] == 0 and c["late_free"] == 0, c
    assert pol["offered_packets"] == n, pol
    up_st = t["uplink"]
    # vm0 is the only sender: each frame was sent, dropped by the policy, or
    # refused by the uplink (its ring_full: no peer; counted on the uplink
    # port, as the PMD path always did)
    assert n == pol["sent_packets"] + sum(pol["drops"].values()) + up_st["drops"]["ring_full"], \
        (pol, up_st)
    assert up_st["drops"]["ring_full"] > 0, up_st          # sent while the peer was gone
    assert pol["uplink_packets"] == pol["sent_packets"] == up_st["tx_packets"] > tx_gone, (pol, up_st)
    wait_for(lambda: d.stats()["mempool"]["in_use"] <= base, "mempool back at baseline")
    assert d.alive(), d.log_tail()
    g.finish()
