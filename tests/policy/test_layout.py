# SPDX-License-Identifier: BSD-3-Clause
"""Lcore layouts: the 2-core arbiter lcore and idle mode.

Spin-then-sleep (PSPAT §3.5, datapath.idle_sleep_us): an idle daemon naps
instead of burning its cores, and each nap's length (the wake-up delay it
adds to the first frame after a quiet period) is measured by the daemon
itself (arbiter.*_thread.sleep_ns / sleeps).
"""
import os
import time

import pytest

pytestmark = pytest.mark.functional

LAYOUTS = ["1core", "2core", "ncore"]   # lcore layouts, see conftest.py


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def threads(d):
    a = d.stats()["arbiter"]
    return a["worker_thread"], a["arbiter_thread"]


@pytest.mark.parametrize("nap_us", [50, 1000])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_idle_daemon_naps_and_reports_wakeup_delay(schednicd, layout, nap_us):
    d = schednicd(ports=["vm0"], datapath={"idle_sleep_us": nap_us})
    time.sleep(1.0)                      # past the 20000 spins
    w0, a0 = threads(d)
    c0 = cpu_seconds(d.proc.pid)
    time.sleep(2.0)
    w1, a1 = threads(d)
    c1 = cpu_seconds(d.proc.pid)
    lcores = [("worker", w0, w1)] + ([("arbiter", a0, a1)] if layout != "1core" else [])
    for name, x0, x1 in lcores:
        naps = x1["sleeps"] - x0["sleeps"]
        assert naps > 100, (name, x0, x1)
        mean_us = (x1["sleep_ns"] - x0["sleep_ns"]) / naps / 1000
        # A nap lasts at least what was asked; the overshoot is the
        # kernel's timer slack and scheduling (reported, not bounded
        # tightly: the machine is shared).
        assert mean_us >= nap_us * 0.99, (name, mean_us)
        print(f"{layout} {name}: {naps} naps, mean {mean_us:.0f} us for {nap_us} us asked")
    if layout == "1core":
        assert a1["loops"] == 0 and a1["sleeps"] == 0
    # Napping lcores use a small part of a CPU (busy polling: ~1 per lcore).
    assert (c1 - c0) / 2.0 < 0.5, c1 - c0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_busy_poll_never_naps(schednicd, layout):
    d = schednicd(ports=["vm0"], datapath={"idle_sleep_us": 0})
    time.sleep(1.5)
    w, a = threads(d)
    assert w["loops"] > 20000 and w["sleeps"] == 0, w
    if layout != "1core":
        assert a["loops"] > 20000 and a["sleeps"] == 0, a
    for k in d.stats()["arbiter"]["workers"]:     # ncore: each worker lcore
        assert k["loops"] > 20000 and k["sleeps"] == 0, k


@pytest.mark.parametrize("bad, msg", [
    ({"layout": "3core"}, "datapath.layout"),
    ({"layout": "ncore", "workers": 1}, "datapath.workers"),
    ({"layout": 2}, "datapath.layout"),
    ({"idle_sleep_us": 100001}, "datapath.idle_sleep_us"),
])
def test_layout_config_rejected_naming_the_key(schednicd_bin, sn_tmpdir, bad, msg):
    import json
    import subprocess
    cfg = sn_tmpdir / "bad.json"
    cfg.write_text(json.dumps({"datapath": bad}))
    r = subprocess.run([str(schednicd_bin), "--config", str(cfg), "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r
    assert f"config: {msg}:" in r.stderr, r.stderr
