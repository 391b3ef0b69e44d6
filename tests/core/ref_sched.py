# SPDX-License-Identifier: BSD-3-Clause
"""Independent reference models for the packet schedulers (sn_sched).

Written from the definitions, sharing no code or structure with the C
implementation; exact rational arithmetic (fractions.Fraction) throughout.

- gps_departures(): the fluid GPS system (Parekh & Gallager 1993) fed with
  the same arrivals: each backlogged class k is served at R * w_k / W(t),
  W(t) the weight sum of backlogged classes. Computed with the GPS virtual
  time V (dV/dt = R / W(t)); a packet leaves GPS when V reaches its virtual
  finish time F = max(F_prev, V(arrival)) + bits / w.
- twfi_lags(): the T-WFI of Definition 1 in PSPAT (Bennett & Zhang's form):
  for a packet p of class k arriving at a_p with Q_k(a_p) bits of class k
  in the real system (p included), the ideal completion is
  a_p + Q_k(a_p) / (phi_k R); the lag is the real completion minus that.
- bound_qfq() / bound_drr(): PSPAT eq. 2 and eq. 3.
- Output parsing and the exact link model (work conservation, transmission
  times) used to check sn-trace's link emulation.

Times are in ns; rates in bit/s; lengths in bytes.
"""
from fractions import Fraction
import heapq
import os
import subprocess

NS = 10 ** 9


def sn_trace_path():
    build = os.environ.get("SN_BUILD_DIR", "/work/main/build")
    return os.path.join(build, "backend", "core", "sn-trace")


def write_trace(cfg, events):
    """cfg: dict(algo, rate, overhead, quantum, queue_len, classes={id: (w, lmax)}).
    events: list of tuples ('p', t, cls, len) / ('a'|'c', t, cls, w, lmax) / ('d', t, cls),
    already in time order."""
    lines = ["algo %s" % cfg["algo"], "rate %d" % cfg["rate"],
             "overhead %d" % cfg.get("overhead", 0),
             "queue_len %d" % cfg.get("queue_len", 65536),
             "max_classes %d" % cfg.get("max_classes", 1024)]
    if cfg.get("quantum"):
        lines.append("quantum %d" % cfg["quantum"])
    for cid, (w, lmax) in sorted(cfg["classes"].items()):
        lines.append("class %d %d %d" % (cid, w, lmax))
    for ev in events:
        lines.append(" ".join(str(x) for x in ev))
    return "\n".join(lines) + "\n"


def run_trace(cfg, events):
    """Run sn-trace sched; return (departed, dropped, ops).
    departed: id -> (cls, len, arrival, departure Fraction ns, order index)
    dropped:  id -> (cls, len, arrival, reason)
    ops: list of (kind, t, cls, rc)."""
    out = subprocess.run([sn_trace_path(), "sched", "-"], input=write_trace(cfg, events),
                         capture_output=True, text=True, check=True, timeout=60).stdout
    departed, dropped, ops = {}, {}, []
    for line in out.splitlines():
        f = line.split()
        if f[0] == "op":
            ops.append((f[1], int(f[2]), int(f[3]), int(f[4])))
            continue
        pid = int(f[0])
        assert pid not in departed and pid not in dropped, "packet %d reported twice" % pid
        if f[4] == "drop":
            dropped[pid] = (int(f[1]), int(f[2]), int(f[3]), f[5])
        else:
            dep = Fraction(int(f[5]), cfg["rate"])
            assert int(f[4]) == dep.numerator // dep.denominator
            departed[pid] = (int(f[1]), int(f[2]), int(f[3]), dep, len(departed))
    return departed, dropped, ops


def tx_time(length, overhead, rate):
    return Fraction((length + overhead) * 8 * NS, rate)


