# SPDX-License-Identifier: BSD-3-Clause
"""Every malformed-ring case against the running daemon (untrusted guest
input, written by the test-only malformed-ring writer).

sn-vufront (backend/tools/sn_vufront.c) is the guest: a vhost-user
front-end that connects to a deferred-completion server port "w", shares two
memfd regions (contiguous in guest-physical space, mapped separately) and
posts crafted chains on its TX ring, each malformed scenario followed by a
well-formed frame on the same ring. A normal sn-gen peer forwards vm1 -> vm2
through the same daemon meanwhile. For every cause the tests check:
- the daemon is alive and answers RPC;
- vring_errors.<cause> moved by exactly the expected amount, every other
  cause by 0;
- chain-level errors were completed (used entry, length 0), ring-level ones
  (head_oob, head_busy, avail_jump) were skipped: nothing to complete;
- nothing stays held (held_now 0, the used index at device stop equals the
  entries seen) and the well-formed frame after the bad one was popped;
- vm1 -> vm2 keeps forwarding (exact counters).
Counters are polled until they settle; nothing depends on speed.
"""
import json
import os
import signal
import subprocess
import time

import pytest

from snlib.wait import wait_for
from sngen import peer_mac, port_table, wait_settled

pytestmark = pytest.mark.functional

FWD = 50                  # frames vm1 -> vm2 per forwarding check
SINK_MAC_BASE = 8

# cause, frames of that cause, chain-level (completed with length 0),
# well-formed frames the scenario also posts on the same ring.
CASES = [
    ("desc_oob", 1, True, 1),
    ("loop", 1, True, 1),
    ("chain_too_long", 1, True, 1),
    ("too_many_segs", 1, True, 1),
    ("addr_oob", 1, True, 1),
    ("cross_region", 1, True, 1),
    ("zero_len", 1, True, 1),
    ("oversized", 1, True, 1),
    ("too_short", 1, True, 1),
    # length % 16, longer than the queue, nested, with NEXT, outside
    # memory, length 0; then a good indirect and a good direct chain
    ("bad_indirect", 6, True, 2),
    ("write_only", 1, True, 1),
    ("head_oob", 1, False, 1),
    ("head_busy", 1, False, 1),
]
REWRITE_CAUSES = {"zero_len", "addr_oob", "loop"}



def dport(d, name, **kw):
    p = {"name": name, "type": "vhost-user", "path": str(d / f"{name}.sock"), "mode": "server"}
    p.update(kw)
    return p


def comp(d, name="w"):
    return port_table(d.stats())[name]["completion"]

