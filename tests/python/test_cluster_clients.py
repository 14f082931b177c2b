"""Cluster-client smoke tests: go-redis v9, ioredis, node-redis, Jedis,
Lettuce and Redisson against a real three-node Kvasir cluster (the `cluster`
fixture); node-redis (RESP2 and RESP3, client-side caching), Lettuce, which
speaks RESP3, and Redisson (locks, semaphores, queues and maps built on Lua
scripts and pub/sub) against a standalone server (`server`) too.

Each client program lives in tests/clients/<lang>/, prints PASS/FAIL lines and
exits non-zero on failure; these tests build it (offline, from the caches that
scripts/install-client-deps.sh fills), run it with a timeout and show its
output when it fails. The failover tests (one per client, sharing the
driver `_failover`) kill a node and restart it, so they run last; each reports
how long its client took to write to the killed node's slot again.
"""

import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLIENTS = os.path.join(ROOT, "tests", "clients")
GO_DIR = os.path.join(CLIENTS, "go")
NODE_DIR = os.path.join(CLIENTS, "node")
JAVA_DIR = os.path.join(CLIENTS, "java")
REDISSON_DIR = os.path.join(CLIENTS, "redisson")
INSTALL_HINT = "run scripts/install-client-deps.sh first"


def _tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH; {INSTALL_HINT}")
    return path


def _run(cmd, timeout, cwd=None, env=None, what=None):
    """Runs cmd to completion (killed after timeout); returns (rc, output, secs)."""
    what = what or " ".join(cmd)
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"{what}: killed after {timeout}s\n{out}")
    secs = time.monotonic() - t0
    print(f"--- {what} (exit {p.returncode}, {secs:.1f}s)\n{p.stdout}")
    return p.returncode, p.stdout, secs


def _assert_passed(rc, out, what):
    assert rc == 0, f"{what} failed (exit {rc}):\n{out}"
    lines = out.splitlines()
    assert not any(l.startswith("FAIL") for l in lines), f"{what} printed a FAIL line:\n{out}"
    assert any(l.startswith("PASS") for l in lines), f"{what} printed no PASS line:\n{out}"


def _seeds(cluster):
    return [str(p) for p in cluster.ports]


@pytest.fixture(scope="module")
def go_client():
    go = _tool("go")
    out_dir = tempfile.mkdtemp(prefix="kvclient-go-")
    binary = os.path.join(out_dir, "kvclient-go")
    # Offline: the module cache is filled by the installer.
    goflags = (os.environ.get("GOFLAGS", "") + " -mod=readonly").strip()
    env = dict(os.environ, GOFLAGS=goflags, GOPROXY="off")
    rc, out, _ = _run([go, "build", "-o", binary, "."], 300, cwd=GO_DIR, env=env, what="go build")
    if rc != 0:
        pytest.fail(f"go build failed ({INSTALL_HINT}):\n{out}")
    yield binary
    shutil.rmtree(out_dir, ignore_errors=True)


def _newest_source_mtime(root):
    newest = os.path.getmtime(os.path.join(root, "pom.xml"))
    for d, _, files in os.walk(os.path.join(root, "src")):
        for f in files:
            newest = max(newest, os.path.getmtime(os.path.join(d, f)))
    return newest


def _java_jar(project, name):
    _tool("java")
    jar = os.path.join(project, "target", name)
    # The installer builds the jar; rebuild (offline) only if a source changed.
    if not os.path.exists(jar) or os.path.getmtime(jar) < _newest_source_mtime(project):
        mvn = _tool("mvn")
        rc, out, _ = _run(
            [mvn, "-q", "-B", "-o", "-Dstyle.color=never", "package"], 300, cwd=project, what="mvn -o package"
        )
        if rc != 0 or not os.path.exists(jar):
            pytest.fail(f"mvn -o package failed in {project} ({INSTALL_HINT}):\n{out}")
    return jar


@pytest.fixture(scope="module")
def java_client():
    return _java_jar(JAVA_DIR, "kvclient-java.jar")


@pytest.fixture(scope="module")
def redisson_client():
    return _java_jar(REDISSON_DIR, "kvclient-redisson.jar")


def test_go_redis_basic(cluster, go_client):
    rc, out, _ = _run([go_client, "basic", *_seeds(cluster)], 90, what="go-redis basic")
    _assert_passed(rc, out, "go-redis basic")


