#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/soak/restart.sh — restart schednicd N times with TX descriptors
# held on a deferred port, alternating SIGTERM and SIGKILL, and count what
# the guest got back (doc/deferred.md, "After a crash or restart").
#
#   scripts/soak/restart.sh [-n N] [--count C] [--build DIR] [--keep]
#
# The guest is sn-vufront (backend/tools/sn_vufront_restart.c) on a
# deferred server port: each round it posts C frames (default 200 on a
# 256-entry ring) whose completions come back out of order (half held at a
# peer that takes nothing, half dropped at once), then the daemon is
# stopped (even rounds SIGTERM, odd rounds SIGKILL) and started again on
# the same config; the guest reconnects as QEMU does (TX ring restarted at
# its used index), waits for every head outstanding before the restart and
# sends C more frames, which must all complete. The front-end keeps its own
# book per head. Printed at the end (one line each, then a JSON line):
#   restarts       restarts done (SIGTERM / SIGKILL)
#   held           heads outstanding at the restarts, summed
#   recovered      of them, completed by the restarted daemon from its
#                  record (front-end's count; the daemon's
#                  recovered_after_restart, summed, next to it)
#   lost           heads never completed (must be 0)
#   duplicated     used entries for a head not outstanding (must be 0)
#   popped_extra   frames the restarted daemons took beyond the new ones
#                  (a frame of before the restart taken again; must be 0)
# Exit status 0 when lost = duplicated = popped_extra = 0 and all N rounds
# ran. Everything started is stopped by PID; the temp dir is removed unless
# --keep. Uses build/ (or --build DIR) of this tree.
set -euo pipefail
cd "$(dirname "$0")/../.."

usage() { sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
N=200; COUNT=200; BUILD=build; KEEP=0
need() { [ $# -ge 2 ] && [ -n "$2" ] || { echo "restart.sh: $1 needs a value" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    -n) need "$@"; N=$2; shift 2 ;;
    --count) need "$@"; COUNT=$2; shift 2 ;;
    --build) need "$@"; BUILD=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "restart.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 1 ] || { echo "restart.sh: -n needs an integer >= 1" >&2; exit 2; }
[[ "$COUNT" =~ ^[0-9]+$ ]] && [ "$COUNT" -ge 2 ] && [ "$COUNT" -le 255 ] ||
  { echo "restart.sh: --count needs an integer 2..255" >&2; exit 2; }
DAEMON=$BUILD/backend/schednicd
VUFRONT=$BUILD/backend/sn-vufront
[ -x "$DAEMON" ] && [ -x "$VUFRONT" ] || { echo "restart.sh: build first (scripts/build.sh $BUILD)" >&2; exit 2; }

TMP=$(mktemp -d /tmp/sn-soak-XXXXXX)
PREFIX=snsoak$$
DPID=; WPID=; SPID=
cleanup() {
  for p in $WPID $SPID $DPID; do kill "$p" 2>/dev/null || true; done
  for p in $WPID $SPID $DPID; do wait "$p" 2>/dev/null || true; done
  rm -rf "/var/run/dpdk/$PREFIX"
  [ "$KEEP" = 1 ] && echo "kept $TMP" || rm -rf "$TMP"
}
trap cleanup EXIT

cat >"$TMP/cfg.json" <<EOF
{"eal": {"memory_mb": 512, "file_prefix": "$PREFIX", "main_cpu": 0, "worker_cpu": 1},
 "control": {"socket": "$TMP/ctl.sock", "state_dir": "$TMP/state"},
 "datapath": {"mbufs": 8191}, "uplink": null,
 "ports": [{"name": "w", "type": "vhost-user", "path": "$TMP/w.sock", "mode": "server",
            "completion": "deferred", "unmarked_max_hold_us": 10000000},
           {"name": "sink", "type": "vhost-user", "path": "$TMP/sink.sock", "mode": "server"}]}
EOF

ctl() { scripts/schednicctl -s "$TMP/ctl.sock" --json "$@"; }
start_daemon() {
  "$DAEMON" --config "$TMP/cfg.json" >>"$TMP/schednicd.log" 2>&1 &
  DPID=$!
  for _ in $(seq 600); do ctl version >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "restart.sh: schednicd did not start (see $TMP/schednicd.log)" >&2; exit 1
}
# The completion counter $1 of port w.
wctr() { ctl stats | python3 -c "import json,sys; p=[p for p in json.load(sys.stdin)['ports'] if p['name']=='w'][0]; print(p['completion']['$1'])"; }
# Wait until sn-vufront printed event $1 of round $2; print that line.
wait_event() {
  for _ in $(seq 1200); do
    l=$(grep -F "\"event\":\"$1\",\"round\":$2," "$TMP/w.out" || true)
    [ -n "$l" ] && { echo "$l"; return 0; }
    kill -0 "$WPID" 2>/dev/null || break
    sleep 0.05
  done
  echo "restart.sh: no $1 event for round $2 (see $TMP/w.out, $TMP/schednicd.log)" >&2
  return 1
}
# Wait until both ports are up (the sink reconnects after each start).
wait_up() {
  for _ in $(seq 600); do
    ctl port-list 2>/dev/null | python3 -c "import json,sys; p=json.load(sys.stdin)['ports']; sys.exit(0 if sum(x['state']=='up' for x in p if x['name'] in ('w','sink'))==2 else 1)" && return 0
    sleep 0.1
  done
  echo "restart.sh: ports not up (see $TMP/schednicd.log)" >&2; return 1
}
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])['$2'])" "$1"; }

