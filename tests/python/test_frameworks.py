"""Job frameworks and client helpers built on Lua scripting and streams,
against a real Kvasir:

- BullMQ (Node, tests/clients/node/bullmq_smoke.js): Queue, Worker and
  QueueEvents over Lua scripts (EVALSHA with cmsgpack) and XREAD BLOCK on the
  queue's event stream; delayed, prioritized and retried jobs, then progress
  events, job logs, a flow, pause/resume, a job scheduler, deduplication and
  clean; against the standalone `server` and the three-node `cluster`
  (ioredis Cluster, every key under the '{bull}' hash tag).
- RQ (Python): enqueue, a burst worker (the forking `rq worker --burst` in a
  subprocess, and the in-process SimpleWorker), results through
  job.return_value() / latest_result() (RQ keeps results in a stream: XADD,
  XREVRANGE), retries, dependencies, and a failing job in the failed registry.
  The job functions live in tests/python/rq_jobs.py.
- asynq (Go, tests/clients/asynq pins v0.26.0): asynq's own internal/rdb
  test suite (its whole storage layer, Lua scripts over sorted sets, lists
  and hashes), built with `go test -c` and run against the standalone
  `server` and the `cluster` (the six tests that fail against a real Redis
  Cluster too are skipped there).
- redis-py helpers: Script objects from register_script (EVALSHA, and the
  NOSCRIPT fallback after SCRIPT FLUSH), Lock (acquire/extend/reacquire/
  release are Lua scripts), and a registered script inside a pipeline.

scripts/test.sh installs RQ into the test venv; scripts/install-client-deps.sh
installs BullMQ into tests/clients/node/node_modules.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
import redis

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIR = os.path.join(ROOT, "tests", "clients", "node")
INSTALL_HINT = "run scripts/install-client-deps.sh first"


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


def _go_test_binary(module_dir, package, binary, what):
    """`go test -c` of `package` from the module cache (offline), pinned by
    the Go module in `module_dir`."""
    go = shutil.which("go")
    if go is None:
        pytest.fail(f"go not found on PATH; {INSTALL_HINT}")
    env = dict(os.environ, GOFLAGS="-mod=readonly", GOPROXY="off")
    rc, out, _ = _run([go, "test", "-c", "-o", binary, package], 600, cwd=module_dir, env=env,
                      what=f"build {what}")
    assert rc == 0, f"building {what} failed ({INSTALL_HINT}):\n{out}"
    return binary


def _run_beside_kvasir_on_6379(tmp_path, server_args, command, timeout, what):
    """Runs the shell `command` with a Kvasir server on 127.0.0.1:6379, both
    in a network namespace of their own (suites that dial Redis's default
    address take no port of the machine) and a PID namespace (nothing
    outlives the run). Returns (exit code, output, the server's log); fails
    the test if the server panicked."""
    from conftest import _kvasir_bin

    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("unshare (util-linux) and ip (iproute2) are needed to give a suite its own :6379")
    data = tmp_path / "data"
    data.mkdir()
    log = tmp_path / "kvasir.log"
    args = " ".join(f"'{a}'" for a in server_args)
    script = f"""
set -e
ip link set lo up
'{_kvasir_bin()}' server {args} --port 6379 --bind 127.0.0.1 --dir '{data}' > '{log}' 2>&1 &
for i in $(seq 1 200); do
  (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && break
  sleep 0.05
done
{command}
"""
    rc, out, _ = _run(["unshare", "--pid", "--fork", "--kill-child", "--net", "bash", "-c", script],
                      timeout, what=what)
    server_log = log.read_text(errors="replace") if log.exists() else ""
    assert "panicked" not in server_log, f"the server panicked:\n{server_log[-20000:]}"
    return rc, out, server_log


# ---------------------------------------------------------------- BullMQ


def _node():
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"node not found on PATH; {INSTALL_HINT}")
    for mod in ("ioredis", "bullmq"):
        if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", mod)):
            pytest.fail(f"tests/clients/node/node_modules/{mod} missing; {INSTALL_HINT}")
    return node


def _bullmq(args, what):
    rc, out, _ = _run([_node(), "bullmq_smoke.js", *args], 90, cwd=NODE_DIR, what=what)
    lines = out.splitlines()
    summaries = [json.loads(l)["summary"] for l in lines if l.startswith('{"summary"')]
    assert rc == 0, f"{what} failed (exit {rc}):\n{out}"
    assert not any(l.startswith("FAIL") for l in lines), f"{what} printed a FAIL line:\n{out}"
    assert summaries and summaries[-1]["ok"], f"{what}: no passing JSON summary:\n{out}"
    s = summaries[-1]
    assert s["added"] == 50 and s["counts"]["completed"] == 50 and s["completed_events"] == 50, s
    assert s.get("extras"), f"{what}: the second phase did not finish:\n{out}"
    return s


def test_bullmq_standalone(server):
    _bullmq([str(server)], "bullmq standalone")


def test_bullmq_cluster(cluster):
    _bullmq(["--cluster", *[str(p) for p in cluster.ports]], "bullmq cluster")


# ---------------------------------------------------------------- asynq

ASYNQ_DIR = os.path.join(ROOT, "tests", "clients", "asynq")
# asynq v0.26.0's own tests that fail against a real Redis Cluster too: the
# messages have no queue, so their keys carry an empty hash tag `{}`, which
# Redis Cluster hashes whole (CROSSSLOT on redis-server 7.0.15's cluster as
# on Kvasir's).
ASYNQ_CROSSSLOT_ON_REDIS_CLUSTER = "TaskIdConflictError"


def _asynq_suite(tmp_path, args, what):
    """Builds asynq's internal/rdb tests (its storage layer: enqueue,
    dequeue, retry, archive, scheduling, groups, all as Lua scripts) and runs
    them against Kvasir."""
    binary = _go_test_binary(ASYNQ_DIR, "github.com/hibiken/asynq/internal/rdb",
                             str(tmp_path / "rdb.test"), what)
    rc, out, _ = _run([binary, "-test.count=1", *args], 600, cwd=str(tmp_path), what=what)
    assert rc == 0, f"{what} failed:\n{out}"
    assert "PASS" in out.splitlines(), f"{what}: no PASS line:\n{out}"


def test_asynq_own_suite_standalone(server, tmp_path):
    _asynq_suite(tmp_path, [f"-redis_addr=127.0.0.1:{server}"], "asynq internal/rdb, standalone")


def test_asynq_own_suite_cluster(cluster, tmp_path):
    addrs = ",".join(f"127.0.0.1:{p}" for p in cluster.ports)
    _asynq_suite(
        tmp_path,
        ["-redis_cluster", f"-redis_cluster_addrs={addrs}", f"-test.skip={ASYNQ_CROSSSLOT_ON_REDIS_CLUSTER}"],
        "asynq internal/rdb, cluster",
    )


# ---------------------------------------------------------------- RQ


@pytest.fixture
def rb(server):
    """A bytes (not decoded) redis-py client, as RQ requires; flushes first."""
    client = redis.Redis(host="127.0.0.1", port=server, socket_timeout=10)
    client.flushall()
    yield client
    client.close()


def _rq_import_path():
    if HERE not in sys.path:
        sys.path.insert(0, HERE)


def _enqueue_rq_jobs(q):
    """Enqueues the test's jobs on q; returns them by role."""
    import rq_jobs
    from rq import Retry

    adds = [q.enqueue(rq_jobs.add, i, 2 * i) for i in range(10)]
    described = q.enqueue(rq_jobs.describe, "report", a=1, b=2)
    failing = q.enqueue(rq_jobs.fail, "boom on purpose")
    flaky = q.enqueue(rq_jobs.fail_first_attempt, 41, retry=Retry(max=1))
    dependent = q.enqueue(rq_jobs.add, 100, 1, depends_on=adds[0])
    return adds, described, failing, flaky, dependent


def _check_rq_outcome(q, adds, described, failing, flaky, dependent):
    from rq.job import JobStatus
    from rq.registry import FailedJobRegistry, FinishedJobRegistry
    from rq.results import Result

    for i, job in enumerate(adds):
        job.refresh()
        assert job.get_status() == JobStatus.FINISHED, (job.id, job.get_status(), job.latest_result())
        assert job.return_value() == 3 * i
        latest = job.latest_result()
        assert latest is not None and latest.type == Result.Type.SUCCESSFUL and latest.return_value == 3 * i
    described.refresh()
    assert described.return_value() == {"name": "report", "kwargs": {"a": 1, "b": 2}, "sum": 3}

    dependent.refresh()
    assert dependent.get_status() == JobStatus.FINISHED
    assert dependent.return_value() == 101

    # Failed once (it fails while it has retries left), was retried and
    # succeeded. RQ records no result for an attempt it retries (as on
    # redis-server 7.0.15), so the job's result stream (Result.all reads it
    # with XREVRANGE) holds the one success.
    flaky.refresh()
    assert flaky.get_status() == JobStatus.FINISHED, flaky.latest_result()
    assert flaky.retries_left == 0
    assert flaky.return_value() == 42
    results = flaky.results()
    assert [r.type for r in results] == [Result.Type.SUCCESSFUL], results

    failing.refresh()
    assert failing.get_status() == JobStatus.FAILED
    assert failing.return_value() is None
    failed_result = failing.latest_result()
    assert failed_result.type == Result.Type.FAILED
    assert "ValueError: boom on purpose" in failed_result.exc_string

    failed_ids = FailedJobRegistry(queue=q).get_job_ids()
    assert failed_ids == [failing.id]
    finished_ids = set(FinishedJobRegistry(queue=q).get_job_ids())
    assert finished_ids == {j.id for j in adds} | {described.id, dependent.id, flaky.id}
    assert q.count == 0


def test_rq_forking_burst_worker(rb, server):
    """`rq worker --burst` in a subprocess: the real forking Worker (a work
    horse process per job, heartbeats, registries)."""
    _rq_import_path()
    from rq import Queue

    q = Queue("kvasir-rq", connection=rb)
    jobs = _enqueue_rq_jobs(q)
    assert q.count == 13  # the dependent job waits for its dependency, outside the queue
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rc, out, secs = _run(
        [sys.executable, "-m", "rq.cli", "worker", "--burst", "--url", f"redis://127.0.0.1:{server}/0",
         "--path", HERE, "kvasir-rq"],
        120, env=env, what="rq worker --burst",
    )
    assert rc == 0, f"rq worker --burst exited {rc}:\n{out}"
    _check_rq_outcome(q, *jobs)
    # A burst worker deregisters itself when done.
    from rq import Worker

    assert Worker.all(connection=rb) == []


def test_rq_simple_worker_in_process(rb):
    _rq_import_path()
    from rq import Queue, SimpleWorker

    q = Queue("kvasir-rq-simple", connection=rb)
    jobs = _enqueue_rq_jobs(q)
    t0 = time.monotonic()
    worker = SimpleWorker([q], connection=rb)
    assert worker.work(burst=True, max_jobs=50) is True  # True: it did work
    print(f"SimpleWorker burst: {time.monotonic() - t0:.2f}s")
    _check_rq_outcome(q, *jobs)


# ---------------------------------------------------------------- redis-py helpers

INCR_SCRIPT = """
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
return {KEYS[1], ARGV[2], n}
"""


def test_register_script_evalsha_and_noscript_fallback(r):
    script = r.register_script(INCR_SCRIPT)
    assert script.sha == hashlib.sha1(INCR_SCRIPT.encode()).hexdigest()
    # First call: EVALSHA answers NOSCRIPT, redis-py loads it and retries.
    assert script(keys=["counter"], args=[5, "tag"]) == ["counter", "tag", 5]
    assert r.script_exists(script.sha) == [True]
    # Second call: EVALSHA straight away.
    assert script(keys=["counter"], args=[2, "again"]) == ["counter", "again", 7]

    assert r.script_flush() is True
    assert r.script_exists(script.sha) == [False]
    with pytest.raises(redis.exceptions.NoScriptError):
        r.evalsha(script.sha, 1, "counter", 1, "x")
    # After the flush the same Script object still works (NOSCRIPT fallback).
    assert script(keys=["counter"], args=[3, "after-flush"]) == ["counter", "after-flush", 10]
    assert r.script_exists(script.sha) == [True]
    assert r.get("counter") == "10"


def test_lock_acquire_extend_release(r, server):
    from redis.exceptions import LockError, LockNotOwnedError

    lock = r.lock("resource", timeout=2)
    assert lock.acquire(blocking=False)
    assert lock.locked() and lock.owned()
    token = r.get("resource")
    assert token == lock.local.token.decode()
    assert 1500 < r.pttl("resource") <= 2000

    # Somebody else cannot take it.
    other = redis.Redis(host="127.0.0.1", port=server, decode_responses=True, socket_timeout=10)
    try:
        rival = other.lock("resource", timeout=2)
        assert rival.acquire(blocking=False) is False
        assert not rival.owned()
        # Releasing or extending a lock one does not hold fails (Lua checks the token).
        with pytest.raises(LockError):
            rival.release()
        rival.local.token = b"not-the-token"
        with pytest.raises(LockNotOwnedError):
            rival.extend(5)
        with pytest.raises(LockNotOwnedError):
            rival.do_release(b"not-the-token")
        assert r.get("resource") == token

        # extend adds to the remaining time; replace_ttl sets it.
        assert lock.extend(3) is True
        assert 4000 < r.pttl("resource") <= 5000
        assert lock.extend(10, replace_ttl=True) is True
        assert 9000 < r.pttl("resource") <= 10000
        assert lock.reacquire() is True
        assert 1500 < r.pttl("resource") <= 2000

        lock.release()
        assert r.exists("resource") == 0
        with pytest.raises(LockError):
            lock.release()

        # A short lock expires; a blocking acquire by the rival then wins.
        short = r.lock("resource", timeout=0.3)
        assert short.acquire(blocking=False)
        t0 = time.monotonic()
        rival2 = other.lock("resource", timeout=2, sleep=0.05)
        assert rival2.acquire(blocking=True, blocking_timeout=3)
        waited = time.monotonic() - t0
        assert 0.1 < waited < 2.5, waited
        with pytest.raises(LockNotOwnedError):
            short.release()  # it expired and someone else holds it now
        rival2.release()
        assert r.exists("resource") == 0
    finally:
        other.close()


def test_lock_serializes_threads(r, server):
    """Four threads increment a counter with GET + SET under one lock (with
    its Lua release): no update is lost."""
    errors = []

    def worker():
        c = redis.Redis(host="127.0.0.1", port=server, decode_responses=True, socket_timeout=10)
        try:
            for _ in range(25):
                with c.lock("counter-lock", timeout=5, sleep=0.005, blocking_timeout=20):
                    v = int(c.get("counter") or 0)
                    c.set("counter", v + 1)
        except Exception as e:  # an assert in a thread would be lost
            errors.append(repr(e))
        finally:
            c.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()
    assert errors == []
    assert r.get("counter") == "100"
    assert r.exists("counter-lock") == 0


@pytest.mark.parametrize("transaction", [True, False], ids=["multi", "plain"])
def test_registered_script_in_pipeline(r, transaction):
    script = r.register_script(INCR_SCRIPT)
    r.script_flush()  # the pipeline must load it itself (SCRIPT EXISTS, SCRIPT LOAD)
    pipe = r.pipeline(transaction=transaction)
    pipe.set("pc", 1)
    script(keys=["pc"], args=[4, "in-pipe"], client=pipe)
    script(keys=["pc"], args=[10, "twice"], client=pipe)
    pipe.get("pc")
    assert pipe.execute() == [True, ["pc", "in-pipe", 5], ["pc", "twice", 15], "15"]
    assert r.script_exists(script.sha) == [True]

    # Already loaded: the pipeline sends EVALSHA directly.
    pipe = r.pipeline(transaction=transaction)
    script(keys=["pc"], args=[1, "x"], client=pipe)
    assert pipe.execute() == [["pc", "x", 16]]


# Error replies of failing scripts, as redis-py raises them (the texts of
# redis-server 7.0.15).


def test_registered_script_error_names_the_line(r):
    script = r.register_script("local x = 1\nreturn redis.call('nosuchcommand')")
    with pytest.raises(redis.exceptions.ResponseError) as e:
        script()
    assert str(e.value) == (
        f"Unknown Redis command called from script script: {script.sha}, on @user_script:2."
    )


def test_function_load_needs_a_newline_after_the_shebang(r):
    for code in ("#!lua name=lib", "#!lua name=lib redis.register_function('f', function() return 1 end)"):
        with pytest.raises(redis.exceptions.ResponseError) as e:
            r.function_load(code)
        assert str(e.value) == "Invalid library metadata", code
