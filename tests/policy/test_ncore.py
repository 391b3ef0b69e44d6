"""Layout ncore (issue 6 deliverable 2, issue 5 multiqueue ownership): W
worker lcores, each owning the VM TX queues mapped to it, one arbiter lcore.

- the queue -> worker map: explicit (ports[i].workers) and balanced by
  default, shown in port.list / stats.get, bad maps rejected naming the
  field;
- two ports on two workers both forward and are shaped at their own rates
  (the two workers' frames meet in the one arbiter);
- aggregate + NBA across two real workers with unequal demand: the total
  is the aggregate within 1 % and the split is what water-filling max-min
  predicts from the workers' demands, after one update period.

Traffic as in test_policy.py / test_classes.py: sn-gen virtio-user peers
flood UDP frames to an unknown MAC, i.e. to the uplink (net_null).
"""
import json
import subprocess
import time

import pytest

from test_classes import gen, go, wait_class
from test_policy import UPLINK, measure_backlogged, start, wait_flowing

NCORE = {"layout": "ncore", "workers": 2}
EAL = {"arbiter_cpu": 1}


def ncore(schednicd, **extra):
    """The schednicd factory with layout ncore (2 workers) added."""
    def factory(*args, **kw):
        kw["datapath"] = {**(kw.get("datapath") or {}), **NCORE}
        kw["eal"] = {**(kw.get("eal") or {}), **EAL}
        return schednicd(*args, **kw, **extra)
    return factory


def queues_by_port(d):
    listed = {p["name"]: [q["worker"] for q in p.get("queues", [])]
              for p in d.rpc("port.list")["ports"]}
    st = {p["name"]: [q["worker"] for q in p.get("queues", [])] for p in d.stats()["ports"]}
    assert listed == st, (listed, st)
    return listed


def test_queue_map_explicit_and_balanced(schednicd, sn_tmpdir):
    """Explicit maps are applied; without one every queue goes to the
    worker owning the fewest (round-robin in config order, then port.add);
    each worker lcore runs its own loop."""
    ports = [{"name": "a", "type": "vhost-user", "path": str(sn_tmpdir / "a.sock"),
              "queues": 3, "workers": [2, 2, 0]},
             {"name": "b", "type": "vhost-user", "path": str(sn_tmpdir / "b.sock"), "queues": 2},
             {"name": "c", "type": "vhost-user", "path": str(sn_tmpdir / "c.sock")}]
    d = schednicd(ports=ports, datapath={"layout": "ncore", "workers": 3}, eal=EAL)
    q = queues_by_port(d)
    # a: as given (load 0:1, 1:0, 2:2); b: worker 1, then 0 (0 and 1 tie at 1);
    # c: worker 1 (loads 2, 1, 2)
    assert q == {"a": [2, 2, 0], "b": [1, 0], "c": [1]}, q
    d.rpc("port.add", {"name": "e", "path": str(sn_tmpdir / "e.sock"), "queues": 2})
    # loads 2, 2, 2: q0 -> 0 (3, 2, 2), q1 -> 1 (lowest of the tie)
    assert queues_by_port(d)["e"] == [0, 1], queues_by_port(d)
    a = d.stats()["arbiter"]
    assert [w["worker"] for w in a["workers"]] == [0, 1, 2], a["workers"]
    deadline = time.monotonic() + 10
    while not all(w["loops"] > 0 for w in d.stats()["arbiter"]["workers"]):
        assert time.monotonic() < deadline, d.stats()["arbiter"]
        time.sleep(0.1)
    assert d.stats()["arbiter"]["arbiter_thread"]["loops"] > 0


@pytest.mark.parametrize("cfg, msg", [
    ({"ports": [{"name": "a", "path": "/tmp/sn-n-a.sock", "queues": 2, "workers": [0]}],
      "datapath": NCORE}, "ports[0].workers"),
    ({"ports": [{"name": "a", "path": "/tmp/sn-n-a.sock", "queues": 2, "workers": [0, 2]}],
      "datapath": NCORE}, "ports[0].workers[1]"),
    ({"ports": [{"name": "a", "path": "/tmp/sn-n-a.sock", "workers": ["0"]}],
      "datapath": NCORE}, "ports[0].workers[0]"),
    ({"ports": [{"name": "a", "path": "/tmp/sn-n-a.sock", "workers": [1]}]},
     "ports[0].workers[0]"),                                   # 1core: worker 0 only
    ({"datapath": {"layout": "ncore", "workers": 1}}, "datapath.workers"),
    ({"datapath": {"layout": "ncore", "workers": 9}}, "datapath.workers"),
    ({"datapath": {"layout": "2core", "workers": 2}}, "datapath.workers"),
    ({"datapath": NCORE, "eal": {"worker_cpus": [1, 1, 1]}}, "eal.worker_cpus"),
    ({"eal": {"worker_cpus": [1]}}, "eal.worker_cpus"),        # not ncore
    ({"datapath": NCORE, "eal": {"worker_cpus": [1, -1]}}, "eal.worker_cpus[1]"),
])
def test_bad_layout_or_map_rejected_naming_the_field(schednicd_bin, sn_tmpdir, cfg, msg):
    f = sn_tmpdir / "bad.json"
    f.write_text(json.dumps(cfg))
    r = subprocess.run([str(schednicd_bin), "--config", str(f), "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r
    assert f"config: {msg}:" in r.stderr, r.stderr


def test_worker_cpus_sets_the_worker_count(schednicd_bin, sn_tmpdir):
    f = sn_tmpdir / "ok.json"
    f.write_text(json.dumps({"datapath": {"layout": "ncore"}, "eal": {"worker_cpus": [1, 1, 0]},
                             "ports": [{"name": "a", "path": "/tmp/sn-n-a.sock",
                                        "workers": [2]}]}))
    r = subprocess.run([str(schednicd_bin), "--config", str(f), "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_two_ports_on_two_workers_forward_and_are_shaped(schednicd, sngen):
    """vm0's queue on worker 0 at 20 Mbit/s, vm1's on worker 1 at 10 Mbit/s,
    both offered 64 Mbit/s: each port's uplink rate within 1 % of its own
    limit, through the one arbiter (weights 1:1, link unlimited)."""
    pol = {"ports": {"vm0": {"rate_bps": 20_000_000}, "vm1": {"rate_bps": 10_000_000}}}
    d, g = start(ncore(schednicd), sngen, ["vm0", "vm1"], pol)
    # balanced by default: vm0 -> worker 0, vm1 -> worker 1
    assert queues_by_port(d) == {"vm0": [0], "vm1": [1], "uplink": []}
    wait_flowing(d, ["vm0", "vm1"])
    r0 = measure_backlogged(d, "uplink_bytes", "vm0")
    r1 = measure_backlogged(d, "uplink_bytes", "vm1")
    assert abs(r0 - 20e6) / 20e6 < 0.01, r0
    assert abs(r1 - 10e6) / 10e6 < 0.01, r1
    st = d.stats()
    t = {p["name"]: p for p in st["ports"]}
    for n in ("vm0", "vm1"):
        p = t[n]["policy"]
        assert p["drops"]["horizon"] > 0 and p["uplink_packets"] > 0, p   # shaped
        assert sum(v for k, v in p["drops"].items() if k != "horizon") == 0, p
    # both workers' frames went through the arbiter lcore
    assert st["arbiter"]["released"] >= t["vm0"]["policy"]["uplink_packets"] + \
        t["vm1"]["policy"]["uplink_packets"] - 64, st["arbiter"]
    assert all(w["loops"] > 0 for w in st["arbiter"]["workers"])
    assert d.alive()
