# SPDX-License-Identifier: BSD-3-Clause
"""schednicd start/stop: clean exit 0 on SIGTERM, SIGINT and the "shutdown"
RPC, with every socket and the DPDK runtime directory removed; socket
parent directories created 0700; a stale server socket replaced."""
import os
import signal
import socket
import stat
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.functional


def runtime_dir(prefix):
    return Path("/var/run/dpdk") / prefix


def wait_exit(d, timeout=20.0):
    try:
        return d.proc.wait(timeout)
    except Exception:
        pytest.fail(f"schednicd did not exit in {timeout}s:\n{d.log_tail()}")


def nested_ports(tmp):
    base = tmp / "run" / "vhost"
    return [{"name": n, "type": "vhost-user", "path": str(base / f"{n}.sock"), "mode": "server"}
            for n in ("vm0", "vm1")]


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "shutdown"])
def test_clean_stop(schednicd, sn_tmpdir, how):
    ports = nested_ports(sn_tmpdir)
    d = schednicd(ports=ports)
    paths = [Path(p["path"]) for p in ports]
    for p in paths:
        assert stat.S_ISSOCK(p.stat().st_mode), p
    assert stat.S_IMODE(paths[0].parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(d.socket).stat().st_mode) == 0o600
    assert runtime_dir(d.prefix).is_dir()
    assert [p["name"] for p in d.rpc("port.list")["ports"]] == ["vm0", "vm1"]

    if how == "shutdown":
        assert d.rpc("shutdown") == {}
    else:
        d.proc.send_signal(getattr(signal, how))
    assert wait_exit(d) == 0, d.log_tail()
    for p in paths:
        assert not p.exists(), f"{p} left behind"
    assert not Path(d.socket).exists()
    assert not runtime_dir(d.prefix).exists(), f"{runtime_dir(d.prefix)} left behind"
    log = d.log_path.read_text()
    assert "port vm0: deleted" in log and "stopped (exit 0)" in log


def test_stale_server_socket_replaced(schednicd, sn_tmpdir):
    stale = sn_tmpdir / "vm0.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()          # bound, never listening: a dead process's socket
    assert stale.exists()
    d = schednicd(ports=["vm0"])
    assert d.rpc("port.list")["ports"][0]["state"] == "down"
    assert "stale socket" in d.log_path.read_text()


def test_auto_file_prefix(schednicd):
    d = schednicd(ports=[], eal={"file_prefix": "auto"}, start=False)
    d.start()
    pid = d.proc.pid
    d.prefix = f"schednic-{pid}"   # what teardown removes if the test fails
    assert runtime_dir(f"schednic-{pid}").is_dir()
    d.proc.send_signal(signal.SIGTERM)
    assert wait_exit(d) == 0
    assert not runtime_dir(f"schednic-{pid}").exists()


def test_port_add_del_runtime(schednicd, sn_tmpdir):
    d = schednicd(ports=["vm0"])
    path = sn_tmpdir / "new" / "vm9.sock"
    assert d.rpc("port.add", {"name": "vm9", "path": str(path)}) == {"name": "vm9"}
    assert path.exists()
    names = {p["name"]: p for p in d.rpc("port.list")["ports"]}
    assert names["vm9"]["mode"] == "server" and names["vm9"]["state"] == "down"
    assert d.rpc("port.del", {"name": "vm9"}) == {}
    assert not path.exists()
    # Re-adding the same name and path works after a delete (slot reuse).
    for _ in range(3):
        d.rpc("port.add", {"name": "vm9", "path": str(path), "mode": "server"})
        d.rpc("port.del", {"name": "vm9"})
    assert [p["name"] for p in d.rpc("port.list")["ports"]] == ["vm0"]
    assert d.alive()


def test_startup_failure_cleans_up(schednicd, sn_tmpdir):
    bad = {"name": "vm0", "type": "vhost-user", "path": "/proc/sn-nonexistent/vm0.sock",
           "mode": "server"}
    d = schednicd(ports=[bad], start=False)
    with pytest.raises(RuntimeError, match="exited with 1"):
        d.start(timeout=30)
    log = d.log_path.read_text()
    assert "config: ports[0] (vm0, /proc/sn-nonexistent/vm0.sock)" in log
    assert "stopped (exit 1)" in log
    assert not Path(d.socket).exists()
    assert not runtime_dir(d.prefix).exists()


def test_port_add_resource_error(schednicd):
    d = schednicd(ports=[])
    from snlib.rpc import RpcError
    with pytest.raises(RpcError) as e:
        d.rpc("port.add", {"name": "vm0", "path": "/proc/sn-nonexistent/vm0.sock"})
    assert e.value.code == -32002
    assert "vm0" in e.value.message
    assert d.rpc("port.list")["ports"] == []
    assert d.alive()


@pytest.mark.parametrize("sections,expect", [
    ({"eal": {"extra_args": ["--sn-no-such-eal-flag"]}}, "EAL init failed"),
    ({"eal": {"memory_mb": 64}, "datapath": {"mbufs": 1 << 20}}, "mempool of 1048576 mbufs"),
    ({"uplink": "net_sn_no_such_driver0"}, "EAL init failed"),   # factory: uplink=devargs
], ids=["bad-eal-arg", "mempool-too-big", "bad-uplink-driver"])
def test_startup_errors_exit_1_and_clean(schednicd, sections, expect):
    d = schednicd(ports=["vm0"], start=False, **sections)
    with pytest.raises(RuntimeError, match="exited with 1"):
        d.start(timeout=60)
    log = d.log_path.read_text()
    assert expect in log, log[-2000:]
    assert not Path(d.socket).exists()
    assert not runtime_dir(d.prefix).exists(), "DPDK runtime dir left behind"


def test_port_limit_64(schednicd, sn_tmpdir):
    from snlib.rpc import RpcError
    d = schednicd(ports=[])
    with d.client() as c:
        for i in range(64):
            assert c.call("port.add", {"name": f"p{i}", "path": str(sn_tmpdir / f"p{i}.sock")})
        with pytest.raises(RpcError) as e:
            c.call("port.add", {"name": "p64", "path": str(sn_tmpdir / "p64.sock")})
        assert e.value.code == -32002 and "limit" in e.value.message
        assert len(c.call("port.list")["ports"]) == 64
        assert c.call("port.del", {"name": "p7"}) == {}
        assert c.call("port.add", {"name": "p64", "path": str(sn_tmpdir / "p64.sock")})
    assert not (sn_tmpdir / "p7.sock").exists()
    assert d.stop() == 0
    assert not any(sn_tmpdir.glob("p*.sock")), "vhost sockets left after stop"
