"""redis-py's cluster client (redis.cluster.RedisCluster) against a real
three-node Kvasir cluster (24 shards, RF=3): to redis-py, and to redis-cli /
redis-benchmark in cluster mode, Kvasir must look like a Redis 7 Cluster.

Every test is bounded in time. Tests that need the exact reply of one node
(error texts, MOVED targets) use a raw connection to that node (RespConn) or
a plain redis.Redis on its port.

redis-py 5 (the version scripts/test.sh installs) has no transactions in its
cluster pipeline (`RedisCluster.pipeline(transaction=True)` raises
"transaction is deprecated in cluster mode"), so WATCH/MULTI/EXEC go through
the slot master's own redis.Redis client, `rc.get_redis_connection(
rc.get_node_from_key(key))`, as redis-py 5 users do.
"""

import collections
import random
import re
import subprocess
import threading
import time

import pytest
import redis
from redis.cluster import RedisCluster
from redis.exceptions import (
    ClusterDownError,
    MovedError,
    ResponseError,
    TryAgainError,
    WatchError,
)

from kvcluster import Cluster, RespConn, RespError

HOST = "127.0.0.1"
PROTOCOLS = pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])


# --------------------------------------------------------------------------
# fixtures and helpers
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stable(cluster):
    """The module's cluster once every node agrees on the slot -> master map
    and it has stopped changing (leaders may move to their preferred node
    right after `cluster_state:ok`). Returns the map."""
    return cluster.wait_stable(timeout=20, quiet=1.0)


def flush_all_nodes(cluster):
    """FLUSHALL on every node: each master flushes the slots it serves."""
    for port in cluster.ports:
        with redis.Redis(host=HOST, port=port, socket_timeout=10) as c:
            c.flushall()


def make_rc(cluster, protocol):
    return RedisCluster(
        host=HOST,
        port=cluster.ports[0],
        decode_responses=True,
        protocol=protocol,
        socket_timeout=10,
        socket_connect_timeout=5,
    )


@pytest.fixture
def protocol():
    return 2


@pytest.fixture
def rc(cluster, stable, protocol):
    flush_all_nodes(cluster)
    client = make_rc(cluster, protocol)
    yield client
    client.close()


def node_client(port, protocol=2):
    """A plain redis.Redis on one node, on a single connection."""
    return redis.Redis(
        host=HOST,
        port=port,
        decode_responses=True,
        protocol=protocol,
        socket_timeout=10,
        socket_connect_timeout=5,
        single_connection_client=True,
    )


def node_call(port, *args):
    with node_client(port) as c:
        return c.execute_command(*args)


def master_port(rc, key):
    return rc.get_node_from_key(key).port


def other_key_same_master(rc, key, prefix):
    """A key whose slot differs from `key`'s but has the same master."""
    slot, port = rc.keyslot(key), master_port(rc, key)
    for i in range(100000):
        k = f"{prefix}{i}"
        if rc.keyslot(k) != slot and master_port(rc, k) == port:
            return k
    raise AssertionError("no second key found on the same master")


# --------------------------------------------------------------------------
# 1. topology and basic routing
# --------------------------------------------------------------------------


@PROTOCOLS
def test_primaries_are_the_three_nodes_and_no_primary_is_a_replica(rc, cluster):
    primaries = rc.get_primaries()
    assert sorted(n.port for n in primaries) == sorted(cluster.ports), (
        f"get_primaries() = {[n.name for n in primaries]}, expected one per node {cluster.ports}; "
        f"CLUSTER SLOTS = {rc.execute_command('CLUSTER SLOTS', target_nodes=RedisCluster.RANDOM)}"
    )
    # Nodes that master at least one slot, as redis-py's slot cache has them.
    masters = {nodes[0].name for nodes in rc.nodes_manager.slots_cache.values()}
    assert masters == {n.name for n in primaries}
    replicas = {n.name for n in rc.get_replicas()}
    assert not (replicas & masters), (
        f"redis-py reports {sorted(replicas & masters)} as replicas, but they master slots "
        f"(CLUSTER SLOTS lists a master of other slots as a replica)"
    )
    assert len(rc.nodes_manager.slots_cache) == 16384


