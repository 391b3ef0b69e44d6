# SPDX-License-Identifier: BSD-3-Clause
"""sn-gen bench mode (scripts/bench/datapath.py's generator) against
deferred ports:
--marker in bench mode writes the opt-in marker as each frame is built
(no TX callback) -- every frame the daemon pops must still carry it, the
learn frame sent through the callback included; --tx-free-thresh sets the
virtio PMD's TX reclaim threshold (same frames, same counters) and is
refused when the PMD would reject it; --hdr-write stores num_buffers
in every frame (datapath.py's default for every run): the marker with
--marker, else 0 (the frames stay unmarked)."""
import json
import os
import subprocess

import pytest

from sngen import port_table

pytestmark = pytest.mark.perf


def dport(d, name):
    return {"name": name, "type": "vhost-user", "path": str(d / f"{name}.sock"),
            "mode": "server", "completion": "deferred"}


def run_bench(spawn, sn_gen_bin, d, extra, tag):
    prefix = f"sn-g-D2-{os.getpid()}-{tag}"
    p = spawn([sn_gen_bin, "bench", "--cpu", "0", "--file-prefix", prefix, "--log-level",
               "warning", "--settle", "0", "--duration", "1", "--warmup", "0.3",
               "--port", d.vhost_path("vm0"), "--port", d.vhost_path("vm1"), *extra],
              name=f"sn-gen-{tag}", dpdk_prefix=prefix, stdout=subprocess.PIPE)
    out, _ = p.communicate(timeout=120)
    return p.returncode, out


@pytest.mark.parametrize("extra", [["--marker"], ["--marker", "--tx-free-thresh", "960"], [],
                                   ["--marker", "--hdr-write"], ["--hdr-write"]],
                         ids=["marker", "marker-txfree", "unmarked", "marker-hdr-write",
                              "hdr-write"])
def test_bench_marks_every_frame(schednicd, spawn, sn_gen_bin, sn_tmpdir, extra):
    d = schednicd(ports=[dport(sn_tmpdir, "vm0"), dport(sn_tmpdir, "vm1")])
    rc, out = run_bench(spawn, sn_gen_bin, d, extra, "b")
    assert rc == 0, out
    res = json.loads(out)
    assert res["ok"] and res["completed"], res
    sent = res["ports"][0]["tx_packets"]
    assert res["bench"]["rx_packets"] > 0 and sent > 1000, res["bench"]
    c = port_table(d.stats())["vm0"]["completion"]
    print(extra, c)
    # frames still posted in the TX ring when sn-gen exits are never popped
    assert 1000 < c["popped"] <= sent, (c, sent)     # learn frame + bench frames
    if "--marker" in extra:
        assert c["marked"] == c["popped"] and c["unmarked"] == 0, c
    else:
        assert c["marked"] == 0 and c["unmarked"] == c["popped"], c
    # the header store happens for every frame the loop built (all
    # sent ones but the learn frame), and only with --hdr-write / --marker:
    # a store of 0 is not visible to the daemon, so this is its check.
    stores = res["bench"]["hdr_stores"]
    if "--hdr-write" in extra or "--marker" in extra:
        assert stores >= sent - 1, (stores, sent)
    else:
        assert stores == 0, stores


def test_hdr_write_is_bench_only(spawn, sn_gen_bin):
    p = spawn([sn_gen_bin, "count", "--hdr-write", "--port", "/nonexistent.sock",
               "--port", "/nonexistent2.sock"], name="sn-gen-hw", stdout=subprocess.PIPE,
              stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 2 and b"bench mode option" in err, (p.returncode, err)


def test_tx_free_thresh_refused(schednicd, spawn, sn_gen_bin, sn_tmpdir):
    d = schednicd(ports=[dport(sn_tmpdir, "vm0"), dport(sn_tmpdir, "vm1")])
    rc, out = run_bench(spawn, sn_gen_bin, d, ["--queue-size", "256", "--tx-free-thresh", "253"],
                        "r")
    assert rc != 0
