#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/bench/core.sh [sn-bench args] — build and run the scheduling-core
# micro-benchmarks (sn-bench) against their same-run baselines, pinned to
# CPU 1 (two-thread cases pin their second thread to CPU 0).
#   scripts/bench/core.sh --json            # all cases, JSON on stdout
#   scripts/bench/core.sh --filter qfq      # a subset, table on stdout
# Numbers are medians of --reps repetitions (default 5). Compare ratios
# within one run; check `uptime` first: these hosts are shared.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/build.sh build >&2
echo "core bench: load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec taskset -c 1 build/backend/bench/sn-bench "$@"
