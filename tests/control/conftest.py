# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures for the control-plane tests.

`ctl` runs every test twice: against rpc_harness (the JSON-RPC server,
sn_rpc*.c, alone with mock handlers, built here with ASan/UBSan; it also
serves test-only methods) and against the real schednicd (the `schednicd`
fixture). Both use the same small limits so the error paths are cheap to
reach.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

from ctlutil import MAX_CLIENTS, MAX_REQ, REPO, TEST_METHODS, Harness, load_schema


@pytest.fixture(scope="session")
def harness_bin(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler"
    out = tmp_path_factory.mktemp("harness") / "rpc_harness"
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "jansson"],
                           capture_output=True, text=True, check=True).stdout.split()
    cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-g", "-O1",
           "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
           "-I", str(REPO / "backend" / "daemon" / "control"), "-I", str(REPO / "backend" / "daemon" / "app"),
           str(Path(__file__).parent / "rpc_harness.c"),
           *(str(REPO / "backend" / "daemon" / "control" / n)
             for n in ("sn_rpc.c", "sn_rpc_dispatch.c", "sn_rpc_params.c")),
           *flags, "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"harness build failed:\n{' '.join(cmd)}\n{r.stderr}"
    return out


@pytest.fixture
def harness(harness_bin, sn_tmpdir):
    """Factory: harness(**kw) -> started Harness serving rpc_api.json + TEST_METHODS."""
    made = []

    def make(schema=None, **kw):
        if schema is None:
            schema = load_schema()
            schema["methods"].update(TEST_METHODS)
        h = Harness(harness_bin, sn_tmpdir, schema, **kw)
        made.append(h)
        return h.start()

    yield make
    for h in made:
        rc = h.stop()
        assert rc == 0, f"harness exit {rc} (ASan/UBSan report?):\n{h.log_tail(60)}"


@pytest.fixture(params=["harness", "daemon"])
def ctl(request, sn_tmpdir):
    """A running control server (harness or schednicd) with MAX_REQ/MAX_CLIENTS.

    ctl.kind tells which; ctl.workdir is a temp dir for vhost socket paths."""
    if request.param == "harness":
        return request.getfixturevalue("harness")()
    d = request.getfixturevalue("schednicd")(
        ports=(), control={"max_request_bytes": MAX_REQ, "max_clients": MAX_CLIENTS})
    d.kind = "daemon"
    return d


