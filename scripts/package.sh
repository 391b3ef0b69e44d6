#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/package.sh — build the Debian package of schednic into build/deb/
# and check it with lintian.
#   1. installs what the build needs (scripts/bootstrap.sh: debhelper,
#      lintian and the build dependencies in debian/control)
#   2. copies the tracked source tree to build/deb/src/schednic-VERSION
#      (a clean tree: no build directories of the working copy)
#   3. dpkg-buildpackage -b (binary only, unsigned), debhelper + meson
#   4. lintian on the result; its output is printed and kept in
#      build/deb/lintian.txt, and any error or warning fails the build
# Then, as root: apt-get install ./build/deb/schednic_*.deb
# Options: --no-lintian   skip step 4
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
lint=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-lintian) lint=0; shift ;;
    -h|--help) awk 'NR > 2 && /^#/ { print; next } NR > 2 { exit }' "$0"; exit 0 ;;
    *) echo "package: unknown option $1" >&2; exit 2 ;;
  esac
done

SN_BOOTSTRAP_NO_VM=1 scripts/bootstrap.sh
version=$(dpkg-parsechangelog -S Version)
out=$REPO/build/deb
src=$out/src/schednic-$version
rm -rf "$out"
mkdir -p "$src"
# The files git tracks or would track (what a fresh clone holds, with
# the working copy's changes), never the ignored build directories.
git ls-files -z --cached --others --exclude-standard | tar -C "$REPO" --null -T - -cf - | tar -C "$src" -xf -
echo "package: dpkg-buildpackage in $src"
(cd "$src" && DEB_BUILD_OPTIONS="parallel=$(nproc)" dpkg-buildpackage -b -uc -us) \
  >"$out/build.log" 2>&1 || { tail -40 "$out/build.log" >&2; echo "package: build failed (log: $out/build.log)" >&2; exit 1; }
mv "$out"/src/*.deb "$out"/src/*.buildinfo "$out"/src/*.changes "$out"/
rm -rf "$out/src"
ls -l "$out"/*.deb
if [ "$lint" = 1 ]; then
  echo "package: lintian"
  # non-zero for an error or a warning, and when lintian cannot run at all
  lintian --fail-on error,warning --info --display-info --pedantic "$out"/*.changes 2>&1 |
    tee "$out/lintian.txt" || {
    echo "package: lintian reports errors or warnings, or failed (build/deb/lintian.txt)" >&2
    exit 1
  }
fi
echo "package: built $(cd "$out" && ls *.deb | tr '\n' ' ')in build/deb/"
