#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Build the schednic-patched guest virtio_net.ko (deferred TX completions)
# out of tree, from Debian packages only.
#
# Usage: guest-driver-patch/build.sh [--out DIR] [--force]
#   --out DIR   output directory (default: $SN_BUILD_DIR/guest-driver, else
#               <repo>/build/guest-driver)
#   --force     rebuild even if the inputs did not change
# Output in DIR: virtio_net.ko, build.env (SN_GUEST_VIRTIO_NET=<path>,
# vermagic), inputs.sha256.
#
# Steps (each printed):
#   1. apt-get install linux-headers-6.1.0-56-amd64 linux-source-6.1 patch kmod
#      build-essential if missing (names the package that failed);
#   2. extract only drivers/net/virtio_net.c from
#      /usr/src/linux-source-6.1.tar.xz (cached in DIR/stock, keyed by the
#      tarball's size+mtime);
#   3. apply virtio_net-deferred.patch (`patch -p1 --fuzz=0`; fails loudly if a
#      hunk does not apply; nothing is built then);
#   4. make -C <headers> M=DIR/src modules, warnings are errors;
#   5. copy virtio_net.ko to DIR.
# Idempotent: the module is rebuilt only when the hash of the inputs (patch,
# Kbuild, this script, stock source, headers version) changes.
set -euo pipefail

KVER=6.1.0-56-amd64
SRC_TAR=/usr/src/linux-source-6.1.tar.xz
SRC_MEMBER=linux-source-6.1/drivers/net/virtio_net.c
HEADERS=/usr/src/linux-headers-$KVER
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
out=
force=0

while [ $# -gt 0 ]; do
	case "$1" in
	--out) out=$2; shift 2 ;;
	--force) force=1; shift ;;
	-h|--help) awk 'NR > 2 && /^#/ { print; next } NR > 2 { exit }' "$0"; exit 0 ;;
	*) echo "guest-driver build: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -n "$out" ] || out=${SN_BUILD_DIR:-$repo/build}/guest-driver
mkdir -p "$out"
out=$(cd "$out" && pwd)

step() { echo "guest-driver build: $*"; }
die() { echo "guest-driver build: ERROR: $*" >&2; exit 1; }

# 1. Packages.
missing=()
for pkg in "linux-headers-$KVER" linux-source-6.1 build-essential patch kmod; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
	step "installing ${missing[*]}"
	for pkg in "${missing[@]}"; do
		DEBIAN_FRONTEND=noninteractive apt-get install -y "$pkg" >"$out/apt-$pkg.log" 2>&1 ||
			die "apt-get install $pkg failed (see $out/apt-$pkg.log; apt-get update?)"
	done
fi
[ -f "$SRC_TAR" ] || die "$SRC_TAR missing although linux-source-6.1 is installed"
[ -f "$HEADERS/Makefile" ] || die "$HEADERS missing although linux-headers-$KVER is installed"
command -v patch >/dev/null || die "'patch' not found (apt-get install patch)"

# 2. Stock source, extracted once per tarball.
stock=$out/stock/virtio_net.c
tar_id=$(stat -c '%s %Y' "$SRC_TAR")
if [ ! -f "$stock" ] || [ "$(cat "$out/stock/.tarball" 2>/dev/null)" != "$tar_id" ]; then
	step "extracting $SRC_MEMBER from $SRC_TAR"
	rm -rf "$out/stock"
	mkdir -p "$out/stock"
	tar -xJf "$SRC_TAR" -O "$SRC_MEMBER" > "$stock.tmp" || die "cannot extract $SRC_MEMBER"
	mv "$stock.tmp" "$stock"
	echo "$tar_id" > "$out/stock/.tarball"
fi

# Input hash: everything that determines the module.
hash=$(cat "$here/virtio_net-deferred.patch" "$here/Kbuild" "$0" "$stock" \
	"$HEADERS/include/config/kernel.release" | sha256sum | awk '{print $1}')
if [ $force -eq 0 ] && [ -f "$out/virtio_net.ko" ] &&
   [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ]; then
	step "up to date ($out/virtio_net.ko, inputs ${hash:0:12})"
	exit 0
fi
rm -f "$out/inputs.sha256" "$out/virtio_net.ko"

# 3. Patch a fresh copy.
src=$out/src
rm -rf "$src"
mkdir -p "$src/drivers/net"
cp "$stock" "$src/drivers/net/virtio_net.c"
step "applying virtio_net-deferred.patch"
if ! (cd "$src" && patch -p1 --forward --fuzz=0 --no-backup-if-mismatch \
		< "$here/virtio_net-deferred.patch"); then
	die "virtio_net-deferred.patch does not apply to $SRC_MEMBER ($(dpkg-query -W -f='${Version}' linux-source-6.1))"
fi
mv "$src/drivers/net/virtio_net.c" "$src/virtio_net.c"
rm -rf "$src/drivers"
cp "$here/Kbuild" "$src/Kbuild"

# 4. Build against the guest kernel's headers; any compiler warning fails.
step "building virtio_net.ko against linux-headers-$KVER"
if ! make -C "$HEADERS" M="$src" KCFLAGS=-Werror modules > "$out/make.log" 2>&1; then
	cat "$out/make.log" >&2
	die "module build failed"
fi
if grep -q 'warning:' "$out/make.log"; then
	cat "$out/make.log" >&2
	die "compiler warnings (see $out/make.log)"
fi

# 5. Publish.
cp "$src/virtio_net.ko" "$out/virtio_net.ko"
vermagic=$(modinfo -F vermagic "$out/virtio_net.ko" 2>/dev/null || true)
case "$vermagic" in
"$KVER "*) ;;
*) die "unexpected vermagic '$vermagic' (want $KVER ...)" ;;
esac
cat > "$out/build.env" <<EOF
SN_GUEST_VIRTIO_NET=$out/virtio_net.ko
SN_GUEST_VIRTIO_NET_VERMAGIC='$vermagic'
EOF
echo "$hash" > "$out/inputs.sha256"
step "done: $out/virtio_net.ko (vermagic $vermagic, inputs ${hash:0:12})"
