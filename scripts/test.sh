#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/test.sh — the whole test suite, from a fresh Debian 12 machine.
#
#   1. bootstrap (Debian + Python deps, idempotent)
#   2. build (build/) and the sanitizer builds: ASan+UBSan (build-asan/,
#      C unit tests) and TSan (build-tsan/, the two-thread mailbox stress)
#   3. libFuzzer targets, briefly (scripts/fuzz.sh)
#   4. pytest: C unit tests, reference models, daemon, control plane,
#      datapath, VMs (tests/)
#
# Options: --quick  skip steps 2b/2c and 3 (sanitizers, fuzzing)
#          -- ARGS  extra pytest arguments (e.g. -- -k control -x)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
pytest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --) shift; pytest_args=("$@"); break ;;
    -h|--help) sed -n '3,14p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

t0=$(date +%s)
step() { echo; echo "=== [$(( $(date +%s) - t0 ))s] $* ==="; }

step "bootstrap"
scripts/bootstrap.sh

step "build (build/)"
scripts/build.sh build

if [ $quick = 0 ]; then
  step "ASan+UBSan build and C unit tests (build-asan/)"
  scripts/build.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --no-rebuild --suite unit --print-errorlogs

  step "TSan build and mailbox stress test (build-tsan/)"
  # Only the mailbox stress test is built here: TSan is about the mailbox's
  # memory ordering (other modules use fences TSan cannot model).
  [ -f build-tsan/build.ninja ] || meson setup build-tsan -Ddaemon=false -Db_sanitize=thread \
    -Db_lundef=false >/tmp/sn-meson-setup-build-tsan.log 2>&1 || {
    cat /tmp/sn-meson-setup-build-tsan.log >&2; exit 1; }
  ninja -C build-tsan backend/core/test_mbox_stress >/dev/null
  TSAN_OPTIONS=halt_on_error=1 build-tsan/backend/core/test_mbox_stress

  step "fuzz targets (scripts/fuzz.sh)"
  scripts/fuzz.sh --seconds "${SN_FUZZ_SECONDS:-20}"
fi

step "pytest"
export SN_BUILD_DIR="$PWD/build"
python3 -m pytest tests/ -v -rfEs --timeout=900 "${pytest_args[@]}"

step "all tests passed"
