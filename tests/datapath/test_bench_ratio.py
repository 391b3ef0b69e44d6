# SPDX-License-Identifier: BSD-3-Clause
"""scripts/bench/datapath.py's schedule and ratio statistics:
every mode run is bracketed by testpmd runs, its ratio is taken against the
mean of its two neighbours (the baseline interpolated to its time), and
"ratio" is the median of those per-run ratios. Pure functions: no DPDK."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import datapath as dp  # noqa: E402

pytestmark = pytest.mark.perf


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


def test_slot_rates_interleaved():
    """--interleave: a slot's Mpps is taken from the samples of its
    own pair inside the slot, after the skip; samples taken while the pair
    was stopped (before the slot) or in the skip never count."""
    size = 64
    # sampled every 50 ms from t = 10.0 s; 3 Mpps before 11.0 s, 6 Mpps after
    samples, b = [], 0.0
    for k in range(61):
        t = 10.0 + 0.05 * k
        samples.append((int(round(t * 1e9)), int(b)))
        b += (3e6 if t < 11.0 else 6e6) * 0.05 * size
    r = dp.slot_rates(samples, [(10.0, 10.9), (11.0, 12.0), (20.0, 21.0)], size, 0.25)
    assert r[0] == pytest.approx(3.0, rel=1e-6)
    assert r[1] == pytest.approx(6.0, rel=1e-6)
    assert r[2] is None                  # no sample of that pair in the slot
    # a slot whose samples after the skip are fewer than two gives None
    assert dp.slot_rates(samples, [(10.0, 10.28)], size, 0.25) == [None]


def test_interleaved_slots_give_paired_ratios():
    """Slots alternate testpmd / mode; a host that switches between a fast
    and a slow state every few slots, with the mode always 0.8 of testpmd in
    the same state: every per-slot ratio is 0.8 except at a switch."""
    order = ["testpmd" if k % 2 == 0 else "deferred" for k in range(21)]
    state = [10.0 if (k // 6) % 2 == 0 else 5.0 for k in range(21)]
    seq = [(w, state[k] * (1.0 if w == "testpmd" else 0.8)) for k, w in enumerate(order)]
    tp, out = dp.summarize(seq)
    assert out["deferred"]["ratio"] == pytest.approx(0.8, abs=1e-9)
    assert sum(1 for r in out["deferred"]["ratios"] if abs(r - 0.8) > 1e-9) <= 3


def test_generator_settings_apply_to_every_port_alike():
    """sn-gen's virtio-user settings come from the invocation, not from the
    mode: the same devargs on every port (testpmd's runs use the same
    run_gen), tx_free_thresh = queue size - 64 unless given, and '' / 0
    give the virtio PMD's own defaults."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--queue-size", type=int, default=1024)
    dp.add_gen_args(ap)

    def parse(*argv):
        a = ap.parse_args(list(argv))
        dp.check_gen_args(ap, a)
        return a
    a = parse()
    assert a.tx_free_thresh == 1024 - dp.TX_FREE_BELOW
    assert a.gen_devargs == dp.GEN_DEVARGS
    # no port of any run (testpmd's included) negotiates IN_ORDER,
    # as with a Linux guest
    assert "in_order=0" in dp.GEN_DEVARGS.split(",")
    assert dp.gen_port("/x/vm0.sock", a) == "/x/vm0.sock," + dp.GEN_DEVARGS
    assert parse("--queue-size", "256").tx_free_thresh == 256 - dp.TX_FREE_BELOW
    pmd = parse("--tx-free-thresh", "0", "--gen-devargs", "")
    assert pmd.tx_free_thresh == 0 and dp.gen_port("/x/vm1.sock", pmd) == "/x/vm1.sock"
    with pytest.raises(SystemExit):
        parse("--queue-size", "64", "--tx-free-thresh", "61")
    # every run's sn-gen writes its header (testpmd's included)
    # unless --gen-hdr pmd restores the PMD's behaviour
    assert a.gen_hdr == "written" and dp.gen_hdr_args(a) == ["--hdr-write"]
    assert dp.gen_hdr_args(parse("--gen-hdr", "pmd")) == []
    with pytest.raises(SystemExit):
        parse("--gen-hdr", "sometimes")