def test_go_redis_watch(cluster, go_client):
    rc, out, _ = _run([go_client, "watch", *_seeds(cluster)], 90, what="go-redis watch")
    _assert_passed(rc, out, "go-redis watch")


def _node(module="ioredis"):
    node = _tool("node")
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", module)):
        pytest.fail(f"tests/clients/node/node_modules/{module} missing; {INSTALL_HINT}")
    return node


def test_ioredis(cluster):
    node = _node()
    rc, out, _ = _run([node, "cluster_smoke.js", *_seeds(cluster)], 90, cwd=NODE_DIR, what="ioredis")
    _assert_passed(rc, out, "ioredis")


def test_node_redis_standalone(server):
    rc, out, _ = _run([_node("redis"), "node_redis_smoke.js", "standalone", str(server)], 90,
                      cwd=NODE_DIR, what="node-redis standalone")
    _assert_passed(rc, out, "node-redis standalone")


def test_node_redis_cluster(cluster):
    rc, out, _ = _run([_node("redis"), "node_redis_smoke.js", "cluster", *_seeds(cluster)], 90,
                      cwd=NODE_DIR, what="node-redis cluster")
    _assert_passed(rc, out, "node-redis cluster")


def test_jedis(cluster, java_client):
    java = _tool("java")
    rc, out, _ = _run([java, "-jar", java_client, *_seeds(cluster)], 90, what="jedis")
    _assert_passed(rc, out, "jedis")


def test_lettuce_standalone(server, java_client):
    java = _tool("java")
    rc, out, _ = _run([java, "-cp", java_client, "kvasir.LettuceSmoke", "standalone", str(server)], 120,
                      what="lettuce standalone")
    _assert_passed(rc, out, "lettuce standalone")


def test_lettuce_cluster(cluster, java_client):
    java = _tool("java")
    rc, out, _ = _run([java, "-cp", java_client, "kvasir.LettuceSmoke", "cluster", *_seeds(cluster)], 120,
                      what="lettuce cluster")
    _assert_passed(rc, out, "lettuce cluster")


def test_redisson_standalone(server, redisson_client):
    java = _tool("java")
    rc, out, _ = _run([java, "-jar", redisson_client, "standalone", str(server)], 130,
                      what="redisson standalone")
    _assert_passed(rc, out, "redisson standalone")


def test_redisson_cluster(cluster, redisson_client):
    java = _tool("java")
    rc, out, _ = _run([java, "-jar", redisson_client, "cluster", *_seeds(cluster)], 130,
                      what="redisson cluster")
    _assert_passed(rc, out, "redisson cluster")


# The failover tests run last in this module: each kills a node and restarts it.
#
# Every client program's `failover` scenario follows the same protocol (see
# `failover` in tests/clients/go/main.go): it prints "KILL host:port" and
# "READY"; the test kills that node and answers GO on the program's stdin; the
# same client object keeps writing to the killed node's slot until it
# succeeds and prints "RECOVERY_SECONDS x" (seconds from GO to the first
# successful write), checks that every acknowledged write reads back, then
# prints "RESTART"; the test restarts the node, waits for cluster_state:ok and
# answers GO again.

# Kvasir elects new leaders within about a second of a node's death; a client
# should be writing to the affected slots again within RECOVERY_GOAL seconds,
# and must within RECOVERY_LIMIT.
RECOVERY_GOAL = 2.0
RECOVERY_LIMIT = 5.0
# Recovery times measured in this session, by client, for the summary below.
RECOVERY_TIMES = {}


@pytest.fixture(scope="module", autouse=True)
def _recovery_summary(request):
    """After the module, writes the measured recovery times to the terminal
    (also without -s)."""
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if not RECOVERY_TIMES or tr is None or capman is None:
        return
    with capman.global_and_fixture_disabled():  # what capsys.disabled() does
        tr.write_line("")
        tr.write_line(
            f"failover recovery (kill -> first write to the killed node's slot; goal {RECOVERY_GOAL:g}s, "
            f"limit {RECOVERY_LIMIT:g}s): "
            + ", ".join(f"{what} {secs:.2f}s" for what, secs in RECOVERY_TIMES.items())
        )


