# SPDX-License-Identifier: BSD-3-Clause
"""Many connected, idle ports (a host of mostly idle VMs).

The daemon is configured with the most vhost-user ports it accepts
(snlib.limits.PORTS_MAX): two busy ones driven by sn-gen, every other one
connected by one `sn-vufront many` process with nothing posted. Checks:
- every port shows up (connected) in port.list and stats.get, and the busy
  pair still switches with exact counters;
- a quiet port is never starved: while the busy pair switches at full rate,
  frames posted on an idle port that the worker polls only in its sweep
  (sn_switch_poll.c) leave within a bounded time, in both completion
  modes and in layouts 1core and ncore. sn-vufront many's probe posts
  them (addressed to their own source MAC: each is a hairpin drop,
  counted and completed, and reaches no sink) and measures the time until
  each completes.
"""
import json
import select
import signal
import subprocess
import threading
import time

import pytest

from snlib.limits import PORTS_MAX, ports_max_config
from snlib.wait import wait_for
from sngen import drops_total, egress_drops, port_table, wait_settled

pytestmark = pytest.mark.functional

N = 5000
BUSY = ["vm0", "vm1"]
# A quiet queue is polled at least once every ceil(entries / 8) worker
# iterations: microseconds to a millisecond. The bound asserted leaves room
# for a loaded 2-core host (scheduler slices of the other processes).
FIRST_FRAME_MS_MAX = 200.0


def idle_names(n):
    return [f"idle{i}" for i in range(n)]


def port_cfg(tmp, name, **kw):
    return {"name": name, "type": "vhost-user", "path": str(tmp / f"{name}.sock"),
            "mode": "server", **kw}


def start_many(spawn, vufront_bin, tmp, n, probe=None, timeout=60.0):
    """One sn-vufront process connected to idle0..idle<n-1> (probe: the
    connection its SIGUSR1 probe posts on); returns it once every connection
    is negotiated."""
    ready = tmp / "many.ready"
    # on CPU 0 with sn-gen: a probe spins until its frame completes, and
    # spinning on the worker's CPU would delay the worker by a time slice
    argv = ["taskset", "-c", "0", vufront_bin, "many", "--pattern", str(tmp / "idle%u.sock"), "--count", str(n),
            "--queue-size", "64", "--timeout", "10", "--ready-file", str(ready)]
    if probe is not None:
        argv += ["--probe", str(probe)]
    p = spawn(argv, name="vufront-many", stdout=subprocess.PIPE)
    wait_for(lambda: ready.exists() or p.poll() is not None, "sn-vufront many ready",
             timeout=timeout)
    assert p.poll() is None, f"sn-vufront many exited {p.returncode}"
    line = p.stdout.readline()
    res = json.loads(line)
    assert res["connected"] == n, res
    return p


def all_up(d, names):
    states = {p["name"]: p["state"] for p in d.rpc("port.list")["ports"]}
    return all(states.get(n) == "up" for n in names)


def start_all(schednicd, sngen, spawn, vufront_bin, sn_tmpdir, flows, idle_kw=None,
              busy_kw=None, probe=None, **sections):
    idle = idle_names(PORTS_MAX - len(BUSY))
    ports = [port_cfg(sn_tmpdir, n, **(busy_kw or {})) for n in BUSY] + \
        [port_cfg(sn_tmpdir, n, **(idle_kw or {})) for n in idle]
    for k, v in ports_max_config().items():
        sections.setdefault(k, {}).update(v)
    d = schednicd(ports=ports, **sections)
    many = start_many(spawn, vufront_bin, sn_tmpdir, len(idle), probe)
    g = sngen([d.vhost_path(n) for n in BUSY], *[a for f in flows for a in ("--flow", f)])
    g.wait("ready")
    wait_for(lambda: all_up(d, BUSY + idle), "every port up", timeout=30)
    return d, g, many, idle


