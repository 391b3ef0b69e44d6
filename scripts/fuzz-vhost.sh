#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/fuzz-vhost.sh [--seconds N] [--seed K] [--build DIR] — the
# black-box vhost-user message fuzzer (sn-vufront fuzz) against a running
# schednicd for N seconds (default 600): one deferred and one immediate
# port are fuzzed at once, each by its own sn-vufront, with fresh seeds
# for every 60 s round, while the daemon's RPC is checked after each
# round. Prints the messages sent per round and port; exits 1 if the
# daemon died or stopped answering, or a fuzzer saw the back-end stop
# accepting connections. Needs a build (scripts/build.sh build).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=600
seed=$(date +%s)
build=build
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds)
      if [ $# -lt 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt 1 ]; then
        echo "fuzz-vhost: --seconds needs a positive integer" >&2; exit 2
      fi
      secs=$2; shift 2 ;;
    --seed)
      if [ $# -lt 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
        echo "fuzz-vhost: --seed needs a non-negative integer" >&2; exit 2
      fi
      seed=$2; shift 2 ;;
    --build)
      [ $# -ge 2 ] || { echo "fuzz-vhost: --build needs a directory" >&2; exit 2; }
      build=$2; shift 2 ;;
    -h|--help) awk 'NR > 2 && /^#/ { print; next } NR > 2 { exit }' "$0"; exit 0 ;;
    *) echo "fuzz-vhost: unknown argument $1" >&2; exit 2 ;;
  esac
done
daemon=$build/backend/schednicd
front=$build/backend/sn-vufront
[ -x "$daemon" ] && [ -x "$front" ] || {
  echo "fuzz-vhost: no $daemon or $front: run scripts/build.sh $build" >&2; exit 1; }

work=$(mktemp -d /tmp/sn-fuzzvhost-XXXXXX)
prefix=sn-fv-$$
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$work" "/var/run/dpdk/$prefix"
}
trap cleanup EXIT
worker_cpu=$(( $(nproc) > 1 ? 1 : 0 ))
cat >"$work/cfg.json" <<CFG
{"eal": {"memory_mb": 512, "file_prefix": "$prefix", "main_cpu": 0, "worker_cpu": $worker_cpu},
 "control": {"socket": "$work/ctl.sock", "state_dir": "$work/state"},
 "datapath": {"mbufs": 8191}, "uplink": null,
 "ports": [
  {"name": "wd", "type": "vhost-user", "path": "$work/wd.sock", "mode": "server",
   "completion": "deferred"},
  {"name": "wi", "type": "vhost-user", "path": "$work/wi.sock", "mode": "server"}]}
CFG
"$daemon" --config "$work/cfg.json" >"$work/schednicd.log" 2>&1 &
pid=$!
rpc() {   # one JSON-RPC call on the control socket; prints the reply
  python3 - "$work/ctl.sock" "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": sys.argv[2]}) + "\n").encode())
buf = b""
while not buf.endswith(b"\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    buf += chunk
r = json.loads(buf)
assert "result" in r, r
print(json.dumps(r["result"]))
PY
}
for _ in $(seq 100); do rpc version >/dev/null 2>&1 && break; sleep 0.1; done
rpc version >/dev/null || { tail -20 "$work/schednicd.log" >&2; exit 1; }

left=$secs
round=0
rc=0
while [ "$left" -gt 0 ]; do
  n=$(( left < 60 ? left : 60 ))
  seed_d=$(( seed + 2 * round )); seed_i=$(( seed_d + 1 ))
  "$front" fuzz --socket "$work/wd.sock" --seconds "$n" --seed "$seed_d" --bad-fds --bad-regions >"$work/wd.json" &
  f1=$!
  "$front" fuzz --socket "$work/wi.sock" --seconds "$n" --seed "$seed_i" --bad-fds --bad-regions >"$work/wi.json" &
  f2=$!
  wait "$f1" || rc=1
  wait "$f2" || rc=1
  for p in wd wi; do
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("fuzz-vhost: round %s port %s seed %s: %s messages, %s connections, %s closed by the daemon, ok %s" % (sys.argv[2], sys.argv[3], r["seed"], r["messages"], r["connections"], r["closed_by_backend"], r["ok"])); print("fuzz-vhost:   sent", json.dumps(r["sent"], sort_keys=True))' "$work/$p.json" "$round" "$p" || rc=1
  done
  if ! kill -0 "$pid" 2>/dev/null || ! rpc version >/dev/null; then
    echo "fuzz-vhost: schednicd died or stopped answering (round $round, seeds $seed_d $seed_i)" >&2
    tail -40 "$work/schednicd.log" >&2
    exit 1
  fi
  [ "$rc" = 0 ] || { echo "fuzz-vhost: a fuzzer failed (round $round, seeds $seed_d $seed_i)" >&2;
                     tail -40 "$work/schednicd.log" >&2; exit 1; }
  left=$(( left - n ))
  round=$(( round + 1 ))
done
rejected=$(rpc stats.get | python3 -c 'import json,sys; print(sum(p.get("vhost_user", {}).get("mem_table_rejected", 0) for p in json.load(sys.stdin)["ports"]))')
echo "fuzz-vhost: ${secs}s, $round rounds, daemon alive; memory tables refused: $rejected"
