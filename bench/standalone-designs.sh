#!/usr/bin/env bash
# The two ways a single node could use several threads, side by side in one
# run on this machine:
#
#   one-thread      kvasir server --threads 1 (the default)
#   io-threads      kvasir server --threads 2: one data thread owns the whole
#                   keyspace, one I/O thread does the sockets (Valkey 8)
#   shards-1        a one-node cluster (--replicas 1 --wal none, 8 shards)
#                   with --threads 1: the keyspace split into shards, all on
#                   the main thread
#   shards-2        the same with --threads 2: the shards spread over the
#                   main thread and a shard thread, one I/O thread (the
#                   keyspace sharded over threads, with the hand-offs a
#                   Dragonfly-style design needs; multi-key commands across
#                   shards answer CROSSSLOT instead of running as VLL
#                   transactions, so this is a lower bound of that design's
#                   cost)
#
# redis-benchmark -c $CLIENTS -r 16384 -n $N -q -t $TESTS -P {1,16}; each
# cell the median of $REPEAT runs, the order rotated, FLUSHALL before each.
#
# Usage: bench/standalone-designs.sh
# Environment: N (default 200000), REPEAT (default 3), CLIENTS (default 50),
# PIPELINES (default "1 16"), TESTS (default "set,get").
# Needs redis-cli and redis-benchmark (scripts/install-test-deps.sh).
set -euo pipefail
N=${N:-200000}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-"1 16"}
TESTS=${TESTS:-"set,get"}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
require_tools designs redis-cli redis-benchmark timeout awk

start_work designs

echo "designs: building Kvasir (release)..." >&2
(cd "$ROOT" && cargo build --release -q -p kvasir)
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"

LABELS=(one-thread io-threads shards-1 shards-2)
read -r -a PORTS <<<"$(free_ports 6)"
start() { # index args...
    local i=$1
    shift
    mkdir -p "$WORK/${LABELS[$i]}"
    "$BIN" server --port "${PORTS[$i]}" --bind 127.0.0.1 --save "" --dir "$WORK/${LABELS[$i]}" "$@" \
        >"$WORK/${LABELS[$i]}.log" 2>&1 &
    PIDS+=($!)
}
start 0 --threads 1
start 1 --threads 2
start 2 --threads 1 --node-id 1 --initial-cluster "1=127.0.0.1:${PORTS[2]}@${PORTS[4]}" \
    --cluster-port "${PORTS[4]}" --replicas 1 --shards-per-node 8 --wal none
start 3 --threads 2 --node-id 1 --initial-cluster "1=127.0.0.1:${PORTS[3]}@${PORTS[5]}" \
    --cluster-port "${PORTS[5]}" --replicas 1 --shards-per-node 8 --wal none
for i in 0 1 2 3; do
    ok=""
    for _ in $(seq 1 300); do
        if [ "$(redis-cli -p "${PORTS[$i]}" PING 2>/dev/null)" = PONG ] &&
            { [ "$i" -lt 2 ] || redis-cli -p "${PORTS[$i]}" CLUSTER INFO 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok'; }; then
            ok=1
            break
        fi
        sleep 0.1
    done
    [ -n "$ok" ] || {
        show_logs "$WORK/${LABELS[$i]}.log"
        exit 1
    }
done

RESULTS="$WORK/results.tsv"
: >"$RESULTS"
for r in $(seq 1 "$REPEAT"); do
    for pipe in $PIPELINES; do
        for k in 0 1 2 3; do
            i=$(((k + r) % 4))
            redis-cli -p "${PORTS[$i]}" FLUSHALL >/dev/null
            timeout 900 redis-benchmark -h 127.0.0.1 -p "${PORTS[$i]}" -c "$CLIENTS" -r 16384 \
                -n "$N" -P "$pipe" -q --csv -t "$TESTS" 2>/dev/null | tr -d '\r' |
                awk -F'","' -v l="${LABELS[$i]}" -v p="$pipe" '
                    /^"test"/ { next }
                    /^"/ { t=$1; sub(/^"/, "", t); v=$2; gsub(/"/, "", v); print l "\t" p "\t" t "\t" v }
                ' >>"$RESULTS"
        done
        echo "designs: run $r/$REPEAT -P $pipe done" >&2
    done
done

median() { # label pipeline test
    awk -F'\t' -v s="$1" -v p="$2" -v t="$3" '$1==s && $2==p && $3==t { print $4 }' "$RESULTS" |
        sort -g | awk '{ v[NR]=$1 } END { print (NR ? v[int((NR+1)/2)] : 0) }'
}
echo "redis-benchmark -c $CLIENTS -r 16384 -n $N -q -t $TESTS, median of $REPEAT runs, order rotated; $(nproc) CPUs shared with the client."
echo
echo "| test | pipeline | one thread | I/O threads (2) | shards, 1 thread | shards on 2 threads | I/O / one | shards-2 / one | shards-2 / shards-1 |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for pipe in $PIPELINES; do
    awk -F'\t' -v p="$pipe" '$2==p { print $3 }' "$RESULTS" | awk '!seen[$0]++' | while IFS= read -r t; do
        a=$(median one-thread "$pipe" "$t")
        b=$(median io-threads "$pipe" "$t")
        c=$(median shards-1 "$pipe" "$t")
        d=$(median shards-2 "$pipe" "$t")
        awk -v t="$t" -v p="$pipe" -v a="$a" -v b="$b" -v c="$c" -v d="$d" 'BEGIN {
            printf "| %s | %s | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f |\n",
                t, p, a, b, c, d, (a > 0 ? b / a : 0), (a > 0 ? d / a : 0), (c > 0 ? d / c : 0) }'
    done
done
