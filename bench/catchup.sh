#!/usr/bin/env bash
# Kvasir catch-up time: how long a node that missed writes takes to rejoin.
#
# A three-node cluster (--replicas 3 --shards-per-node 8 --wal fsync
# --snapshot-entries $SNAP plus $KVASIR_ARGS) on 127.0.0.1. Node $VICTIM
# (which leads some shards and follows the others) is killed with kill -9; once
# the two others lead all 24 shards, $WRITES keys (16-byte keys and values)
# are SET in the degraded cluster by one of:
#   WRITER=kvasir (default): the load phase of `kvasir bench kv --cluster
#     --writers 0 --readers $CLIENTS --keyspace $WRITES --key-size 16
#     --value-size 16 --load-batch 16` (exactly $WRITES SETs of distinct keys,
#     16 in flight per connection, at most 8 connections, spread over all
#     shards; kvasir bench has no request count for its timed run, and the
#     timed read-only run after the load lasts 0.1 s);
#   WRITER=kvasir-duration: kvasir bench pipelined-kv --cluster --writers
#     $CLIENTS -P 16 --key-size 16 --value-size 16 --keyspace $WRITES
#     --no-load for $DURATION seconds (as many SETs as it gets done);
#   WRITER=redis-benchmark: redis-benchmark --cluster -t set -n $WRITES
#     -r $WRITES -P 16 -d 16 -c $CLIENTS (beware: it puts every key of a node
#     in one slot, so only 3 of the 24 shards get writes).
# Then node $VICTIM is restarted with the same flags and data directory, and
# every 100 ms, for each shard, its CLUSTER SHARDDIGEST ([applied index, keys,
# digest]) is compared with the shard leader's (with the most advanced
# surviving replica's while the restarted node leads the shard itself): the
# catch-up time is from the restart until every shard matched. Afterwards all
# three replicas of every shard must agree, and the restarted node's log says
# whether it caught up by installing snapshots ("installed snapshot").
#
# Environment: WRITES (default 1000000), SNAP (--snapshot-entries, 100000),
# VICTIM (node id killed, 3), WRITER (kvasir, kvasir-duration or
# redis-benchmark), CLIENTS (writer connections, 16; kvasir uses at most 8),
# DURATION (seconds, WRITER=kvasir-duration only, 30),
# CATCHUP_TIMEOUT (seconds, 600), WRITE_TIMEOUT (seconds, 1800), KVASIR_ARGS
# (extra `kvasir server` flags), KVASIR, START_TIMEOUT (60),
# REBALANCE_TIMEOUT (30), KEEP_LOGS (directory to copy server logs into).
# Needs redis-cli and redis-benchmark (scripts/install-test-deps.sh), python3.
set -euo pipefail

WRITES=${WRITES:-1000000}
SNAP=${SNAP:-100000}
VICTIM=${VICTIM:-3}
WRITER=${WRITER:-kvasir}
CLIENTS=${CLIENTS:-16}
DURATION=${DURATION:-30}
CATCHUP_TIMEOUT=${CATCHUP_TIMEOUT:-600}
WRITE_TIMEOUT=${WRITE_TIMEOUT:-1800}

NAME=catchup
# shellcheck source=bench/lib-cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-cluster.sh"

case "$WRITER" in
    redis-benchmark) command -v redis-benchmark >/dev/null 2>&1 ||
        die "redis-benchmark not found; run scripts/install-test-deps.sh" ;;
    kvasir | kvasir-duration) ;;
    *) die "WRITER must be kvasir, kvasir-duration or redis-benchmark" ;;
esac
case "$VICTIM" in 1 | 2 | 3) ;; *) die "VICTIM must be 1, 2 or 3" ;; esac

elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

SURVIVORS=()
for i in "${NODES[@]}"; do [ "$i" != "$VICTIM" ] && SURVIVORS+=("$i"); done

cluster_init --snapshot-entries "$SNAP"
S1=${PORT[${SURVIVORS[0]}]}
say "starting a three-node cluster (--snapshot-entries $SNAP${KVASIR_ARGS:+ $KVASIR_ARGS})..."
start_cluster
say "cluster healthy; leadership balanced: $(wait_balanced)"
SHARDS=$(rcli "$S1" INFO cluster | awk -F: '$1 == "cluster_shards" { print $2 }')
LED_BEFORE=$(shards_led "$VICTIM")

# --- Kill the node, let the others take over -------------------------------------
say "kill -9 node $VICTIM (it led $LED_BEFORE of $SHARDS shards)..."
t=$EPOCHREALTIME
kill9_node "$VICTIM"
survivors_lead_all() {
    local i sum=0 n
    for i in "${SURVIVORS[@]}"; do
        rcli "${PORT[$i]}" INFO cluster | grep -qx 'cluster_shards_without_leader:0' || return 1
        n=$(shards_led "$i")
        sum=$((sum + ${n:-0}))
    done
    [ "$sum" -eq "$SHARDS" ]
}
wait_until "takeover after killing node $VICTIM" survivors_lead_all "$START_TIMEOUT"
TAKEOVER=$(elapsed "$t")
say "nodes ${SURVIVORS[*]} lead all $SHARDS shards after ${TAKEOVER}s"