@PROTOCOLS
def test_set_get_1000_keys_over_all_slots(rc, cluster, stable):
    keys = {f"key:{i}:{random.random()}": f"value-{i}" for i in range(1000)}
    for k, v in keys.items():
        assert rc.set(k, v) is True
    for k, v in keys.items():
        assert rc.get(k) == v
    # The keys cover every slot range of the map and every node.
    ranges_hit = set()
    for k in keys:
        slot = rc.keyslot(k)
        for a, b, _ in stable:
            if a <= slot <= b:
                ranges_hit.add((a, b))
    assert ranges_hit == {(a, b) for a, b, _ in stable}
    assert {master_port(rc, k) for k in keys} == set(cluster.ports)
    # Multi-slot helpers split by slot and still agree.
    some = list(keys)[:200]
    assert rc.mget_nonatomic(some) == [keys[k] for k in some]
    assert rc.delete(*some[:50]) == 50  # redis-py splits DEL per slot
    assert rc.exists(*some[:50]) == 0
    assert rc.exists(*some[50:]) == 150


# --------------------------------------------------------------------------
# 2. whole-keyspace commands: SCAN, DBSIZE, INFO, KEYS
# --------------------------------------------------------------------------


@PROTOCOLS
def test_scan_dbsize_info_keys_over_primaries(rc, cluster):
    keys = [f"scan:{i}" for i in range(1000)]
    for k in keys:
        rc.set(k, "x")

    seen = collections.Counter(rc.scan_iter(count=100))
    dups = {k: n for k, n in seen.items() if n > 1}
    assert not dups, f"SCAN returned keys more than once: {list(dups.items())[:10]}"
    missing = set(keys) - set(seen)
    assert not missing, f"SCAN missed {len(missing)} keys, e.g. {sorted(missing)[:10]}"
    assert set(seen) == set(keys)

    expected = {k for k in keys if k.startswith("scan:1")}
    matched = collections.Counter(rc.scan_iter(match="scan:1*", count=50))
    assert max(matched.values(), default=1) == 1
    assert set(matched) == expected and len(expected) == 111

    assert rc.dbsize(target_nodes=RedisCluster.PRIMARIES) == 1000
    # Each node counts only the slots it masters, as Redis does.
    per_node = {p: node_call(p, "DBSIZE") for p in cluster.ports}
    assert sum(per_node.values()) == 1000, per_node

    info = rc.info(target_nodes=RedisCluster.PRIMARIES)
    assert isinstance(info, dict) and set(info) == {f"{HOST}:{p}" for p in cluster.ports}, (
        f"INFO answered by {list(info)[:5]}"
    )
    for name, section in info.items():
        assert section.get("cluster_enabled") == 1, (name, section.get("cluster_enabled"))

    # redis-py merges KEYS replies into a set, so check the nodes one by one too.
    per_node_keys = {p: node_call(p, "KEYS", "*") for p in cluster.ports}
    assert sum(len(v) for v in per_node_keys.values()) == 1000, {p: len(v) for p, v in per_node_keys.items()}
    assert sorted(rc.keys(target_nodes=RedisCluster.PRIMARIES)) == sorted(keys)
    assert sorted(rc.keys("scan:1*", target_nodes=RedisCluster.PRIMARIES)) == sorted(expected)


# --------------------------------------------------------------------------
# 3. optimistic locking: WATCH / MULTI / EXEC on the slot's master
# --------------------------------------------------------------------------


def master_redis(rc, key):
    """The redis.Redis client redis-py keeps for the key's slot master."""
    return rc.get_redis_connection(rc.get_node_from_key(key))


