# SPDX-License-Identifier: BSD-3-Clause
"""scripts/schednicctl: output, exit codes, --json, --watch (against the
harness for speed; test_ctl_api.py runs every subcommand on schednicd)."""
import json
import os
import subprocess
import time

import pytest

from ctlutil import CTL, run_ctl

pytestmark = pytest.mark.functional


def test_exit_codes_and_messages(harness, sn_tmpdir):
    h = harness()
    r = run_ctl(h.socket, "version")
    assert r.returncode == 0 and r.stdout.startswith("schednicd 0.1.0")
    r = run_ctl(h.socket, "port-del", "ghost")
    assert r.returncode == 1 and "-32001" in r.stderr and "ghost" in r.stderr
    r = run_ctl(h.socket, "--json", "stats", "ghost")
    assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == -32001
    r = run_ctl(h.socket, "port-add", "vm0")  # PATH missing
    assert r.returncode == 2
    r = run_ctl(h.socket, "port-add", "vm0", "/tmp/x.sock", "--mode", "sideways")
    assert r.returncode == 2
    r = run_ctl(h.socket, "frobnicate")
    assert r.returncode == 2
    r = run_ctl(h.socket)
    assert r.returncode == 2
    r = run_ctl(h.socket, "stats", "--count", "2")
    assert r.returncode == 2
    r = run_ctl(sn_tmpdir / "nobody.sock", "version")
    assert r.returncode == 3 and "is schednicd running" in r.stderr
    assert "Traceback" not in r.stderr


def test_busy_daemon_retried_then_reported(harness):
    """A connection refused at max_clients (-32002, nothing run) is retried
    for ~3 s, then reported: not a failure at once (exit 1), nor exit 3
    'Broken pipe' when the refusal races the send."""
    import socket
    import threading
    h = harness(max_clients=1)
    held = socket.socket(socket.AF_UNIX)
    held.connect(h.socket)
    time.sleep(0.2)
    threading.Timer(0.7, held.close).start()
    t0 = time.monotonic()
    r = run_ctl(h.socket, "port-add", "b0", "/tmp/sn-busy/b0.sock")
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert time.monotonic() - t0 >= 0.5
    assert [p["name"] for p in h.rpc("port.list")["ports"]] == ["b0"]  # added once
    held = socket.socket(socket.AF_UNIX)
    held.connect(h.socket)
    time.sleep(0.2)
    r = run_ctl(h.socket, "version")
    held.close()
    assert r.returncode == 1 and "too many clients" in r.stderr and "gave up" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_policy_set_bad_files(harness, sn_tmpdir):
    """A non-UTF-8 file, one that is not JSON, a directory and a missing
    file: each a usage error (exit 2) with a message, not a traceback."""
    h = harness()
    binary = sn_tmpdir / "bin.json"
    binary.write_bytes(b"\xff\xfe{}")
    bad = sn_tmpdir / "bad.json"
    bad.write_text("{bad")
    for f, word in ((binary, "not UTF-8"), (bad, "not JSON"), (sn_tmpdir, "Is a directory"),
                    (sn_tmpdir / "none.json", "No such file")):
        r = run_ctl(h.socket, "policy-set", f)
        assert r.returncode == 2 and word in r.stderr, (f, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr


def test_socket_from_environment(harness):
    h = harness()
    env = dict(os.environ, SCHEDNIC_SOCKET=h.socket)
    r = run_ctl(h.socket, "version", env=env)
    assert r.returncode == 0
    r = subprocess.run([str(CTL), "--json", "version"], capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode == 0 and json.loads(r.stdout)["api"] == 1


def test_tables(harness, sn_tmpdir):
    h = harness()
    assert run_ctl(h.socket, "port-list").stdout.strip() == "no ports"
    for name, mode in (("vm0", "server"), ("vm1", "client")):
        r = run_ctl(h.socket, "port-add", name, str(sn_tmpdir / f"{name}.sock"), "--mode", mode)
        assert r.returncode == 0 and name in r.stdout
    lines = run_ctl(h.socket, "port-list").stdout.splitlines()
    assert lines[0].split() == ["NAME", "TYPE", "MODE", "STATE", "OWNER", "COMPLETION", "WORKERS",
                                "PATH"]
    assert lines[2].split() == ["vm1", "vhost-user", "client", "down", "rpc", "immediate", "-",
                                str(sn_tmpdir / "vm1.sock")]
    assert json.loads(run_ctl(h.socket, "--json", "port-list").stdout) == h.rpc("port.list")
    out = run_ctl(h.socket, "stats").stdout.splitlines()
    assert out[0].split()[:8] == ["NAME", "TYPE", "STATE", "RX_PKTS", "RX_BYTES", "TX_PKTS",
                                  "TX_BYTES", "DROPS"]
    assert out[1].split() == ["vm0", "vhost-user", "down", "0", "0", "0", "0", "0"]
    assert "mempool: 0/8191" in out[-1]
    one = json.loads(run_ctl(h.socket, "--json", "stats", "vm1").stdout)
    assert [p["name"] for p in one["ports"]] == ["vm1"]
    assert run_ctl(h.socket, "port-del", "vm0").returncode == 0
    r = subprocess.run([str(CTL), "-s", h.socket, "port-add", "rel", "rel.sock"],
                       cwd=sn_tmpdir, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert {p["name"]: p["path"] for p in h.rpc("port.list")["ports"]}["rel"] == \
        str(sn_tmpdir / "rel.sock")
    assert run_ctl(h.socket, "shutdown").returncode == 0
    h.proc.wait(10)


def test_stats_watch(harness, sn_tmpdir):
    h = harness()
    run_ctl(h.socket, "port-add", "w0", str(sn_tmpdir / "w0.sock"))
    t0 = time.monotonic()
    r = run_ctl(h.socket, "stats", "--watch", "0.3", "--count", "3")
    assert r.returncode == 0
    assert r.stdout.count("schednicctl stats") == 3
    assert "RX_PPS" in r.stdout  # rates appear from the second refresh
    assert time.monotonic() - t0 >= 0.6
    r = run_ctl(h.socket, "--json", "stats", "--watch", "0.1", "--count", "2")
    assert [json.loads(line)["ports"][0]["name"] for line in r.stdout.splitlines()] == ["w0", "w0"]
    assert h.stop() == 0
    r = run_ctl(h.socket, "stats", "--watch", "0.1")
    assert r.returncode == 3
