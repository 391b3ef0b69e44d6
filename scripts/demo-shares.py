#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""demo-shares.py — the two policy phases of scripts/demo.sh.

Three shaped VM ports share an uplink emulated at --link-mbps; each port's
peer offers more than any share it can get. Phase 1: weights 1:2:5, no
port limit. Phase 2, applied live with policy.set: weights 8:2:5 and vm0
limited to --limit-mbps, below its weighted share, so vm0's target is its
limit and vm1 and vm2 share the rest 2:5. Max-min fairness gives each
phase's targets (doc/policy.md, "Weighted sharing and isolation").

Every second it reads stats.get, prints one line of per-port uplink rates
and appends one row per port to the CSV:
  t_s, phase, port, uplink_bytes, clock_ns, mbps
(uplink_bytes: the port's frames the arbiter sent on the uplink, L2 bytes,
cumulative; clock_ns: the worker clock the counter is exact at; mbps: the
rate since the previous row of that port). Rows 0..S (S = --seconds) are
phase 1; phase 2's policy is set right after row S, rows S+1..2S are
phase 2. A phase's measured share is the bytes between its first row at
least --settle seconds after its first row and its last row, over the
clocks of those rows (the settle time lets the backlog a port built
under the previous policy drain); the summary compares it with the target
and --plot draws the per-second rates over time (matplotlib).

