# SPDX-License-Identifier: BSD-3-Clause
"""Weighted sharing 1:2:5 on an emulated uplink, and idle handover.

Three shaped ports (weights 1, 2, 5; no rate limit) each offer more than
their share of an uplink emulated at L = 20 Mbit/s (+24 B per frame); the
arbiter (DRR, and QFQ) shares it. The frames leave through a net_vhost uplink whose
peer is sn-gen's sampling sink (per-flow bytes every 10 ms, CLOCK_MONOTONIC
timestamps; scripts/bench/conformance.py). Shares are byte ratios at the
daemon's uplink rate per port between two exact (worker clock, counter)
pairs (clock_consistent), which is the arbiter's own order (sink shares are printed beside: their window edges
depend on when the often descheduled sink ran).

QFQ accuracy. QFQ's guarantee scales with lmax (with every scheduler
class at lmax 64 KiB its shares drift by up to ~2.6 %): a class lags its ideal service by at most
phi_k B T-WFI_k = 6 L_k + phi_k (L - L_k) bytes (PSPAT eq. 2), i.e. with
L_k = L = 64 KiB + 24 B: 393 KB; over 2 s at 20 Mbit/s vm0's share is
625 KB, so QFQ allows a 63 % error there, and with lmax it rounds
timestamps to 64 KiB / phi_k virtual slots (sn-trace on an exact link,
all three backlogged: up to 3.7 % for vm0, DRR 0.27 %). Classes start
at lmax 1518 B and grow only for longer frames
(arb_oversize in pipeline/sn_pl_arbiter.c): the lag bound is 6 x 1542 B = 9.3 KB, 1.5 %
of vm0's 2 s share (0.74 % vm1, 0.3 % vm2); a window can meet it at
both edges, so QFQ guarantees 3 % for vm0 and 1.5 % / 0.6 % for vm1 / vm2,
and sn-trace gives 0.29 / 0.14 / 0.04 %. 2 % is asserted below
(measured here: 0.1-0.25 %; with lmax 64 KiB the test fails it).

Handover: vm0 sends a finite number of frames; once its backlog in the
daemon has drained (the last of its frames reached the sink), the link
time it had goes to vm1 and vm2. The emulated link is work-conserving, so
the right measure of "within 10 ms" is link time: the uplink bytes that
follow vm0's last frame. The first 10 ms of link time after it must
hold frames of both vm1 and vm2 (vm0 none); over the ~100 ms of samples after
it vm1 and vm2 share the link 2:5 (within 5 %); over the following >= 1 s
(daemon counters, exact pairs) they fill it and share it 2:5 within 2 %. On this loaded machine the sink's 10 ms samples arrive in
bursts (20-40 ms apart), so a finer statement than "within the first
10 ms of link time" is not measurable here.
"""
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import conformance as conf  # noqa: E402

pytestmark = pytest.mark.accuracy

LINK = 20_000_000
OVH = 24
FRAME = 1000
W = {"vm0": 1, "vm1": 2, "vm2": 5}


SHARES = "weighted sharing 1:2:5 of a 20 Mbit/s uplink (2 s, daemon counters)"
HANDOVER = "idle hand-over: vm0 stops, vm1:vm2 = 2:5 (link time after vm0's last frame)"


def wire_bps(payload_bps):
    return payload_bps * (FRAME + OVH) / FRAME


