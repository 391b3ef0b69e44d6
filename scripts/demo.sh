#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/demo.sh — the main job, end to end, in under a minute:
#   1. installs missing dependencies and builds (only when needed)
#   2. starts schednicd on its embedded default config (two vhost-user
#      server ports vm0/vm1 under /run/schednic, an uplink net_tap
#      "sn-uplink0", control socket /run/schednic/schednicd.sock), adds a
#      third port vm2 over JSON-RPC and moves the uplink tap into a
#      private network namespace
#   3. attaches three DPDK virtio-user peers (one sn-gen process on CPU 0),
#      each sending more to the uplink than it can get
#   4. phase 1: the uplink emulated at 40 Mbit/s, weights 1:2:5; phase 2,
#      changed live: weights 8:2:5 and vm0 limited to 16 Mbit/s, below its
#      weighted share (its target is its limit, vm1 and vm2 share the rest
#      2:5); a live per-port rate table, then each phase's measured shares
#      against its max-min fair target (scripts/demo-shares.py)
#   5. writes the per-second rates to a CSV and plots them (PNG), paths
#      printed; pings across the uplink from the namespace to the vm0 peer
#   6. stops everything it started and removes what it created
# Options: --seconds N   length of each phase (default 8)
#          --out DIR     where the CSV and the PNG go (default build/demo)
# Exit status: 0 when every share is within 2 % of its target.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
secs=8
out=$REPO/build/demo
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds)
      # checked before anything starts: a missing or non-numeric value is
      # a usage error, not a failure once the daemon is up
      if [ $# -lt 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt 4 ] || [ "$2" -gt 3600 ]; then
        echo "demo: --seconds needs an integer 4..3600" >&2; exit 2
      fi
      secs=$2; shift 2 ;;
    --out)
      if [ $# -lt 2 ] || [ -z "$2" ]; then echo "demo: --out needs a directory" >&2; exit 2; fi
      out=$(realpath -m "$2"); shift 2 ;;
    -h|--help) awk 'NR > 2 && /^#/ { print; next } NR > 2 { exit }' "$0"; exit 0 ;;
    *) echo "demo: unknown option $1" >&2; exit 2 ;;
  esac
done

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "dependencies and build"
SN_BOOTSTRAP_NO_VM=1 scripts/bootstrap.sh
scripts/build.sh build
B=$REPO/build/backend
CTL="python3 $REPO/scripts/schednicctl"

SOCK=/run/schednic/schednicd.sock
if [ -S "$SOCK" ] && $CTL version >/dev/null 2>&1; then
  echo "demo: a schednicd already answers on $SOCK; stop it first (schednicctl shutdown)" >&2
  exit 1
fi

work=$(mktemp -d /tmp/sn-demo.XXXXXX)
ns=sn-demo-$$
daemon_pid= gen_pid=
cleanup() {
  set +e
  [ -n "$gen_pid" ] && kill "$gen_pid" 2>/dev/null && wait "$gen_pid" 2>/dev/null
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    $CTL shutdown >/dev/null 2>&1 || kill "$daemon_pid"
    for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$daemon_pid" 2>/dev/null
    wait "$daemon_pid" 2>/dev/null
  fi
  ip netns del "$ns" 2>/dev/null
  rm -rf /var/run/dpdk/sn-demo-gen-$$ "$work"
  echo "demo: stopped schednicd and sn-gen, removed namespace $ns and temp files"
}
trap cleanup EXIT INT TERM

say "schednicd --print-default-config (the embedded default the demo runs on)"
"$B/schednicd" --print-default-config

say "start schednicd"
"$B/schednicd" >"$work/schednicd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 150); do
  $CTL version >/dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/schednicd.log"; echo "demo: schednicd exited" >&2; exit 1; }
  sleep 0.2
done
$CTL version
$CTL port-list

say "uplink: move tap sn-uplink0 into namespace $ns (10.99.0.1/24)"
ip netns add "$ns"
ip link set sn-uplink0 netns "$ns"
ip -n "$ns" addr add 10.99.0.1/24 dev sn-uplink0
ip -n "$ns" link set sn-uplink0 up
ip -n "$ns" link set lo up

say "a third port: schednicctl port-add vm2 /run/schednic/vm2.sock"
$CTL port-add vm2 /run/schednic/vm2.sock
# The tap's MAC, learned on the uplink from the ARP requests of a ping
# nobody answers: the peers' frames to it go to the uplink only.
tap_mac=$(ip netns exec "$ns" cat /sys/class/net/sn-uplink0/address)
ip netns exec "$ns" ping -c 1 -W 1 10.99.0.9 >/dev/null 2>&1 || true

say "traffic: three peers (sn-gen, CPU 0) send 1000 B frames to the uplink ($tap_mac), 32 Mbit/s each"
mkdir -p "$out"
"$B/sn-gen" count --port /run/schednic/vm0.sock --port /run/schednic/vm1.sock \
  --port /run/schednic/vm2.sock --cpu 0 --file-prefix sn-demo-gen-$$ --size 1000 \
  --rate 12000 --count "$((4000 * (2 * secs + 30)))" --duration "$((2 * secs + 30))" \
  --flow "src=0,dst=$tap_mac" --flow "src=1,dst=$tap_mac" --flow "src=2,dst=$tap_mac" \
  >"$work/gen.json" 2>"$work/gen.log" &
gen_pid=$!
rc=0
python3 scripts/demo-shares.py --seconds "$secs" --csv "$out/rates.csv" --plot "$out/rates.png" || rc=$?
kill "$gen_pid" 2>/dev/null || true; wait "$gen_pid" 2>/dev/null || true
gen_pid=
[ "$rc" -eq 0 ] || { tail -5 "$work/gen.log" >&2; }

say "uplink: ping from $ns to the vm0 peer (10.99.0.2, answered by sn-gen echo)"
"$B/sn-gen" echo --port /run/schednic/vm0.sock --port /run/schednic/vm1.sock \
  --echo-ip 10.99.0.2 --echo-port 0 --cpu 0 --file-prefix sn-demo-gen-$$ --duration 20 \
  >"$work/echo.json" 2>"$work/echo.log" &
gen_pid=$!
sleep 3
ip netns exec "$ns" ping -c 3 -i 0.3 -W 2 10.99.0.2 || echo "demo: ping across the uplink failed (see $work/echo.log)"
kill "$gen_pid" 2>/dev/null || true; wait "$gen_pid" 2>/dev/null || true
gen_pid=

say "final counters"
$CTL stats
exit "$rc"