# --- Writes to the degraded cluster ------------------------------------------------
say "writing ($WRITER, WRITES=$WRITES) to the degraded cluster..."
t=$EPOCHREALTIME
if [ "$WRITER" = redis-benchmark ]; then
    out=$(timeout "$WRITE_TIMEOUT" redis-benchmark --cluster -h 127.0.0.1 -p "$S1" -t set \
        -n "$WRITES" -r "$WRITES" -P 16 -d 16 -c "$CLIENTS" -q --csv 2>&1) || {
        echo "$out" | tail -20 >&2
        die "redis-benchmark failed"
    }
    WRITE_S=$(elapsed "$t")
    WRITES_DONE=$WRITES
    WRITE_ERRORS=$(echo "$out" | grep -ci 'error' || true)
    RPS=$(echo "$out" | tr -d '"\r' | awk -F, '$1 == "SET" { printf "%.0f", $2 }')
    WRITER_DESC="redis-benchmark --cluster -t set -n $WRITES -r $WRITES -P 16 -d 16 -c $CLIENTS"
elif [ "$WRITER" = kvasir ]; then
    json="$WORK/bench.json"
    out=$(timeout "$WRITE_TIMEOUT" "$KVASIR" bench kv --host 127.0.0.1 --port "$S1" --cluster \
        --writers 0 --readers "$CLIENTS" --key-size 16 --value-size 16 --keyspace "$WRITES" \
        --load-batch 16 --duration 0.1 --no-progress --label degraded --json "$json" 2>&1) || {
        echo "$out" | tail -20 >&2
        die "kvasir bench failed"
    }
    WRITE_S=$(elapsed "$t")
    read -r WRITES_DONE RPS <<<"$(python3 - "$json" <<'EOF'
import json, sys
load = json.load(open(sys.argv[1]))["load"]
print(load["ops"], f"{load['ops_per_sec']:.0f}")
EOF
)"
    WRITE_ERRORS=0 # the load fails on any error
    WRITER_DESC="kvasir bench kv --cluster --writers 0 --readers $CLIENTS --key-size 16 --value-size 16 --keyspace $WRITES --load-batch 16 (its load phase)"
else
    json="$WORK/bench.json"
    out=$(timeout "$WRITE_TIMEOUT" "$KVASIR" bench pipelined-kv --host 127.0.0.1 --port "$S1" --cluster \
        --writers "$CLIENTS" --readers 0 -P 16 --key-size 16 --value-size 16 --keyspace "$WRITES" \
        --no-load --duration "$DURATION" --no-progress --label degraded --json "$json" 2>&1) || {
        echo "$out" | tail -20 >&2
        die "kvasir bench failed"
    }
    WRITE_S=$(elapsed "$t")
    read -r WRITES_DONE WRITE_ERRORS RPS <<<"$(python3 - "$json" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][-1]
print(run["ops"].get("write", 0), run["errors"]["total"], f"{run['ops_per_sec']:.0f}")
EOF
)"
    WRITER_DESC="kvasir bench pipelined-kv --cluster --writers $CLIENTS -P 16 --key-size 16 --value-size 16 --keyspace $WRITES --no-load --duration $DURATION"
fi
say "wrote $WRITES_DONE keys in ${WRITE_S}s ($RPS/s reported by the writer, $WRITE_ERRORS errors)"

# --- Restart and wait for the digests to match -------------------------------------
say "restarting node $VICTIM..."
t=$EPOCHREALTIME
start_node "$VICTIM"
others=$(for i in "${SURVIVORS[@]}"; do echo "${PORT[$i]}"; done | paste -sd,)
read -r CATCHUP CAUGHT KEYS <<<"$(python3 - "${PORT[$VICTIM]}" "$others" "$SHARDS" "$CATCHUP_TIMEOUT" "$t" <<'EOF'
import os, sys, time
sys.path.insert(0, os.environ["WORK"])
import resp

