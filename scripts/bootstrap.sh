#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/bootstrap.sh — install everything schednic needs on Debian 12.
#
# Idempotent: packages already present are not touched, so a re-run takes
# about a second. A failed install stops with the name of the package.
# Needs root (or sudo). Set SN_BOOTSTRAP_NO_VM=1 to skip the VM packages.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build + daemon + tools.
PKGS=(
  build-essential pkg-config meson ninja-build python3 python3-pip
  dpdk dpdk-dev libdpdk-dev          # DPDK 22.11: vhost, virtio-user, tap/null/ring PMDs, testpmd
  liburcu-dev libjansson-dev         # RCU for table publication, JSON for config/RPC
  libsystemd-dev systemd             # sd_notify (readiness, watchdog); systemd-analyze in tests
  clang libclang-rt-14-dev           # libFuzzer targets + sanitizer runtimes (scripts/fuzz.sh)
  valgrind                           # callgrind instruction counts in benchmarks
  iproute2 iputils-ping procps tcpdump ethtool   # namespaces, veth/tap checks in tests
  python3-prometheus-client          # scripts/schednic-exporter
  python3-libvirt                    # scripts/schednic-libvirt (the reconciler)
  debhelper lintian dpkg-dev         # scripts/package.sh: the Debian package
)
# Packages whose maintainer scripts start a service: installed with a
# policy-rc.d that forbids it, and not started at boot either. Tests start
# their own private instance (prometheus: tests/control/test_exporter.py).
NOSTART_PKGS=(prometheus)
# Real VMs (tests/vm, scripts/build-guest-image.sh).
VM_PKGS=(
  qemu-system-x86 qemu-utils libvirt-daemon-system libvirt-clients
  busybox-static iperf3 cpio kmod xz-utils zstd
  linux-headers-6.1.0-56-amd64 linux-source-6.1 patch   # guest-driver-patch/build.sh
)
[ "${SN_BOOTSTRAP_NO_VM:-0}" = 1 ] || PKGS+=("${VM_PKGS[@]}")

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "bootstrap: need root or sudo to install packages" >&2; exit 1; }
  SUDO="sudo"
fi

missing=()
nostart=()
for p in "${PKGS[@]}" "${NOSTART_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
  missing+=("$p")
  [[ " ${NOSTART_PKGS[*]} " == *" $p "* ]] && nostart+=("$p")
done

# invoke-rc.d and deb-systemd-invoke ask /usr/sbin/policy-rc.d; 101 = "do not
# start". One we create is removed again whatever happens.
POLICY_RC=/usr/sbin/policy-rc.d
if [ ${#nostart[@]} -gt 0 ] && [ ! -e "$POLICY_RC" ]; then
  trap '$SUDO rm -f "$POLICY_RC"' EXIT
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY_RC" >/dev/null
  $SUDO chmod 755 "$POLICY_RC"
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${#missing[@]} Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null || { echo "bootstrap: apt-get update failed" >&2; exit 1; }
  if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/sn-bootstrap-apt.log 2>&1; then
    # Find which package broke, one by one, and name it.
    for p in "${missing[@]}"; do
      if ! $SUDO apt-get install -y -q --no-install-recommends "$p" >>/tmp/sn-bootstrap-apt.log 2>&1; then
        echo "bootstrap: failed to install Debian package '$p' (log: /tmp/sn-bootstrap-apt.log)" >&2
        tail -5 /tmp/sn-bootstrap-apt.log >&2
        exit 1
      fi
    done
  fi
  # Not at boot either (update-rc.d also disables the systemd unit).
  for p in "${nostart[@]}"; do
    $SUDO update-rc.d "$p" disable >/dev/null 2>&1 || true
  done
else
  echo "bootstrap: all $(( ${#PKGS[@]} + ${#NOSTART_PKGS[@]} )) Debian packages present"
fi

# Python dependencies (requirements.txt), into the python3 that runs the tests.
if ! python3 - <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for line in open("requirements.txt"):
    line = line.split("#")[0].strip()
    if line:
        name, want = line.split("==")
        if version(name) != want:
            sys.exit(1)
PY
then
  echo "bootstrap: installing Python dependencies (requirements.txt)"
  if ! python3 -m pip install -q -r requirements.txt 2>/tmp/sn-bootstrap-pip.log; then
    # Debian's system python refuses pip without this flag (PEP 668).
    python3 -m pip install -q --break-system-packages -r requirements.txt 2>>/tmp/sn-bootstrap-pip.log || {
      echo "bootstrap: pip install -r requirements.txt failed (log: /tmp/sn-bootstrap-pip.log)" >&2
      tail -5 /tmp/sn-bootstrap-pip.log >&2; exit 1; }
  fi
else
  echo "bootstrap: Python dependencies present"
fi
python3 -m pytest --version >/dev/null || { echo "bootstrap: python3 -m pytest does not work" >&2; exit 1; }
