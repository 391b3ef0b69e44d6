# SPDX-License-Identifier: BSD-3-Clause
"""Switching in hugepage mode (eal.hugepages).

The test reserves PAGES more 2 MB pages (/proc/sys/vm/nr_hugepages), mounts
a private hugetlbfs in its temp dir (these hosts have no systemd to mount
one), and runs schednicd from it with eal.huge_dir pointing there: frames
both ways between two vhost-user ports, counters exact. While it runs the
daemon holds hugepages; after it stops every page is free again and the
mount holds no file (--huge-unlink=always). Then the mount goes and
nr_hugepages is restored. A host that cannot give the pages fails the
test with the numbers: hugepage mode must work on every CI host.
"""
import os
import subprocess
import time
from pathlib import Path

import pytest

from sngen import drops_total, egress_drops, learn, port_table, wait_settled

pytestmark = pytest.mark.functional

PAGES = 64                  # 128 MB: eal.memory_mb 64 plus what the mempool grows into
MEMORY_MB = 64
N = 5000
NR = Path("/proc/sys/vm/nr_hugepages")
SIZE_DIR = Path("/sys/kernel/mm/hugepages/hugepages-2048kB")


def free_pages() -> int:
    return int((SIZE_DIR / "free_hugepages").read_text())


@pytest.fixture
def hugetlbfs(sn_tmpdir):
    """A private 2 MB hugetlbfs with PAGES more pages reserved; restored at
    teardown."""
    before = int(NR.read_text())
    free0 = free_pages()
    mnt = sn_tmpdir / "huge"
    mnt.mkdir()
    NR.write_text(str(before + PAGES))
    got = int(NR.read_text())
    mounted = False
    try:
        if got < before + PAGES:
            pytest.fail(f"the kernel gave {got - before} of {PAGES} 2 MB hugepages "
                        f"(vm.nr_hugepages {before} -> {got}): memory too fragmented or short")
        r = subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", str(mnt)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"mount -t hugetlbfs failed: {r.stderr}"
        mounted = True
        yield {"dir": mnt, "free0": free0 + PAGES}
    finally:
        if mounted and subprocess.run(["umount", str(mnt)], timeout=30).returncode:
            subprocess.run(["umount", "-l", str(mnt)], check=False, timeout=30)
        NR.write_text(str(before))


# hugetlbfs first: set up before, torn down after the daemon that maps it.
def test_switching_in_hugepage_mode_counters_exact(hugetlbfs, schednicd, sngen):
    mnt = hugetlbfs["dir"]
    assert free_pages() >= PAGES, free_pages()
    names = ["vm0", "vm1"]
    d = schednicd(ports=names, eal={"hugepages": True, "huge_dir": str(mnt),
                                    "memory_mb": MEMORY_MB})
    log = d.log_path.read_text()
    assert f"memory: {MEMORY_MB} MB of hugepages from {mnt}" in log, d.log_tail()
    assert "--no-huge" not in " ".join(Path(f"/proc/{d.proc.pid}/cmdline").read_text().split("\0"))
    used = hugetlbfs["free0"] - free_pages()
    assert used >= MEMORY_MB // 2, f"schednicd holds {used} hugepages, -m {MEMORY_MB} needs 32"
    # unlinked as soon as mapped: nothing in the mount while it runs
    assert list(mnt.iterdir()) == [], list(mnt.iterdir())

    g = sngen([d.vhost_path(n) for n in names],
              "--flow", f"src=0,dst=1,count={N}", "--flow", f"src=1,dst=0,count={N}")
    learn(d, g, names)
    g.go(0)
    wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 + N and
                                  t[n]["tx_packets"] + egress_drops(t[n]) == 1 + N for n in names))
    r = g.finish()
    t = port_table(d.stats())
    for i, n in enumerate(names):
        gp = r["ports"][i]
        assert t[n]["rx_packets"] == gp["tx_packets"] == 1 + N, (n, t[n], gp)
        assert t[n]["tx_packets"] == gp["rx_packets"], (n, t[n], gp)
        assert t[n]["rx_bytes"] == gp["tx_bytes"] and t[n]["tx_bytes"] == gp["rx_bytes"], n
        # what did not arrive is a counted egress drop (the peer's ring full)
        assert t[n]["tx_packets"] + egress_drops(t[n]) == 1 + N, t[n]
        assert drops_total(t[n]) == egress_drops(t[n]), t[n]
    for i, f in enumerate(r["flows"]):
        dst = names[1 - i]
        assert f["tx"] == N and f["rx_ooo"] == 0 and f["rx_bad"] == 0, f
        assert f["rx"] + egress_drops(t[dst]) == N, (f, t[dst])

    assert d.stop() == 0, d.log_tail()
    deadline = time.monotonic() + 10
    while free_pages() < hugetlbfs["free0"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert free_pages() >= hugetlbfs["free0"], \
        f"{hugetlbfs['free0'] - free_pages()} hugepages still held after the daemon stopped"
    assert list(mnt.iterdir()) == [], list(mnt.iterdir())