def gps_departures(pkts, weights, rate, overhead=0):
    """pkts: list of (id, arrival, cls, len) in arrival order (ties in list
    order). weights: cls -> weight (constant). Returns id -> GPS departure."""
    R = Fraction(rate, NS)  # bits per ns
    V = Fraction(0)
    t = Fraction(0)
    W = 0
    queued = {}
    last_f = {}
    heap = []
    dep = {}
    i, n = 0, len(pkts)
    while i < n or heap:
        next_a = pkts[i][1] if i < n else None
        if heap:
            F = heap[0][0]
            t_fin = t + (F - V) * W / R
            if next_a is None or t_fin <= next_a:
                t, V = t_fin, F
                while heap and heap[0][0] == F:
                    _, _, pid, c = heapq.heappop(heap)
                    dep[pid] = t
                    queued[c] -= 1
                    if queued[c] == 0:
                        W -= weights[c]
                continue
        if W:
            V += (next_a - t) * R / W
        t = Fraction(next_a)
        pid, _, c, length = pkts[i]
        i += 1
        if queued.get(c, 0) == 0:
            W += weights[c]
            start = V
        else:
            start = last_f[c]
        F = start + Fraction((length + overhead) * 8, weights[c])
        last_f[c] = F
        queued[c] = queued.get(c, 0) + 1
        heapq.heappush(heap, (F, pid, pid, c))
    return dep


def twfi_lags(pkts, departed, weights, rate, overhead=0):
    """T-WFI lag in Bennett & Zhang's form (the one QFQ's and PSPAT's
    bounds are proven in): real completion of p minus a_p + Q_k(a_p) /
    (phi_k R), where Q_k(a_p) is class k's backlog in the real system at
    a_p (p included) and phi_k = w_k / sum(w)."""
    R = Fraction(rate, NS)
    wsum = sum(weights.values())
    by_cls = {}
    for pid, a, c, length in pkts:
        if pid in departed:
            by_cls.setdefault(c, []).append((pid, a, (length + overhead) * 8))
    lags = {}
    for c, lst in by_cls.items():
        phi_r = R * Fraction(weights[c], wsum)
        prefix = [0]
        for _, _, bits in lst:
            prefix.append(prefix[-1] + bits)
        first = 0  # first packet of the class not yet completed at a_p
        for j, (pid, a, _) in enumerate(lst):
            while departed[lst[first][0]][3] <= a:
                first += 1
            q = Fraction(prefix[j + 1] - prefix[first])
            d0 = departed[lst[first][0]][3]
            bits0 = lst[first][2]
            if d0 - Fraction(bits0) / R < a:  # in transmission at a_p
                q -= bits0 - (d0 - a) * R
            lags[pid] = departed[pid][3] - (a + q / phi_r)
    return lags


def real_backlog(pkts, idx, departed, rate, overhead=0):
    """Bits per class in the real system at the arrival of pkts[idx]
    (packets arrived before it, itself included, not yet completed)."""
    R = Fraction(rate, NS)
    a_p = pkts[idx][1]
    backlog = {}
    for pid, a, c, length in pkts[:idx + 1]:
        if pid not in departed or departed[pid][3] <= a_p:
            continue
        bits = (length + overhead) * 8
        d = departed[pid][3]
        left = bits if d - Fraction(bits) / R >= a_p else (d - a_p) * R
        backlog[c] = backlog.get(c, 0) + left
    return backlog


def gps_from_snapshot(pkts, idx, backlog, weights, rate, overhead=0):
    """PSPAT Definition 1 taken literally: an ideal GPS system that holds
    the real system's backlogs at a_p and then receives the later arrivals.
    Returns when it completes packet pkts[idx] (class k is served
    backlog[k] bits; k's later packets queue behind p and do not matter)."""
    R = Fraction(rate, NS)
    _, a_p, k, _ = pkts[idx]
    t = Fraction(a_p)
    b = {c: Fraction(v) for c, v in backlog.items() if v > 0}
    j = idx + 1
    while True:
        W = sum(weights[c] for c in b)
        dt, _ = min((b[c] * W / (R * weights[c]), c) for c in b)
        nxt = pkts[j][1] if j < len(pkts) else None
        if nxt is not None and t + dt > nxt:
            dt = nxt - t
        for c in list(b):
            b[c] -= R * weights[c] / W * dt
            if b[c] <= 0:
                del b[c]
        t += dt
        if k not in b:
            return t
        while j < len(pkts) and pkts[j][1] == t:
            _, _, c, length = pkts[j]
            if c != k:
                b[c] = b.get(c, 0) + (length + overhead) * 8
            j += 1


