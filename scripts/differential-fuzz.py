#!/usr/bin/env python3
"""Sends the same random commands to Kvasir and to redis-server and reports
where they answer differently, and any command after which Kvasir stopped
answering (a crash or a hang).

Commands come from redis-server's COMMAND table (every command and
subcommand but those that change the connection, block, or reconfigure or
stop the server); arguments are drawn from a small vocabulary of keys of
every type, numbers at the edges (overflow, inf, nan, hex floats, empty),
option words and random bytes. A difference is counted when one server
answers an error and the other does not; with --errors, differing error
texts are printed too. Random commands (SPOP, SRANDMEMBER...) make the two
keyspaces drift apart over a run, so the setup keys are written again
every 500 commands.

Cluster mode: --tag '{a}' prefixes every key with a hash tag and
--kvasir-port names the node that leads its slot; commands Kvasir refuses
with MOVED or CROSSSLOT (random words used as keys) are not sent to
redis-server, so both keyspaces see the same writes.

    scripts/differential-fuzz.py --kvasir-port 6380 --redis-port 6379 --count 40000 --seed 7

Needs redis-py (scripts/install-test-deps.sh puts one in
~/.cache/kvasir-test-venv).
"""

import argparse
import random
import sys
import time

import redis

EXCLUDED = {
    # Connection state, blocking, server configuration and lifetime.
    "shutdown", "monitor", "subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe",
    "sunsubscribe", "sync", "psync", "replicaof", "slaveof", "failover", "quit", "reset", "hello",
    "auth", "acl", "config", "client", "debug", "wait", "waitaof", "save", "bgsave", "bgrewriteaof",
    "cluster", "readonly", "readwrite", "migrate", "module", "replconf", "swapdb", "exec", "multi",
    "discard", "watch", "blpop", "brpop", "blmove", "brpoplpush", "bzpopmin", "bzpopmax", "blmpop",
    "bzmpop", "xread", "xreadgroup", "select", "flushall", "flushdb", "restore-asking", "asking",
    # Answers that differ by design or by nature (time, server state).
    "script", "function", "latency", "pfselftest", "keys", "time", "randomkey", "info", "memory",
    "object", "slowlog", "command", "lolwut", "dbsize", "echo", "ping", "scan", "spublish", "publish",
    "pubsub", "role", "lastsave",
}

WORDS = """WITHSCORES LIMIT COUNT MATCH TYPE BYSCORE BYLEX REV NX XX GT LT CH INCR KEEPTTL GET EX PX
EXAT PXAT PERSIST WITHVALUES LEFT RIGHT BEFORE AFTER MAXLEN MINID ~ = * $ > - + 0-0 1-1 ID IDLE
TIME RETRYCOUNT FORCE JUSTID WEIGHTS AGGREGATE SUM MIN MAX WITHCOORD WITHDIST WITHHASH STORE
STOREDIST ASC DESC FROMMEMBER FROMLONLAT BYRADIUS BYBOX m km ANY OVERFLOW WRAP SAT FAIL SET INCRBY
u8 i64 u63 i5 #3 BIT BYTE AND OR XOR NOT RANK IDX LEN MINMATCHLEN WITHMATCHLEN ALPHA BY nosort
REPLACE ABSTTL FREQ DB COPY KEYS NOMKSTREAM MKSTREAM ENTRIESREAD CREATE DESTROY SETID
CREATECONSUMER DELCONSUMER STREAMS BLOCK NOACK FULL GROUPS CONSUMERS STREAM""".split()

NUMBERS = ["0", "1", "-1", "2", "3", "-2", "10", "100", "-100", "9223372036854775807",
           "-9223372036854775808", "9223372036854775808", "4294967296", "1.5", "-1.5", "inf",
           "-inf", "+inf", "nan", "1e308", "1e400", "0.0000001", "(1", "(-inf", "[a", "(b", "",
           "abc", " 1", "1 ", "0x10", "0x1p-2", "00001", "-0", "4611686018427387904", "536870911",
           "4294967295", "1000000", "-1000000", "13.361389", "38.115556", "180", "-85.06", "200",
           "1-0", "18446744073709551615-18446744073709551615"]

