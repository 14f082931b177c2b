"""pytest-redis, the pytest plugin projects use to test against a real
Redis, with Kvasir as its redis-server.

pytest-redis (tests/clients/pytest-redis pins it, in a virtualenv of its
own that scripts/install-client-deps.sh makes) runs `redis-server
--version`, starts the server with its command line (a pidfile, a logfile,
`unixsocket`, save points, a password and a database count for a second
server), waits for the port, and gives each test a client on the Unix
socket, emptied after the test. tests/clients/pytest-redis/test_fixtures.py
is what a project's tests do with it; every test must pass, as against
redis-server 7.0.15. It found that Kvasir did not listen on `unixsocket`
(every client failed with "No such file or directory").
"""

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_frameworks import INSTALL_HINT, ROOT, _run  # noqa: E402

SUITE = os.path.join(ROOT, "tests", "clients", "pytest-redis", "test_fixtures.py")
VENV = os.environ.get(
    "KVASIR_PYTEST_REDIS_VENV",
    os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kvasir-pytest-redis-venv"),
)


def test_pytest_redis_fixtures(tmp_path_factory):
    from conftest import _kvasir_bin

    pytest_bin = os.path.join(VENV, "bin", "pytest")
    if not os.path.exists(pytest_bin):
        pytest.fail(f"pytest-redis is not installed in {VENV}; {INSTALL_HINT}")
    # A short folder: a Unix socket's path is at most 107 bytes.
    work = tmp_path_factory.mktemp("prd")
    wrapper = work / "redis-server"
    wrapper.write_text(f"#!/bin/sh\nexec '{_kvasir_bin()}' server \"$@\"\n")
    wrapper.chmod(0o755)
    rc, out, _ = _run(
        [pytest_bin, "-q", "-p", "no:cacheprovider", f"--redis-exec={wrapper}",
         f"--basetemp={work / 'bt'}", SUITE],
        300, cwd=str(work), what="pytest-redis fixtures")
    assert rc == 0, out[-10000:]
    passed = re.search(r"(\d+) passed", out)
    assert passed and int(passed.group(1)) == 6, out[-5000:]
    assert "failed" not in out and "error" not in out.lower(), out[-5000:]
