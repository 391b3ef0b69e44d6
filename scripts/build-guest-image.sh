#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Build the schednic test guest: a Debian 6.1 kernel + a busybox-static
# initramfs with the virtio modules, iperf3, ping, ethtool and a command agent.
#
# Usage: scripts/build-guest-image.sh [--out DIR] [--virtio-net FILE.ko] [--force]
#   --out DIR         cache directory (default: $SN_BUILD_DIR/guest, else
#                     <repo>/build/guest)
#   --virtio-net KO   install KO as lib/modules/<kver>/updates/virtio_net.ko;
#                     the guest /init loads it instead of the stock driver
#                     (also: env SN_GUEST_VIRTIO_NET)
#   --force           rebuild even if the inputs did not change
# Output in DIR: vmlinuz, initrd.img, image.env (paths + KVER, shell syntax).
# The image is rebuilt only when the hash of its inputs changes (this script,
# scripts/guest/*, the kernel package, the host binaries copied in, the
# optional patched module); otherwise the script prints "up to date".
#
# Debian packages needed on the host (scripts/bootstrap.sh installs them):
#   busybox-static cpio kmod iperf3 ethtool iputils-ping apt (for
#   `apt-get download`), qemu-system-x86 (to run it), and for the libvirt
#   tests libvirt-daemon-system libvirt-clients.
set -euo pipefail

KVER=6.1.0-56-amd64
KPKG=linux-image-$KVER
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
out=
force=0
virtio_net_ko=${SN_GUEST_VIRTIO_NET:-}

while [ $# -gt 0 ]; do
	case "$1" in
	--out|--virtio-net)   # a missing value is a usage error, not "unbound variable"
		[ $# -ge 2 ] && [ -n "$2" ] || { echo "build-guest-image: $1 needs a value" >&2; exit 2; }
		if [ "$1" = --out ]; then out=$2; else virtio_net_ko=$2; fi
		shift 2 ;;
	--force) force=1; shift ;;
	-h|--help) awk 'NR > 2 && /^#/ { print; next } NR > 2 { exit }' "$0"; exit 0 ;;
	*) echo "build-guest-image: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -n "$out" ] || out=${SN_BUILD_DIR:-$repo/build}/guest
mkdir -p "$out"
out=$(cd "$out" && pwd)

step() { echo "build-guest-image: $*"; }
need() {
	command -v "$1" >/dev/null 2>&1 && return 0
	echo "build-guest-image: missing '$1' (apt-get install $2; scripts/bootstrap.sh installs it)" >&2
	exit 1
}
need busybox busybox-static
need cpio cpio
need iperf3 iperf3
need depmod kmod
need apt-get apt
need dpkg-deb dpkg
busybox_bin=$(command -v busybox)
if ldd "$busybox_bin" >/dev/null 2>&1; then
	echo "build-guest-image: $busybox_bin is not static (apt-get install busybox-static)" >&2
	exit 1
fi
host_bins=("$(command -v iperf3)")
command -v ethtool >/dev/null 2>&1 && host_bins+=("$(command -v ethtool)")
# ss (iproute2): per-socket TSQ inputs (skmem, pacing_rate) for the VM
# experiments' diagnostics (tests/vm/test_backpressure.py SN_BP_PERFLOW).
command -v ss >/dev/null 2>&1 && host_bins+=("$(command -v ss)")
if [ -n "$virtio_net_ko" ] && [ ! -f "$virtio_net_ko" ]; then
	echo "build-guest-image: --virtio-net $virtio_net_ko: no such file" >&2
	exit 1
fi