def writer(vufront_bin, d, scenario, *args, timeout=60):
    """Run one sn-vufront scenario to its end; returns its JSON line."""
    r = subprocess.run([str(vufront_bin), "--socket", d.vhost_path("w"), "--scenario", scenario,
                        "--timeout", "30", *map(str, args)],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (scenario, r.returncode, r.stdout, r.stderr, d.log_tail())
    return json.loads(r.stdout)


def settled_comp(d, pred, what):
    """Poll until pred(completion counters of w) holds and they stop moving."""
    deadline = time.monotonic() + 30
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        c = comp(d)
        # held_occupancy accumulates time while the ring is live: not a counter that settles
        key = json.dumps({k: v for k, v in c.items() if k != "held_occupancy"}, sort_keys=True)
        if key != last:
            last, since = key, time.monotonic()
        elif pred(c) and time.monotonic() - since >= 0.3:
            return c
        time.sleep(0.05)
    raise TimeoutError(f"w counters: {what}: {last}\n{d.log_tail()}")


def alive(d):
    assert d.alive(), d.log_tail()
    assert d.rpc("version"), d.log_tail()     # raises if it does not answer


def rig(schednicd, sngen, sn_tmpdir, nphases, completion="deferred"):
    """Daemon with the writer's port w (deferred unless told) and two normal
    ports whose sn-gen forwards FWD frames vm1 -> vm2 per phase
    (0..nphases-1)."""
    d = schednicd(ports=[dport(sn_tmpdir, "w", completion=completion),
                         dport(sn_tmpdir, "vm1"), dport(sn_tmpdir, "vm2")])
    flows = []
    for k in range(nphases):
        flows += ["--flow", f"src=0,dst=1,count={FWD},phase={k}"]
    g = sngen([d.vhost_path("vm1"), d.vhost_path("vm2")], *flows)
    g.wait("ready")
    for n in ("vm1", "vm2"):
        d.wait_port_state(n, "up")
    g.go("learn")
    wait_settled(d, lambda t: t["vm1"]["rx_packets"] == 1 and t["vm2"]["rx_packets"] == 1)
    return d, g


def forwards(d, g, phase):
    """The other ports keep forwarding: phase's FWD frames arrive at vm2."""
    t0 = port_table(d.stats())
    g.go(phase)
    t = wait_settled(d, lambda t: t["vm1"]["rx_packets"] == t0["vm1"]["rx_packets"] + FWD
                     and t["vm2"]["tx_packets"] == t0["vm2"]["tx_packets"] + FWD)
    assert t["vm2"]["drops"] == t0["vm2"]["drops"], t["vm2"]


def check_writer(r, completes, skipped):
    """What the guest saw: every completing chain came back once, with
    length 0 (bad ones: spec; good TX ones: nothing written), nothing more
    at device stop, and the avail index taken past every posted head."""
    assert r["ok"] and not r["timeout"], r
    assert r["used_total"] == r["expect_used"] == completes, r
    assert all(u["len"] == 0 for u in r["used"]), r
    assert set(r["bad_heads"]) <= {u["id"] for u in r["used"]}, r
    assert r["stop"]["used_idx"] == completes, r
    assert r["stop"]["tx_base"] == completes + skipped, r


def test_every_malformed_case(schednicd, sngen, sn_tmpdir, vufront_bin):
    d, g = rig(schednicd, sngen, sn_tmpdir, len(CASES) + 1)
    failures = []
    for k, (cause, n, chain_level, good) in enumerate(CASES):
        try:
            c0 = comp(d)
            r = writer(vufront_bin, d, cause)
            completes = good + (n if chain_level else 0)
            check_writer(r, completes, 0 if chain_level else n)
            want = dict(c0["vring_errors"])
            want[cause] += n
            c = settled_comp(d, lambda c: c["vring_errors"] == want, f"{cause} +{n}")
            assert c["popped"] - c0["popped"] == good, (cause, c0, c)
            assert c["completed"] - c0["completed"] == completes, (cause, c0, c)
            assert c["held_now"] == 0 and c["forced"] == c0["forced"], (cause, c)
            alive(d)
            forwards(d, g, k)
        except (AssertionError, TimeoutError) as e:
            failures.append(f"{cause}: {e}")
    assert not failures, "\n".join(failures)
    # the same port, a new connection, still serves well-formed traffic
    c0 = comp(d)
    r = writer(vufront_bin, d, "good", "--count", 100)
    check_writer(r, 100, 0)
    c = settled_comp(d, lambda c: c["popped"] == c0["popped"] + 100, "good after all")
    assert c["vring_errors"] == c0["vring_errors"], c
    forwards(d, g, len(CASES))
    alive(d)


def test_avail_jump_stops_queue_until_reconnect(schednicd, sngen, sn_tmpdir, vufront_bin,
                                                spawn):
    """avail->idx moved by more than the queue size: the ring cannot be
    interpreted. The daemon counts it once, stops reading that TX queue
    (the avail index it reports at stop stays where the jump began), keeps
    the port and every other port running, and a reconnect (new rings)
    recovers."""
    d, g = rig(schednicd, sngen, sn_tmpdir, 2)
    go = sn_tmpdir / "jump-stop"
    c0 = comp(d)
    p = spawn([vufront_bin, "--socket", d.vhost_path("w"), "--scenario", "avail_jump",
               "--timeout", "30", "--wait-file", go], name="vufront", stdout=subprocess.PIPE)
    # counted while the guest is still connected (sn_vqtx_recv)
    c = settled_comp(d, lambda c: c["vring_errors"]["avail_jump"] == 1, "avail_jump counted")
    assert c["popped"] == c0["popped"] + 1 and c["held_now"] == 0, c
    assert {k: v for k, v in c["vring_errors"].items() if v} == {"avail_jump": 1}, c
    alive(d)
    forwards(d, g, 0)
    assert comp(d)["vring_errors"]["avail_jump"] == 1      # counted once, not per poll
    go.touch()
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, (out, d.log_tail())
    r = json.loads(out)
    # after the file, the guest put avail->idx back (one more good chain) and
    # watched 1 s: the stopped queue took nothing
    assert r["used_total"] == 1 and r["stop"]["used_idx"] == 1, r
    assert r["stop"]["tx_base"] == 1, r      # nothing taken past the jump
    c = comp(d)
    assert c["popped"] == c0["popped"] + 1 and c["vring_errors"]["avail_jump"] == 1, c
    # reconnect: fresh rings, the queue works again
    r = writer(vufront_bin, d, "good", "--count", 20)
    check_writer(r, 20, 0)
    c = settled_comp(d, lambda c: c["popped"] == c0["popped"] + 21, "good after reconnect")
    assert c["vring_errors"]["avail_jump"] == 1 and c["held_now"] == 0, c
    forwards(d, g, 1)
    alive(d)


def test_rewrite_after_post(schednicd, sngen, sn_tmpdir, vufront_bin):
    """The guest rewrites a posted descriptor while the daemon may be
    reading it (length 0, address outside memory, a loop back to the head,
    the original again, round and round until it is completed). The daemon
    copies each descriptor once before checking it, so every round ends as
    either a good frame or one chain-level error among those the rewrites
    can produce; each chain is completed exactly once; nothing else."""
    rounds = 200
    d, g = rig(schednicd, sngen, sn_tmpdir, 1)
    c0 = comp(d)
    r = writer(vufront_bin, d, "rewrite", "--count", rounds)
    check_writer(r, rounds, 0)
    c = settled_comp(d, lambda c: c["completed"] == c0["completed"] + rounds, "rewrite rounds")
    errs = {k: v - c0["vring_errors"][k] for k, v in c["vring_errors"].items()}
    bad = sum(errs[k] for k in REWRITE_CAUSES)
    assert c["popped"] - c0["popped"] + bad == rounds, (c0, c)
    assert all(v == 0 for k, v in errs.items() if k not in REWRITE_CAUSES), errs
    assert c["held_now"] == 0, c
    print(f"rewrite: {rounds} rounds -> {c['popped'] - c0['popped']} good, "
          f"{ {k: errs[k] for k in sorted(REWRITE_CAUSES)} }")
    alive(d)
    forwards(d, g, 0)


def test_disconnect_with_held_descriptors(schednicd, sngen, sn_tmpdir, vufront_bin, spawn):
    """The writer sends to a paused sink (small RX ring) so the daemon holds
    its descriptors, then dies without GET_VRING_BASE. Everything held is
    drop-completed at device stop (forced), held_now returns to 0, mempool
    in_use to its baseline, and a reconnected writer works."""
    n = 120
    # sn-vufront writes no opt-in marker: without a long
    # unmarked_max_hold_us its frames would be dropped after 1 ms instead
    # of staying held until the disconnect.
    d = schednicd(ports=[dport(sn_tmpdir, "w", completion="deferred",
                               unmarked_max_hold_us=10_000_000), dport(sn_tmpdir, "vm1")])
    sink = sngen([d.vhost_path("vm1")], "--flow", "src=0,dst=02:99:00:00:00:09,count=0",
                 "--queue-size", "64", mac_base=SINK_MAC_BASE)
    sink.wait("ready")
    d.wait_port_state("vm1", "up")
    sink.go("learn")
    wait_settled(d, lambda t: t["vm1"]["rx_packets"] == 1)
    base = d.stats()["mempool"]["in_use"]
    c0 = comp(d)
    os.kill(sink.proc.pid, signal.SIGSTOP)
    try:
        p = spawn([vufront_bin, "--socket", d.vhost_path("w"), "--scenario", "hold",
                   "--count", n, "--dst", peer_mac(SINK_MAC_BASE), "--timeout", "60",
                   "--wait-file", sn_tmpdir / "never", "--no-stop"],
                  name="vufront", stdout=subprocess.PIPE)
        c = settled_comp(d, lambda c: c["popped"] == c0["popped"] + n and c["held_now"] > 0,
                         "writer's frames popped and held")
        held = c["held_now"]
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        d.wait_port_state("w", "down")
        c = settled_comp(d, lambda c: c["held_now"] == 0, "held drained at disconnect")
    finally:
        os.kill(sink.proc.pid, signal.SIGCONT)
    assert c["completed"] - c0["completed"] == n, (c0, c)
    assert 0 < c["forced"] - c0["forced"] <= held, (c0, c, held)
    assert not any(c["vring_errors"].values()), c
    wait_for(lambda: d.stats()["mempool"]["in_use"] <= base, "mempool back at baseline", d=d)
    r = writer(vufront_bin, d, "good", "--count", 20)
    check_writer(r, 20, 0)
    alive(d)


def test_immediate_port_survives_every_case(schednicd, sngen, sn_tmpdir, vufront_bin):
    """On an "immediate" port the TX ring is DPDK's (rte_vhost_dequeue_burst),
    not sn_vring: there is no per-cause counter and DPDK does not complete
    a bad chain (for some causes it stops taking from that queue until the
    guest resets it). What schednicd must still guarantee: it survives
    every scenario, answers RPC, and the other ports keep forwarding."""
    d, g = rig(schednicd, sngen, sn_tmpdir, 1, completion="immediate")
    seen = {}
    for cause in [c[0] for c in CASES] + ["avail_jump", "rewrite", "good"]:
        r = subprocess.run([str(vufront_bin), "--socket", d.vhost_path("w"), "--scenario", cause,
                            "--timeout", "1"], capture_output=True, text=True, timeout=60)
        # 0: all came back, 1: DPDK did not complete (stalled queue); 3 would
        # be a protocol failure (daemon gone or hung)
        assert r.returncode in (0, 1), (cause, r.returncode, r.stderr, d.log_tail())
        seen[cause] = json.loads(r.stdout)["used_total"]
        alive(d)
    print("immediate port, used entries seen per scenario:", seen)
    assert seen["good"] == 8, seen
    forwards(d, g, 0)


HOTPLUG_N = 40   # frames per phase: region 1, the hot-added region 2, region 1


@pytest.mark.parametrize("completion", ["deferred", "immediate"])
def test_memory_hotplug_while_running(schednicd, sngen, sn_tmpdir, vufront_bin, spawn,
                                     completion):
    """The guest's memory table changes while the device runs (a
    SET_MEM_TABLE that adds a region, as QEMU sends after a DIMM hotplug:
    DPDK's library unmaps every region it had and maps the new table,
    without telling the application). A deferred port's TX ring and frames
    are on the daemon's own mapping of the region files, and its TX queue
    takes the new table (mem_remaps): frames whose buffers lie in the new
    region are switched like the others (not dropped as addr_oob, and no
    crash when the library's remap moves the mapping). Immediate ports stay
    inside the library. Every frame of the three phases reaches both other
    ports, nothing is held, no ring error, and the daemon keeps forwarding.
    The same table sent again (unchanged, as QEMU may) is no remap."""
    d, g = rig(schednicd, sngen, sn_tmpdir, 1, completion=completion)
    t0 = port_table(d.stats())
    go = sn_tmpdir / "hotplug-stop"
    p = spawn([vufront_bin, "--socket", d.vhost_path("w"), "--scenario", "hotplug",
               "--count", HOTPLUG_N, "--timeout", "30", "--wait-file", go],
              name="vufront", stdout=subprocess.PIPE)
    n = 3 * HOTPLUG_N
    # still connected: every frame through, the old table's mapping gone
    t = wait_settled(d, lambda t: t["w"]["rx_packets"] == t0["w"]["rx_packets"] + n
                     and t["vm1"]["tx_packets"] == t0["vm1"]["tx_packets"] + n
                     and t["vm2"]["tx_packets"] == t0["vm2"]["tx_packets"] + n)
    c = t["w"]["completion"]
    assert all(v == 0 for v in c["vring_errors"].values()), c["vring_errors"]
    assert t["w"]["drops"] == t0["w"]["drops"], t["w"]["drops"]
    if completion == "deferred":
        assert c["popped"] == n and c["held_now"] == 0, c
        # one TX queue took one new table; the unchanged resend was no remap
        assert c["mem_remaps"] == 1, c
        # the replaced table's mapping was unmapped once its frames were freed
        assert c["mem_maps"] == 1, c
        assert c["extbuf_in_use"] == 0 and c["forced"] == 0, c
    else:
        assert c["mem_remaps"] == 0 and c["mem_maps"] == 0 and c["popped"] == 0, c
    go.touch()
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, (out, d.log_tail())
    check_writer(json.loads(out), n, 0)
    alive(d)
    assert comp(d)["mem_maps"] == 0          # device stop: every mapping unmapped
    forwards(d, g, 0)
    alive(d)