victim, others, shards, limit = int(sys.argv[1]), [int(p) for p in sys.argv[2].split(",")], int(sys.argv[3]), float(sys.argv[4])
t0 = float(sys.argv[5])  # the restart (epoch seconds)
# The first slot of shard s (bootstrap layout: rounded s * 16384 / shards).
first_slot = {s: ((s - 1) * 2 * 16384 + shards) // (2 * shards) for s in range(1, shards + 1)}
conns = {}


def conn(p):
    c = conns.get(p)
    if c is None:
        c = conns[p] = resp.Conn(p, timeout=5)
    return c


def digest(p, s):
    try:
        a, k, d = conn(p).cmd("CLUSTER", "SHARDDIGEST", s)
        return int(a), int(k), d
    except Exception:
        c = conns.pop(p, None)
        if c:
            c.close()
        return None


caught, keys, last_report, last_n = {}, 0, 0.0, -1
while True:
    tick = time.time()
    try:
        slots = conn(others[0]).cmd("CLUSTER", "SLOTS")
    except Exception:
        conns.pop(others[0], None)
        slots = None
    if slots is not None:
        for s in range(1, shards + 1):
            if s in caught:
                continue
            mine = digest(victim, s)
            if mine is None:
                break  # not up yet
            leader = resp.slot_leader(slots, first_slot[s])
            if leader is not None and leader != victim:
                ref = digest(leader, s)
            else:  # it leads the shard itself: the most advanced survivor
                refs = [r for r in (digest(p, s) for p in others) if r]
                ref = max(refs) if refs else None
            if ref is not None and mine[0] == ref[0] and mine[2] == ref[2]:
                caught[s] = time.time() - t0
                keys += mine[1]
    n, now = len(caught), time.time() - t0
    if n != last_n or now - last_report >= 1:
        print(f"catchup: {now:6.1f}s after restart: {n}/{shards} shards caught up", file=sys.stderr)
        last_report, last_n = now, n
    if n == shards:
        print(f"{max(caught.values()):.2f} {n} {keys}")
        break
    if now > limit:
        print(f"- {n} {keys}")
        break
    time.sleep(max(0.0, 0.1 - (time.time() - tick)))
EOF
)"
node_ok_victim() { node_ready "$VICTIM"; }
wait_until "node $VICTIM after restart" node_ok_victim "$START_TIMEOUT"

# All three replicas of every shard agree once the writes have settled.
identical() {
    python3 - "$(for i in "${NODES[@]}"; do echo "${PORT[$i]}"; done | paste -sd,)" "$SHARDS" <<'EOF'
import os, sys
sys.path.insert(0, os.environ["WORK"])
import resp
ports, shards = [int(p) for p in sys.argv[1].split(",")], int(sys.argv[2])
conns = [resp.Conn(p) for p in ports]
bad, applied = [], []
for s in range(1, shards + 1):
    seen = {(int(d[0]), d[2]) for d in (c.cmd("CLUSTER", "SHARDDIGEST", s) for c in conns)}
    if len(seen) != 1:
        bad.append(s)
    applied.append(max(seen)[0])
print(min(applied), max(applied))
sys.exit(1 if bad else 0)
EOF
}
IDENTICAL=no
APPLIED="? ?"
for _ in $(seq 1 100); do
    if APPLIED=$(identical); then IDENTICAL=yes; break; fi
    sleep 0.1
done
read -r APPLIED_MIN APPLIED_MAX <<<"$APPLIED"
INSTALLED=$(grep -c 'installed snapshot' "${LOG[$VICTIM]}" || true)
INSTALLED_SHARDS=$(awk '/installed snapshot/ && match($0, /group=[0-9]+/) { g[substr($0, RSTART, RLENGTH)] = 1 }
    END { print length(g) }' "${LOG[$VICTIM]}")
TAKEN=$( (cat "${LOG[${SURVIVORS[0]}]}" "${LOG[${SURVIVORS[1]}]}" | grep -c 'snapshot taken') || true)
REBAL=$(wait_balanced)

# --- Report -----------------------------------------------------------------------
echo "# Kvasir catch-up: a node restarted after missing writes"
echo
echo "$(nproc) CPUs shared by the three nodes and the writer. \`kvasir server --replicas 3 --shards-per-node 8 --wal fsync --snapshot-entries $SNAP${KVASIR_ARGS:+ $KVASIR_ARGS}\`;"
echo "node $VICTIM (leading $LED_BEFORE of $SHARDS shards) killed with kill -9, writes by \`$WRITER_DESC\`."
echo
echo "| | |"
echo "|---|---:|"
echo "| survivors lead all shards after the kill | ${TAKEOVER} s |"
echo "| writes done while degraded | $WRITES_DONE ($WRITE_ERRORS errors) |"
echo "| distinct keys in the shards | $KEYS |"
echo "| write throughput while degraded | $RPS writes/s (writer's figure; $WRITES_DONE in ${WRITE_S} s wall) |"
if [ "$CATCHUP" = "-" ]; then
    echo "| catch-up time | not caught up after ${CATCHUP_TIMEOUT} s ($CAUGHT/$SHARDS shards) |"
else
    echo "| catch-up time (restart to all $SHARDS shards' SHARDDIGEST equal to the leader's) | ${CATCHUP} s |"
fi
echo "| raft log length per shard afterwards (applied index, min-max) | $APPLIED_MIN-$APPLIED_MAX |"
echo "| snapshots installed by the restarted node | $INSTALLED ($INSTALLED_SHARDS shards) |"
echo "| snapshots taken by the survivors | $TAKEN |"
echo "| all three replicas identical afterwards | $IDENTICAL |"
echo "| leadership rebalanced (8 shards per node) | $([ "${REBAL#no}" = "$REBAL" ] && echo "yes" || echo "$REBAL") |"
[ "$CATCHUP" != "-" ] && [ "$IDENTICAL" = yes ] || exit 1
