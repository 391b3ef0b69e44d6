# SPDX-License-Identifier: BSD-3-Clause
"""The guest image builder and the QEMU template, without booting."""
import gzip
import subprocess

import pytest

from guest import QEMU_VM, REPO

BUILD = REPO / "scripts" / "build-guest-image.sh"
KVER = "6.1.0-56-amd64"
pytestmark = pytest.mark.vm


def initrd_files(path):
    data = gzip.decompress(path.read_bytes())
    r = subprocess.run(["cpio", "-t", "--quiet"], input=data, capture_output=True, check=True)
    return set(r.stdout.decode().split())


def test_image_contents_and_cache(guest_image):
    files = initrd_files(guest_image / "initrd.img")
    for f in ("init", "sbin/sn-agent", "etc/sn-modules", "bin/busybox", "usr/bin/iperf3",
              f"lib/modules/{KVER}/kernel/drivers/net/virtio_net.ko",
              f"lib/modules/{KVER}/kernel/drivers/virtio/virtio_pci.ko",
              f"lib/modules/{KVER}/modules.dep"):
        assert f in files, f"{f} missing from initrd"
    assert not any(f.startswith(f"lib/modules/{KVER}/updates/") and f.endswith(".ko")
                   for f in files)
    # Second run with unchanged inputs: cached, nothing rewritten.
    before = (guest_image / "initrd.img").stat().st_mtime_ns
    r = subprocess.run([str(BUILD), "--out", str(guest_image)], capture_output=True,
                       text=True, check=True)
    assert "up to date" in r.stdout
    assert (guest_image / "initrd.img").stat().st_mtime_ns == before


def test_patched_virtio_net_swaps_in(guest_image, tmp_path):
    """--virtio-net puts a module in updates/ (which /init prefers) and
    changes the input hash, so the image is rebuilt."""
    out = tmp_path / "guest"
    out.mkdir()
    # Reuse the downloaded kernel package instead of fetching it again.
    (out / "debs").symlink_to(guest_image / "debs")
    fake = tmp_path / "virtio_net.ko"
    stock = guest_image / "rootfs" / "lib" / "modules" / KVER / "kernel/drivers/net/virtio_net.ko"
    fake.write_bytes(stock.read_bytes() + b"\0patched")
    r = subprocess.run([str(BUILD), "--out", str(out), "--virtio-net", str(fake)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "using patched virtio_net.ko" in r.stdout
    files = initrd_files(out / "initrd.img")
    assert f"lib/modules/{KVER}/updates/virtio_net.ko" in files
    assert (out / "inputs.sha256").read_text() != (guest_image / "inputs.sha256").read_text()


@pytest.mark.parametrize("mode,want,unwanted", [
    ("client", ",reconnect=1", "server=on,wait=off"),
    ("server", ",server=on,wait=off", "reconnect=1"),
])
def test_qemu_template(guest_image, tmp_path, mode, want, unwanted):
    sock = tmp_path / "p.sock"
    r = subprocess.run([str(QEMU_VM), "--dry-run", "--sock", str(sock), "--sock-mode", mode,
                        "--guest-dir", str(guest_image), "--ip", "10.77.0.5/24"],
                       capture_output=True, text=True, check=True)
    cmd = r.stdout
    assert f"path={sock}{want}" in cmd and f"path={sock},{unwanted}" not in cmd
    for needed in ("-accel tcg", "share=on", "memdev=mem", "vectors=0", "vhost-user",
                   "sn.ip=10.77.0.5/24"):
        assert needed in cmd, f"{needed} missing from {cmd}"
    bad = subprocess.run([str(QEMU_VM), "--dry-run", "--sock", str(sock), "--sock-mode", "x"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "client or server" in bad.stderr
