# SPDX-License-Identifier: BSD-3-Clause
"""Pre-start host checks of schednicd (app/sn_eal.c) through the binary.

A PCI uplink naming a device that does not exist, one bound to a kernel
driver or used as a kernel interface, one under vfio-pci without an IOMMU
group, an AF_XDP interface that does not exist, and hugepage mode without
a hugetlbfs mount or free pages: each is refused by --check-config and by
a start, exit status 1, with the message that says how to fix it, before
the EAL starts (no DPDK runtime directory is created). The checks read a
fake sysfs/procfs tree in a temp dir (the SN_HOST_ROOT test hook): no
test touches a real PCI device, and the addresses used are asserted absent
from this host's real /sys.
"""
import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.functional

BDF = "0000:7e:1f.6"          # asserted absent from the real host
DEV = f"sys/bus/pci/devices/{BDF}"
_seq = itertools.count()


@pytest.fixture
def fake_root(tmp_path):
    root = tmp_path / "host"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "mounts").write_text("proc /proc proc rw 0 0\n")
    (root / "proc" / "meminfo").write_text("Hugepagesize:       2048 kB\n")
    for drv in ("ixgbe", "vfio-pci", "uio_pci_generic"):
        (root / "sys" / "bus" / "pci" / "drivers" / drv).mkdir(parents=True)
    (root / "sys" / "kernel" / "iommu_groups" / "12").mkdir(parents=True)
    assert not Path("/sys/bus/pci/devices", BDF).exists(), f"{BDF} exists on this host"
    return root


def bind(root: Path, driver: str, ifname=None, iommu=False):
    dev = root / DEV
    dev.mkdir(parents=True, exist_ok=True)
    link = dev / "driver"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(f"../../../../bus/pci/drivers/{driver}")
    if ifname:
        (dev / "net" / ifname).mkdir(parents=True)
    if iommu:
        (dev / "iommu_group").symlink_to("../../../../kernel/iommu_groups/12")


def run(binary, tmp_path, root, cfg, check=True):
    prefix = f"sn-chk-{os.getpid()}-{next(_seq)}"
    full = {"eal": {"file_prefix": prefix, "memory_mb": 64},
            "control": {"socket": str(tmp_path / "ctl.sock"), "state_dir": ""},
            "datapath": {"mbufs": 1023, "mbuf_cache": 32}, "ports": []}
    for k, v in cfg.items():
        full[k] = {**full[k], **v} if isinstance(full.get(k), dict) and isinstance(v, dict) else v
    f = tmp_path / "cfg.json"
    f.write_text(json.dumps(full))
    argv = [str(binary), "--config", str(f)] + (["--check-config"] if check else [])
    env = {**os.environ, "SN_HOST_ROOT": str(root)}
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env,
                           stdin=subprocess.DEVNULL)
        created = Path("/var/run/dpdk", prefix).exists()
    finally:
        shutil.rmtree(Path("/var/run/dpdk", prefix), ignore_errors=True)
    return r, created


def pci(extra=None):
    return {"uplink": {"name": "uplink", "pci": BDF, **(extra or {})}}