KEY_NAMES = ["k1", "k2", "k3", "{t}a", "{t}b", "str", "lst", "hsh", "st", "zs", "strm", "geo", "hll"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kvasir-port", type=int, required=True)
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--tag", default="", help="hash tag prefixed to every key (cluster mode)")
    ap.add_argument("--errors", action="store_true", help="also print differing error texts")
    opts = ap.parse_args()

    rnd = random.Random(opts.seed)
    tag = opts.tag.encode()
    keys = [tag + k.encode() for k in KEY_NAMES]
    setup = [
        ["SET", tag + b"str", "hello"], ["RPUSH", tag + b"lst", "a", "b", "c", "1", "2"],
        ["HSET", tag + b"hsh", "f", "1", "g", "2"], ["SADD", tag + b"st", "a", "1", "2"],
        ["ZADD", tag + b"zs", "1", "a", "2", "b", "3", "c"], ["XADD", tag + b"strm", "1-1", "f", "v"],
        ["GEOADD", tag + b"geo", "13.361389", "38.115556", "Palermo"],
        ["PFADD", tag + b"hll", "a", "b"], ["SADD", tag + b"k1", "x"],
    ]
    ours = redis.Redis(port=opts.kvasir_port, socket_timeout=10)
    theirs = redis.Redis(port=opts.redis_port, socket_timeout=10)
    for conn in (ours, theirs):
        conn.response_callbacks.clear()

    commands = []
    for entry in theirs.execute_command("COMMAND"):
        name, arity = entry[0].decode(), entry[1]
        if name in EXCLUDED:
            continue
        subcommands = entry[9] if len(entry) > 9 else []
        if subcommands:
            commands += [(s[0].decode().split("|"), s[1]) for s in subcommands]
        else:
            commands.append(([name], arity))

    def argument():
        r = rnd.random()
        if r < 0.3:
            return rnd.choice(keys)
        if r < 0.6:
            return rnd.choice(NUMBERS).encode()
        if r < 0.85:
            return rnd.choice(WORDS).encode()
        if r < 0.95:
            return bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 8)))
        return b"x" * rnd.choice([100, 1000, 70000])

    def run(conn, args):
        try:
            return conn.execute_command(*args)
        except redis.exceptions.ResponseError as e:
            return e
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            return e

    def redirected(reply):
        text = str(reply)
        return isinstance(reply, Exception) and any(
            w in text for w in ("127.0.0.1:", "same slot", "MOVE is not allowed"))

    for conn in (ours, theirs):
        if tag:
            conn.execute_command("DEL", *keys)
        else:
            conn.execute_command("FLUSHALL")
    differences = 0
    started = time.time()
    for i in range(opts.count):
        if i % 500 == 0:
            for conn in (ours, theirs):
                for c in setup:
                    run(conn, c)
        name, arity = rnd.choice(commands)
        extra = abs(arity) - len(name) + (0 if arity > 0 else rnd.randrange(0, 6))
        args = name + [argument() for _ in range(max(0, extra))]
        if rnd.random() < 0.1 and len(args) > len(name):
            args = args[:-1]  # a wrong argument count now and then
        a = run(ours, args)
        if isinstance(a, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
            try:
                ours.ping()
            except Exception:
                print(f"KVASIR STOPPED ANSWERING after {[x[:60] for x in args]}: {a}")
                return 2
        if tag and redirected(a):
            continue
        b = run(theirs, args)
        a_err, b_err = isinstance(a, Exception), isinstance(b, Exception)
        shown = [x[:40] for x in args]
        if a_err != b_err:
            differences += 1
            print(f"DIFF {shown} kvasir: {repr(a)[:150]} redis: {repr(b)[:150]}")
        elif a_err and opts.errors and str(a) != str(b):
            print(f"ERRDIFF {shown} kvasir: {str(a)[:100]} | redis: {str(b)[:100]}")
    print(f"{opts.count} commands, {differences} differences (error vs reply), "
          f"{time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