def test_max_ports_connected_busy_pair_exact(schednicd, sngen, spawn, vufront_bin, sn_tmpdir):
    d, g, many, idle = start_all(schednicd, sngen, spawn, vufront_bin, sn_tmpdir,
                                 [f"src=0,dst=1,count={N}", f"src=1,dst=0,count={N}"])
    names = BUSY + idle
    assert len(names) == PORTS_MAX
    st = port_table(d.stats())
    assert set(st) >= set(names), sorted(set(names) - set(st))
    # learning: each busy port broadcasts once (its copies reach every port
    # or are counted where they were lost: idle rings have no buffers)
    g.go("learn")
    wait_settled(d, lambda t: all(t[x]["rx_packets"] == 1 for x in BUSY))
    t0 = port_table(d.stats())
    g.go(0)
    # every frame taken, and each either delivered or dropped at a full
    # destination ring (a frame waits in the switch's backlog first)
    t = wait_settled(d, lambda t: all(
        t[x]["rx_packets"] == 1 + N and
        t[x]["tx_packets"] + egress_drops(t[x]) - egress_drops(t0[x]) == 1 + N for x in BUSY))
    assert all_up(d, names)
    r = g.finish()
    for i, n in enumerate(BUSY):
        gp = r["ports"][i]
        assert t[n]["rx_packets"] == gp["tx_packets"], (n, t[n], gp)
        assert t[n]["tx_packets"] == gp["rx_packets"], (n, t[n], gp)
        assert t[n]["rx_bytes"] == gp["tx_bytes"] and t[n]["tx_bytes"] == gp["rx_bytes"], n
    for i, f in enumerate(r["flows"]):
        # unicast to a learned MAC: all of it at the other busy port, but
        # for what found sn-gen's RX ring full (a loaded host descheduled
        # the generator for longer than the backlog waits): counted there
        full = egress_drops(t[BUSY[1 - i]]) - egress_drops(t0[BUSY[1 - i]])
        assert f["tx"] == f["count"] == N and f["rx"] == f["rx_by_port"][1 - i], f
        assert f["rx"] + full == N and full <= N // 20, (f["rx"], full)
    for n in BUSY:
        assert drops_total(t[n]) - egress_drops(t[n]) == \
            drops_total(t0[n]) - egress_drops(t0[n]), (n, t[n]["drops"])
    for n in idle:
        # nothing posted, nothing taken; unicast phase sent them nothing
        assert t[n]["rx_packets"] == 0, (n, t[n])
        assert t[n]["tx_packets"] + egress_drops(t[n]) == t0[n]["tx_packets"] + \
            egress_drops(t0[n]), (n, t[n], t0[n])
    assert d.stats()["mac_table"]["entries"] == 2
    assert many.poll() is None


def probe(many, n=5, timeout=15.0):
    """n first-frame latencies (ms) of the probe connection of sn-vufront many."""
    out = []
    for _ in range(n):
        many.send_signal(signal.SIGUSR1)
        r, _, _ = select.select([many.stdout], [], [], timeout)
        assert r, "sn-vufront many: no probe answer"
        res = json.loads(many.stdout.readline())
        assert res["probe_ms"] is not None, res
        out.append(res["probe_ms"])
        time.sleep(0.05)      # the ring goes quiet again (1024 empty polls)
    return out


@pytest.mark.parametrize("completion,layout", [("immediate", "1core"), ("deferred", "1core"),
                                               ("immediate", "ncore")])
def test_quiet_port_not_starved(schednicd, sngen, spawn, vufront_bin, sn_tmpdir,
                                completion, layout):
    """Frames posted on a quiet port while the busy pair runs flat out."""
    busy_n = 2_000_000
    extra = {"datapath": {"layout": layout}}
    if layout == "ncore":
        extra["datapath"]["idle_sleep_us"] = 10
        extra["eal"] = {"worker_cpus": [1, 1]}
    idle = idle_names(PORTS_MAX - len(BUSY))
    quiet = idle[-1]
    d, g, many, idle = start_all(
        schednicd, sngen, spawn, vufront_bin, sn_tmpdir,
        [f"src=0,dst=1,count={busy_n}", f"src=1,dst=0,count={busy_n}"],
        idle_kw={"completion": completion}, probe=len(idle) - 1, **extra)
    g.go("learn")
    wait_settled(d, lambda t: all(t[x]["rx_packets"] == 1 for x in BUSY))
    time.sleep(0.2)       # long past the worker's quiet threshold
    at_rest = probe(many)
    th = threading.Thread(target=g.go, args=(0,), daemon=True)
    th.start()
    wait_for(lambda: port_table(d.stats())["vm0"]["rx_packets"] > 1000, "busy pair running",
             timeout=30)
    busy_rx = port_table(d.stats())["vm0"]["rx_packets"]
    busy = probe(many)
    th.join(120)
    print(f"quiet port first frame ({completion}, {layout}, {len(idle)} idle ports): "
          f"at rest {at_rest} ms, busy pair running {busy} ms "
          f"(vm0 at {busy_rx} of {busy_n + 1} frames)")
    # the busy pair was still switching when the quiet port's first
    # probe left (2 M frames per direction outlast a probe by far)
    assert busy_rx < busy_n + 1, busy_rx
    assert max(at_rest + busy) < FIRST_FRAME_MS_MAX, (at_rest, busy)
    t = wait_settled(d, lambda t: all(t[x]["rx_packets"] == 1 + busy_n for x in BUSY))
    n = len(at_rest) + len(busy)
    assert t[quiet]["rx_packets"] == n and t[quiet]["drops"]["hairpin"] == n, t[quiet]
    g.finish()
