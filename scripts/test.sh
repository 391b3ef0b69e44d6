#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/test.sh — the whole test suite, from a fresh Debian 12 machine.
#
#   1. bootstrap (Debian + Python deps, idempotent), then the tree lint
#      (scripts/lint.py: work-log tags, SPDX lines; also with --quick)
#   2. build (build/) and the sanitizer builds: ASan+UBSan (build-asan/,
#      with the test hooks: C unit tests, the daemon's device-stop tests
#      and the tests marked hooks, e.g. the watchdog's) and TSan
#      (build-tsan/, the two-thread mailbox stress)
#   3. libFuzzer targets, briefly (scripts/fuzz.sh), then the Debian
#      package (scripts/package.sh, lintian): installed with apt-get, the
#      installed daemon tested (tests/package), purged again
#   4. pytest (tests/), every tier unless --tier says otherwise:
#      unit (C unit tests, reference models), functional (daemon, control
#      plane, datapath), accuracy (rates, sharing, conformance, isolation,
#      fair dropping, live change against their bounds), attack (a hostile
#      tenant against a measured victim: quotas, spoofing), perf (benchmark
#      harness), vm (QEMU guests; libvirt ones are also marked libvirt)
#
# Options: --quick         skip steps 2b/2c and 3 (sanitizers, fuzzing, package)
#          --tier T[,T...] run only these pytest tiers (pytest -m "T or ...")
#          --extended      also run the tests marked extended
#          -- ARGS         extra pytest arguments (e.g. -- -k control -x)
set -euo pipefail
cd "$(dirname "$0")/.."

tiers_known="unit functional accuracy attack perf vm libvirt"
quick=0
extended=0
tier_expr=""
pytest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --extended) extended=1; shift ;;
    --tier)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "test.sh: --tier needs T[,T...]" >&2; exit 2; }
      IFS=, read -r -a tiers <<<"$2"
      for t in "${tiers[@]}"; do
        case " $tiers_known " in
          *" $t "*) tier_expr="${tier_expr:+$tier_expr or }$t" ;;
          *) echo "test.sh: unknown tier '$t' (tiers: $tiers_known)" >&2; exit 2 ;;
        esac
      done
      [ -n "$tier_expr" ] || { echo "test.sh: --tier needs T[,T...]" >&2; exit 2; }
      shift 2 ;;
    --) shift; pytest_args=("$@"); break ;;
    -h|--help) awk 'NR > 2 && /^#/ { print; next } NR > 2 { exit }' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ $extended = 0 ]; then
  tier_expr="${tier_expr:+($tier_expr) and }not extended"
fi
# The test-hook tests run in the ASan step below, on build-asan; the
# package tests in the package step, against the installed package.
tier_expr="${tier_expr:+($tier_expr) and }not hooks and not package"
if [ -n "$tier_expr" ]; then
  pytest_args=(-m "$tier_expr" "${pytest_args[@]}")
fi

t0=$(date +%s)
step() { echo; echo "=== [$(( $(date +%s) - t0 ))s] $* ==="; }

step "bootstrap"
scripts/bootstrap.sh

step "lint (scripts/lint.py)"
python3 scripts/lint.py

step "build (build/)"
scripts/build.sh build

if [ $quick = 0 ]; then
  step "ASan+UBSan build and C unit tests (build-asan/)"
  scripts/build.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dtest_hooks=true
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --no-rebuild --suite unit --print-errorlogs

  step "ASan+UBSan daemon: device stops with frames deep in QFQ (build-asan/)"
  # A frame completed into a freed queue is reported here (the queue state
  # comes from malloc in sanitizer builds); about 30 s.
  SN_BUILD_DIR=build-asan ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
    python3 -m pytest tests/policy/test_stop_slow_link.py -q

  step "ASan+UBSan daemon: the watchdog and a stalled worker (build-asan/, test hooks)"
  SN_BUILD_DIR=build-asan ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
    python3 -m pytest -m hooks tests/daemon -q

  step "TSan build and mailbox stress test (build-tsan/)"
  # Only the mailbox stress test is built here: TSan is about the mailbox's
  # memory ordering (other modules use fences TSan cannot model).
  [ -f build-tsan/build.ninja ] || meson setup build-tsan -Ddaemon=false -Db_sanitize=thread \
    -Db_lundef=false >/tmp/sn-meson-setup-build-tsan.log 2>&1 || {
    cat /tmp/sn-meson-setup-build-tsan.log >&2; exit 1; }
  ninja -C build-tsan backend/core/test_mbox_stress >/dev/null
  TSAN_OPTIONS=halt_on_error=1 build-tsan/backend/core/test_mbox_stress

  step "fuzz targets (scripts/fuzz.sh)"
  scripts/fuzz.sh --seconds "${SN_FUZZ_SECONDS:-8}"

  step "Debian package: build and lintian, install, the installed daemon, purge"
  # The machine is left as it was: a schednic package installed before
  # (or its conffiles, left by a removal) would be replaced and then
  # purged, so the step refuses to run; no Recommends are pulled in.
  pkg_state=$(dpkg-query -W -f='${db:Status-Status}' schednic 2>/dev/null || true)
  if [ -n "$pkg_state" ] && [ "$pkg_state" != not-installed ]; then
    echo "test.sh: a schednic package is on this machine ($pkg_state); purge it" \
         "(apt-get purge schednic) or run with --quick" >&2
    exit 1
  fi
  scripts/package.sh
  purge_pkg() {
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -q schednic schednic-dbgsym \
      >/tmp/sn-apt-purge.log 2>&1 || { cat /tmp/sn-apt-purge.log >&2; return 1; }
  }
  trap purge_pkg EXIT
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ./build/deb/*.deb \
    >/tmp/sn-apt-install.log 2>&1 || { cat /tmp/sn-apt-install.log >&2; exit 1; }
  python3 -m pytest -m package tests/package -q
  trap - EXIT
  purge_pkg
  for f in /usr/sbin/schednicd /etc/schednic/schednicd.json /lib/systemd/system/schednicd.service; do
    [ ! -e "$f" ] || { echo "test.sh: the purge left $f" >&2; exit 1; }
  done
fi

step "pytest"
export SN_BUILD_DIR="$PWD/build"
# --durations: the slowest tests, to keep the suite inside its CI budget
python3 -m pytest tests/ -v -rfEs --timeout=900 --durations=40 "${pytest_args[@]}"

step "all tests passed"
