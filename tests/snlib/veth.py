# SPDX-License-Identifier: BSD-3-Clause
"""A veth pair with one end in a fresh network namespace, for uplinks on a
kernel interface (net_af_xdp, net_af_packet).

VethNs(queues) creates `<host>` in the host namespace (the uplink's
interface) and `<peer>` in namespace `<ns>`, both with `queues` RX and TX
queues, IPv6 off on both ends and nothing else configured, so that the
kernel sends no frame of its own: every frame counted on either end is one
the test or schednicd sent. close() deletes the pair and the namespace.
Names are unique per process and call (other tests run at the same time).
"""
import itertools
import os
import subprocess
from pathlib import Path

_seq = itertools.count()


def _run(*cmd, check=True):
    return subprocess.run(cmd, check=check, timeout=60, capture_output=True, text=True)


class VethNs:
    def __init__(self, queues: int = 1):
        tag = f"{os.getpid() % 100000}{next(_seq)}"
        self.ns = f"snx{tag}"
        self.host = f"snxh{tag}"
        self.peer = f"snxn{tag}"
        self.queues = queues
        _run("ip", "netns", "add", self.ns)
        try:
            q = ["numrxqueues", str(queues), "numtxqueues", str(queues)]
            _run("ip", "link", "add", self.host, *q, "type", "veth", "peer", "name", self.peer,
                 *q, "netns", self.ns)
            _run("sysctl", "-qw", f"net.ipv6.conf.{self.host}.disable_ipv6=1")
            for key in ("all", "default", self.peer):
                self.ns_run("sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1")
            self.ns_run("ip", "link", "set", "lo", "up")
            self.ns_run("ip", "link", "set", self.peer, "up")
            _run("ip", "link", "set", self.host, "up")
            self.peer_mac = self.ns_run("cat", f"/sys/class/net/{self.peer}/address").stdout.strip()
        except BaseException:
            self.close()
            raise

    def ns_run(self, *cmd, check=True, timeout=60, **kw):
        return subprocess.run(["ip", "netns", "exec", self.ns, *cmd], check=check,
                              timeout=timeout, capture_output=True, text=True, **kw)

    def host_stats(self) -> dict:
        """rx/tx packets of the host end (the uplink's interface)."""
        base = Path("/sys/class/net") / self.host / "statistics"
        return {k: int((base / k).read_text()) for k in ("rx_packets", "tx_packets")}

    def peer_stats(self) -> dict:
        """rx/tx packets of the namespace end."""
        out = self.ns_run("cat", f"/sys/class/net/{self.peer}/statistics/rx_packets",
                          f"/sys/class/net/{self.peer}/statistics/tx_packets").stdout.split()
        return {"rx_packets": int(out[0]), "tx_packets": int(out[1])}

    def send_raw(self, dst_mac: str, count: int, ethertype: int = 0x88B5, size: int = 64):
        """Send count frames from the namespace end to dst_mac (AF_PACKET)."""
        prog = (
            "import socket,sys\n"
            "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n"
            "s.bind((sys.argv[1],0))\n"
            "dst=bytes.fromhex(sys.argv[2].replace(':',''))\n"
            "src=bytes.fromhex(sys.argv[3].replace(':',''))\n"
            "n,et,size=int(sys.argv[4]),int(sys.argv[5]),int(sys.argv[6])\n"
            "for i in range(n):\n"
            "    f=dst+src+et.to_bytes(2,'big')+i.to_bytes(4,'big')\n"
            "    s.send(f+bytes(size-len(f)))\n")
        self.ns_run("python3", "-c", prog, self.peer, dst_mac, self.peer_mac, str(count),
                    str(ethertype), str(size))

    def close(self):
        _run("ip", "link", "del", self.host, check=False)
        _run("ip", "netns", "del", self.ns, check=False)
