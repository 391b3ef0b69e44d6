# SPDX-License-Identifier: BSD-3-Clause
"""Held-occupancy histograms of deferred ports (stats.get
completion.held_occupancy): interval measurement by snapshot diff.

The daemon's histogram is cumulative (time in ns spent at each held count,
buckets [lo, hi]); the distribution over one interval is the bucket-wise
difference of two snapshots. Percentiles here follow the daemon's own
definition (sn_vqtx_occ_pct): the smallest bucket whose cumulative time
reaches pct % of the total, reported as its upper end `hi`.
"""


def occ_hist(occ):
    """{(lo, hi): ns} of one held_occupancy object."""
    return {(lo, hi): ns for lo, hi, ns in occ["hist"]}


def occ_diff(before, after):
    """held_occupancy histogram of the interval between two snapshots."""
    a, b = occ_hist(before), occ_hist(after)
    d = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
    neg = {k: v for k, v in d.items() if v < 0}
    assert not neg, f"held_occupancy went backwards: {neg}"
    return {k: v for k, v in d.items() if v > 0}


def occ_pct(hist, pct):
    """Held count at time-weighted percentile pct of {(lo, hi): ns}."""
    total = sum(hist.values())
    if total <= 0:
        return 0
    run, hi = 0, 0
    for (lo, hi), ns in sorted(hist.items()):
        run += ns
        if run >= total * pct / 100.0:
            return hi
    return hi


def occ_summary(hist):
    """{p50, p99, max, mean, sampled_s} of {(lo, hi): ns} (mean from the
    bucket midpoints: exact below 128)."""
    total = sum(hist.values())
    mean = sum((lo + hi) / 2 * ns for (lo, hi), ns in hist.items()) / total if total else 0.0
    return {"p50": occ_pct(hist, 50), "p99": occ_pct(hist, 99), "max": occ_pct(hist, 100),
            "mean": mean, "sampled_s": total / 1e9}