def _failover(cluster, cmd, what, cwd=None):
    """Runs a client program's failover scenario (cmd) through the KILL/READY
    and RESTART handshakes; asserts that it passed and that it recovered
    within RECOVERY_LIMIT seconds. Returns the recovery time it measured."""
    # A previous failover test's restarted node may still be taking back its
    # shards' leadership: start from a settled slot map.
    cluster.wait_stable(timeout=30)
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines = queue.Queue()
    output = []
    t0 = time.monotonic()

    def pump():
        for line in proc.stdout:
            lines.put((time.monotonic(), line))
        lines.put((time.monotonic(), None))

    threading.Thread(target=pump, daemon=True).start()

    def note(msg):
        output.append(f"[pytest {time.monotonic() - t0:6.2f}s] {msg}\n")

    killed_at = None
    recovery_seen_at = None

    def read_until(marker, timeout):
        """Collects output until a line equal to marker (True) or EOF/timeout (False)."""
        nonlocal recovery_seen_at
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                at, line = lines.get(timeout=left)
            except queue.Empty:
                return False
            if line is None:
                return False
            output.append(line)
            if line.startswith("RECOVERY_SECONDS ") and recovery_seen_at is None:
                recovery_seen_at = at
            if marker is not None and line.strip() == marker:
                return True

    def say_go():
        proc.stdin.write("GO\n")
        proc.stdin.flush()

    killed = None
    try:
        reached = read_until("READY", 60)
        victims = [l.split()[1] for l in output if l.startswith("KILL ")]
        assert reached and victims, f"{what} did not reach READY:\n" + "".join(output)
        port = int(victims[0].rsplit(":", 1)[1])
        assert port in cluster.ports, f"victim {victims[0]} is not a cluster node:\n" + "".join(output)
        killed = cluster.ports.index(port)
        cluster.kill(killed)
        killed_at = time.monotonic()
        note(f"killed node {killed + 1} ({victims[0]})")
        say_go()

        if read_until("RESTART", 90):
            cluster.start_node(killed)
            restarted, killed = killed, None
            cluster.wait_ok(timeout=60)
            note(f"restarted node {restarted + 1}; cluster_state:ok on every node")
            say_go()

        read_until(None, 120)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = None
        out = "".join(output)
        print(f"--- {what} (exit {rc}, {time.monotonic() - t0:.1f}s)\n{out}")
        assert rc is not None, f"{what} did not finish in time:\n" + out
        recs = [float(l.split()[1]) for l in output if l.startswith("RECOVERY_SECONDS ")]
        if recs:
            RECOVERY_TIMES[what] = recs[0]
            seen = f"{recovery_seen_at - killed_at:.2f}s" if recovery_seen_at is not None else "?"
            print(
                f"[pytest] {what}: RECOVERED after {recs[0]:.2f}s as measured by the client "
                f"(kill -> its report: {seen}; goal {RECOVERY_GOAL:g}s, limit {RECOVERY_LIMIT:g}s)"
            )
        _assert_passed(rc, out, what)
        assert recs, f"{what} printed no RECOVERY_SECONDS line:\n{out}"
        assert recs[0] <= RECOVERY_LIMIT, (
            f"{what}: the client needed {recs[0]:.2f}s to write to the killed node's slot again "
            f"(limit {RECOVERY_LIMIT:g}s, goal {RECOVERY_GOAL:g}s):\n{out}"
        )
        return recs[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if killed is not None:
            cluster.start_node(killed)
            try:
                cluster.wait_ok(timeout=60)
            except RuntimeError as e:
                print(f"[pytest] restarted node {killed + 1} but: {e}")


def test_go_redis_failover(cluster, go_client):
    _failover(cluster, [go_client, "failover", *_seeds(cluster)], "go-redis failover")


def test_ioredis_failover(cluster):
    node = _node()
    _failover(cluster, [node, "failover.js", *_seeds(cluster)], "ioredis failover", cwd=NODE_DIR)


def test_jedis_failover(cluster, java_client):
    java = _tool("java")
    _failover(cluster, [java, "-cp", java_client, "kvasir.Failover", *_seeds(cluster)], "jedis failover")


def test_lettuce_failover(cluster, java_client):
    java = _tool("java")
    _failover(cluster, [java, "-cp", java_client, "kvasir.LettuceFailover", *_seeds(cluster)], "lettuce failover")
