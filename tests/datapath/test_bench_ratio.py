"""scripts/bench/datapath.py's schedule and ratio statistics (s12-D2, issue 5):
every mode run is bracketed by testpmd runs, its ratio is taken against the
mean of its two neighbours (the baseline interpolated to its time), and
"ratio" is the median of those per-run ratios. Pure functions: no DPDK."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import datapath as dp  # noqa: E402


def test_order_brackets_every_mode_run():
    modes = ["switch", "immediate", "deferred", "scheduled"]
    order = dp.run_order(modes, 3)
    assert len(order) == 2 * 3 * len(modes) + 1
    assert order.count("testpmd") == 3 * len(modes) + 1
    for m in modes:
        assert order.count(m) == 3
    for i, w in enumerate(order):
        if w != "testpmd":
            assert order[i - 1] == "testpmd" and order[i + 1] == "testpmd"
    # odd rounds run the modes in reverse order
    assert [w for w in order[1:2 * len(modes)] if w != "testpmd"] == modes
    assert [w for w in order[2 * len(modes) + 1:4 * len(modes)] if w != "testpmd"] == modes[::-1]


def test_linear_drift_cancels():
    """A host whose speed drifts linearly (testpmd 10 -> 4 Mpps) and a mode
    that is always exactly 0.8 of testpmd at the same moment: every bracketed
    ratio is 0.8, while the ratio of medians is off."""
    modes = ["immediate", "deferred"]
    order = dp.run_order(modes, 3)
    n = len(order)
    speed = [10 - 6 * k / (n - 1) for k in range(n)]
    factor = {"testpmd": 1.0, "immediate": 0.95, "deferred": 0.8}
    seq = [(w, speed[k] * factor[w]) for k, w in enumerate(order)]
    tp, out = dp.summarize(seq)
    assert out["deferred"]["ratio"] == pytest.approx(0.8, abs=1e-3)
    assert out["immediate"]["ratio"] == pytest.approx(0.95, abs=1e-3)
    assert all(r == pytest.approx(0.8, abs=1e-3) for r in out["deferred"]["ratios"])
    assert len(out["deferred"]["ratios"]) == 3
    assert abs(out["deferred"]["ratio_of_medians"] - 0.8) > 0.005


def test_one_outlier_baseline_is_damped():
    """One testpmd run at twice the speed moves only the two ratios next to
    it, and the median over the runs ignores them."""
    order = dp.run_order(["deferred"], 5)
    seq = [(w, 5.0 if w == "testpmd" else 4.5) for w in order]
    seq[4] = ("testpmd", 10.0)
    tp, out = dp.summarize(seq)
    assert tp == 5.0
    assert out["deferred"]["ratio"] == pytest.approx(0.9)
    assert sorted(out["deferred"]["ratios"])[:2] == [pytest.approx(0.6), pytest.approx(0.6)]


def test_unbracketed_run_gets_no_ratio():
    seq = [("testpmd", 5.0), ("deferred", 4.0), ("immediate", 4.5), ("testpmd", 5.0)]
    assert dp.bracket_ratios(seq) == []
    tp, out = dp.summarize(seq)
    assert out["deferred"]["ratio"] is None
    assert out["deferred"]["ratio_of_medians"] == pytest.approx(0.8)
    assert dp.bracket_ratios([("testpmd", 0.0), ("deferred", 1.0), ("testpmd", 0.0)]) == []
