# SPDX-License-Identifier: BSD-3-Clause
"""The Debian package, installed: every file an operator uses is where the
package says, the unit is one systemd accepts, and the installed daemon
switches frames between two peers of the installed sn-gen, every one."""
import json
import subprocess
from pathlib import Path

import pytest

from sngen import learn, port_table, wait_settled

pytestmark = [pytest.mark.package, pytest.mark.functional]

N = 1000


def run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, **kw)


def test_files_and_versions():
    v = run("/usr/sbin/schednicd", "--version")
    assert v.returncode == 0 and v.stdout.startswith("schednicd 0.1.0 (DPDK 22.11"), v
    print(v.stdout.strip())
    for tool in ("/usr/bin/schednicctl", "/usr/bin/sn-gen", "/usr/bin/schednic-exporter",
                 "/usr/bin/schednic-libvirt"):
        r = run(tool, "--help")
        assert r.returncode == 0 and "usage" in (r.stdout + r.stderr).lower(), (tool, r)
    for page in ("schednicd", "schednicctl", "sn-gen", "schednic-exporter", "schednic-libvirt"):
        assert run("man", "-w", page).returncode == 0, page
    # the conffile is the embedded default, and it passes its own checks
    # but for the host's (net_tap needs no device)
    conf = json.loads(Path("/etc/schednic/schednicd.json").read_text())
    dflt = json.loads(run("/usr/sbin/schednicd", "--print-default-config").stdout)
    assert conf == dflt
    hook = Path("/usr/share/schednic/libvirt/qemu-hook")
    assert hook.stat().st_mode & 0o111, oct(hook.stat().st_mode)
    unit = Path("/lib/systemd/system/schednicd.service")
    assert "ExecStart=/usr/sbin/schednicd --config /etc/schednic/schednicd.json" in unit.read_text()
    r = run("systemd-analyze", "verify", unit)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r


def test_installed_daemon_switches(schednicd, sngen, sn_tmpdir):
    names = ["vm0", "vm1"]
    d = schednicd(ports=names, uplink="net_null0,no-rx=1")
    g = sngen([d.vhost_path(n) for n in names], "--flow", f"src=0,dst=1,count={N}")
    learn(d, g, names)
    g.go(0)
    wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 + N)
    r = g.finish()
    t = port_table(d.stats())
    print(f"installed schednicd: vm0 rx {t['vm0']['rx_packets']}, vm1 tx {t['vm1']['tx_packets']}, "
          f"sn-gen vm1 rx {r['ports'][1]['rx_packets']}")
    assert t["vm1"]["tx_packets"] >= N and r["ports"][1]["rx_packets"] >= N, (t, r)
    f = r["flows"][0]
    assert f["tx"] == f["rx"] == N and f["rx_ooo"] == 0 and f["rx_bad"] == 0, f
    ctl = run("/usr/bin/schednicctl", "-s", d.socket, "version")
    assert ctl.returncode == 0 and "0.1.0" in ctl.stdout, ctl
    assert d.stop() == 0