@PROTOCOLS
def test_watch_increments_under_contention(rc):
    key, commits = "{ol}counter", "{ol}commits"
    rc.set(key, 0)
    threads_n, per_thread = 4, 50
    deadline = time.monotonic() + 120
    lock = threading.Lock()
    stats = {"watch_errors": 0, "redirects": 0}
    errors = []
    workers_done = threading.Event()
    writer_incrs = [0]

    def worker():
        try:
            done = 0
            while done < per_thread:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {done}/{per_thread} increments before the deadline")
                client = master_redis(rc, key)
                with client.pipeline(transaction=True) as p:
                    try:
                        p.watch(key)
                        v = int(p.get(key))
                        p.multi()
                        p.set(key, v + 1)
                        p.incr(commits)
                        p.execute()
                        done += 1
                    except WatchError:
                        with lock:
                            stats["watch_errors"] += 1
                    except (MovedError, TryAgainError, ClusterDownError):
                        # The slot's leader moved: nothing was applied; retry
                        # on the new master.
                        with lock:
                            stats["redirects"] += 1
                        rc.nodes_manager.initialize()
                        time.sleep(0.05)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    def writer():
        try:
            while not workers_done.is_set() and time.monotonic() < deadline:
                rc.incr(key)
                writer_incrs[0] += 1
                # Paced so that a transaction (WATCH, GET, EXEC: three
                # round trips, two through the Raft log) can commit between
                # two writes on a machine whose fsync takes milliseconds;
                # at 2 ms the workers starved (17 of 50 in 120 s here).
                time.sleep(0.02)
        except Exception as e:
            errors.append(e)

    w = threading.Thread(target=writer, daemon=True)
    ts = [threading.Thread(target=worker, daemon=True) for _ in range(threads_n)]
    w.start()
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=max(1, deadline - time.monotonic()) + 5)
    workers_done.set()
    w.join(timeout=15)
    assert not any(t.is_alive() for t in ts + [w]), "threads did not finish in time"
    assert not errors, errors
    print(f"watch errors={stats['watch_errors']} redirects={stats['redirects']} writer incrs={writer_incrs[0]}")
    assert writer_incrs[0] > 0
    assert int(rc.get(commits)) == threads_n * per_thread
    assert int(rc.get(key)) == threads_n * per_thread + writer_incrs[0], stats
    # Five clients hammering one key: transactions must have hit conflicts.
    assert stats["watch_errors"] > 0, "no EXEC was ever aborted by a concurrent write"


@PROTOCOLS
def test_watch_conflict_from_another_client_aborts_exec(rc, protocol):
    key = "{wc}k"
    rc.set(key, "1")
    client = master_redis(rc, key)
    with client.pipeline(transaction=True) as p:
        p.watch(key)
        assert p.get(key) == "1"
        # Another client (the cluster client) writes the watched key.
        assert rc.set(key, "other") is True
        p.multi()
        p.set(key, "mine")
        with pytest.raises(WatchError):
            p.execute()
    assert rc.get(key) == "other"


@PROTOCOLS
def test_watch_is_per_key_not_per_slot(rc, protocol):
    # As in Redis, a write to another key of the same slot (same shard) does
    # not abort a transaction that watches only `key`.
    key = "{wc}k"
    client = master_redis(rc, key)
    rc.set(key, "1")
    with client.pipeline(transaction=True) as p:
        p.watch(key)
        v = int(p.get(key))
        rc.set("{wc}other", "x")
        p.multi()
        p.set(key, v + 1)
        assert p.execute() == [True]
    assert rc.get(key) == "2"


@PROTOCOLS
def test_watch_keys_in_two_slots_is_crossslot(rc, protocol):
    k1 = "{xs}a"
    k2 = other_key_same_master(rc, k1, "xs-other-")
    with node_client(master_port(rc, k1), protocol) as c:
        with pytest.raises(ResponseError) as ei:
            c.execute_command("WATCH", k1, k2)
        assert "CROSSSLOT" in str(ei.value)
        # Nothing is watched: a transaction still runs.
        assert c.execute_command("MULTI") in (True, "OK")
        c.execute_command("SET", k1, "v")
        assert c.execute_command("EXEC") is not None
    assert rc.get(k1) == "v"


@PROTOCOLS
def test_watched_key_expiring_aborts_exec(rc, protocol):
    key = "{wx}k"
    rc.set(key, "v")
    assert rc.pexpire(key, 400)
    client = master_redis(rc, key)
    with client.pipeline(transaction=True) as p:
        p.watch(key)
        assert p.get(key) == "v", "key expired before WATCH: machine too slow?"
        time.sleep(0.7)
        p.multi()
        p.set("{wx}side", "written")
        with pytest.raises(WatchError):
            p.execute()
    assert rc.get(key) is None
    assert rc.get("{wx}side") is None


@PROTOCOLS
def test_unwatch_then_exec_succeeds(rc, protocol):
    key = "{uw}k"
    rc.set(key, "1")
    client = master_redis(rc, key)
    with client.pipeline(transaction=True) as p:
        p.watch(key)
        assert p.get(key) == "1"
        rc.set(key, "changed")
        p.unwatch()
        p.multi()
        p.set(key, "after-unwatch")
        assert p.execute() == [True]
    assert rc.get(key) == "after-unwatch"


