# SPDX-License-Identifier: BSD-3-Clause
"""scripts/demo.sh, as a newcomer runs it: the shares it shows are the
scheduling schednic promises.

The demo shares an uplink emulated at 40 Mbit/s (+24 B per frame) among
three VM peers that each offer 32 Mbit/s of 1000 B frames. Phase 1:
weights 1:2:5, no port limit. Phase 2, set live: weights 8:2:5 and vm0
limited to 16 Mbit/s, below its weighted share. The max-min fair targets,
in L2 bits of the link's capacity C = 40e6 x 1000 / 1024: phase 1 C w / 8;
phase 2 vm0 16 Mbit/s and vm1, vm2 (C - 16 Mbit/s) w / 7. Each port's
share over each phase, recomputed here from the CSV the demo writes (the
cumulative uplink bytes and the worker clock of each row, after the same
settle time), must be within 2 % of its target; the PNG must be a
non-empty image; and the demo must leave nothing behind.
"""
import csv
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.accuracy

SECONDS = 6
SETTLE = 2.0
C = 40e6 * 1000 / 1024
TARGET = {1: {"vm0": C / 8, "vm1": 2 * C / 8, "vm2": 5 * C / 8},
          2: {"vm0": 16e6, "vm1": (C - 16e6) * 2 / 7, "vm2": (C - 16e6) * 5 / 7}}


def shares(rows, phase):
    out = {}
    for port in ("vm0", "vm1", "vm2"):
        r = [x for x in rows if x["phase"] == str(phase) and x["port"] == port]
        assert r, (phase, port)
        t0 = float(r[0]["t_s"])
        r = [x for x in r if float(x["t_s"]) >= t0 + SETTLE]
        assert len(r) >= 2, (phase, port, r)
        out[port] = ((int(r[-1]["uplink_bytes"]) - int(r[0]["uplink_bytes"])) * 8e9
                     / (int(r[-1]["clock_ns"]) - int(r[0]["clock_ns"])))
    return out


def test_demo_shows_weighted_shares_and_a_live_limit(tmp_path, measured):
    out = tmp_path / "demo"
    r = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh"), "--seconds", str(SECONDS),
                        "--out", str(out)], capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL, cwd="/")
    tail = r.stdout[-4000:] + r.stderr[-2000:]
    assert r.returncode == 0, tail
    with open(out / "rates.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(x["phase"]) for x in rows[::3]] == [1] * (SECONDS + 1) + [2] * SECONDS, rows
    for phase in (1, 2):
        got = shares(rows, phase)
        for port, want in TARGET[phase].items():
            err = got[port] / want - 1
            measured("demo.sh shares vs their max-min targets", phase=phase, port=port,
                     mbps=f"{got[port] / 1e6:.3f}", target=f"{want / 1e6:.3f}",
                     error=f"{100 * err:+.2f} %", bound="2 %")
            assert abs(err) <= 0.02, (phase, port, got[port], want, tail)
    png = (out / "rates.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, len(png)
    assert str(out / "rates.png") in r.stdout and str(out / "rates.csv") in r.stdout
    # nothing left behind: the daemon's sockets, the namespace, the tap
    assert not list(Path("/run/schednic").glob("*.sock")), list(Path("/run/schednic").glob("*"))
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "sn-demo-" not in ns, ns
    assert not Path("/sys/class/net/sn-uplink0").exists()
