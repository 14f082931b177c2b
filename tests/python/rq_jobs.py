"""Job functions for the RQ test in test_frameworks.py. RQ stores a job's
function as a dotted import path, so they live in an importable module."""


def add(a, b):
    return a + b


def describe(name, **kwargs):
    return {"name": name, "kwargs": dict(sorted(kwargs.items())), "sum": sum(kwargs.values())}


def fail(message):
    raise ValueError(message)


def fail_first_attempt(n):
    """Fails while the job still has retries left, so a job enqueued with
    Retry(max=1) fails once and then succeeds."""
    from rq import get_current_job

    job = get_current_job()
    if job.retries_left:
        raise RuntimeError(f"attempt with {job.retries_left} retries left fails on purpose")
    return n + 1
