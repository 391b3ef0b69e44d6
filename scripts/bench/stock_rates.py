#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# stock_rates.py — delivered rate of a rate-limited deferred port, stock
# guest against opted-in guest.
#
# For each port rate limit x frame size x guest kind, one schednicd with one
# deferred vhost-user port (rate_bps = the limit, unmarked_max_hold_us
# 1000) and a net_null uplink; one sn-gen virtio-user peer (256-entry TX
# ring) offers frames at line rate to an unknown MAC (they go to the uplink
# only), with --marker for the opted-in guest, without it for the stock
# guest. After a warmup, the port's uplink bytes over a window give the
# delivered rate. Prints one row per point: delivered / limit, the
# completion counters hold_timeouts and copied_out (over the whole run),
# copied_out in the window / frames popped in the window, and the longest
# descriptor hold (hold_us.max).
#
# usage: scripts/bench/stock_rates.py [--build DIR] [--rates 1,10,100,1000]
#            [--sizes 64,1500] [--guests stock,optin] [--window S]
#            [--warmup S] [--json]
#   --build DIR   build directory with schednicd and backend/sn-gen
#                 (default: build/ of the current directory)
#   --rates       port limits in Mbit/s (default 1,10,100,1000)
#   --sizes       frame sizes in bytes without FCS (default 64,1500)
#   --guests      stock (no marker), optin (marker) (default both)
#   --window S    measurement window (default 3; at 1 Mbit/s at least 5)
#   --warmup S    time before the window (default 1)
#   --json        one JSON object per row instead of the table
# Runs on a quiet 2-core host: schednicd's worker on CPU 1, sn-gen on
# CPU 0. Other load on the machine lowers the rates: note it.
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchutil  # noqa: E402

SINK_MAC = "02:00:00:00:00:99"


def opening_comment():
    lines = []
    for ln in Path(__file__).read_text().splitlines()[2:]:
        if not ln.startswith("#"):
            break
        lines.append(ln[2:] if ln.startswith("# ") else ln[1:])
    return "\n".join(lines)


def vm0(sock):
    for p in benchutil.rpc(sock, "stats.get")["ports"]:
        if p["name"] == "vm0":
            return p
    raise RuntimeError("vm0 missing from stats.get")


def wait(pred, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except (OSError, RuntimeError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    raise TimeoutError(what)


def point(build, rate_mbps, size, guest, window, warmup):
    tmp = Path(tempfile.mkdtemp(prefix="sn-sr-", dir="/tmp"))
    dpfx, gpfx = f"sn-sr-d-{os.getpid()}", f"sn-sr-g-{os.getpid()}"
    ctl = str(tmp / "ctl.sock")
    rate = int(rate_mbps * 1e6)
    cfg = {"eal": {"memory_mb": 512, "file_prefix": dpfx, "main_cpu": 0, "worker_cpu": 1},
           "control": {"socket": ctl}, "datapath": {"mbufs": 16383},
           "uplink": {"name": "uplink", "devargs": "net_null0,no-rx=1"},
           "ports": [{"name": "vm0", "type": "vhost-user", "mode": "server",
                      "path": str(tmp / "vm0.sock"), "completion": "deferred",
                      "unmarked_max_hold_us": 1000}],
           "policy": {"ports": {"vm0": {"rate_bps": rate}}}}
    (tmp / "d.json").write_text(json.dumps(cfg))
    d = g = None
    try:
        with open(tmp / "d.log", "wb") as log:
            d = subprocess.Popen([str(build / "backend" / "schednicd"), "--config", str(tmp / "d.json")],
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait(lambda: benchutil.rpc(ctl, "version") is not None, "schednicd up")
        sync = tmp / "sync"
        sync.mkdir()
        argv = [str(build / "backend" / "sn-gen"), "count", "--cpu", "0", "--file-prefix", gpfx,
                "--sync", str(sync), "--log-level", "warning", "--settle", "0",
                "--port", f"{tmp / 'vm0.sock'},mac=02:53:47:00:00:01", "--no-learn",
                "--size", str(size), "--queue-size", "256",
                "--flow", f"src=0,dst={SINK_MAC},count=1000000000"]
        if guest == "optin":
            argv.append("--marker")
        with open(tmp / "g.log", "wb") as log:
            g = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log,
                                 stdin=subprocess.DEVNULL)
        wait(lambda: (sync / "ready").exists(), "sn-gen ready")
        wait(lambda: vm0(ctl)["state"] == "up" if "state" in vm0(ctl) else True, "vm0 up")
        (sync / "go-0").touch()
        wait(lambda: vm0(ctl)["policy"]["uplink_packets"] > 0, "traffic shaped")
        time.sleep(warmup)
        a, ta = vm0(ctl), benchutil.rpc(ctl, "stats.get")["uptime_s"]
        time.sleep(window)
        b, tb = vm0(ctl), benchutil.rpc(ctl, "stats.get")["uptime_s"]
        dr = (b["policy"]["uplink_bytes"] - a["policy"]["uplink_bytes"]) * 8 / (tb - ta)
        ca, cb = a["completion"], b["completion"]
        return {"rate_mbps": rate_mbps, "size": size, "guest": guest,
                "delivered_mbps": dr / 1e6, "ratio": dr / rate,
                "hold_timeouts": cb["hold_timeouts"],
                "copied_out": cb.get("copied_out", 0),
                "copied_window": cb.get("copied_out", 0) - ca.get("copied_out", 0),
                "popped_window": cb["popped"] - ca["popped"],
                "copy_no_mbuf": cb.get("copy_no_mbuf", 0),
                "hold_max_us": cb["hold_us"]["max"],
                "drops": {k: v for k, v in b["policy"]["drops"].items() if v}}
    finally:
        benchutil.stop(g)
        benchutil.stop(d)
        benchutil.remove_runtime(dpfx)
        benchutil.remove_runtime(gpfx)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=opening_comment(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 usage=argparse.SUPPRESS)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rates", default="1,10,100,1000")
    ap.add_argument("--sizes", default="64,1500")
    ap.add_argument("--guests", default="stock,optin")
    ap.add_argument("--window", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--json", action="store_true")
    o = ap.parse_args()
    build = Path(o.build).resolve()
    if not o.json:
        print(f"{'limit':>9} {'size':>5} {'guest':>6} {'delivered':>10} {'/limit':>7} "
              f"{'hold_to':>8} {'copied':>9} {'copied/popped (window)':>23} "
              f"{'hold max':>10}  other drops")
    for rate in [float(x) for x in o.rates.split(",")]:
        for size in [int(x) for x in o.sizes.split(",")]:
            for guest in o.guests.split(","):
                window = max(o.window, 5.0) if rate < 5 else o.window
                try:
                    r = point(build, rate, size, guest, window, o.warmup)
                except (OSError, RuntimeError, TimeoutError, KeyError) as e:
                    print(f"{rate:>6g} Mb {size:>5} {guest:>6} failed: {e!r}", flush=True)
                    continue
                if o.json:
                    print(json.dumps(r), flush=True)
                    continue
                print(f"{rate:>6g} Mb {size:>5} {guest:>6} {r['delivered_mbps']:>7.3f} Mb "
                      f"{r['ratio']:>7.4f} {r['hold_timeouts']:>8} {r['copied_out']:>9} "
                      f"{r['copied_window']:>11}/{r['popped_window']:<11} "
                      f"{r['hold_max_us']:>7.0f} us  {r['drops'] or ''}", flush=True)


if __name__ == "__main__":
    main()
