#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/build.sh [BUILD_DIR] [meson options...] — configure (once; options
# given again apply to an existing BUILD_DIR) and build.
#   scripts/build.sh                      -> build/
#   scripts/build.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
if [ ! -f "$dir/build.ninja" ]; then
  echo "build: meson setup $dir $*"
  meson setup "$dir" "$@" >"/tmp/sn-meson-setup-$(basename "$dir").log" 2>&1 || {
    cat "/tmp/sn-meson-setup-$(basename "$dir").log" >&2; exit 1; }
elif [ $# -gt 0 ]; then
  # An existing build dir takes the options it is given now (a changed
  # option in scripts/test.sh applies without a fresh setup).
  meson configure "$dir" "$@" >"/tmp/sn-meson-configure-$(basename "$dir").log" 2>&1 || {
    cat "/tmp/sn-meson-configure-$(basename "$dir").log" >&2; exit 1; }
fi
echo "build: ninja -C $dir"
ninja -C "$dir" | grep -vE '^\[[0-9]+/[0-9]+\] (Compiling|Linking|Generating)' || true
# ninja's exit status is lost in the pipe above; check it for real.
ninja -C "$dir" >/dev/null
