# SPDX-License-Identifier: BSD-3-Clause
"""Reference-model tests of the packet schedulers (QFQ, DRR, FIFO).

Randomized traces (weights 1..1000, lengths 64..9000, bursts, overload,
class churn) are replayed by `sn-trace sched` (binary from $SN_BUILD_DIR,
default /work/main/build) and checked against the independent exact models
in ref_sched.py:

- QFQ: every packet's T-WFI lag within PSPAT eq. 2 (+ L/B, see
  ref_sched.bound_qfq). The ideal system is the fluid GPS in which every
  configured class is backlogged, i.e. class k is served at exactly
  phi_k B (Bennett & Zhang's form of Definition 1, the one QFQ's bound is
  proven in): lag = d_p - (a_p + Q_k(a_p) / (phi_k B));
- DRR: the same with PSPAT eq. 3 (quantum of the lightest class = L);
- lags behind GPS with only the actually backlogged classes (and GPS fed
  with the same arrivals) are computed exactly and reported, not asserted
  (see test_delay_bounds);
- QFQ/DRR: long-run byte shares of continuously backlogged classes within
  1 % (relative) of their weights;
- FIFO: exact order and exact departure times;
- all: exact, work-conserving link emulation; with class add / change /
  delete while backlogged: every packet accounted for exactly once, the
  right packets dropped for the right reason, per-class FIFO order.
"""
from fractions import Fraction
import random

import pytest

import ref_sched as ref

pytestmark = pytest.mark.unit

EEXIST, ENOENT = 17, 2
SUMMARY = {}


def note(key, lag, bound):
    ratio = lag / bound
    cur = SUMMARY.get(key)
    if cur is None or ratio > cur[0]:
        SUMMARY[key] = (ratio, float(lag), float(bound))
    SUMMARY[key + "/packets"] = SUMMARY.get(key + "/packets", 0) + 1


def gen_classes(rng, n, max_lmax):
    classes = {}
    for k in range(n):
        w = rng.choice([1, 1, 2, 3, 5, 8, 10, 16, 30, 100, rng.randint(1, 1000)])
        lmax = rng.choice([64, 200, 576, 1500, 1500, max_lmax])
        classes[k] = (w, min(lmax, max_lmax))
    return classes


