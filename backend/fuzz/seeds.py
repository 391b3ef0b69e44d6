#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Write the seed corpora and dictionaries of the libFuzzer targets.

usage: backend/fuzz/seeds.py [--check]

Writes backend/fuzz/corpus/<target>/seed-* (a few dozen small inputs per
target, each in the input format its target's header describes) and
backend/fuzz/<target>.dict. Deterministic: the same tree gives the same
files. Inputs found by fuzzing (regress-*, and those merged with
scripts/fuzz.sh --merge) live beside the seeds and are left alone.
--check: exit 1 if writing would change any file (CI can keep them in
step with this script).
"""
import json
import random
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
out: dict[Path, bytes] = {}


def put(target: str, name: str, data: bytes | str) -> None:
    if isinstance(data, str):
        data = data.encode()
    out[HERE / "corpus" / target / f"seed-{name}"] = data


def put_dict(target: str, tokens: list[bytes | str]) -> None:
    lines = [f"# {target}.dict, written by seeds.py"]
    seen = set()
    for t in tokens:
        b = t.encode() if isinstance(t, str) else t
        if b in seen:
            continue
        seen.add(b)
        esc = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\x{c:02x}" for c in b)
        lines.append(f'"{esc}"')
    out[HERE / f"{target}.dict"] = ("\n".join(lines) + "\n").encode()


def rand_programs(target: str, rng: random.Random, n: int, lo: int, hi: int) -> None:
    for i in range(n):
        data = bytearray(rng.randrange(256) for _ in range(rng.randrange(lo, hi)))
        if 0 not in data:
            data[-1] = 0   # binary for scripts/lint.py: random bytes are not prose
        put(target, f"{i:02d}", bytes(data))


# ---- Frames. ----
MAC = bytes.fromhex("525400000002525400000001")


def ipv4(proto: int, src: int, dst: int, l4: bytes, ihl: int = 5, frag: int = 0) -> bytes:
    opts = b"\x01" * ((ihl - 5) * 4)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 20 + len(opts) + len(l4), 1, frag, 64,
                      proto, 0, src.to_bytes(4, "big"), dst.to_bytes(4, "big"))
    return hdr + opts + l4


def tcp(sport: int, dport: int, doff: int = 5) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, doff << 4, 0x18, 65535, 0, 0) + \
        b"\0" * ((doff - 5) * 4) + b"payload!" * 4


def udp(sport: int, dport: int) -> bytes:
    return struct.pack("!HHHH", sport, dport, 40, 0) + b"u" * 32


def eth(etype: int, body: bytes, vlan: int | None = None) -> bytes:
    tag = struct.pack("!HH", 0x8100, vlan) if vlan is not None else b""
    return MAC + tag + struct.pack("!H", etype) + body


def ipv6(nxt: int, l4: bytes) -> bytes:
    return struct.pack("!IHBB", 6 << 28, len(l4), nxt, 64) + b"\x20\x01" + b"\0" * 14 + \
        b"\x20\x01" + b"\0" * 13 + b"\x02" + l4


A, B = 0x0A010203, 0xC0A80001


def frames() -> list[tuple[str, bytes]]:
    return [
        ("tcp4", eth(0x0800, ipv4(6, A, B, tcp(1234, 80)))),
        ("tcp4-vlan", eth(0x0800, ipv4(6, A, B, tcp(1234, 443)), vlan=100)),
        ("tcp4-opts", eth(0x0800, ipv4(6, A, B, tcp(1, 80, doff=8), ihl=7))),
        ("udp4", eth(0x0800, ipv4(17, A, B, udp(53, 53)))),
        ("icmp4", eth(0x0800, ipv4(1, A, B, b"\x08\0" + b"\0" * 30))),
        ("frag4", eth(0x0800, ipv4(6, A, B, tcp(9, 80), frag=0x0010))),
        ("tcp6", eth(0x86DD, ipv6(6, tcp(1234, 80)))),
        ("udp6-vlan", eth(0x86DD, ipv6(17, udp(5000, 53)), vlan=7)),
        ("arp", eth(0x0806, b"\0\x01\x08\0\x06\x04\0\x01" + b"\0" * 20)),
        ("runt", MAC[:10]),
    ]


def bind_seeds() -> None:
    """fuzz_bind: flags (bit 0 allowed_macs, bit 1 allowed_ips, bits 2..4
    segments - 1), cut bytes, a frame from the bound MAC."""
    vm = bytes.fromhex("ffffffffffff525400123456")
    src6 = bytes.fromhex("20010db8000000000000000000000005")

    def f(etype: int, body: bytes) -> bytes:
        return vm + struct.pack("!H", etype) + body

    def nd(kind: int, tgt: bytes, opts: bytes) -> bytes:
        body = bytes([kind, 0, 0, 0]) + b"\0" * 4 + (tgt if kind != 133 else b"")
        return f(0x86DD, struct.pack("!IHBB", 6 << 28, len(body) + len(opts), 58, 255) + src6 +
                 bytes(16) + body + opts)

    lla = b"\x02\x01" + vm[6:]
    pad = b"\xfe\x01" + b"\0" * 6
    seeds = [
        ("ipv4", f(0x0800, ipv4(17, 0x0A000005, B, udp(68, 67)))),
        ("ipv4-qinq", vm + struct.pack("!HHHH", 0x88A8, 1, 0x8100, 2) + b"\x08\0" +
         ipv4(17, 0x0A000005, B, udp(1, 2))),
        ("ipv4-3tags", vm + struct.pack("!HHHHHH", 0x88A8, 1, 0x8100, 2, 0x8100, 3) + b"\x08\0" +
         ipv4(17, 0x0A000005, B, udp(1, 2))),
        ("arp", f(0x0806, b"\0\x01\x08\0\x06\x04\0\x01" + vm[6:] + bytes([10, 0, 0, 5]) +
                  bytes(10))),
        ("na", nd(136, src6, b"\x02\x01" + vm[6:])),
        ("ns", nd(135, src6, lla)),
        ("rs", nd(133, b"", lla)),
        ("na-far-option", nd(136, src6, pad * 40 + b"\x02\x01" + bytes(6))),
    ]
    for name, frame in seeds:
        put("fuzz_bind", name, b"\x03" + frame)
        put("fuzz_bind", name + "-3seg", b"\x0b\x10\x80" + frame)


def vnethdr_seeds() -> None:
    # virtio_net_hdr_v1: flags, gso_type, hdr_len, gso_size, csum_start,
    # csum_offset, num_buffers (little-endian), then nseg-1, cuts, frame.
    def hdr(flags: int, gso: int, gso_size: int, cstart: int, coff: int) -> bytes:
        return struct.pack("<BBHHHHH", flags, gso, 0, gso_size, cstart, coff, 0)

    for name, f in frames():
        et = f[12:14]
        l2 = 18 if et == b"\x81\x00" else 14
        if len(f) < l2 + 1:
            put("fuzz_vnethdr", name, hdr(0, 0, 0, 0, 0) + b"\0" + f)
            continue
        l3 = 40 if f[l2 - 2:l2] == b"\x86\xdd" else (f[l2] & 15) * 4
        coff = 16 if b"tcp" in name.encode() or "opts" in name else 6
        put("fuzz_vnethdr", name + "-csum", hdr(1, 0, 0, l2 + l3, coff) + b"\0" + f)
        put("fuzz_vnethdr", name + "-csum-3seg", hdr(1, 0, 0, l2 + l3, coff) + b"\x02\x20\x90" + f)
        put("fuzz_vnethdr", name + "-tso", hdr(1, 1, 1448, l2 + l3, coff) + b"\x01\x40" + f)
        put("fuzz_vnethdr", name + "-none", hdr(2, 0, 0, 0, 0) + b"\0" + f)
    put("fuzz_vnethdr", "tso-huge", hdr(1, 1, 65500, 34, 16) + b"\0" + frames()[0][1])
    put("fuzz_vnethdr", "gso-tcpv6", hdr(1, 4, 1400, 54, 16) + b"\0" + frames()[6][1])
    put("fuzz_vnethdr", "gso-udp", hdr(1, 3, 1400, 34, 6) + b"\0" + frames()[3][1])
    put("fuzz_vnethdr", "ecn", hdr(1, 0x81, 1400, 34, 16) + b"\0" + frames()[0][1])
    put_dict("fuzz_vnethdr", [b"\x08\x00", b"\x86\xdd", b"\x81\x00", b"\x08\x06", b"\x45", b"\x06",
                              b"\x11", b"\x22\x00", b"\x36\x00", b"\x10\x00", b"\x06\x00"])


def classify_seeds(rng: random.Random) -> None:
    # max_flows, flow caps of slots 1..3 (2 bits each), per slot 1..3
    # n_classes and 2 bytes per class, then ops: frame records (sel, kind,
    # l, variable bytes, split), time (200..239), apply (240..).
    pol = [b"\x01\x41\x00", b"\x03\x41\x00\x06\x21\x42\x20\x01",
           b"\x04\x55\x00\x12\x21\x43\x42\x41\x01\x00"]
    for i in range(30):
        body = bytearray([rng.randrange(16), i * 23 % 64])
        for k in range(3):
            body += pol[(i + k) % len(pol)]
        for _ in range(rng.randrange(3, 20)):
            op = rng.randrange(256)
            if op < 200:
                body += bytes([op & 0xFD | 1, rng.randrange(256), rng.randrange(256)])
                body += bytes(rng.randrange(256) for _ in range(rng.randrange(2, 8)))
            elif op < 240:
                body += bytes([op, rng.randrange(256)])
            else:
                body += bytes([op]) + pol[rng.randrange(len(pol))]
        put("fuzz_classify", f"{i:02d}", bytes(body))
    # A table of 300 entries, slot 1 renaming its one paced flow-scoped
    # class on each apply and sending it a flow: past 256 class uids with
    # entries, a new class purges the entries of a gone one.
    body = bytearray(b"\xff\x00" + b"\x01\x40\x00" + b"\x00" * 2)
    for i in range(270):
        body += b"\xf0" + (b"\x01\x40\x20" if i % 2 == 0 else b"\x01\x40\x00")
        body += bytes([0, 1, 0, 1, i % 256, 0, 80, 0])
    put("fuzz_classify", "purge", bytes(body))
    # IPv6: slot 1 has a udp class of 2001:db8::/32 (b bits 2-4 = 1, then
    # a value byte) paced per flow, slot 2 one of VLAN 200 PCP 5 (3) and
    # slot 3 one of flow label 0x12345 (6); frames: IPv6/UDP behind
    # hop-by-hop + a first fragment header, the same tagged with TCI
    # 0xa0c8 (PCP 5, VLAN 200), and one with that flow label.
    pol6 = b"\x01\x46\x04\x00" + b"\x01\x00\x0c\x05" + b"\x01\x00\x18\x01"
    v6 = b"\x18\x06\x10\x02\x01\x00\x02\x13\x88\x00"
    put("fuzz_classify", "ipv6", b"\x08\x00" + pol6 + b"\x01" + v6 + b"\x02\x1a\x06\xa0\xc8"
        + v6[2:] + b"\x03\x18\x06\x30\x00\x00\x13\x88\x00")
    put_dict("fuzz_classify", [b"\x08\x00", b"\x86\xdd", b"\x81\x00", b"\x45", b"\x00\x50",
                               b"\x01\xbb", b"\x00\x35", b"\x0a", b"\xc0\xa8", b"\x20\x00",
                               b"\xc8", b"\xf0", b"\x2b", b"\x2c", b"\x3c", b"\x20\x01\x0d\xb8",
                               b"\x01\x23\x45", b"\xb8", b"\xa0\xc8", b"\x0f\xff"])


CONFIG_KEYS = """af_xdp af_xdp_busy_budget af_xdp_queues af_xdp_start_queue arbiter_cpu auto
burst client completion control cpu_fair_pct datapath deferred devargs eal extra_args
file_prefix huge_dir hugepages idle_sleep_us immediate layout mac_aging_s mac_table_size
main_cpu max_clients max_flows max_hold_us max_ports max_request_bytes mbuf_cache mbufs
memory_mb mode name ncore 1core 2core path pci policy ports queues rx_desc rx_queues server
socket state_dir tx_desc type unmarked_max_hold_us uplink vhost-user worker_cpu worker_cpus
workers""".split()
POLICY_KEYS = """aggregate aggregates algorithm burst_bytes clamp class classes drop dscp dst dst_port
fair family flow flow_label horizon icmp ipv4 ipv6 name overhead_bytes overload pcp policy
ports proto rate_bps scope src src_port tail tcp udp update_ms uplink vlan weight qfq drr
fifo peak_bps min_rate_bps inbound""".split()
JSON_TOKENS = ["{", "}", "[", "]", ":", ",", "\"", "null", "true", "false", "0", "-1",
               "4294967296", "9223372036854775808", "1e999", "\"\\u0000\"", "\"\\ud800\""]


def policies() -> list[dict]:
    return [
        {},
        {"uplink": {"rate_bps": 1000000000, "algorithm": "drr", "overhead_bytes": 24}},
        {"uplink": {"rate_bps": 10000000, "overload": "fair"}},
        {"ports": {"vm0": {"rate_bps": 100000000, "burst_bytes": 3000, "weight": 2}}},
        {"uplink": {"rate_bps": 100000000},
         "ports": {"vm0": {"rate_bps": 20000000, "peak_bps": 40000000, "burst_bytes": 65536,
                           "min_rate_bps": 10000000,
                           "inbound": {"rate_bps": 5000000, "peak_bps": 8000000}},
                   "vm1": {"min_rate_bps": 30000000}, "vm2": {"weight": 9}}},
        {"ports": {"vm0": {"weight": 1, "classes": [
            {"name": "web", "proto": "tcp", "dst_port": 80, "rate_bps": 1000000},
            {"src": "10.0.0.0/8", "dst": "192.0.2.1", "src_port": [1024, 65535], "proto": "udp",
             "scope": "class", "horizon": "clamp"},
            {"proto": 47}]}}},
        {"aggregates": {"tenant": {"rate_bps": 50000000, "burst_bytes": 10000, "update_ms": 50}},
         "ports": {"vm0": {"classes": [{"aggregate": "tenant"}]},
                   "vm1": {"classes": [{"aggregate": "tenant", "proto": "icmp"}]}}},
        {"ports": {"vm0": {"rate_bps": 1}}},
        {"ports": {"bad name": {}}},
        {"ports": {"vm0": {"classes": [{"src": "10.0.0.1/8"}]}}},
        {"ports": {"vm0": {"classes": [{"dst_port": 80}]}}},
        {"ports": {f"vm{i}": {"weight": 65536} for i in range(9)}},
        {"aggregates": {"a": {}}},
        {"uplink": {"algorithm": "wfq"}},
        {"bogus": 1},
    ]


def config_seeds() -> None:
    default = json.loads((ROOT / "backend/daemon/app/default-config.json").read_text())
    cfgs = [
        {},
        default,
        {"uplink": None},
        {"ports": []},
        {"ports": [{"name": "vm0", "type": "vhost-user", "path": "/tmp/vm0.sock", "mode": "client",
                    "completion": "deferred", "max_hold_us": 0, "queues": 4}]},
        {"datapath": {"layout": "ncore", "workers": 3}, "eal": {"worker_cpus": [1, 2, 3]},
         "ports": [{"name": "vm0", "path": "/tmp/a", "queues": 2, "workers": [0, 2]}]},
        {"datapath": {"layout": "2core", "burst": 64, "mac_table_size": 1024, "max_ports": 2}},
        {"datapath": {"max_ports": 1}},
        {"uplink": {"pci": "0000:03:00.0"}},
        {"uplink": {"af_xdp": "eth0", "af_xdp_queues": 2, "rx_queues": 2}},
        {"eal": {"extra_args": ["--log-level=8"] * 3, "hugepages": True, "huge_dir": "/dev/hugepages"}},
        {"control": {"socket": "/run/x.sock", "state_dir": "", "max_request_bytes": 1024}},
        {"policy": policies()[4]},
        {"policy": policies()[5]},
        {"policy": {"ports": {"nope": {"weight": 0}}}},
        {"datapath": {"burst": 0}},
        {"datapath": {"mac_table_size": 1000}},
        {"ports": [{"name": "vm0", "path": "/a"}, {"name": "vm0", "path": "/b"}]},
        {"ports": [{"name": "uplink", "path": "/a"}]},
        {"ports": [{"name": "vm0", "path": "/a/"}]},
        {"datapath": {"layout": "4core"}},
        {"eal": {"memory_mb": -1}},
        {"unknown": True},
        [1, 2],
    ]
    for i, c in enumerate(cfgs):
        put("fuzz_config", f"{i:02d}", json.dumps(c, indent=1 if i % 2 else None))
    put("fuzz_config", "truncated", json.dumps(default)[:200])
    put("fuzz_config", "nul-in-name", '{"ports": [{"name": "vm\\u00000", "path": "/a"}]}')
    put("fuzz_config", "dup-key", '{"eal": {}, "eal": {}}')
    put_dict("fuzz_config", [f'"{k}"' for k in CONFIG_KEYS + POLICY_KEYS] + JSON_TOKENS)


def policy_seeds() -> None:
    for i, p in enumerate(policies()):
        put("fuzz_policy", f"{i:02d}", bytes([7 if i != 10 else 3]) + json.dumps(p).encode())
    put("fuzz_policy", "classes-v6", b"\x07" + json.dumps({"ports": {"vm0": {"classes": [
        {"name": "v6", "proto": "udp", "src": "2001:db8::/32", "dst": "2001:db8:1::1",
         "dst_port": [53, 53], "flow_label": 74565, "dscp": 46, "rate_bps": 1000000},
        {"family": "ipv6", "vlan": 200, "pcp": 5}, {"family": "ipv4", "dscp": 10},
        {"src": "::/0", "dst": "fe80::/10"}]}}}).encode())
    put("fuzz_policy", "null", b"\x07null")
    put("fuzz_policy", "array", b"\x07[]")
    put_dict("fuzz_policy", [f'"{k}"' for k in POLICY_KEYS] + JSON_TOKENS +
             ['"10.0.0.0/8"', '"0.0.0.0/0"', '"255.255.255.255/32"', "[1024, 65535]"])


def rpc_seeds() -> None:
    api = json.loads((ROOT / "backend/daemon/control/rpc_api.json").read_text())
    methods = list(api["methods"])
    reqs = [
        {"jsonrpc": "2.0", "id": 1, "method": "version"},
        {"jsonrpc": "2.0", "id": "a", "method": "port.add",
         "params": {"name": "vm0", "path": "/tmp/vm0.sock", "mode": "client"}},
        {"jsonrpc": "2.0", "id": None, "method": "port.del", "params": {"name": "vm0"}},
        {"jsonrpc": "2.0", "id": 2, "method": "stats.get", "params": {"port": "vm0"}},
        {"jsonrpc": "2.0", "id": 3, "method": "policy.set", "params": {"policy": policies()[4]}},
        {"jsonrpc": "2.0", "id": 4, "method": "policy.del", "params": {"port": "vm0"}},
        {"jsonrpc": "2.0", "method": "port.list"},
        {"jsonrpc": "2.0", "id": 5, "method": "no.such"},
        {"jsonrpc": "2.0", "id": 6, "method": "port.add", "params": ["vm0"]},
        {"jsonrpc": "2.0", "id": 7, "method": "port.add", "params": {"name": 1}},
        {"jsonrpc": "2.0", "id": 8, "method": "port.add", "params": {"name": "x", "path": "/p", "extra": 1}},
        {"jsonrpc": "1.0", "id": 9, "method": "version"},
        {"jsonrpc": "2.0", "id": [1], "method": "version"},
        {"jsonrpc": "2.0", "id": 10, "method": "version", "bogus": 1},
        {"jsonrpc": "2.0", "id": 9223372036854775807, "method": "version"},
    ]
    for i, r in enumerate(reqs):
        put("fuzz_rpc", f"{i:02d}", bytes([i % 4]) + json.dumps(r).encode() + b"\n")
    put("fuzz_rpc", "many", b"\x00" + b"\n".join(json.dumps(r).encode() for r in reqs))
    put("fuzz_rpc", "batch", b"\x00[{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"version\"}]\n")
    put("fuzz_rpc", "garbage", b"\x00{\"jsonrpc\": \"2.0\", \"id\": 1,\n  \n\r\nnot json\n")
    put("fuzz_rpc", "overflow", b"\x00{\"jsonrpc\": \"2.0\", \"id\": 99999999999999999999, \"method\": \"version\"}\n")
    put("fuzz_rpc", "utf8-cut", b"\x01{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"port.del\", \"params\": {\"name\": \"" +
        "é".encode() * 40 + b"\"}}\n")
    params = set()
    for m in api["methods"].values():
        params.update(m.get("params", {}))
    put_dict("fuzz_rpc", [f'"{m}"' for m in methods] + [f'"{p}"' for p in sorted(params)] +
             ['"jsonrpc"', '"2.0"', '"method"', '"params"', '"id"', '"server"', '"client"'] +
             [f'"{k}"' for k in POLICY_KEYS] + JSON_TOKENS)


# ---- vhost-user messages (fuzz_vhost_msg.c's program format). ----

def vu_table(regions: list[tuple[int, int | None, int | None, int]], kind: int = 0,
             nregions: int | None = None, nfds: int | None = None,
             size: int | None = None) -> bytes:
    """Operation 6 on vid 0: a SET_MEM_TABLE of regions (c, size, offset,
    fd kind); size and offset are sent when c asks for them."""
    b = bytes([6, 0, kind, len(regions) if nregions is None else nregions])
    for c, sz, off, _ in regions:
        b += bytes([c])
        if c & 0x80:
            b += struct.pack("<Q", sz)
        if c & 0x40:
            b += struct.pack("<Q", off)
    if nfds is not None:
        b += bytes([nfds])
    b += bytes(fd for *_, fd in regions[:8 if nfds is None else nfds])
    if size is not None:
        b += bytes([size])
    return b


def vu_fd_msg(inflight: bool, c: int, size: int | None = None, off: int | None = None,
              fds: tuple[int, ...] = (0,), nfds: int | None = None,
              psize: int | None = None, queues: tuple[int, int] | None = None) -> bytes:
    """Operation 6 on vid 0: a SET_LOG_BASE (or SET_INFLIGHT_FD) with
    mmap size and offset from c (sent when c asks for them), its fd kinds
    fds, and the fd count and payload size when given."""
    flags = (0x20 if inflight else 0) | (0x40 if nfds is not None else 0) | \
        (0x80 if psize is not None else 0)
    kind = next(k for k in range(flags, flags + 32) if k % 5 == 2)
    b = bytes([6, 0, kind, c])
    if c & 0x80:
        b += struct.pack("<Q", size)
    if c & 0x40:
        b += struct.pack("<Q", off)
    if inflight and c & 0x10:
        b += struct.pack("<HH", *queues)
    if nfds is not None:
        b += bytes([nfds])
    b += bytes(fds[:1 if nfds is None else nfds])
    if psize is not None:
        b += bytes([psize])
    return b


def vhost_msg_seeds() -> None:
    """One input per SET_MEM_TABLE shape the pre hook refuses, and per
    SET_LOG_BASE and SET_INFLIGHT_FD shape it passes or refuses, each sent
    to a running device between two good tables, then the device stopped
    and closed: connect vid 0 (c: port, r: ring layout), new_device."""
    good = vu_table([(0x00, None, None, 0), (0x01, None, None, 1)])
    bad = {
        "eventfd": vu_table([(0x00, None, None, 4)]),
        "rdonly": vu_table([(0x00, None, None, 5)]),
        "sealed": vu_table([(0x00, None, None, 6)]),
        "nofd": vu_table([(0x00, None, None, 7)]),
        "huge": vu_table([(0x80, 1 << 40, None, 0)]),
        "beyond-file": vu_table([(0xc0, 0x10000, 0x8000, 0)]),
        "size0": vu_table([(0x80, 0, None, 0)]),
        "offset-wraps": vu_table([(0xc0, 0x10000, (1 << 64) - 0x1000, 0)]),
        "overlap": vu_table([(0x00, None, None, 0), (0x00, None, None, 1)]),
        "misaligned": vu_table([(0xc0, 0x1000, 0x801, 0)]),
        "nregions9": vu_table([(0x00 | i, None, None, i & 3) for i in range(8)], nregions=9),
        "fd-count": vu_table([(0x00, None, None, 0)], kind=0x41, nfds=0),
        "short": vu_table([(0x00, None, None, 0)], kind=0x82, size=20),
    }
    for inflight, msg in (False, "log"), (True, "inflight"):
        bad.update({
            f"{msg}-good": vu_fd_msg(inflight, 0x00),
            f"{msg}-good-offset": vu_fd_msg(inflight, 0x20),
            f"{msg}-beyond-file": vu_fd_msg(inflight, 0xc0, 0x10000, 0x8000),
            f"{msg}-huge": vu_fd_msg(inflight, 0x80, 1 << 40),
            f"{msg}-size0": vu_fd_msg(inflight, 0x80, 0),
            f"{msg}-offset-wraps": vu_fd_msg(inflight, 0xc0, 0x1000, (1 << 64) - 0x800),
            f"{msg}-eventfd": vu_fd_msg(inflight, 0x00, fds=(4,)),
            f"{msg}-rdonly": vu_fd_msg(inflight, 0x00, fds=(5,)),
            f"{msg}-sealed": vu_fd_msg(inflight, 0x00, fds=(6,)),
            f"{msg}-nofd": vu_fd_msg(inflight, 0x00, fds=(7,)),
            f"{msg}-fd-count0": vu_fd_msg(inflight, 0x00, nfds=0),
            f"{msg}-fd-count2": vu_fd_msg(inflight, 0x00, fds=(0, 1), nfds=2),
            f"{msg}-short": vu_fd_msg(inflight, 0x00, psize=8),
        })
    bad.update({
        "inflight-queues": vu_fd_msg(True, 0x13, queues=(2, 256)),
        "inflight-queues-past-map": vu_fd_msg(True, 0x10, queues=(2, 256)),
        "inflight-queues-257": vu_fd_msg(True, 0x97, 0x10000, queues=(257, 0)),
    })
    for port, c in (("deferred", 0x00), ("immediate", 0x01)):
        for name, msg in bad.items():
            put("fuzz_vhost_msg", f"{port}-{name}",
                bytes([0, 0, c, 0, 1, 0]) + good + msg + good + bytes([3, 0, 4, 0]))


def main() -> int:
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        print(__doc__, file=sys.stderr)
        return 2
    rng = random.Random(24)
    vnethdr_seeds()
    bind_seeds()
    classify_seeds(rng)
    config_seeds()
    policy_seeds()
    rpc_seeds()
    vhost_msg_seeds()
    # Byte programs: the first bytes pick sizes, the rest are operations.
    rand_programs("fuzz_mbox", rng, 24, 8, 200)
    rand_programs("fuzz_qfq", rng, 24, 16, 300)
    rand_programs("fuzz_twheel", rng, 24, 16, 300)
    rand_programs("fuzz_vring", rng, 24, 40, 400)
    rand_programs("fuzz_mac", rng, 24, 8, 300)
    rand_programs("fuzz_quota", rng, 24, 6, 200)
    stale = [p for p in out if not p.exists() or p.read_bytes() != out[p]]
    if check:
        for p in stale:
            print(f"seeds: {p.relative_to(ROOT)} out of date (run backend/fuzz/seeds.py)",
                  file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(out[p])
    print(f"seeds: {len(out)} files, {len(stale)} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
