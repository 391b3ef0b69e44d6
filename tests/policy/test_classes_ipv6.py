# SPDX-License-Identifier: BSD-3-Clause
"""IPv6 flows paced per flow (scope "flow") through schednicd.

vm0's sn-gen sends four IPv6/UDP flows (sn-gen udp6=, 1000 B frames,
each offered 6 Mbit/s) to an unknown MAC, flooded to the uplink. Two
classes pace them per flow: "a" (2001:db8:a::/48, 2 Mbit/s a flow) and
"b" (2001:db8:b::/48, 3 Mbit/s a flow). The flows of a class differ in
one 32-bit word of an address only (source word 2 in "a", destination
word 3 in "b"), so each has its own flow state only if the flow table
keys on the whole IPv6 5-tuple. The uplink is net_pcap: each flow's rate
is measured from the frames' departure timestamps in the capture, in 1 s
windows past the start-up transient. No window may show a flow above its
rate (beyond one frame); one window (the host may keep sn-gen off its CPU
in the others: every flow then reads low) must show every flow at its
per-flow rate. A flow sharing its class's or another flow's state would
read half of it or less in every window.
"""
import ipaddress
import struct
from pathlib import Path

import pytest

from snlib.hostwait import load_seen, wait_quiet
from test_policy import SINK_MAC
from test_classes import cstats, wait_class

SIZE = 1000
FLOWS = [   # (source, destination, class, per-flow rate)
    ("2001:db8:a::1", "2001:db8:ff::1", "a", 2_000_000),
    ("2001:db8:a:0:0:1::1", "2001:db8:ff::1", "a", 2_000_000),
    ("2001:db8:b::1", "2001:db8:ff::1", "b", 3_000_000),
    ("2001:db8:b::1", "2001:db8:ff::2", "b", 3_000_000),
]
OFFERED = 6_000_000                 # bit/s per flow, above either rate
SEND_S = 7.0
WINDOWS = [(1.5 + i, 2.5 + i) for i in range(5)]   # s after the first frame on the uplink
TOLERANCE = 0.03
QUIET_S = 8.0                       # the most it waits for a quiet host before sending

PCAP_HDR = struct.Struct("<IHHiIII")
PCAP_REC = struct.Struct("<IIII")


def pcap_frames(path):
    """(timestamp s, frame bytes) of a pcap file (either precision)."""
    data = Path(path).read_bytes()
    magic = PCAP_HDR.unpack_from(data, 0)[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), hex(magic)
    frac = 1e-9 if magic == 0xA1B23C4D else 1e-6
    off, out = PCAP_HDR.size, []
    while off + PCAP_REC.size <= len(data):
        sec, sub, incl, _ = PCAP_REC.unpack_from(data, off)
        off += PCAP_REC.size
        out.append((sec + sub * frac, data[off:off + incl]))
        off += incl
    return out


@pytest.mark.accuracy
def test_ipv6_flows_paced_per_flow(schednicd, sngen, sn_tmpdir):
    pol = {"ports": {"vm0": {"classes": [
        {"name": "a", "proto": "udp", "src": "2001:db8:a::/48", "rate_bps": 2_000_000},
        {"name": "b", "proto": "udp", "src": "2001:db8:b::/48", "dst_port": 53,
         "rate_bps": 3_000_000, "scope": "flow"}]}}}
    empty, out = sn_tmpdir / "empty.pcap", sn_tmpdir / "out.pcap"
    empty.write_bytes(PCAP_HDR.pack(0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    d = schednicd(ports=["vm0"], uplink=f"net_pcap0,rx_pcap={empty},tx_pcap={out}",
                  policy=pol, datapath={"mbufs": 16383})
    pps = len(FLOWS) * OFFERED // (8 * SIZE)
    spec = []
    for i, (src, dst, _, _) in enumerate(FLOWS):
        spec += ["--flow", f"src=0,dst={SINK_MAC},count={int(pps * SEND_S) // len(FLOWS)},"
                           f"udp6={src}.5000-{dst}.53,smac=02:53:47:00:01:{i + 1:02x}"]
    g = sngen([d.vhost_path("vm0")], "--no-learn", "--size", str(SIZE), "--rate", str(pps),
              *spec)
    g.wait("ready")
    d.wait_port_state("vm0", "up")
    wait_quiet(max_s=QUIET_S, pids=[d.proc.pid, g.proc.pid])
    (g.sync / "go-0").touch()
    wait_class(d, "vm0", ["a", "b"])
    _, c, _ = cstats(d, "vm0")
    g.wait("sent-0", timeout=SEND_S + 30)
    g.finish()
    d.stop()                             # net_pcap flushes its file at close

    want = {(str(ipaddress.IPv6Address(s)), str(ipaddress.IPv6Address(t))): r
            for s, t, _, r in FLOWS}
    frames = {}
    for ts, f in pcap_frames(out):
        if len(f) < 58 or f[12:14] != b"\x86\xdd" or f[20] != 17:
            continue
        key = (str(ipaddress.IPv6Address(f[22:38])), str(ipaddress.IPv6Address(f[38:54])))
        frames.setdefault(key, []).append((ts, len(f)))
    assert set(frames) == set(want), sorted(frames)
    t0 = min(v[0][0] for v in frames.values())
    rates = []                           # per window: {flow: bit/s}
    for a, b in WINDOWS:
        w0, w1 = t0 + a, t0 + b
        rates.append({k: sum(n for ts, n in v if w0 <= ts < w1) * 8 / (w1 - w0)
                      for k, v in frames.items()})
    print("\nIPv6 per-flow rates over the uplink, bit/s, per 1 s window (configured):")
    for k in sorted(want):
        print(f"  {k[0]} -> {k[1]} ({want[k]}): " +
              " ".join(f"{r[k]:.0f} ({(r[k] / want[k] - 1) * 100:+.1f} %)" for r in rates))
    print(f"  classes: a {c['a']['flows_active']} flows, b {c['b']['flows_active']} flows")
    assert c["a"]["flows_active"] == 2 and c["b"]["flows_active"] == 2, c
    assert c["a"]["flow_table_full"] == 0 and c["b"]["flow_table_full"] == 0, c
    frame_bps = SIZE * 8 / (WINDOWS[0][1] - WINDOWS[0][0])
    for r in rates:
        for k, x in r.items():
            assert x <= want[k] * (1 + TOLERANCE) + frame_bps, (k, x, want[k], rates)
    clean = [r for r in rates if all(abs(x - want[k]) <= TOLERANCE * want[k]
                                     for k, x in r.items())]
    assert clean, ("no window with every flow within 3 % of its rate", rates, load_seen())
