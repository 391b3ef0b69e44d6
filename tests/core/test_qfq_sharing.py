# SPDX-License-Identifier: BSD-3-Clause
"""QFQ sharing accuracy vs class lmax (the weighted-sharing experiment of
tests/policy/test_sharing.py through sn_qfq alone).

With every scheduler class at lmax 64 KiB, QFQ's 1:2:5 shares drift by up
to 2.6 % over 2 s windows. This replays the daemon's sharing experiment
through sn_qfq alone (sn-trace sched: exact link, no daemon, no OS
noise): three classes, weights 1:2:5, all backlogged with 1000 B frames
on a 20 Mbit/s link (+24 B per frame), and measures every 2 s window
(50 ms steps) of 10 s.

QFQ's guarantee: class k lags its fluid service by at most
phi_k B T-WFI_k = 6 L_k + phi_k (L - L_k) bytes (PSPAT eq. 2); a window can
meet that lag at both edges, so its share of a window of T seconds is off
by at most 2 (6 L_k + phi_k (L - L_k)) / (phi_k B T) (relative). With
lmax 1518 that is 3.0 / 1.5 / 0.6 % for weights 1 / 2 / 5; with 64 KiB it
is 126 / 63 / 25 %, i.e. no useful guarantee, and the measured drift is
real (printed). The daemon starts every class at lmax 1518
(CLASS_LMAX_INIT, backend/daemon/pipeline/sn_pl_internal.h): asserted here, QFQ at 1518 keeps every
window within its bound and within 2 %.
"""
import bisect
import subprocess

import pytest

import ref_sched as R

pytestmark = pytest.mark.unit

RATE = 20_000_000
OVH = 24
FRAME = 1000
W = (1, 2, 5)
WIN_NS = 2_000_000_000
STEP_NS = 50_000_000


def window_devs(algo, lmax, seconds=10):
    """Largest relative share error per class over all 2 s windows while
    every class is backlogged."""
    pps = RATE / ((FRAME + OVH) * 8)
    n = int(pps * seconds)                     # frames per class: all stay backlogged
    cfg = dict(algo=algo, rate=RATE, overhead=OVH, queue_len=1 << 20,
               classes={i: (w, lmax) for i, w in enumerate(W)})
    ev = [("p", 0, c, FRAME) for _ in range(n) for c in range(len(W))]
    out = subprocess.run([R.sn_trace_path(), "sched", "-"], input=R.write_trace(cfg, ev),
                         capture_output=True, text=True, check=True).stdout
    deps = sorted((int(f[4]), int(f[1]), int(f[2])) for f in map(str.split, out.splitlines())
                  if f[0] != "op" and f[4] != "drop")
    ts = [d[0] for d in deps]
    cum = [[0] * len(W)]
    for _, c, ln in deps:
        row = list(cum[-1])
        row[c] += ln
        cum.append(row)
    # the weight-5 class runs out first, at about n / (5/8 * pps) s
    end = min(ts[-1], int(n / (W[-1] / sum(W) * pps) * 1e9)) - 1
    worst = [0.0] * len(W)
    t = 0
    while t + WIN_NS <= end:
        a, b = bisect.bisect_right(ts, t), bisect.bisect_right(ts, t + WIN_NS)
        got = [cum[b][i] - cum[a][i] for i in range(len(W))]
        for i, w in enumerate(W):
            ideal = w / sum(W)
            worst[i] = max(worst[i], abs(got[i] / sum(got) - ideal) / ideal)
        t += STEP_NS
    return worst


def qfq_bound(lmax):
    """Per class: the relative share error QFQ allows over one window
    (weight 1, lmax 1518: lag 6 x 1542 B = 9252 B, its 2 s share
    20e6 / 8 / 8 x 2 = 625000 B, 2 x 9252 / 625000 = 2.96 %)."""
    lk = lmax + OVH
    out = []
    for w in W:
        phi = w / sum(W)
        lag = 6 * lk            # + phi (L - L_k): 0, every class has the same lmax
        out.append(2 * lag / (phi * RATE / 8 * WIN_NS / 1e9))
    return out


def test_qfq_shares_within_bound_at_mtu_lmax():
    devs = window_devs("qfq", 1518)
    bound = qfq_bound(1518)
    old = window_devs("qfq", 65536)
    drr = window_devs("drr", 1518)
    print(f"\nworst 2 s window share error, weights {W}: qfq lmax 1518 "
          f"{[f'{d:.3%}' for d in devs]} (bound {[f'{b:.1%}' for b in bound]}); "
          f"qfq lmax 65536 {[f'{d:.3%}' for d in old]} (bound "
          f"{[f'{b:.0%}' for b in qfq_bound(65536)]}); drr {[f'{d:.3%}' for d in drr]}")
    for i in range(len(W)):
        assert devs[i] <= min(bound[i], 0.02), (i, devs, bound)
