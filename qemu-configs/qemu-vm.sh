#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Start one QEMU VM attached to a schednicd vhost-user port.
#
# This is the reference QEMU command line for schednic; the pytest VM suite
# (tests/vm/) runs exactly this script, so what is documented here is tested.
#
# Usage:
#   qemu-configs/qemu-vm.sh --sock PATH [--sock-mode client|server]
#       [--name NAME] [--mac MAC] [--ip CIDR] [--role server|client|idle]
#       [--mem MB] [--queues N] [--guest-dir DIR] [--agent PATH]
#       [--console FILE] [--pidfile FILE] [--dry-run] [-- EXTRA QEMU ARGS]
#
#   --sock-mode client  (default) QEMU connects to PATH; schednicd port in
#                       "server" mode (port.add ... mode=server) owns PATH.
#   --sock-mode server  QEMU creates PATH and listens; schednicd port in
#                       "client" mode connects to it.
#   --guest-dir DIR     vmlinuz + initrd.img from scripts/build-guest-image.sh
#                       (default $SN_BUILD_DIR/guest or <repo>/build/guest)
#   --agent PATH        unix socket for the guest command agent (guest ttyS1);
#                       see scripts/guest/sn-agent for the protocol
#   --console FILE      guest kernel console (ttyS0) log
#   --dry-run           print the command line instead of running it
# QEMU runs in the foreground (exec), so the caller's PID is QEMU's PID.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
name=vm0 sock= sock_mode=client mac=52:54:00:00:00:01 ip= role=idle mem=256
queues=1 guest_dir= agent= console=/dev/null pidfile= dry=0
while [ $# -gt 0 ]; do
	case "$1" in
	--name) name=$2; shift 2 ;;
	--sock) sock=$2; shift 2 ;;
	--sock-mode) sock_mode=$2; shift 2 ;;
	--mac) mac=$2; shift 2 ;;
	--ip) ip=$2; shift 2 ;;
	--role) role=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--queues) queues=$2; shift 2 ;;
	--guest-dir) guest_dir=$2; shift 2 ;;
	--agent) agent=$2; shift 2 ;;
	--console) console=$2; shift 2 ;;
	--pidfile) pidfile=$2; shift 2 ;;
	--dry-run) dry=1; shift ;;
	--) shift; break ;;
	-h|--help) awk 'NR > 2 && /^#/ { print; next } NR > 2 { exit }' "$0"; exit 0 ;;
	*) echo "qemu-vm: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -n "$sock" ] || { echo "qemu-vm: --sock PATH is required" >&2; exit 2; }
[ -n "$guest_dir" ] || guest_dir=${SN_BUILD_DIR:-$repo/build}/guest
[ -n "$agent" ] || agent=$(dirname "$sock")/$name.agent
case "$sock_mode" in
client) sockopt= ;;
# server=on: QEMU creates the socket. wait=off only keeps the chardev from
# blocking; the vhost-user netdev itself still waits at startup until
# schednicd (client-mode port) connects, so add that port first or right
# after starting QEMU.
server) sockopt=,server=on,wait=off ;;
*) echo "qemu-vm: --sock-mode must be client or server" >&2; exit 2 ;;
esac
if [ "$sock_mode" = client ]; then
	# reconnect=1: if schednicd restarts, QEMU redials every second instead
	# of losing the NIC for good. (At startup QEMU waits until connected.)
	sockopt=,reconnect=1
fi
qemu=$(command -v qemu-system-x86_64 || true)
if [ -z "$qemu" ]; then
	echo "qemu-vm: qemu-system-x86_64 not found (apt-get install qemu-system-x86; scripts/bootstrap.sh)" >&2
	exit 1
fi

append="console=ttyS0 loglevel=4 panic=-1 tsc=reliable sn.name=$name sn.role=$role"
[ -z "$ip" ] || append="$append sn.ip=$ip"

mq=()
if [ "$queues" -gt 1 ]; then
	# Multiqueue: one TX+RX pair per queue, so 2N+2 MSI-X vectors would be
	# usual; vectors stay 0 below, so the guest uses one shared INTx.
	mq=(,mq=on)
fi

args=(
	"$qemu"
	-name "$name"
	# TCG: nested KVM stalls guests on the CI machines.
	# On a host with working KVM use "-accel kvm -cpu host" instead.
	-accel tcg
	-machine pc
	-smp 1
	-m "${mem}M"
	# vhost-user needs guest RAM in a shareable fd that schednicd mmaps:
	# memfd with share=on, and a NUMA node that uses it as guest memory.
	# (hugepage-backed memory-backend-file,mem-path=/dev/hugepages also works.)
	-object "memory-backend-memfd,id=mem,size=${mem}M,share=on"
	-numa node,memdev=mem
	# Direct kernel boot of the test guest (no disk, no firmware menu).
	-kernel "$guest_dir/vmlinuz"
	-initrd "$guest_dir/initrd.img"
	-append "$append"
	# The vhost-user control socket (see --sock-mode above).
	-chardev "socket,id=vhost0,path=$sock$sockopt"
	-netdev "vhost-user,id=net0,chardev=vhost0,queues=$queues"
	# vectors=0 disables MSI-X on the NIC: QEMU 7.2 + TCG + vhost-user crashes
	# in msix_set_vector_notifiers when the guest starts the device. Not
	# needed under KVM (vhost-user then uses irqfds and MSI-X is faster).
	-device "virtio-net-pci,netdev=net0,mac=$mac,vectors=0${mq[*]:-}"
	# No default devices (VGA, floppy, parallel, network): a minimal,
	# deterministic machine.
	-nodefaults
	-no-user-config
	-display none
	# ttyS0 = kernel console (log); ttyS1 = command agent on a unix socket
	# (QEMU listens; the test connects whenever it wants, nowait).
	-chardev "file,id=con0,path=$console"
	-serial chardev:con0
	-chardev "socket,id=agent0,path=$agent,server=on,wait=off"
	-serial chardev:agent0
)
[ -z "$pidfile" ] || args+=(-pidfile "$pidfile")
args+=("$@")

if [ $dry -eq 1 ]; then
	# One option per line, quoted only where the shell needs it.
	sq="'"
	for a in "${args[@]}"; do
		if [[ $a =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then
			out=$a
		else
			out="'${a//$sq/$sq\\$sq$sq}'"
		fi
		if [[ $a == -* ]]; then printf ' \\\n  %s' "$out"; else printf ' %s' "$out"; fi
	done
	echo
	exit 0
fi
exec "${args[@]}"