@PROTOCOLS
def test_watch_inside_multi_is_an_error(rc, protocol):
    key = "{wm}k"
    port = master_port(rc, key)
    with RespConn(port) as c:
        if protocol == 3:
            assert isinstance(c.call("HELLO", "3"), dict)
        assert c.call("MULTI") == b"OK"
        reply = c.call("WATCH", key)
        assert isinstance(reply, RespError), reply
        assert str(reply) == "ERR WATCH inside MULTI is not allowed"
        assert c.call("DISCARD") == b"OK"
    # Through redis-py on the same node.
    with node_client(port, protocol) as c:
        c.execute_command("MULTI")
        with pytest.raises(ResponseError, match="WATCH inside MULTI is not allowed"):
            c.execute_command("WATCH", key)
        c.execute_command("DISCARD")


# --------------------------------------------------------------------------
# 4. HELLO and INFO in cluster mode
# --------------------------------------------------------------------------


def test_hello_3_reports_cluster_mode(cluster, stable):
    for port in cluster.ports:
        with node_client(port, protocol=3) as c:
            hello = c.execute_command("HELLO", "3")
            assert hello["proto"] == 3
            assert hello["mode"] == "cluster", (port, hello)
            info = c.info("cluster")
            assert info["cluster_enabled"] == 1
            assert c.info("server")["redis_mode"] == "cluster"
        with node_client(port, protocol=2) as c:
            hello = c.execute_command("HELLO", "2")
            fields = dict(zip(hello[::2], hello[1::2])) if isinstance(hello, list) else hello
            assert fields["mode"] == "cluster", (port, hello)
            assert c.info("cluster")["cluster_enabled"] == 1


# --------------------------------------------------------------------------
# 5. pub/sub: sharded (Redis 7) and classic
# --------------------------------------------------------------------------


def assert_numsub_reply_is_array(port, subcommand, channel):
    """Redis 7 answers PUBSUB NUMSUB / SHARDNUMSUB with a flat array even in
    RESP3 (redis-py's parser slices it); a RESP3 map breaks clients."""
    with RespConn(port) as c:
        c.call("HELLO", "3")
        reply = c.call("PUBSUB", subcommand, channel)
    assert isinstance(reply, list), f"PUBSUB {subcommand} in RESP3 must be an array, got {reply!r}"


