"""Application patterns Redis users rely on, driven by redis-py: a work
queue (producer LPUSH, consumers BRPOP) and a leaderboard (ZADD, ZINCRBY,
ZREVRANGE WITHSCORES)."""

import threading

import redis


def test_queue_producer_lpush_consumers_brpop(r, server):
    jobs = [f"job-{i}" for i in range(200)]
    consumed = []
    wrong_keys = []
    lock = threading.Lock()

    def consumer():
        c = redis.Redis(host="127.0.0.1", port=server, decode_responses=True, socket_timeout=10)
        while True:
            item = c.brpop("queue:jobs", timeout=2)
            if item is None:
                break
            key, job = item
            if key != "queue:jobs":
                # An assert here would only end this thread, not the test.
                with lock:
                    wrong_keys.append(key)
            if job == "STOP":
                break
            with lock:
                consumed.append(job)
        c.close()

    workers = [threading.Thread(target=consumer) for _ in range(3)]
    for w in workers:
        w.start()
    for job in jobs:
        r.lpush("queue:jobs", job)
    for _ in workers:
        r.lpush("queue:jobs", "STOP")
    for w in workers:
        w.join(timeout=30)
        assert not w.is_alive()
    # Every job consumed exactly once, and a FIFO queue: LPUSH + BRPOP.
    assert wrong_keys == []
    assert sorted(consumed) == sorted(jobs)
    assert len(consumed) == len(set(consumed))
    assert r.llen("queue:jobs") == 0


def test_brpop_times_out_with_none(r):
    assert r.brpop("queue:empty", timeout=0.2) is None


def test_leaderboard_zadd_zincrby_zrevrange(r):
    r.zadd("board", {"alice": 10, "bob": 20, "carol": 15})
    assert r.zincrby("board", 12, "alice") == 22.0
    r.zincrby("board", 1.5, "dave")
    top = r.zrevrange("board", 0, 2, withscores=True)
    assert top == [("alice", 22.0), ("bob", 20.0), ("carol", 15.0)]
    assert r.zrevrank("board", "dave") == 3
    assert r.zscore("board", "dave") == 1.5
    # Ties are ordered by member, reversed in ZREVRANGE.
    r.zadd("board", {"erin": 20})
    assert r.zrevrange("board", 1, 2) == ["erin", "bob"]
    assert r.zcard("board") == 5


def test_transaction_pipeline_and_pubsub(r, server):
    with r.pipeline(transaction=True) as p:
        p.incr("counter")
        p.incr("counter")
        assert p.execute() == [1, 2]
    sub = r.pubsub()
    sub.subscribe("alerts")
    assert sub.get_message(timeout=5)["type"] == "subscribe"
    assert r.publish("alerts", "disk full") == 1
    msg = sub.get_message(timeout=5)
    assert msg["type"] == "message" and msg["data"] == "disk full"
    sub.close()