def bound_qfq(k, classes, rate, overhead=0, inflight=True):
    """PSPAT eq. 2: 6 L_k / (phi_k B) + (L - L_k) / B, in ns; with
    inflight, plus L / B. The extra term: QFQ (like the paper's pseudo-code
    and Linux) charges V for a whole packet when it is dequeued, so a class
    that becomes backlogged while a max-size packet is on the wire starts
    at a V that already counts all of it; it can then send about one slot
    of packets, become ineligible and wait for one more max-size packet.
    Measured on these traces: up to ~1.6x eq. 2 as printed, never above
    eq. 2 + L/B (see SUMMARY in test_ref_sched.py)."""
    wsum = sum(w for w, _ in classes.values())
    w, lmax = classes[k]
    Lk = (lmax + overhead) * 8
    L = max(lm + overhead for _, lm in classes.values()) * 8
    phi = Fraction(w, wsum)
    b = Fraction(6 * Lk * NS, rate) / phi + Fraction((L - Lk) * NS, rate)
    return b + Fraction(L * NS, rate) if inflight else b


def bound_drr(k, classes, rate, overhead=0, quantum=1514):
    """PSPAT eq. 3: (1/phi_min + 1/phi_k + N - 1) L / B, in ns. Eq. 3
    assumes the smallest class's quantum is one maximum packet, quanta
    proportional to weights: L here is max(L, quantum * w_min)."""
    wsum = sum(w for w, _ in classes.values())
    wmin = min(w for w, _ in classes.values())
    phi_k = Fraction(classes[k][0], wsum)
    phi_min = Fraction(wmin, wsum)
    L = max(max(lm + overhead for _, lm in classes.values()), quantum * wmin) * 8
    return (1 / phi_min + 1 / phi_k + len(classes) - 1) * Fraction(L * NS, rate)


def check_link(pkts, departed, dropped_at, rate, overhead):
    """Exact, work-conserving link: packets are sent back to back in
    departure order, each lasting (len + overhead) * 8 / rate; the next one
    starts at the earliest instant x >= end of the previous one at which
    some unsent admitted packet is in the scheduler (arrived <= x, not yet
    dropped: a deleted class's packet is available up to its drop time
    inclusive, as dequeues due at an event's instant run first).
    dropped_at: id -> drop time (class deleted). Returns error strings."""
    errs = []
    avail = [(Fraction(a), pid) for pid, a, _, _ in pkts if pid in departed or pid in dropped_at]
    heapq.heapify(avail)
    order = sorted(departed, key=lambda p: departed[p][4])
    prev_dep = Fraction(0)
    sent = set()
    for pid in order:
        _, length, a, d, _ = departed[pid]
        start = d - tx_time(length, overhead, rate)
        # drop entries already sent, or dropped before the link could take
        # them (prev_dep only grows, so they never come back)
        while avail and (avail[0][1] in sent or
                         (avail[0][1] in dropped_at and
                          max(prev_dep, avail[0][0]) > dropped_at[avail[0][1]])):
            heapq.heappop(avail)
        expected = max(prev_dep, avail[0][0]) if avail else None
        if start < a:
            errs.append("packet %d starts before it arrives" % pid)
        if start != expected:
            errs.append("packet %d starts at %s, link model says %s" % (pid, start, expected))
        sent.add(pid)
        prev_dep = d
    return errs
