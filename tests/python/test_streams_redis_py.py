"""The consumer-group walk-through of redis-py's stream examples
(docs/examples/redis-stream-example.ipynb) against Kvasir: a group created
with MKSTREAM, XADD, XREADGROUP with `>`, XACK, XPENDING (summary and
range), XCLAIM and XAUTOCLAIM moving idle entries to another consumer,
XINFO GROUPS/CONSUMERS, and deleting a consumer with pending entries.
Each assertion is what redis-server 7.0 answers to the same calls."""

import time

import pytest
import redis

STREAM = "skey"
GROUP = "grp"


def _ids(entries):
    return [entry_id for entry_id, _ in entries]


def test_consumer_group_example(r):
    # XGROUP CREATE without MKSTREAM needs the stream; with it, creates it.
    with pytest.raises(redis.ResponseError, match="requires the key to exist"):
        r.xgroup_create(STREAM, GROUP, id="$")
    assert r.xgroup_create(STREAM, GROUP, id="$", mkstream=True) is True
    assert r.xlen(STREAM) == 0
    with pytest.raises(redis.ResponseError, match="BUSYGROUP"):
        r.xgroup_create(STREAM, GROUP, id="$")

    ids = [r.xadd(STREAM, {"ts": i, "v": i * 10}) for i in range(1, 6)]
    assert r.xlen(STREAM) == 5

    # Two consumers share the new entries: `>` hands each entry out once.
    got1 = r.xreadgroup(GROUP, "c1", {STREAM: ">"}, count=2)
    assert got1 == [[STREAM, [(ids[0], {"ts": "1", "v": "10"}), (ids[1], {"ts": "2", "v": "20"})]]]
    got2 = r.xreadgroup(GROUP, "c2", {STREAM: ">"}, count=2)
    assert _ids(got2[0][1]) == ids[2:4]
    got3 = r.xreadgroup(GROUP, "c1", {STREAM: ">"})
    assert _ids(got3[0][1]) == [ids[4]]
    # Nothing new left for anyone (a non-blocking read answers an empty list).
    assert r.xreadgroup(GROUP, "c2", {STREAM: ">"}) == []
    # `0` reads the consumer's own pending entries again.
    own = r.xreadgroup(GROUP, "c1", {STREAM: "0"})
    assert _ids(own[0][1]) == [ids[0], ids[1], ids[4]]

    # XPENDING summary: five delivered, none acknowledged.
    summary = r.xpending(STREAM, GROUP)
    assert summary["pending"] == 5
    assert summary["min"] == ids[0] and summary["max"] == ids[4]
    assert sorted((c["name"], c["pending"]) for c in summary["consumers"]) == [("c1", 3), ("c2", 2)]

    # XACK removes entries from the pending list; acking twice counts 0.
    assert r.xack(STREAM, GROUP, ids[0], ids[2]) == 2
    assert r.xack(STREAM, GROUP, ids[0]) == 0
    pending = r.xpending_range(STREAM, GROUP, min="-", max="+", count=10)
    assert [p["message_id"] for p in pending] == [ids[1], ids[3], ids[4]]
    assert [p["consumer"] for p in pending] == ["c1", "c2", "c1"]
    # ids[1] was delivered twice (the `>` read and the `0` re-read).
    assert [p["times_delivered"] for p in pending] == [2, 1, 2]
    only_c2 = r.xpending_range(STREAM, GROUP, "-", "+", 10, consumername="c2")
    assert [p["message_id"] for p in only_c2] == [ids[3]]

    time.sleep(0.05)
    # XCLAIM: entries idle for at least 10 ms move to c3.
    claimed = r.xclaim(STREAM, GROUP, "c3", min_idle_time=10, message_ids=[ids[1]])
    assert claimed == [(ids[1], {"ts": "2", "v": "20"})]
    # A fresh claim resets the idle time: claiming again at once fails.
    assert r.xclaim(STREAM, GROUP, "c4", min_idle_time=10_000, message_ids=[ids[1]]) == []
    # JUSTID answers only ids and does not count a delivery.
    assert r.xclaim(STREAM, GROUP, "c3", min_idle_time=0, message_ids=[ids[3]], justid=True) == [ids[3]]
    pending = {p["message_id"]: p for p in r.xpending_range(STREAM, GROUP, "-", "+", 10)}
    assert pending[ids[1]]["consumer"] == "c3"
    assert pending[ids[1]]["times_delivered"] == 3
    assert pending[ids[3]]["consumer"] == "c3"
    assert pending[ids[3]]["times_delivered"] == 1

    # XAUTOCLAIM scans the pending list from a start id.
    time.sleep(0.05)
    next_id, entries, deleted = r.xautoclaim(STREAM, GROUP, "c5", min_idle_time=10, start_id="0-0", count=2)
    assert _ids(entries) == [ids[1], ids[3]]
    assert next_id == ids[4]
    assert deleted == []
    next_id, entries, deleted = r.xautoclaim(STREAM, GROUP, "c5", min_idle_time=10, start_id=next_id, count=2)
    assert _ids(entries) == [ids[4]]
    assert next_id == "0-0"
    # A deleted entry is dropped from the pending list and reported.
    r.xadd(STREAM, {"ts": 6, "v": 60}, id="9999999999999-0")
    r.xreadgroup(GROUP, "c6", {STREAM: ">"})
    r.xdel(STREAM, "9999999999999-0")
    time.sleep(0.02)
    _, entries, deleted = r.xautoclaim(STREAM, GROUP, "c7", min_idle_time=10, start_id="9999999999999-0")
    assert entries == [] and deleted == ["9999999999999-0"]

    # XINFO: the group, and its consumers with their pending counts.
    (group,) = r.xinfo_groups(STREAM)
    assert group["name"] == GROUP
    assert group["pending"] == 3
    assert group["last-delivered-id"] == "9999999999999-0"
    consumers = {c["name"]: c["pending"] for c in r.xinfo_consumers(STREAM, GROUP)}
    # A claim that took nothing (c4, c7) creates no consumer in Redis 7.0.
    assert consumers == {"c1": 0, "c2": 0, "c3": 0, "c5": 3, "c6": 0}

    # Deleting a consumer answers how many pending entries it had; they are
    # gone from the group's pending list.
    assert r.xgroup_delconsumer(STREAM, GROUP, "c5") == 3
    assert r.xpending(STREAM, GROUP)["pending"] == 0
    assert r.xgroup_destroy(STREAM, GROUP) == 1
    assert r.xinfo_groups(STREAM) == []