def gen_packets(rng, classes, rate, npkts, load):
    """Bursty arrivals: at exponential gaps one class sends a burst of
    1..30 packets at the same instant; lengths uniform, minimal or maximal."""
    ids = list(classes)
    hot = rng.sample(ids, max(1, len(ids) // 3))
    mean_bits = 8 * 10 * sum(lm for _, lm in classes.values()) / 2 / len(classes)
    gap_ns = mean_bits / (rate * load) * ref.NS
    t = 0
    out = []
    while len(out) < npkts:
        t += int(rng.expovariate(1.0 / gap_ns)) + 1
        c = rng.choice(hot) if rng.random() < 0.5 else rng.choice(ids)
        lmax = classes[c][1]
        for _ in range(rng.randint(1, 30)):
            mode = rng.random()
            length = 64 if mode < 0.2 else lmax if mode < 0.4 else rng.randint(64, lmax)
            out.append((len(out), t, c, length))
    return out


def events_of(pkts):
    return [("p", a, c, length) for _, a, c, length in pkts]


@pytest.mark.parametrize("algo,seed", [("qfq", s) for s in range(24)] + [("drr", s) for s in range(16)])
def test_delay_bounds(algo, seed):
    rng = random.Random(1000 * seed + len(algo))
    max_lmax = 9000 if algo == "qfq" else 1500  # DRR: quantum 1514 * w >= L
    classes = gen_classes(rng, rng.randint(2, 12), max_lmax)
    rate = rng.choice([10 ** 6, 10 ** 8, 10 ** 9, 10 ** 10, 3 * 10 ** 9 + 7])
    pkts = gen_packets(rng, classes, rate, 1000, rng.uniform(0.8, 1.6))
    wmin = min(w for w, _ in classes.values())
    quantum = -(-max_lmax // wmin)  # eq. 3: quantum of the lightest class = L
    cfg = dict(algo=algo, rate=rate, classes=classes, quantum=quantum)
    departed, dropped, _ = ref.run_trace(cfg, events_of(pkts))
    assert not dropped and len(departed) == len(pkts)
    assert not ref.check_link(pkts, departed, {}, rate, 0)

    weights = {c: w for c, (w, _) in classes.items()}
    if algo == "qfq":
        bounds = {c: ref.bound_qfq(c, classes, rate) for c in classes}
        eq2 = {c: ref.bound_qfq(c, classes, rate, inflight=False) for c in classes}
    else:
        bounds = {c: ref.bound_drr(c, classes, rate, quantum=quantum) for c in classes}
    lags = ref.twfi_lags(pkts, departed, weights, rate)
    for pid, _, c, _ in pkts:
        note(algo + "/twfi", lags[pid], bounds[c])
        if algo == "qfq":
            note("qfq/twfi_vs_eq2_as_printed", lags[pid], eq2[c])
        assert lags[pid] <= bounds[c], "packet %d class %d: T-WFI lag %s > bound %s" % (
            pid, c, float(lags[pid]), float(bounds[c]))
    # Reported, not asserted: Definition 1 read with a GPS that holds the
    # real backlogs at a_p (only the classes backlogged then compete), for
    # the packets closest to their bound and a random sample; and GPS fed
    # with the same arrivals. Neither is what eq. 2/3 bound: QFQ, like
    # WF2Q+, normalises virtual time by the weights of all configured
    # classes, so when some are idle their share goes to whichever eligible
    # class has the smallest finish time, not pro rata as in GPS (seen: a
    # weight-100 class waiting behind a weight-1 class's 1470 B packet).
    worst = sorted(range(len(pkts)), key=lambda i: lags[pkts[i][0]] / bounds[pkts[i][2]])
    for idx in set(worst[-10:] + rng.sample(worst, 10)):
        pid, _, c, _ = pkts[idx]
        backlog = ref.real_backlog(pkts, idx, departed, rate)
        lag = departed[pid][3] - ref.gps_from_snapshot(pkts, idx, backlog, weights, rate)
        note(algo + "/gps_def1_backlogged_only", lag, bounds[c])
    gps = ref.gps_departures(pkts, weights, rate)
    for pid, _, c, _ in pkts:
        note(algo + "/gps_same_arrivals", departed[pid][3] - gps[pid], bounds[c])


@pytest.mark.parametrize("algo,seed", [(a, s) for a in ("qfq", "drr") for s in range(4)])
def test_long_run_shares(algo, seed):
    rng = random.Random(77 + seed)
    n = rng.randint(2, 6)
    classes = {k: (rng.randint(1, 8), 1500) for k in range(n)}
    rate = 10 ** 9
    pkts = []
    for c, (w, lmax) in classes.items():
        # each class backlogged from t=0 for ~400 DRR rounds
        nbytes = 0
        while nbytes < 400 * 1514 * w:
            length = rng.randint(64, lmax)
            pkts.append((len(pkts), 0, c, length))
            nbytes += length
    cfg = dict(algo=algo, rate=rate, classes=classes)
    departed, dropped, _ = ref.run_trace(cfg, events_of(pkts))
    assert not dropped
    last = {}
    for pid, (c, _, _, d, _) in departed.items():
        last[c] = max(last.get(c, d), d)
    t_end = min(last.values())  # every class is backlogged on [0, t_end]
    served = {c: 0 for c in classes}
    for c, length, _, d, _ in departed.values():
        if d <= t_end:
            served[c] += length
    total = sum(served.values())
    wsum = sum(w for w, _ in classes.values())
    worst = 0.0
    for c, (w, _) in classes.items():
        rel = abs(Fraction(served[c], total) / Fraction(w, wsum) - 1)
        worst = max(worst, float(rel))
    SUMMARY[algo + "/share_err"] = max(SUMMARY.get(algo + "/share_err", 0), worst)
    assert worst <= 0.01, "share off by %.4f" % worst


@pytest.mark.parametrize("seed", range(6))
def test_fifo_exact(seed):
    rng = random.Random(500 + seed)
    classes = gen_classes(rng, rng.randint(1, 8), 9000)
    rate = rng.choice([10 ** 7, 10 ** 9, 25 * 10 ** 9])
    overhead = rng.choice([0, 24])
    pkts = gen_packets(rng, classes, rate, 1500, rng.uniform(0.5, 1.5))
    cfg = dict(algo="fifo", rate=rate, overhead=overhead, classes=classes)
    departed, dropped, _ = ref.run_trace(cfg, events_of(pkts))
    assert not dropped
    order = sorted(departed, key=lambda p: departed[p][4])
    assert order == [pid for pid, _, _, _ in pkts], "FIFO order broken"
    d = Fraction(0)
    for pid, a, _, length in pkts:
        d = max(d, Fraction(a)) + ref.tx_time(length, overhead, rate)
        assert departed[pid][3] == d, "packet %d departs at %s, model %s" % (pid, departed[pid][3], d)
    assert not ref.check_link(pkts, departed, {}, rate, overhead)


@pytest.mark.parametrize("algo,seed", [(a, s) for a in ("qfq", "drr", "fifo") for s in range(5)])
def test_churn(algo, seed):
    """Class add / change (weight, lmax below queued lengths) / delete while
    backlogged, interleaved with bursts."""
    rng = random.Random(9000 + seed * 3 + len(algo))
    rate = 10 ** 9
    overhead = rng.choice([0, 24])
    classes = {k: (rng.randint(1, 50), rng.choice([64, 1500, 9000])) for k in range(4)}
    cur = dict(classes)        # model: present classes -> (w, lmax)
    incarnation = {c: 0 for c in cur}
    events, pkts = [], []
    expect_drop = {}           # pid -> reason known at arrival
    t = 0
    for _ in range(1500):
        t += rng.randint(1, 20000)
        r = rng.random()
        c = rng.randint(0, 7)
        if r < 0.04:
            w, lm = rng.randint(1, 50), rng.choice([64, 700, 1500, 9000])
            events.append(("a", t, c, w, lm))
            if c not in cur:
                cur[c] = (w, lm)
                incarnation[c] = incarnation.get(c, 0) + 1
        elif r < 0.10:
            w, lm = rng.randint(1, 50), rng.choice([64, 700, 1500, 9000])
            events.append(("c", t, c, w, lm))
            if c in cur:
                cur[c] = (w, lm)
        elif r < 0.13:
            events.append(("d", t, c))
            cur.pop(c, None)
        else:
            for _ in range(rng.randint(1, 12)):
                length = rng.choice([64, rng.randint(64, 9000), 1500])
                pid = len(pkts)
                pkts.append((pid, t, c, length, incarnation.get(c)))
                events.append(("p", t, c, length))
                if c not in cur:
                    expect_drop[pid] = "noclass"
                elif length > cur[c][1]:
                    expect_drop[pid] = "msgsize"
    cfg = dict(algo=algo, rate=rate, overhead=overhead, classes=classes)
    departed, dropped, ops = ref.run_trace(cfg, events)

    # every packet exactly once (run_trace asserts no duplicates)
    assert set(departed) | set(dropped) == set(range(len(pkts)))
    assert not set(departed) & set(dropped)
    for pid, reason in expect_drop.items():
        assert dropped.get(pid, (0, 0, 0, None))[3] == reason, "packet %d" % pid
    for pid, (_, _, _, reason) in dropped.items():
        assert reason == "del" or expect_drop.get(pid) == reason, "packet %d dropped: %s" % (pid, reason)

    # op return codes follow the class presence model
    present = set(classes)
    model_ops = [e for e in events if e[0] != "p"]
    assert len(ops) == len(model_ops)
    for (kind, t_op, c, rc), ev in zip(ops, model_ops):
        assert (kind, t_op, c) == ev[:3]
        if kind == "a":
            assert rc == (-EEXIST if c in present else 0)
            present.add(c)
        elif kind == "c":
            assert rc == (0 if c in present else -ENOENT)
        else:
            assert rc == (0 if c in present else -ENOENT)
            present.discard(c)

    # deletes drop exactly what was still queued: admitted packets of that
    # class incarnation not dequeued (start <= t_del) before the delete
    dropped_at = {}
    del_times = {}
    for kind, t_op, c, rc in ops:
        if kind == "d" and rc == 0:
            del_times.setdefault(c, []).append(t_op)
    admitted = [p for p in pkts if p[0] not in expect_drop]
    for pid, a, c, length, inc in admitted:
        t_del = next((td for td in del_times.get(c, []) if td >= a), None)
        if pid in departed:
            start = departed[pid][3] - ref.tx_time(length, overhead, rate)
            assert t_del is None or start <= t_del, "packet %d sent after its class was deleted" % pid
        else:
            assert dropped[pid][3] == "del" and t_del is not None, "packet %d lost" % pid
            dropped_at[pid] = t_del

    # per-class FIFO (per incarnation) and exact work-conserving link
    last = {}
    for pid in sorted(departed, key=lambda p: departed[p][4]):
        key = (pkts[pid][2], pkts[pid][4])
        assert last.get(key, -1) < pid, "class %d out of order" % key[0]
        last[key] = pid
    flat = [(pid, a, c, length) for pid, a, c, length, _ in admitted]
    errs = ref.check_link(flat, departed, dropped_at, rate, overhead)
    assert not errs, errs[:5]
    SUMMARY["churn/traces"] = SUMMARY.get("churn/traces", 0) + 1
    SUMMARY["churn/del_drops"] = SUMMARY.get("churn/del_drops", 0) + len(dropped_at)


def test_zz_summary(capsys):
    """Prints the run's summary: traces checked, worst lag / bound."""
    with capsys.disabled():
        print("\nreference-model summary:")
        for k in sorted(SUMMARY):
            v = SUMMARY[k]
            if isinstance(v, tuple):
                print("  %-12s max lag/bound %.3f (lag %.0f ns, bound %.0f ns)" % (k, v[0], v[1], v[2]))
            else:
                print("  %-20s %s" % (k, v))