# 1. Kernel package, downloaded once per version into the cache.
deb=$(ls "$out"/debs/"${KPKG}"_*.deb 2>/dev/null | head -n 1 || true)
if [ -z "$deb" ]; then
	step "downloading $KPKG"
	mkdir -p "$out/debs"
	(cd "$out/debs" && apt-get download "$KPKG" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
	deb=$(ls "$out"/debs/"${KPKG}"_*.deb 2>/dev/null | head -n 1 || true)
	if [ -z "$deb" ]; then
		echo "build-guest-image: apt-get download $KPKG failed (run apt-get update?)" >&2
		exit 1
	fi
fi

# 2. Input hash: everything that ends up in the image.
hash=$( {
	sha256sum "$0" "$here"/guest/* "$deb" "$busybox_bin" "${host_bins[@]}" | awk '{print $1}'
	for b in "${host_bins[@]}"; do ldd "$b" | awk '/=>/ {print $3}' | xargs sha256sum | awk '{print $1}'; done
	[ -z "$virtio_net_ko" ] || sha256sum "$virtio_net_ko" | awk '{print $1}'
	} | sha256sum | awk '{print $1}')
if [ $force -eq 0 ] && [ -f "$out/initrd.img" ] && [ -f "$out/vmlinuz" ] &&
   [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ]; then
	step "up to date ($out, inputs ${hash:0:12})"
	exit 0
fi
rm -f "$out/inputs.sha256"

# 3. Unpack the kernel package (not installed on the host).
kroot=$out/kernel-$KVER
if [ ! -f "$kroot/.unpacked" ] || [ "$(cat "$kroot/.unpacked")" != "$(basename "$deb")" ]; then
	step "unpacking $(basename "$deb")"
	rm -rf "$kroot"
	mkdir -p "$kroot"
	dpkg -x "$deb" "$kroot"
	basename "$deb" > "$kroot/.unpacked"
fi

# 4. Root filesystem staging tree.
step "assembling initramfs root"
root=$out/rootfs
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,usr/bin,usr/sbin,lib/modules/$KVER/updates}
cp "$busybox_bin" "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
	[ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
install -m 0755 "$here/guest/init" "$root/init"
install -m 0755 "$here/guest/sn-agent" "$root/sbin/sn-agent"
install -m 0644 "$here/guest/modules" "$root/etc/sn-modules"
echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
echo "root:x:0:" > "$root/etc/group"
printf '127.0.0.1 localhost\n' > "$root/etc/hosts"

# Dynamic host binaries with their shared libraries (same paths as the host,
# so the host's ld.so and library search paths work unchanged).
copy_with_libs() {
	local bin=$1 lib
	install -D -m 0755 "$bin" "$root/usr/bin/$(basename "$bin")"
	for lib in $(ldd "$bin" | awk '/=>/ {print $3} /^\t\// {print $1}'); do
		[ -f "$root$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
	done
}
for b in "${host_bins[@]}"; do
	step "adding $(basename "$b") + shared libraries"
	copy_with_libs "$b"
done

# Modules keep their in-tree relative paths under kernel/ so that modprobe
# tooling and a later patched module (updates/) coexist.
step "adding virtio modules"
grep -v -e '^#' -e '^$' "$here/guest/modules" | while read -r mod; do
	src=$(find "$kroot/lib/modules/$KVER/kernel" -name "$mod.ko" | head -n 1)
	[ -n "$src" ] || { echo "build-guest-image: $mod.ko not in $KPKG" >&2; exit 1; }
	rel=${src#"$kroot/lib/modules/$KVER/"}
	install -D -m 0644 "$src" "$root/lib/modules/$KVER/$rel"
done
if [ -n "$virtio_net_ko" ]; then
	step "using patched virtio_net.ko from $virtio_net_ko"
	install -m 0644 "$virtio_net_ko" "$root/lib/modules/$KVER/updates/virtio_net.ko"
fi
for f in modules.order modules.builtin modules.builtin.modinfo; do
	cp "$kroot/lib/modules/$KVER/$f" "$root/lib/modules/$KVER/$f"
done
depmod -b "$root" "$KVER"

# 5. Pack.
step "packing initrd.img"
(cd "$root" && find . -print0 | sort -z | cpio --null -o -H newc --quiet) | gzip -1 > "$out/initrd.img.tmp"
mv "$out/initrd.img.tmp" "$out/initrd.img"
cp "$kroot/boot/vmlinuz-$KVER" "$out/vmlinuz"
cat > "$out/image.env" <<EOF
SN_GUEST_KVER=$KVER
SN_GUEST_KERNEL=$out/vmlinuz
SN_GUEST_INITRD=$out/initrd.img
EOF
echo "$hash" > "$out/inputs.sha256"
step "done: $out/vmlinuz $out/initrd.img ($(du -h "$out/initrd.img" | cut -f1), inputs ${hash:0:12})"
