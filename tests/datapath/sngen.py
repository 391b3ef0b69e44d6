# SPDX-License-Identifier: BSD-3-Clause
"""sn-gen driver and counter helpers for the datapath tests.

sn-gen (backend/tools/sn_gen.c) is one single-threaded DPDK process owning
every virtio-user peer of a test. With --sync DIR it does nothing on its own
schedule: it creates DIR/ready once its links are up, sends a phase only
when the test creates DIR/go-<phase>, creates DIR/sent-<phase> when every
frame of that phase was accepted by its virtio driver, and drains until it
is stopped. The tests wait for the daemon's counters to settle between
phases, so nothing depends on how fast the shared 2-core machine runs.
"""
import itertools
import json
import os
import signal
import subprocess
import time
from pathlib import Path

_seq = itertools.count()
DROP_KEYS = ("no_mbuf", "ring_full", "unknown_dst", "malformed", "port_down", "hairpin", "gso_failed",
             "spoofed", "spoofed_arp", "spoofed_nd")


def peer_mac(i: int) -> str:
    """The MAC the tests give sn-gen port i."""
    return f"02:53:47:00:00:{i + 1:02x}"


class SnGen:
    """One sn-gen process in --sync mode."""

    def __init__(self, spawn, binary, workdir: Path, mode, socks, args, tag, mac_base=0):
        self.sync = workdir / f"sync-{tag}"
        self.sync.mkdir()
        self.prefix = f"sn-g-{os.getpid()}-{next(_seq)}"
        argv = [binary, mode, "--cpu", "0", "--file-prefix", self.prefix,
                "--sync", self.sync, "--log-level", "warning", "--settle", "0"]
        for i, s in enumerate(socks):
            argv += ["--port", f"{s},mac={peer_mac(mac_base + i)}"]
        argv += list(args)
        self.proc = spawn(argv, name=f"sn-gen-{tag}", dpdk_prefix=self.prefix,
                          stdout=subprocess.PIPE)
        self.result = None

    def log(self) -> str:
        try:
            return self.proc.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def wait(self, name: str, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (self.sync / name).exists():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"sn-gen exited {self.proc.returncode} before {name}:\n"
                                   f"{self.log()}")
            time.sleep(0.02)
        raise TimeoutError(f"sn-gen: no {name} after {timeout}s:\n{self.log()}")

    def go(self, phase, timeout: float = 120.0):
        """Start a phase ("learn" or a number) and wait until it is all sent."""
        (self.sync / f"go-{phase}").touch()
        self.wait(f"sent-{phase}", timeout)

    def finish(self, timeout: float = 30.0) -> dict:
        """Stop (it drains once more first) and return its JSON summary."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, f"sn-gen exited {self.proc.returncode}:\n{self.log()}"
        self.result = json.loads(out)
        assert self.result["ok"], self.result
        return self.result


def port_table(stats: dict) -> dict:
    return {p["name"]: p for p in stats["ports"]}


def drops_total(p: dict) -> int:
    return sum(p["drops"].get(k, 0) for k in DROP_KEYS)


def egress_drops(p: dict) -> int:
    """Drops charged to a port as the destination (spec: ring_full, port_down)."""
    return p["drops"]["ring_full"] + p["drops"]["port_down"]


def wait_settled(d, pred, timeout: float = 60.0, quiet: float = 0.3) -> dict:
    """Poll stats.get until pred(ports) holds and the counters stop moving for
    `quiet` seconds; returns the port table. Rate-independent by design."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        t = port_table(d.stats())
        key = {n: (p["rx_packets"], p["tx_packets"], drops_total(p)) for n, p in t.items()}
        if key != last:
            last, since = key, time.monotonic()
        elif pred(t) and time.monotonic() - since >= quiet:
            return t
        time.sleep(0.05)
    raise TimeoutError(f"daemon counters did not settle: {last}\n{d.log_tail()}")


def learn(d, g, names, timeout: float = 60.0) -> dict:
    """Wait for sn-gen `g` and the daemon's ports `names` to be up, then run
    its learn phase (one broadcast from each port's MAC) until every port
    has received it; returns the port table."""
    g.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    g.go("learn")
    return wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 for n in names), timeout)
