"""Celery app and tasks for tests/python/test_celery.py. The worker runs as
`celery -A celery_tasks worker` in a subprocess, so the app lives in an
importable module; both sides read the broker and result backend URLs from
KVASIR_CELERY_BROKER / KVASIR_CELERY_BACKEND (the test sets them before it
imports this module and in the worker's environment)."""

import os
import time

from celery import Celery

app = Celery(
    "celery_tasks",
    broker=os.environ.get("KVASIR_CELERY_BROKER", "redis://127.0.0.1:6379/0"),
    backend=os.environ.get("KVASIR_CELERY_BACKEND", "redis://127.0.0.1:6379/1"),
)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    # One message at a time per worker process, acked after the task ran
    # (kombu's unacked hash and index are then exercised for every task).
    worker_prefetch_multiplier=1,
    task_acks_late=True,
    broker_connection_retry_on_startup=True,
    # Fail fast instead of retrying forever if the server misbehaves.
    broker_connection_max_retries=3,
    redis_socket_timeout=15,
    # A few quick reconnect attempts, not Celery's 20 one-second ones.
    result_backend_transport_options={
        "retry_policy": {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5},
    },
    result_expires=600,
)

# The redelivery test shortens kombu's visibility timeout (an hour by
# default) so that a message its killed worker left unacked is restored soon.
if os.environ.get("KVASIR_CELERY_VISIBILITY"):
    app.conf.broker_transport_options = {"visibility_timeout": float(os.environ["KVASIR_CELERY_VISIBILITY"])}


@app.task
def add(x, y):
    return x + y


@app.task
def mul(x, y):
    return x * y


@app.task
def tsum(numbers):
    return sum(numbers)


@app.task
def collect(values):
    """A chord body that returns the header's results as it got them."""
    return list(values)


@app.task
def now():
    """The worker's wall clock when the task ran (for countdown/ETA)."""
    return time.time()


@app.task(bind=True, max_retries=2)
def fail_first_attempt(self, n):
    """Raises on the first attempt and asks to be retried; the retry
    succeeds and reports how many retries it took."""
    if self.request.retries == 0:
        raise self.retry(exc=RuntimeError("first attempt fails on purpose"), countdown=0.5)
    return {"n": n + 1, "retries": self.request.retries}


@app.task
def boom(message):
    raise ValueError(message)


@app.task(bind=True)
def sleepy(self, secs):
    """Sleeps on its first delivery (its worker is killed meanwhile);
    reports a redelivery at once."""
    if self.request.delivery_info.get("redelivered"):
        return "redelivered"
    time.sleep(secs)
    return "slept"