def wait_message(get, want, timeout=10):
    """Polls get() until a message satisfying want() arrives."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        m = get()
        if m is not None:
            seen.append(m)
            if want(m):
                return m
        else:
            time.sleep(0.01)
    raise AssertionError(f"no matching message within {timeout}s; got {seen}")


@PROTOCOLS
def test_sharded_pubsub_through_cluster_client(rc, protocol):
    channel = "{news}sports"
    node = rc.get_node_from_key(channel)
    p = rc.pubsub()
    try:
        p.ssubscribe(channel)
        get = lambda: p.get_sharded_message(timeout=0.1, target_node=node)  # noqa: E731
        wait_message(get, lambda m: m["type"] == "ssubscribe" and m["channel"] == channel)

        assert channel in rc.pubsub_shardchannels(target_nodes=node)
        if protocol == 3:
            assert_numsub_reply_is_array(node.port, "SHARDNUMSUB", channel)
        assert rc.pubsub_shardnumsub(channel, target_nodes=node) == [(channel, 1)]

        receivers = rc.spublish(channel, "goal")
        assert receivers >= 1
        m = wait_message(get, lambda m: m["type"] == "smessage")
        assert m["channel"] == channel and m["data"] == "goal"

        p.sunsubscribe(channel)
        wait_message(get, lambda m: m["type"] == "sunsubscribe")
        assert rc.pubsub_shardnumsub(channel, target_nodes=node) == [(channel, 0)]
    finally:
        p.close()


@PROTOCOLS
def test_ssubscribe_two_slots_is_crossslot(rc, protocol):
    ch1 = "{chan}a"
    ch2 = other_key_same_master(rc, ch1, "chan-other-")
    with RespConn(master_port(rc, ch1)) as c:
        if protocol == 3:
            c.call("HELLO", "3")
        reply = c.call("SSUBSCRIBE", ch1, ch2)
        assert isinstance(reply, RespError), reply
        assert str(reply).startswith("CROSSSLOT"), reply
        # The connection is still usable and subscribed to nothing.
        assert c.call("PING") in (b"PONG", [b"pong", b""])


@PROTOCOLS
def test_ssubscribe_on_a_node_that_does_not_master_the_slot_is_moved(rc, cluster, protocol):
    channel = "{moved}ch"
    owner = master_port(rc, channel)
    slot = rc.keyslot(channel)
    for port in cluster.ports:
        if port == owner:
            continue
        with RespConn(port) as c:
            if protocol == 3:
                c.call("HELLO", "3")
            reply = c.call("SSUBSCRIBE", channel)
            assert isinstance(reply, RespError), (port, reply)
            assert str(reply) == f"MOVED {slot} {HOST}:{owner}", (port, reply)
            assert c.call("PING") in (b"PONG", [b"pong", b""])


@PROTOCOLS
def test_publish_on_one_node_reaches_subscribers_on_every_node(cluster, stable, protocol):
    channel = f"broadcast-{random.random()}"
    clients = [
        redis.Redis(host=HOST, port=p, decode_responses=True, protocol=protocol, socket_timeout=10)
        for p in cluster.ports
    ]
    subs = []
    try:
        for c in clients:
            ps = c.pubsub()
            ps.subscribe(channel)
            wait_message(lambda ps=ps: ps.get_message(timeout=0.1), lambda m: m["type"] == "subscribe")
            subs.append(ps)
        # PUBSUB NUMSUB counts this node's subscribers (as in Redis Cluster);
        # an array of channel, count in RESP2 and RESP3 alike.
        for port, c in zip(cluster.ports, clients):
            if protocol == 3:
                assert_numsub_reply_is_array(port, "NUMSUB", channel)
            assert c.pubsub_numsub(channel) == [(channel, 1)]
        for sender in range(len(clients)):
            payload = f"from-node-{sender}"
            clients[sender].publish(channel, payload)
            for i, ps in enumerate(subs):
                m = wait_message(lambda ps=ps: ps.get_message(timeout=0.1), lambda m: m["type"] == "message")
                assert m["channel"] == channel and m["data"] == payload, (sender, i, m)
    finally:
        for ps in subs:
            ps.close()
        for c in clients:
            c.close()


# --------------------------------------------------------------------------
# 7. redis-cli --cluster and redis-benchmark --cluster
# --------------------------------------------------------------------------


def run_tool(args, timeout):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    return proc.returncode, re.sub(r"\x1b\[[0-9;]*m", "", out)


def test_redis_cli_cluster_check_and_info(cluster, stable):
    addr = f"{HOST}:{cluster.ports[0]}"
    # Nodes may briefly disagree while a leader moves; allow a few attempts.
    attempts = []
    deadline = time.monotonic() + 10
    while True:
        code, out = run_tool(["redis-cli", "--cluster", "check", addr], timeout=30)
        attempts.append(out)
        ok = (
            code == 0
            and "[OK] All 16384 slots covered." in out
            and "[OK] All nodes agree about slots configuration." in out
        )
        if ok or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert ok, f"redis-cli --cluster check (exit {code}), {len(attempts)} attempts; last:\n{out}"
    if len(attempts) > 1:
        print(f"--cluster check passed after {len(attempts)} attempts; first:\n{attempts[0]}")
    assert "[ERR]" not in out and "[WARNING]" not in out, out
    assert len(re.findall(r"^M: ", out, re.M)) == 3, out

    code, out = run_tool(["redis-cli", "--cluster", "info", addr], timeout=30)
    assert code == 0, out
    assert re.search(r"\[OK\] \d+ keys in 3 masters\.", out), out
    for port in cluster.ports:
        assert re.search(rf"^{re.escape(HOST)}:{port} \(\w+\.\.\.\) -> \d+ keys \| \d+ slots", out, re.M), out


def test_redis_benchmark_cluster_right_after_start():
    c = Cluster().start()
    try:
        time.sleep(0.1)
        args = [
            "redis-benchmark", "--cluster", "-h", HOST, "-p", str(c.ports[0]),
            "-t", "set,get", "-n", "20000", "-c", "10", "-q",
        ]
        try:
            code, out = run_tool(args, timeout=180)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"redis-benchmark did not finish in 180 s: {e.output!r:.2000}")
        final = [line.split("\r")[-1] for line in out.splitlines()]
        summary = "\n".join(x for x in final if x.strip())
        assert code == 0, f"exit {code}:\n{summary[-3000:]}\nlogs in {c.dir}"
        for cmd in ("SET", "GET"):
            m = re.search(rf"^{cmd}: ([\d.]+) requests per second", "\n".join(final), re.M)
            assert m, f"no {cmd} result in:\n{summary[-3000:]}"
            assert float(m.group(1)) > 0
        bad = re.findall(r".*(?:Error|ERR|CLUSTERDOWN).*", out)
        assert not bad, bad[:5]
    finally:
        c.stop()
