# SPDX-License-Identifier: BSD-3-Clause
"""schednicctl top: the non-interactive modes against a running
schednicd with a policy: --once prints one frame with every column, --count
N prints N frames, no terminal escape codes without a tty, bad options are
usage errors. (The values under traffic: tests/policy/test_conformance.py
::test_top_shows_the_shaped_rate.)"""
import json

import pytest

from ctlutil import run_ctl

pytestmark = pytest.mark.functional

COLUMNS = ["PORT", "STATE", "LIMIT_MBPS", "WEIGHT", "OFFERED_MBPS", "SENT_MBPS", "OFFERED_PPS",
           "SENT_PPS", "WHEEL", "QFQ", "DROPS/S", "HELD/P99_US"]


def test_top_once_and_count(schednicd, sn_tmpdir):
    pol = {"uplink": {"rate_bps": 50_000_000, "algorithm": "drr"},
           "ports": {"vm0": {"rate_bps": 10_000_000, "weight": 3}}}
    d = schednicd(ports=["vm0", "vm1"], policy=pol)
    r = run_ctl(d.socket, "top", "--once", "--interval", "0.2")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "\033[" not in out
    assert out.count("schednicctl top") == 1
    lines = out.splitlines()
    head = next(ln for ln in lines if ln.startswith("PORT"))
    assert head.split() == COLUMNS
    rows = {ln.split()[0]: ln.split() for ln in lines[lines.index(head) + 1:]
            if ln.split() and ln.split()[0] in ("vm0", "vm1")}
    assert set(rows) == {"vm0", "vm1"}
    assert rows["vm0"][2] == "10" and rows["vm0"][3] == "3"      # limit, weight
    assert rows["vm1"][2] == "-" and rows["vm1"][8] == "-"       # unshaped: no wheel
    assert rows["vm0"][8] == "0" and rows["vm0"][9] == "0"       # idle: wheel, QFQ empty
    arb = next(ln for ln in lines if ln.startswith("arbiter:"))
    assert "drr" in arb and "link=50.0Mbit/s" in arb and "decisions/s=0" in arb, arb
    assert "drops/s by cause: none" in out

    r = run_ctl(d.socket, "top", "--count", "3", "-d", "0.1")
    assert r.returncode == 0 and r.stdout.count("schednicctl top") == 3, r.stdout

    assert run_ctl(d.socket, "top", "--interval", "0").returncode == 2
    assert run_ctl(d.socket, "top", "--count", "-1").returncode == 2
    assert "top" in run_ctl(d.socket, "--help").stdout
    # a view, not a method: the schema/CLI agreement list is unchanged
    cmds = json.loads(run_ctl(d.socket, "--dump-commands").stdout)
    assert "top" not in cmds


def test_top_daemon_unreachable(sn_tmpdir):
    r = run_ctl(sn_tmpdir / "nobody.sock", "top", "--once")
    assert r.returncode == 3 and "Traceback" not in r.stderr
