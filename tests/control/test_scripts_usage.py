# SPDX-License-Identifier: BSD-3-Clause
"""Operator scripts reject bad arguments at once, with a message and exit
status 2, before they install, build or start anything."""
import subprocess

import pytest

from ctlutil import REPO

pytestmark = pytest.mark.functional


def run(*args):
    return subprocess.run([str(REPO / "scripts" / args[0]), *args[1:]], capture_output=True,
                          text=True, timeout=20, stdin=subprocess.DEVNULL, cwd="/")


@pytest.mark.parametrize("args", [["--seconds"], ["--seconds", "abc"], ["--seconds", "0"],
                                  ["--seconds", "-5"], ["--seconds", "99999"]],
                         ids=["missing", "not-a-number", "zero", "negative", "too-long"])
def test_demo_bad_seconds(args):
    r = run("demo.sh", *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip() == "demo: --seconds needs an integer 4..3600", r.stderr
    assert "==" not in r.stdout  # no step started


@pytest.mark.parametrize("script,word", [("demo.sh", "demo: unknown option --bogus"),
                                         ("test.sh", "unknown option --bogus")])
def test_unknown_option(script, word):
    r = run(script, "--bogus")
    assert r.returncode == 2 and word in r.stderr, (r.returncode, r.stderr)


@pytest.mark.parametrize("script", ["demo.sh", "test.sh"])
def test_help(script):
    r = run(script, "--help")
    assert r.returncode == 0 and "Options:" in r.stdout, (r.returncode, r.stdout, r.stderr)


@pytest.mark.parametrize("script,args,word", [
    ("fuzz.sh", ["--seconds"], "fuzz: --seconds needs a positive integer"),
    ("fuzz.sh", ["--seconds", "x"], "fuzz: --seconds needs a positive integer"),
    ("fuzz.sh", ["--seconds", "0"], "fuzz: --seconds needs a positive integer"),
    ("fuzz.sh", ["--hours"], "fuzz: --hours needs a positive integer"),
    ("fuzz.sh", ["--long", "--hours", "1.5"], "fuzz: --hours needs a positive integer"),
    ("fuzz.sh", ["--jobs", "0"], "fuzz: --jobs needs a positive integer"),
    ("fuzz.sh", ["--target"], "fuzz: --target needs a target name"),
    ("fuzz.sh", ["--target", "fuzz_bogus"], "fuzz: unknown target fuzz_bogus (--list shows them)"),
    ("fuzz.sh", ["fuzz_mbox", "bogus"], "fuzz: unknown target bogus (--list shows them)"),
    ("fuzz.sh", ["--bogus"], "fuzz: unknown option --bogus"),
    ("build-guest-image.sh", ["--out"], "build-guest-image: --out needs a value"),
    ("build-guest-image.sh", ["--virtio-net"], "build-guest-image: --virtio-net needs a value"),
    ("build-guest-image.sh", ["--bogus"], "build-guest-image: unknown argument --bogus"),
    ("test.sh", ["--tier"], "test.sh: --tier needs T[,T...]"),
    ("test.sh", ["--tier", "unit,bogus"],
     "test.sh: unknown tier 'bogus' (tiers: unit functional accuracy attack perf vm libvirt)"),
], ids=["fuzz-missing", "fuzz-nan", "fuzz-zero", "fuzz-hours-missing", "fuzz-hours-fraction",
        "fuzz-jobs-zero", "fuzz-target-missing", "fuzz-target-unknown", "fuzz-name-unknown",
        "fuzz-unknown-option", "image-out", "image-virtio", "image-unknown",
        "test-tier-missing", "test-tier-unknown"])
def test_option_values_checked(script, args, word):
    r = run(script, *args)
    assert r.returncode == 2 and r.stderr.strip() == word, (r.returncode, r.stderr)


def test_fuzz_list_names_every_target_with_a_corpus():
    """--list prints each backend/fuzz/fuzz_*.c target; each has a committed
    seed corpus, and the generated seeds and dictionaries are up to date."""
    r = run("fuzz.sh", "--list")
    assert r.returncode == 0, r.stderr
    listed = r.stdout.split()
    sources = sorted(p.stem for p in (REPO / "backend/fuzz").glob("fuzz_*.c"))
    print(listed)
    assert listed == sources and len(listed) >= 11, (listed, sources)
    for t in listed:
        corpus = list((REPO / "backend/fuzz/corpus" / t).glob("*"))
        assert len(corpus) >= 10, (t, len(corpus))
    c = subprocess.run(["python3", str(REPO / "backend/fuzz/seeds.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert c.returncode == 0, c.stderr


@pytest.mark.parametrize("args,word", [
    (["--resync", "0"], "--resync: must be 0.5..3600"),
    (["--hook", "/nonexistent/qemu"], "--hook: /nonexistent/qemu: not found"),
    (["--config", "/nonexistent.json"], "--config: /nonexistent.json"),
    (["--bogus"], "unrecognized arguments: --bogus")])
def test_reconciler_bad_arguments(args, word):
    r = run("schednic-libvirt", *args)
    assert r.returncode == 2 and word in r.stderr, (r.returncode, r.stderr)
