"""Celery 5 against a real Kvasir: kombu's Redis transport as the broker
(database 0) and Celery's Redis result backend (database 1).

A worker (`celery -A celery_tasks worker`, the solo pool and a prefork pool
of two processes) runs in a subprocess. The test sends 50 tasks and checks
every result, runs a group, two chords (the Redis backend counts a chord's
finished parts with MULTI/ZADD/ZCOUNT/GET and fires the body from the
worker that finishes the last part), a chain, a task that retries once, a
task with a countdown (the worker holds the ETA message unacked until it is
due) and a failing task; it pings the worker over the broadcast (pidbox)
exchange; results reach the client over pub/sub. Every wait is bounded by
one deadline, and the worker is stopped by pid (SIGTERM, then SIGKILL of its
process group) whatever happens. A second test kills (SIGKILL) a worker in
the middle of a task and checks that the next worker restores the unacked
message (kombu's visibility timeout, cut to 1 s: a redis-py Lock, whose
release is an EVALSHA, around ZREVRANGEBYSCORE, then WATCH/HGET/MULTI/EXEC)
and runs it again. No worker flag (--without-heartbeat, --without-gossip,
--without-mingle) is needed: mingle, gossip and heartbeats run as usual.

The tasks live in tests/python/celery_tasks.py; scripts/test.sh installs
Celery into the test venv.
"""

import gc
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis

HERE = os.path.dirname(os.path.abspath(__file__))
# Celery 5.5's Redis backend calls redis-py 5.3's get_connection() the old way.
pytestmark = pytest.mark.filterwarnings("ignore:Call to 'get_connection':DeprecationWarning")
# Everything a test waits for (worker start, every result) together.
DEADLINE_SECS = 60


class Deadline:
    def __init__(self, secs):
        self.end = time.monotonic() + secs

    def left(self):
        left = self.end - time.monotonic()
        if left <= 0:
            pytest.fail("the test's deadline passed")
        return left


def _urls(port):
    return f"redis://127.0.0.1:{port}/0", f"redis://127.0.0.1:{port}/1"


@pytest.fixture
def celery_app(server):
    """The tasks module's app, pointed at this module's server; both
    databases flushed first."""
    pytest.importorskip("celery", reason="run scripts/test.sh to install Celery into the test venv")
    broker, backend = _urls(server)
    os.environ["KVASIR_CELERY_BROKER"] = broker
    os.environ["KVASIR_CELERY_BACKEND"] = backend
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import celery_tasks

    app = celery_tasks.app
    app.conf.update(broker_url=broker, result_backend=backend)
    client = redis.Redis(host="127.0.0.1", port=server, socket_timeout=10)
    client.flushall()
    yield app
    client.close()
    # Drop the result consumer's pub/sub connection while
    # the server still runs: an AsyncResult collected later (after the server
    # is gone) would otherwise UNSUBSCRIBE through the backend's reconnect
    # loop. The short retry policy in celery_tasks bounds that loop anyway.
    gc.collect()
    consumer = app.backend.result_consumer
    consumer.stop()
    consumer._pubsub = None
    consumer.subscribed_to.clear()


class Worker:
    """`celery worker` in a subprocess (its own process group), its log
    collected by a thread."""

    def __init__(self, port, pool, name, **extra_env):
        broker, backend = _urls(port)
        env = dict(
            os.environ,
            KVASIR_CELERY_BROKER=broker,
            KVASIR_CELERY_BACKEND=backend,
            PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""),
            **extra_env,
        )
        pool_args = ["--pool=solo"] if pool == "solo" else ["--pool=prefork", "--concurrency=2"]
        self.name = name
        self.lines = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "celery_tasks", "worker", *pool_args,
             "--loglevel=INFO", "-n", name],
            cwd=HERE, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            if " ready." in line:
                self.ready.set()

    def wait_for(self, text, deadline):
        while text not in self.log():
            if self.proc.poll() is not None:
                pytest.fail(f"celery worker exited {self.proc.returncode} before logging {text!r}:\n{self.log()}")
            if time.monotonic() > deadline.end:
                pytest.fail(f"celery worker did not log {text!r} in time:\n{self.log()}")
            time.sleep(0.05)

    def log(self):
        return "".join(self.lines)

    def kill(self):
        """SIGKILL (a crash): no warm shutdown, nothing acked or restored."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def wait_ready(self, deadline):
        while not self.ready.wait(timeout=0.1):
            if self.proc.poll() is not None:
                pytest.fail(f"celery worker exited {self.proc.returncode} before it was ready:\n{self.log()}")
            if time.monotonic() > deadline.end:
                pytest.fail(f"celery worker not ready in time:\n{self.log()}")

    def stop(self):
        """SIGTERM (warm shutdown), then SIGKILL of the whole process group
        (prefork children included) if it is still there after 10 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group we created; strays only
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        return self.proc.returncode


@pytest.fixture(params=["solo", "prefork"])
def worker(request, server, celery_app):
    w = Worker(server, request.param, f"kvasir-{request.param}@%h")
    try:
        yield w
    finally:
        rc = w.stop()
        print(f"--- celery worker ({request.param}) exit {rc}\n{w.log()}")


