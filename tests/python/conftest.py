"""Starts a real kvasir server on a free loopback port for each test module."""

import os
import re
import subprocess
import tempfile
import threading

import pytest
import redis


def _kvasir_bin():
    path = os.environ.get("KVASIR_BIN")
    if not path:
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "target"))
        path = os.path.join(target, "debug", "kvasir")
    if not os.path.exists(path):
        pytest.fail(f"kvasir binary not found at {path}: build it with `cargo build -p kvasir`")
    return path


@pytest.fixture(scope="module")
def server(request):
    """A standalone server per test module; a module may give it more
    arguments in KVASIR_SERVER_ARGS."""
    extra = list(getattr(request.module, "KVASIR_SERVER_ARGS", []))
    data = tempfile.mkdtemp(prefix="kvasir-py-")
    proc = subprocess.Popen(
        [_kvasir_bin(), "server", "--port", "0", "--bind", "127.0.0.1", "--dir", data, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    port = None
    timer = threading.Timer(30, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            m = re.search(r"port=(\d+)", line)
            if m:
                port = int(m.group(1))
                break
    finally:
        timer.cancel()
    if port is None:
        proc.kill()
        pytest.fail("kvasir did not report its port")
    # Keep draining the log so the server never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    yield port
    proc.kill()
    proc.wait(timeout=10)
    subprocess.run(["rm", "-rf", data], check=False)


@pytest.fixture
def r(server):
    client = redis.Redis(host="127.0.0.1", port=server, decode_responses=True, socket_timeout=10)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(scope="module")
def cluster():
    """A three-node cluster (24 shards, RF=3) per test module, ready
    (`cluster_state:ok` on every node) before the first test runs."""
    from kvcluster import Cluster

    c = Cluster().start()
    try:
        c.wait_ok()
    except Exception:
        c.stop()
        raise
    yield c
    c.stop()