start_daemon
"$VUFRONT" --socket "$TMP/sink.sock" --scenario sink --timeout 60 --go-file "$TMP/sink-done" \
  >"$TMP/sink.out" 2>&1 & SPID=$!
"$VUFRONT" --socket "$TMP/w.sock" --scenario restart --count "$COUNT" --rounds "$N" \
  --dst 02:99:00:00:00:09 --timeout 60 --go-file "$TMP/go" >"$TMP/w.out" 2>"$TMP/w.err" & WPID=$!

done_=0; held=0; daemon_rec=0; popped_extra=0; nterm=0; nkill=0; failed=0
for ((k = 0; k < N; k++)); do
  wait_up || { failed=1; break; }
  touch "$TMP/go.$k"
  ev=$(wait_event held "$k") || { failed=1; break; }
  held=$((held + $(field "$ev" outstanding)))
  if ((k % 2 == 0)); then
    kill -TERM "$DPID"; wait "$DPID" || true; nterm=$((nterm + 1))
  else
    kill -KILL "$DPID"; wait "$DPID" 2>/dev/null || true; nkill=$((nkill + 1))
    rm -rf "/var/run/dpdk/$PREFIX"
  fi
  start_daemon
  wait_event round "$k" >/dev/null || { failed=1; break; }
  done_=$((done_ + 1))
  rec=$(wctr recovered_after_restart); popped=$(wctr popped)
  daemon_rec=$((daemon_rec + rec))
  popped_extra=$((popped_extra + popped - COUNT))
done
touch "$TMP/sink-done"
wait "$WPID" || true; WPID=
res=$(tail -n 1 "$TMP/w.out")
# The front-end's final book, or its last event if it did not finish.
r() { python3 -c "import json,sys; j=json.loads(sys.argv[1]); print(j['restart']['$1'] if 'restart' in j else j.get({'lost':'outstanding'}.get('$1','$1'),'?'))" "$res"; }
lost=$(r lost); dup=$(r duplicates); recov=$(r recovered)
echo "restarts       $done_ of $N (SIGTERM $nterm, SIGKILL $nkill)"
echo "held           $held"
echo "recovered      $recov (daemon recovered_after_restart: $daemon_rec)"
echo "lost           $lost"
echo "duplicated     $dup"
echo "popped_extra   $popped_extra"
echo "{\"restarts\":$done_,\"sigterm\":$nterm,\"sigkill\":$nkill,\"held\":$held,\"recovered\":\"$recov\",\"daemon_recovered\":$daemon_rec,\"lost\":\"$lost\",\"duplicated\":\"$dup\",\"popped_extra\":$popped_extra}"
[ "$failed" = 0 ] && [ "$done_" = "$N" ] && [ "$lost" = 0 ] && [ "$dup" = 0 ] && [ "$popped_extra" = 0 ]
