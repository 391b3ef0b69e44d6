#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/fuzz.sh [--seconds N] [TARGET...] — build and run the libFuzzer
# targets in backend/fuzz/ (clang, ASan + UBSan) for N seconds each
# (default 20). Corpora live in build-fuzz/corpus/<target>/ (not committed).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=20
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds)   # checked here: a usage error, not a shell or libFuzzer error
      if [ $# -lt 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt 1 ]; then
        echo "fuzz: --seconds needs a positive integer" >&2; exit 2
      fi
      secs=$2; shift 2 ;;
    -h|--help) awk 'NR > 2 && /^#/ { print; next } NR > 2 { exit }' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in backend/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi
out=build-fuzz
mkdir -p "$out"
for t in "${targets[@]}"; do
  src=backend/fuzz/$t.c
  [ -f "$src" ] || { echo "fuzz: no $src" >&2; exit 1; }
  echo "fuzz: building $t"
  clang -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I backend/core -I backend/virtio "$src" backend/core/*.c backend/virtio/*.c -lm -lpthread -o "$out/$t"
  mkdir -p "$out/corpus/$t"
  echo "fuzz: running $t for ${secs}s"
  if ! "$out/$t" -max_total_time="$secs" -print_final_stats=1 "$out/corpus/$t" \
        >"$out/$t.log" 2>&1; then
    tail -40 "$out/$t.log" >&2
    echo "fuzz: $t FAILED (log: $out/$t.log)" >&2
    exit 1
  fi
  grep -E '^stat::number_of_executed_units' "$out/$t.log" | sed "s/^/fuzz: $t /" || true
done
echo "fuzz: ${#targets[@]} targets passed"