def test_ratios_split_by_host_state():
    """A host that switches between two speeds (testpmd 10.5 and 7
    Mpps) and a mode that is 0.83 of testpmd in the fast state and 0.71 in
    the slow one: by_host_state gives each state its own ratio; a bracket
    inside which the state changed counts as mixed, in neither state."""
    seq = [("testpmd", 10.5)]
    for k in range(12):
        fast = k < 5 or k == 11
        tp = 10.5 if fast else 7.0
        seq += [("scheduled", tp * (0.83 if fast else 0.71)), ("testpmd", tp)]
    # k == 5 (fast -> slow inside the bracket) and k == 11 (slow -> fast)
    _, out = dp.summarize(seq)
    st = out["scheduled"]["by_host_state"]
    assert 7.0 < st["split_mpps"] < 10.5
    assert st["fast"]["ratio"] == pytest.approx(0.83, abs=1e-3)
    assert st["slow"]["ratio"] == pytest.approx(0.71, abs=1e-3)
    assert st["fast"]["n"] == 5 and st["slow"]["n"] == 5 and st["mixed"] == 2
    assert st["slow"]["testpmd_mpps"] == [7.0, 7.0]


def test_one_host_state_gives_no_split():
    """Baselines within STATE_GAP of each other (10 +- 5 %): no split."""
    seq = [("testpmd", 10.0)]
    for k in range(6):
        tp = 10.0 * (1.05 if k % 2 else 0.95)
        seq += [("deferred", 0.8 * tp), ("testpmd", tp)]
    _, out = dp.summarize(seq)
    assert "by_host_state" not in out["deferred"]
    assert out["deferred"]["ratio"] == pytest.approx(0.8, rel=0.06)


def test_host_states_shared_by_modes_and_lone_outlier():
    """Two modes interleaved in one host history share one split; a mode
    whose every bracket straddles a state change gets only "mixed"; one
    lone slow baseline among fast ones (fewer than STATE_MIN) is no state."""
    seq = [("testpmd", 10.0)]
    for k in range(8):
        tp = 10.0 if k < 4 else 6.0
        seq += [("deferred", tp * (0.9 if tp > 8 else 0.8)), ("testpmd", tp),
                ("scheduled", tp * (0.8 if tp > 8 else 0.7)), ("testpmd", tp)]
    seq += [("immediate", 7.0), ("testpmd", 10.0), ("immediate", 7.0), ("testpmd", 6.0)]
    _, out = dp.summarize(seq)
    d, s = out["deferred"]["by_host_state"], out["scheduled"]["by_host_state"]
    assert d["split_mpps"] == s["split_mpps"]
    assert (d["fast"]["ratio"], d["slow"]["ratio"]) == (0.9, 0.8)
    assert (s["fast"]["ratio"], s["slow"]["ratio"]) == (0.8, 0.7)
    assert s["fast"]["testpmd_mpps"] == [10.0, 10.0] and s["slow"]["n"] == 4
    # deferred's first slow run straddles the change (10 -> 6): mixed
    assert d["mixed"] == 1 and d["slow"]["n"] == 3 and d["fast"]["n"] == 4
    im = out["immediate"]["by_host_state"]
    assert im["mixed"] == 2 and "fast" not in im and "slow" not in im

    # testpmd 10 x4, 6 x3, 10 x3: two brackets at 6 (both neighbours 6),
    # two mixed, the rest at 10: fewer than STATE_MIN slow baselines
    tps = [10.0] * 4 + [6.0] * 3 + [10.0] * 3
    lone = [("testpmd", tps[0])]
    for tp in tps[1:]:
        lone += [("deferred", 0.8 * tp), ("testpmd", tp)]
    _, out = dp.summarize(lone)
    assert "by_host_state" not in out["deferred"]


def test_baseline_build_config_mirrors_the_mode(tmp_path):
    """--baseline-build: the other build's schednicd gets this build's
    configuration for the mode, on the baseline pair's sockets and its own
    control socket; with an uplink peer, sn-gen's port 1 is the uplink's."""
    import json
    import types

    b = dp.Bench.__new__(dp.Bench)
    b.tmp = tmp_path
    b.gen_cpu, b.sw_cpu = 0, 1
    b.args = types.SimpleNamespace()
    b.baseline_schednicd = "/other/build/backend/schednicd"
    socks = [str(tmp_path / "tp0.sock"), str(tmp_path / "tp1.sock")]
    for mode in ("deferred", "scheduled"):
        argv = b.build_baseline_argv(dp.MODES[mode], socks, "pre-x")
        assert argv[:2] == ["/other/build/backend/schednicd", "--config"]
        cfg = json.loads(Path(argv[2]).read_text())
        mine, _, ctl = b.daemon_config(dp.MODES[mode], "pre-x")
        assert cfg["control"]["socket"] != ctl
        assert cfg["eal"] == mine["eal"]
        assert cfg["ports"][0]["path"] == socks[0]
        assert cfg["ports"][0].get("completion") == "deferred"
        if mode == "scheduled":
            assert cfg["policy"] == mine["policy"] and len(cfg["ports"]) == 1
            assert cfg["uplink"]["devargs"] == f"net_vhost0,iface={socks[1]},queues=1"
        else:
            assert [p["path"] for p in cfg["ports"]] == socks and not cfg.get("uplink")
