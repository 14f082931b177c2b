"""redigo's own test suite against Kvasir started as redis-server.

redigo (the Go client; tests/clients/redigo-suite pins v1.9.3) starts the
server of its tests itself, as a redis-server: it runs `redis-server
--version` and reads `v=<major>.<minor>.<patch>` from it, starts `redis-server
--port P --bind ADDR --save "" --appendonly no --enable-debug-command local`,
waits for redis-server's log line ` * Ready to accept connections` on its
standard output, and stops it with SIGINT. Here `redis-server` is a
two-line script that runs `kvasir server`, so the suite checks those
conventions as well as the commands. Every test runs. The suite and its
server run in a network and PID namespace of their own: the port is
fixed, and nothing outlives the run.
"""

import os
import re
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_frameworks import ROOT, _go_test_binary, _run  # noqa: E402

SUITE_DIR = os.path.join(ROOT, "tests", "clients", "redigo-suite")


def test_redigo_own_suite(tmp_path):
    from conftest import _kvasir_bin

    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("unshare (util-linux) and ip (iproute2) are needed to give the suite its own port")
    binary = _go_test_binary(SUITE_DIR, "github.com/gomodule/redigo/redis", str(tmp_path / "redigo.test"),
                             "redigo's tests")
    wrapper = tmp_path / "redis-server"
    wrapper.write_text(f"#!/bin/sh\nexec '{_kvasir_bin()}' server \"$@\"\n")
    wrapper.chmod(0o755)
    log = tmp_path / "server.log"
    script = f"""
set -e
ip link set lo up
cd '{tmp_path}'
'{binary}' -test.count=1 -test.v -test.timeout=10m -redis-server '{wrapper}' -redis-port 6379 -redis-log '{log}'
"""
    rc, out, _ = _run(["unshare", "--pid", "--fork", "--kill-child", "--net", "bash", "-c", script], 900,
                      what="redigo suite")
    server_log = log.read_text(errors="replace") if log.exists() else ""
    assert "panicked" not in server_log, f"the server panicked:\n{server_log[-20000:]}"
    assert rc == 0, f"redigo suite failed (exit {rc}):\n{out[-30000:]}\n--- server log:\n{server_log[-5000:]}"
    passed = re.findall(r"^--- PASS: (\S+)", out, re.M)
    assert len(passed) >= 75, f"too few tests ran: {len(passed)}"
    # The suite's server is the one started through the wrapper: Kvasir.
    assert "Kvasir" in server_log and "Ready to accept connections" in server_log, server_log[-5000:]
    assert "--- FAIL" not in out, out[-5000:]
    assert out.rstrip().splitlines()[-1] == "PASS", out[-5000:]