def test_celery_worker(celery_app, worker, server):
    import celery_tasks as t
    from celery import chain, chord, group

    t0 = time.monotonic()
    deadline = Deadline(DEADLINE_SECS)
    # Tasks sent before the worker is up wait in the broker's list.
    early = t.add.delay(20, 22)
    worker.wait_ready(deadline)
    started = time.monotonic() - t0

    # The broadcast exchange (pidbox over PUBLISH / PSUBSCRIBE) and the reply
    # queue: the worker answers a ping.
    replies = []
    while not replies:
        replies = celery_app.control.ping(timeout=min(1.0, deadline.left()))
    assert len(replies) == 1 and list(replies[0].values()) == [{"ok": "pong"}], replies
    assert list(replies[0])[0].startswith("kvasir-"), replies

    assert early.get(timeout=deadline.left()) == 42

    # A countdown (ETA) task, sent first so it is due while the rest runs.
    sent_at = time.time()
    eta = t.now.apply_async(countdown=2)

    # 50 tasks, every result checked.
    results = [t.add.delay(i, 1000 * i) for i in range(50)]
    assert [r.get(timeout=deadline.left()) for r in results] == [1001 * i for i in range(50)]
    assert all(r.successful() for r in results)

    # A group.
    g = group(t.mul.s(i, i) for i in range(10))()
    assert g.get(timeout=deadline.left()) == [i * i for i in range(10)]

    # Chords: the last header task to finish fires the body.
    c = chord((t.add.s(i, i) for i in range(10)), t.tsum.s())()
    assert c.get(timeout=deadline.left()) == 90
    # Ordered chord results (the backend's ZADD by group index).
    c2 = chord((t.mul.s(i, 3) for i in range(8)), t.collect.s())()
    assert c2.get(timeout=deadline.left()) == [3 * i for i in range(8)]

    # A chain.
    ch = chain(t.add.s(1, 2), t.add.s(3), t.mul.s(10))()
    assert ch.get(timeout=deadline.left()) == 60

    # A task that fails once and is retried.
    retried = t.fail_first_attempt.delay(41)
    assert retried.get(timeout=deadline.left()) == {"n": 42, "retries": 1}

    # A failing task: the exception comes back through the backend.
    failed = t.boom.delay("boom on purpose")
    with pytest.raises(ValueError, match="boom on purpose"):
        failed.get(timeout=deadline.left())
    assert failed.failed() and failed.state == "FAILURE"

    ran_at = eta.get(timeout=deadline.left())
    assert ran_at - sent_at >= 1.9, f"countdown=2 ran after {ran_at - sent_at:.2f}s"
    assert ran_at - sent_at < 30, f"countdown=2 ran after {ran_at - sent_at:.2f}s"

    # Nothing left in the broker: the queue is empty and (acks_late) every
    # message was acked, so kombu's unacked hash and index empty out.
    broker = redis.Redis(host="127.0.0.1", port=server, db=0, socket_timeout=10)
    try:
        while True:
            pending = (broker.llen("celery"), broker.hlen("unacked"), broker.zcard("unacked_index"))
            if pending == (0, 0, 0):
                break
            if deadline.left() < 0.2:
                pytest.fail(f"broker still holds messages (queue, unacked, unacked_index) = {pending}")
            time.sleep(0.1)
    finally:
        broker.close()
    backend = redis.Redis(host="127.0.0.1", port=server, db=1, socket_timeout=10)
    try:
        assert backend.exists(f"celery-task-meta-{results[0].id}") == 1
        assert 0 < backend.ttl(f"celery-task-meta-{results[0].id}") <= 600
    finally:
        backend.close()
    done = time.monotonic() - t0

    # A warm shutdown on SIGTERM: the worker disconnects cleanly.
    rc = worker.stop()
    assert rc == 0, f"celery worker exited {rc} on SIGTERM:\n{worker.log()}"
    assert "Warm shutdown" in worker.log()
    print(f"celery ({worker.name}): worker ready after {started:.1f}s, all done after {done:.1f}s")


def test_celery_redelivers_a_killed_workers_task(celery_app, server):
    """A worker is killed (SIGKILL) while it runs a task (acks_late, so the
    message stays in kombu's unacked hash and index); once the visibility
    timeout (1 s here) passed, the next worker restores it (a redis-py Lock
    (SET NX PX, EVALSHA release) around ZREVRANGEBYSCORE, then WATCH, HGET,
    MULTI, ZREM, HDEL, RPUSH, EXEC) and runs it again, redelivered."""
    import celery_tasks as t

    deadline = Deadline(DEADLINE_SECS)
    broker = redis.Redis(host="127.0.0.1", port=server, db=0, socket_timeout=10)
    first = Worker(server, "solo", "kvasir-doomed@%h", KVASIR_CELERY_VISIBILITY="1")
    second = None
    try:
        first.wait_ready(deadline)
        res = t.sleepy.delay(30)
        first.wait_for(f"sleepy[{res.id}] received", deadline)
        first.kill()
        assert broker.llen("celery") == 0
        assert broker.hlen("unacked") == 1 and broker.zcard("unacked_index") == 1
        time.sleep(1.2)  # past the visibility timeout

        second = Worker(server, "solo", "kvasir-heir@%h", KVASIR_CELERY_VISIBILITY="1")
        assert res.get(timeout=deadline.left()) == "redelivered"
        while (broker.hlen("unacked"), broker.zcard("unacked_index")) != (0, 0):
            if deadline.left() < 0.2:
                pytest.fail("the redelivered message was never acked")
            time.sleep(0.1)
        assert second.stop() == 0
    finally:
        broker.close()
        for w in (first, second):
            if w is not None:
                rc = w.stop()
                print(f"--- celery worker {w.name} exit {rc}\n{w.log()}")