Exit status: 0 when every share is within --tolerance of its target, 1
when one is not, 2 on a usage error, 3 when the daemon cannot be reached.
"""
import argparse
import csv
import importlib.machinery
import importlib.util
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PORTS = ("vm0", "vm1", "vm2")
FRAME = 1000        # sn-gen frame size (L2, no FCS) the demo sends
OVERHEAD = 24       # uplink.overhead_bytes: preamble, FCS, inter-frame gap


def load_ctl():
    """scripts/schednicctl as a module (its rpc())."""
    loader = importlib.machinery.SourceFileLoader("schednicctl", str(HERE / "schednicctl"))
    spec = importlib.util.spec_from_loader("schednicctl", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def phase_policy(phase, link_bps, limit_bps):
    ports = ({"vm0": {"weight": 1}, "vm1": {"weight": 2}, "vm2": {"weight": 5}} if phase == 1 else
             {"vm0": {"weight": 8, "rate_bps": limit_bps}, "vm1": {"weight": 2},
              "vm2": {"weight": 5}})
    return {"uplink": {"rate_bps": link_bps, "algorithm": "qfq", "overhead_bytes": OVERHEAD},
            "ports": ports}


def targets(policy):
    """Max-min fair L2 rates (bit/s) of backlogged ports on the uplink:
    water-filling of the link's L2 capacity by weight, a port never above
    its own limit."""
    cap = policy["uplink"]["rate_bps"] * FRAME / (FRAME + OVERHEAD)
    left = dict(policy["ports"])
    out = {}
    while left:
        wsum = sum(p["weight"] for p in left.values())
        capped = {n: p["rate_bps"] for n, p in left.items()
                  if p.get("rate_bps") and p["rate_bps"] < cap * p["weight"] / wsum}
        if not capped:
            out.update({n: cap * p["weight"] / wsum for n, p in left.items()})
            break
        for n, r in capped.items():
            out[n] = r
            cap -= r
            del left[n]
    return out


def measured(rows, phase, settle_s):
    """{port: bit/s} of a phase from CSV rows (dicts of str), between its
    first row at least settle_s into the phase and its last row."""
    out = {}
    for port in PORTS:
        r = [x for x in rows if int(x["phase"]) == phase and x["port"] == port]
        t0 = float(r[0]["t_s"]) if r else 0.0
        r = [x for x in r if float(x["t_s"]) >= t0 + settle_s]
        if len(r) < 2:
            raise ValueError(f"phase {phase}: fewer than 2 samples of {port} after the settle time")
        a, b = r[0], r[-1]
        dt = int(b["clock_ns"]) - int(a["clock_ns"])
        if dt <= 0:
            raise ValueError(f"phase {phase}: the worker clock of {port} did not advance")
        out[port] = (int(b["uplink_bytes"]) - int(a["uplink_bytes"])) * 8e9 / dt
    return out


def sample(ctl, sock):
    st = ctl.rpc(sock, "stats.get", {}, 5.0)
    out = {}
    for p in st["ports"]:
        pol = p.get("policy")
        if p["name"] in PORTS and pol:
            out[p["name"]] = (pol["uplink_bytes"], pol["clock_ns"])
    return out


def wait_for(what, cond, timeout):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError(f"{what} after {timeout:g} s")
        time.sleep(0.2)


def ports_up(ctl, sock):
    st = {p["name"]: p["state"] for p in ctl.rpc(sock, "port.list", {}, 5.0)["ports"]}
    return all(st.get(n) == "up" for n in PORTS)


def run(ctl, args):
    link, limit = int(args.link_mbps * 1e6), int(args.limit_mbps * 1e6)
    pol = {1: phase_policy(1, link, limit), 2: phase_policy(2, link, limit)}
    tg = {k: targets(v) for k, v in pol.items()}
    for k in (1, 2):
        print(f"phase {k}: " + json.dumps(pol[k]["ports"]) + "; max-min targets: " +
              ", ".join(f"{n} {tg[k][n] / 1e6:.2f}" for n in PORTS) + " Mbit/s")
    print(f"{'t (s)':>6} {'phase':>5} " + " ".join(f"{n + ' Mbit/s':>11}" for n in PORTS) +
          f" {'total':>8}")
    wait_for("the VM peers not all connected", lambda: ports_up(ctl, args.socket), 30)
    ctl.rpc(args.socket, "policy.set", {"policy": pol[1]}, 5.0)
    s0 = sample(ctl, args.socket)
    wait_for("no traffic from every VM peer on the uplink",
             lambda: all(sample(ctl, args.socket).get(n, (0, 0))[0] > s0.get(n, (0, 0))[0]
                         for n in PORTS), 20)
    rows, prev = [], {}
    t_start = time.monotonic()
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "phase", "port", "uplink_bytes", "clock_ns", "mbps"])
        # one row per port each second: rows 0..S are phase 1, S+1..2S
        # phase 2 (its policy set right after row S)
        for k in range(2 * args.seconds + 1):
            time.sleep(max(0.0, t_start + k - time.monotonic()))
            t = time.monotonic() - t_start
            phase = 1 if k <= args.seconds else 2
            s = sample(ctl, args.socket)
            line = []
            for n in PORTS:
                b, c = s.get(n, (0, 0))
                pb, pc = prev.get(n, (b, c))
                mbps = (b - pb) * 8e3 / (c - pc) if c > pc else 0.0
                prev[n] = (b, c)
                w.writerow([f"{t:.3f}", phase, n, b, c, f"{mbps:.3f}"])
                rows.append({"t_s": f"{t:.3f}", "phase": str(phase), "port": n,
                             "uplink_bytes": str(b), "clock_ns": str(c)})
                line.append(mbps)
            f.flush()
            print(f"{t:6.1f} {phase:>5} " + " ".join(f"{x:11.2f}" for x in line) +
                  f" {sum(line):8.2f}", flush=True)
            if k == args.seconds:
                ctl.rpc(args.socket, "policy.set", {"policy": pol[2]}, 5.0)
                print("       policy.set: phase 2", flush=True)
    ok = True
    print(f"\nshares over each phase after {args.settle:g} s of settling "
          "(daemon counters; target: max-min fair):")
    print(f"{'phase':>5} {'port':>5} {'measured':>10} {'target':>10} {'error':>8}")
    for phase in (1, 2):
        m = measured(rows, phase, args.settle)
        for n in PORTS:
            err = m[n] / tg[phase][n] - 1
            ok = ok and abs(err) <= args.tolerance
            print(f"{phase:>5} {n:>5} {m[n] / 1e6:10.2f} {tg[phase][n] / 1e6:10.2f} "
                  f"{100 * err:+7.2f}%")
    print(f"rates per second: {args.csv}")
    if args.plot:
        plot(args.csv, args.plot)
        print(f"plot: {args.plot}")
    if not ok:
        print(f"demo: a share is off its target by more than {100 * args.tolerance:g} %",
              file=sys.stderr)
    return 0 if ok else 1


def plot(csv_path, png_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for n in PORTS:
        r = [x for x in rows if x["port"] == n][1:]   # the first row has no interval
        ax.plot([float(x["t_s"]) for x in r], [float(x["mbps"]) for x in r], marker=".", label=n)
    t2 = max((float(x["t_s"]) for x in rows if x["phase"] == "1"), default=None)
    if t2 is not None and any(x["phase"] == "2" for x in rows):
        ax.axvline(t2, color="grey", linestyle="--")
        ax.text(t2, ax.get_ylim()[1] * 0.95, " policy.set: weights 8:2:5, vm0 limited",
                fontsize=8, va="top")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("uplink rate (Mbit/s, L2)")
    ax.set_title("schednic: weights 1:2:5, then changed live with a port limit")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-s", "--socket", default="/run/schednic/schednicd.sock")
    ap.add_argument("--seconds", type=int, default=8, help="length of each phase")
    ap.add_argument("--settle", type=float, default=2,
                    help="seconds of each phase left out of its share")
    ap.add_argument("--link-mbps", type=float, default=40, help="emulated uplink rate")
    ap.add_argument("--limit-mbps", type=float, default=16, help="vm0's limit in phase 2")
    ap.add_argument("--tolerance", type=float, default=0.02,
                    help="largest relative error of a share")
    ap.add_argument("--csv", required=True, help="where the per-second rates go")
    ap.add_argument("--plot", help="PNG of the rates over time")
    args = ap.parse_args()
    if args.seconds < args.settle + 2:
        ap.error("--seconds must be at least --settle + 2")
    ctl = load_ctl()
    try:
        return run(ctl, args)
    except ctl.Unreachable as e:
        print(f"demo: {e}", file=sys.stderr)
        return 3
    except ctl.RpcFailed as e:
        print(f"demo: schednicd refused a request: {e}", file=sys.stderr)
        return 1
    except (TimeoutError, ValueError) as e:
        print(f"demo: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