@pytest.mark.parametrize("algo", [
    "drr",
    "qfq",
])
def test_weighted_sharing_and_idle_handover(build_dir, algo, measured):
    pol = {"uplink": {"rate_bps": LINK, "algorithm": algo, "overhead_bytes": OVH},
           "ports": {n: {"weight": w} for n, w in W.items()}}
    # 20 kpps in total (~50 Mbit/s per port, vm2 needs 13 of them): every port offers more than its share.
    vm0_frames = 60000
    with conf.Schednic(build_dir, list(W), pol, FRAME, 20000, sample_ms=10,
                       flows=[(0, vm0_frames), 1, 2]) as s:
        s.wait_flowing()
        time.sleep(0.5)
        # --- shares over 2 s windows while all three are backlogged
        for _ in range(8):
            r0 = s.stats()["arbiter"]["link_resets"]
            a0 = snapshot(s, must=False)
            t0 = time.monotonic()
            time.sleep(2.0)
            t1 = time.monotonic()
            a1 = snapshot(s, must=False)
            r1 = s.stats()["arbiter"]["link_resets"]
            if a0 is None or a1 is None:
                continue                  # no exact pair (worker busy at every read)
            # a class that ran empty more than a few times (the generator
            # was descheduled) was not backlogged: shares undefined
            idle = any(a1[n][2]["qfq_idle"] - a0[n][2]["qfq_idle"] > 3 or
                       a1[n][1] == a0[n][1] for n in W)
            # a worker descheduled at a snapshot leaves its clock stale:
            # the window is then shorter than 1.9 s of its time, measure again
            if not idle and r1 == r0 and a1["vm0"][0] - a0["vm0"][0] >= 1.9:
                break
        else:
            measured(SHARES, algo=algo, note="no 2 s window with all three backlogged: fail")
            pytest.fail("no 2 s window (>= 1.9 s of worker clock) with all three ports "
                        "backlogged")
        # shares: the daemon's uplink bytes per port between two exact
        # snapshots (the arbiter's order, in the worker's time base)
        rates = {n: (a1[n][1] - a0[n][1]) * 8 / (a1[n][0] - a0[n][0]) for n in W}
        total = sum(rates.values())
        shares = {n: rates[n] / total for n in W}
        dt = a1["vm0"][0] - a0["vm0"][0]
        time.sleep(0.1)
        smp = conf.window([(d[0], d[1]) for d in sink_flows(s)], t0, t1)
        sgot = [smp[-1][1][i] - smp[0][1][i] for i in range(3)]
        print(f"\nshares (daemon, {dt:.2f} s): {shares}; at the sink: "
              f"{[round(x / sum(sgot), 4) for x in sgot]}")
        measured(SHARES, algo=algo, **{
            "shares vm0/vm1/vm2": [shares[n] for n in W],
            "weights": "1:2:5 = 0.125/0.25/0.625",
            "max err %": max(abs(shares[n] - w / 8) / (w / 8) for n, w in W.items()) * 100,
            "bound %": "< 2", "link fill %": wire_bps(total) / LINK * 100,
            "fill bound %": "100 +-2", "window s": dt})
        assert dt >= 1.9
        for n, w in W.items():
            assert abs(shares[n] - w / 8) / (w / 8) < 0.02, shares
        # the link is full: payload rate x wire overhead = L
        assert abs(wire_bps(total) - LINK) / LINK < 0.02, (rates, dt)

        # --- vm0 stops: wait until its last frame reached the sink
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            p = s.port_policy()["vm0"]
            if p["offered_packets"] + p["drops"]["horizon"] >= vm0_frames and \
                    p["qfq_backlog"] == 0 and p["wheel_depth"] == 0:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"vm0 never went idle: {s.port_policy()['vm0']}")
        time.sleep(0.5)
        # vm1 + vm2 fill the link without vm0: daemon counters, exact pairs
        # over >= 1 s (the arbiter's time base, like the shares above)
        for _ in range(8):
            r0 = s.stats()["arbiter"]["link_resets"]
            b0 = snapshot(s, must=False)
            time.sleep(1.0)
            b1 = snapshot(s, must=False)
            r1 = s.stats()["arbiter"]["link_resets"]
            if b0 and b1 and r1 == r0 and all(b1[n][2]["qfq_idle"] - b0[n][2]["qfq_idle"] <= 3
                                for n in ("vm1", "vm2")):
                break
        else:
            pytest.fail("no 1 s window with vm1 and vm2 backlogged after vm0 went idle")
        after_rates = {n: (b1[n][1] - b0[n][1]) * 8 / (b1[n][0] - b0[n][0]) for n in W}
        st = s.stats()
        pp = s.port_policy(st)
        samples = sink_flows(s)
    last0 = samples[-1][1][0]
    k = next(i for i, x in enumerate(samples) if x[1][0] == last0)   # first sample with all of vm0
    after = samples[k:k + 11]                                        # ~100 ms of 10 ms samples
    rows = []
    for a, b in zip(after, after[1:]):
        d = [b[1][i] - a[1][i] for i in range(3)]
        rows.append((round((b[0] - a[0]) * 1e3, 2), d, round(wire_bps((d[1] + d[2]) * 8 /
                                                                      (b[0] - a[0])) / 1e6, 2)))
    print("after vm0 idle (ms, bytes per flow, vm1+vm2 wire Mbit/s):")
    for r in rows:
        print("  ", r)
    # The first 10 ms of link time after vm0's last frame (the first samples
    # whose bytes / L add up to 10 ms): both vm1 and vm2 are served in it.
    first, link_ms = [0, 0, 0], 0.0
    for r in rows:
        first = [a + b for a, b in zip(first, r[1])]
        link_ms = (first[1] + first[2]) * (FRAME + OVH) / FRAME * 8 / LINK * 1e3
        if link_ms >= 10:
            break
    print(f"first {link_ms:.1f} ms of link time after idle: {first}")
    v1 = sum(r[1][1] for r in rows)
    v2 = sum(r[1][2] for r in rows)
    fill = wire_bps(after_rates["vm1"] + after_rates["vm2"])
    share2 = after_rates["vm2"] / (after_rates["vm1"] + after_rates["vm2"])
    measured(HANDOVER, algo=algo, **{
        "first link ms": link_ms, "vm1/vm2 bytes in it": first[1:],
        "10 ms bound": "both > 0",
        "vm2 share ~100 ms": v2 / (v1 + v2) if v1 + v2 else None,
        "100 ms bound": "5/7=0.7143 +-5 %", "vm2 share >= 1 s": share2,
        "1 s bound": "0.7143 +-2 %", "link fill %": fill / LINK * 100,
        "vm0 after": after_rates["vm0"]})
    # vm0 got nothing more; vm1:vm2 = 2:5 from the first 10 ms on (link time:
    # bytes, not sink time)
    assert all(r[1][0] == 0 for r in rows), rows
    assert link_ms >= 10 and first[1] > 0 and first[2] > 0, rows
    # 2:5 over the ~100 ms of samples after the handover (a single sample of
    # ~100-200 frames deviates by up to ~15 %: QFQ's short-term service is
    # bursty at that scale; reported above, not asserted)
    assert abs(v2 / (v1 + v2) - 5 / 7) / (5 / 7) < 0.05, rows
    # Without vm0, vm1 + vm2 fill the link and share it 2:5 (daemon
    # counters over >= 1 s, within 2 % as the backlogged shares). The sink's
    # ~100 ms after the handover is printed, not asserted: its timestamps
    # come from a sink descheduled for 10-30 ms at a time on this machine
    # (load average 12-16: 5-8 % low or high over 100 ms at either edge).
    dt = after[-1][0] - after[0][0]
    bytes12 = sum(after[-1][1][i] - after[0][1][i] for i in (1, 2))
    print(f"after vm0 idle: sink {wire_bps(bytes12 * 8 / dt) / 1e6:.2f} Mbit/s over "
          f"{dt * 1e3:.0f} ms; daemon {after_rates}")
    assert after_rates["vm0"] == 0, after_rates
    assert abs(fill - LINK) / LINK < 0.02, after_rates
    assert abs(share2 - 5 / 7) / (5 / 7) < 0.02, after_rates
    assert pp["vm0"]["drops"]["mailbox_full"] == 0 and pp["vm1"]["drops"]["mailbox_full"] == 0


def snapshot(s, tries=100, must=True):
    """{port: (worker clock s, uplink bytes, policy stats)}: for each shaped
    port an exact pair (clock_consistent), possibly from different reads.
    None (must=False) or a failure when `tries` reads gave none."""
    out = {}
    for _ in range(tries):
        for p in s.stats()["ports"]:
            q = p.get("policy")
            if q and q["clock_consistent"] and p["name"] not in out:
                out[p["name"]] = (q["clock_ns"] / 1e9, q["uplink_bytes"], q)
        if set(W) <= set(out):
            return out
    if not must:
        return None
    pytest.fail(f"no consistent stats pair for every port: {sorted(out)}")


def sink_flows(s):
    """[(t_s, [bytes of flow 0, 1, 2])] from the sink's 10 ms samples."""
    import json
    out = []
    for line in Path(s.samples).read_text().splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        out.append((d["t_ns"] / 1e9, d["flow_rx_bytes"]))
    return out
