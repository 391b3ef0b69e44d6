# SPDX-License-Identifier: BSD-3-Clause
"""Fair dropping in front of the arbiter (Addanki et al., fair packet dropping).

Three unresponsive flows (three UDP 5-tuples of one port, vm0) offer 1,
0.6 and 0.1 of a 20 Mbit/s uplink. sn-gen serves its --flow entries
round-robin, so the offers are set by listing each 5-tuple 10, 6 and 1
times. One port means one client mailbox and one scheduler class: with
tail drop (a full queue drops the arriving frame) the link is shared in
proportion to the offers; with "overload": "fair" (per-flow virtual
queues served max-min at the uplink rate, drop above θ) each flow gets
its max-min fair share: 0.1, 0.45, 0.45 of the link (within 2 % of the
share; for the 0.1 flow within 2 % of a tenth of the link, see below). Both are measured in
the same run (policy.set switches the mode under traffic), per flow from
per-class uplink counters (one class per 5-tuple, no rate); the fair
shares are asserted within 2 %, the tail-drop shares are reported.
"""
import time

import pytest

from test_policy import FRAME, SINK_MAC, UPLINK, pstats

pytestmark = pytest.mark.accuracy

LINK = 20_000_000
OVERHEAD = 24
FLOWS = {"f1": ("10.0.0.1:9-10.9.0.1:1", 10), "f06": ("10.0.0.2:9-10.9.0.1:2", 6),
         "f01": ("10.0.0.3:9-10.9.0.1:3", 1)}


def shares(d, window=5.0):
    def snap():
        t, ports, st = pstats(d)
        return t, {c["name"]: c for c in ports["vm0"]["policy"]["classes"]}, st

    ta, a, sa = snap()
    time.sleep(window)
    tb, b, sb = snap()
    rate = {n: (b[n]["uplink_bytes"] - a[n]["uplink_bytes"]) * 8 / (tb - ta) for n in FLOWS}
    off = {n: (b[n]["offered_bytes"] - a[n]["offered_bytes"]) * 8 / (tb - ta) for n in FLOWS}
    return rate, off, sb["arbiter"]["link_resets"] - sa["arbiter"]["link_resets"]


def maxmin(offered, cap):
    """Water-filling of cap over the offered rates."""
    left, out, todo = cap, {}, dict(offered)
    while todo:
        fair = left / len(todo)
        small = {n: o for n, o in todo.items() if o <= fair}
        if not small:
            out.update({n: fair for n in todo})
            return out
        for n, o in small.items():
            out[n] = o
            left -= o
            del todo[n]
    return out


def summary_rows(measured, layout, fair, off, want, used, tail, tail_off, windows):
    """Per flow: fair dropping's throughput beside its max-min share and the
    allowed error, tail drop's (same run) beside it."""
    for n in FLOWS:
        measured("fair dropping vs tail drop: 3 flows offering 1/0.6/0.1 of a 20 Mbit/s "
                 "uplink (Mbit/s, 5 s windows)", layout=layout, flow=n, **{
                     "fair offered": off[n] / 1e6, "fair sent": fair[n] / 1e6,
                     "max-min": want[n] / 1e6, "err": abs(fair[n] - want[n]) / 1e6,
                     "err bound": 0.02 * max(want[n], used / 10) / 1e6,
                     "tail offered": tail_off[n] / 1e6, "tail sent": tail[n] / 1e6,
                     "tail share": tail[n] / sum(tail.values()), "windows": windows})


def mbit(r):
    return {n: round(v / 1e6, 2) for n, v in r.items()}


# Both lcore layouts (conftest.py): in 2core the fair dropper stays on the
# worker (in front of the client mailboxes) and the per-class uplink
# counters these shares come from are counted by the arbiter lcore.
@pytest.mark.parametrize("layout", ["1core", "2core"])
def test_fair_dropping_vs_tail_drop(schednicd, sngen, capsys, layout, measured):
    cap = LINK * FRAME / (FRAME + OVERHEAD)        # payload bits/s of the link
    pps = int(1.7 * cap / (FRAME * 8))
    classes = [{"name": n, "proto": "udp", "dst_port": int(u.rsplit(":", 1)[1])}
               for n, (u, _) in FLOWS.items()]
    pol = {"uplink": {"rate_bps": LINK, "algorithm": "fifo", "overhead_bytes": OVERHEAD},
           "ports": {"vm0": {"classes": classes}}}
    d = schednicd(ports=["vm0"], uplink=UPLINK, policy=pol, datapath={"mbufs": 16383})
    spec = []
    for n, (udp, k) in FLOWS.items():
        for j in range(k):
            spec += ["--flow", f"src=0,dst={SINK_MAC},count={pps * 90 // 17},udp={udp},"
                               f"smac=02:53:47:00:01:{len(spec) // 2 + 1:02x}"]
    g = sngen([d.vhost_path("vm0")], "--no-learn", "--size", str(FRAME), "--rate", str(pps),
              *spec)
    g.wait("ready")
    for n in ("vm0", "uplink"):
        d.wait_port_state(n, "up")
    (g.sync / "go-0").touch()
    time.sleep(2.0)

    tail, tail_off, _ = shares(d)
    assert d.stats()["arbiter"]["overload"] == "tail"

    d.rpc("policy.set", {"policy": {**pol, "uplink": {**pol["uplink"], "overload": "fair"}}})
    assert d.rpc("policy.get")["uplink"]["overload"] == "fair"
    time.sleep(1.0)
    got = []
    for _ in range(6):
        fair, off, resets = shares(d)
        # The max-min split of what the link delivered in this window over
        # what each flow offered in it: on this shared machine a stalled
        # worker or generator can leave the link short in a window, which
        # says nothing about how the drops were shared.
        used = sum(fair.values())
        want = maxmin(off, used)
        got.append(({n: round(fair[n] / want[n], 3) for n in FLOWS}, round(used / cap, 3)))
        # Error bound: 2 % of each flow's max-min share, but at least 2 %
        # of the link for the small flow (f01, 0.1 of the link): a 5 s
        # window edge cuts through up to ~100 ms of its frames queued in
        # FIFO order, a few % of so small a rate. A window where the link
        # clock reset after a worker stall is measured again.
        if resets == 0 and all(abs(fair[n] - want[n]) < 0.02 * max(want[n], used / 10)
                               for n in FLOWS):
            break
    else:
        summary_rows(measured, layout, fair, off, want, used, tail, tail_off, len(got))
        pytest.fail(f"fair dropping: no window within 2 % of max-min "
                    f"(share / max-min share, link utilization): {got}")
    summary_rows(measured, layout, fair, off, want, used, tail, tail_off, len(got))
    st = d.stats()
    port = {p["name"]: p for p in st["ports"]}["vm0"]["policy"]
    assert st["arbiter"]["overload"] == "fair" and st["arbiter"]["fair"]["dropped"] > 0, st
    assert port["drops"]["fair"] > 0, port
    with capsys.disabled():
        print(f"\nfair dropping, link {cap / 1e6:.2f} Mbit/s payload")
        print(f"  tail drop: {mbit(tail)} Mbit/s, offered {mbit(tail_off)}")
        print(f"  fair drop: {mbit(fair)} Mbit/s, offered {mbit(off)}, max-min {mbit(want)}")
    # Tail drop by arrival order is not max-min fair: the heaviest flow
    # takes clearly more than the middle one (reported above).
    assert tail["f1"] > tail["f06"] * 1.2, tail
    assert d.alive()