CASES = [
    # (id, tree setup, config, message)
    ("pci-missing", lambda r: None, pci(),
     f"schednicd: uplink.pci: no PCI device {BDF} (/sys/bus/pci/devices/{BDF}): check the "
     "address with lspci -D or dpdk-devbind.py --status"),
    ("pci-kernel-driver", lambda r: bind(r, "ixgbe"), pci(),
     f"schednicd: uplink.pci: {BDF} is bound to the kernel driver ixgbe, not to vfio-pci or "
     f"a uio driver: dpdk-devbind.py --bind=vfio-pci {BDF}"),
    ("pci-kernel-interface", lambda r: bind(r, "ixgbe", ifname="enp126s31f6"), pci(),
     f"schednicd: uplink.pci: {BDF} is in use by the kernel as interface enp126s31f6 (driver "
     f"ixgbe): take it down (ip link set enp126s31f6 down) and bind the device to vfio-pci: "
     f"dpdk-devbind.py --bind=vfio-pci {BDF}"),
    ("pci-no-iommu", lambda r: bind(r, "vfio-pci"), pci(),
     "enable_unsafe_noiommu_mode"),
    ("pci-uio-no-hugepages", lambda r: bind(r, "uio_pci_generic"), pci(),
     f"schednicd: uplink.pci: {BDF} is bound to uio_pci_generic, a uio driver without "
     "IOMMU: the NIC needs physical addresses, so set eal.hugepages true"),
    ("af-xdp-missing", lambda r: None, {"uplink": {"name": "uplink", "af_xdp": "snnoif0"}},
     "schednicd: uplink.af_xdp: no network interface snnoif0"),
    ("huge-no-mount", lambda r: None, {"eal": {"hugepages": True}, "uplink": None},
     "schednicd: eal.hugepages: no hugetlbfs mount in /proc/mounts: mount one (mkdir -p "
     "/dev/hugepages && mount -t hugetlbfs -o pagesize=2M nodev /dev/hugepages)"),
    ("huge-no-pages",
     lambda r: ((r / "proc" / "mounts").write_text("nodev /mnt/sn-h hugetlbfs rw,pagesize=2M 0 0\n"),
                (r / "sys/kernel/mm/hugepages/hugepages-2048kB").mkdir(parents=True),
                (r / "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages").write_text("3\n")),
     {"eal": {"hugepages": True}, "uplink": None},
     "schednicd: eal.hugepages: 3 free 2048 kB hugepages (6 MB) for hugetlbfs /mnt/sn-h, "
     "eal.memory_mb needs 64 MB: reserve at least 29 more (sysctl -w vm.nr_hugepages=N"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("check", [True, False], ids=["check-config", "start"])
def test_host_check_refuses(schednicd_bin, tmp_path, fake_root, case, check):
    _, setup, cfg, message = case
    setup(fake_root)
    r, created = run(schednicd_bin, tmp_path, fake_root, cfg, check=check)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr
    assert "config: ok" not in r.stderr and "EAL" not in r.stderr, r.stderr
    assert not created, "the EAL started"


def test_pci_ready_device_passes_checks(schednicd_bin, tmp_path, fake_root):
    """Bound to vfio-pci with an IOMMU group: --check-config is ok; a start
    gets past the checks to the EAL with -a <BDF>, which finds no such
    device on this host (the fake tree is only sysfs), so the uplink is
    refused: the EAL did not probe it."""
    bind(fake_root, "vfio-pci", iommu=True)
    r, _ = run(schednicd_bin, tmp_path, fake_root, pci(), check=True)
    assert r.returncode == 0 and "config: ok" in r.stderr, r.stderr
    # the test hook never goes unnoticed
    assert f"schednicd: SN_HOST_ROOT={fake_root}: host checks read that tree, not this " \
        "host's" in r.stderr, r.stderr
    r, _ = run(schednicd_bin, tmp_path, fake_root, pci(), check=False)
    assert r.returncode == 1, r.stderr
    assert (f"uplink: the EAL did not probe PCI device {BDF}: no ethdev for it (see the EAL "
            "lines above)") in r.stderr, r.stderr


XDP = {"name": "uplink", "af_xdp": "snnoif0"}
ARG_CASES = [
    # (id, config, message): refused while building the EAL arguments or
    # by the config's own rules, both before the EAL starts
    ("af-xdp-layout", {"uplink": XDP, "datapath": {"layout": "2core"}},
     "uplink.af_xdp: datapath.layout \"1core\" only"),
    ("extra-args-owned", {"uplink": None, "eal": {"extra_args": ["--file-prefix=x"]}},
     "eal.extra_args: --file-prefix is set from the config"),
    ("extra-args-socket-mem", {"uplink": None, "eal": {"extra_args": ["--socket-mem=64"]}},
     "eal.extra_args: --socket-mem needs eal.hugepages true"),
    ("extra-args-lcores", {"uplink": None, "eal": {"extra_args": ["-l", "0-1"]}},
     "eal.extra_args: -l is set from the config"),
    ("af-xdp-key-on-vdev", {"uplink": {"name": "uplink", "devargs": "net_null0",
                                       "af_xdp_queues": 2}},
     "uplink.af_xdp_queues: only with uplink.af_xdp"),
    ("vdev-name-too-long", {"uplink": {"name": "uplink", "devargs": "net_null" + "0" * 60}},
     "uplink.devargs: device name \"net_null" + "0" * 60 + "\" is too long"),
]


@pytest.mark.parametrize("case", ARG_CASES, ids=[c[0] for c in ARG_CASES])
@pytest.mark.parametrize("check", [True, False], ids=["check-config", "start"])
def test_argument_checks_refuse(schednicd_bin, tmp_path, fake_root, case, check):
    """--check-config runs every check a start runs before the EAL: both
    refuse, exit status 1, with the same message."""
    _, cfg, message = case
    r, created = run(schednicd_bin, tmp_path, fake_root, cfg, check=check)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr
    assert "config: ok" not in r.stderr and "EAL" not in r.stderr, r.stderr
    assert not created, "the EAL started"
