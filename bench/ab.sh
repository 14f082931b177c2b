#!/usr/bin/env bash
# A/B: this checkout's Kvasir against an earlier revision of it, with
# redis-server beside both, in one run on this machine: does a change keep
# the single-node speed? Builds both in release (the baseline in a temporary
# git worktree with its own cached target directory), starts the three
# servers on free loopback ports, runs redis-benchmark against each in turn
# (rotating the order every repetition, FLUSHALL before each run) and prints
# a markdown table of medians with both ratios.
#
# Usage: bench/ab.sh <baseline-rev>
# Environment: N (requests per test, default 200000), REPEAT (default 3),
# CLIENTS (default 50), PIPELINES (default "1 16"),
# TESTS (default "set,get,incr,lpush,lpop,sadd,hset,zadd,lrange"),
# BENCH_TIMEOUT (seconds per redis-benchmark run, default 900).
set -euo pipefail

BASE_REV=${1:?usage: bench/ab.sh <baseline-rev>}
N=${N:-200000}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-"1 16"}
TESTS=${TESTS:-"set,get,incr,lpush,lpop,sadd,hset,zadd,lrange"}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-900}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

require_tools ab redis-cli redis-benchmark redis-server timeout git

start_work ab
cleanup_extra() {
    git -C "$ROOT" worktree remove --force "$WORK/base-src" 2>/dev/null || true
}

BASE_SHA=$(git -C "$ROOT" rev-parse --short "$BASE_REV")
HEAD_DESC="$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo '+changes')"
echo "ab: building this checkout ($HEAD_DESC, release)..." >&2
(cd "$ROOT" && cargo build --release -q -p kvasir)
NEW_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"
echo "ab: building the baseline $BASE_SHA (release)..." >&2
git -C "$ROOT" worktree add --detach -q "$WORK/base-src" "$BASE_REV"
BASE_TARGET="${XDG_CACHE_HOME:-$HOME/.cache}/kvasir-ab-baseline-target"
(cd "$WORK/base-src" && CARGO_TARGET_DIR="$BASE_TARGET" cargo build --release -q -p kvasir)
cp "$BASE_TARGET/release/kvasir" "$WORK/kvasir-base"

ping_ok() { [ "$(redis-cli -h 127.0.0.1 -p "$1" PING 2>/dev/null)" = "PONG" ]; }
wait_ping() { # port pid log
    for _ in $(seq 1 300); do
        ping_ok "$1" && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.05
    done
    echo "ab: a server did not start on port $1" >&2
    show_logs "$3"
    exit 1
}

read -r P_NEW P_BASE P_REDIS <<<"$(free_ports 3)"
mkdir -p "$WORK/new" "$WORK/base" "$WORK/redis"
"$NEW_BIN" server --port "$P_NEW" --bind 127.0.0.1 --save "" --dir "$WORK/new" >"$WORK/new.log" 2>&1 &
PIDS+=($!)
wait_ping "$P_NEW" "$!" "$WORK/new.log"
"$WORK/kvasir-base" server --port "$P_BASE" --bind 127.0.0.1 --save "" --dir "$WORK/base" >"$WORK/base.log" 2>&1 &
PIDS+=($!)
wait_ping "$P_BASE" "$!" "$WORK/base.log"
redis-server --port "$P_REDIS" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --dir "$WORK/redis" --logfile "$WORK/redis.log" &
PIDS+=($!)
wait_ping "$P_REDIS" "$!" "$WORK/redis.log"

RESULTS="$WORK/results.tsv" # label \t pipeline \t test \t rps
: >"$RESULTS"
bench_once() { # label port pipeline
    local out
    redis-cli -p "$2" FLUSHALL >/dev/null
    out=$(timeout "$BENCH_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "$2" -c "$CLIENTS" -r 16384 -n "$N" \
        -P "$3" -q --csv -t "$TESTS" 2>&1) || {
        echo "ab: redis-benchmark failed against $1:" >&2
        echo "$out" >&2
        exit 1
    }
    echo "$out" | tr -d '\r' | awk -F'","' -v l="$1" -v p="$3" '
        /^"test"/ { next }
        /^"/ { t=$1; sub(/^"/, "", t); r=$2; gsub(/"/, "", r); print l "\t" p "\t" t "\t" r }
    ' >>"$RESULTS"
}

LABELS=(new base redis)
PORTS=("$P_NEW" "$P_BASE" "$P_REDIS")
for r in $(seq 1 "$REPEAT"); do
    for pipe in $PIPELINES; do
        for k in 0 1 2; do
            i=$(((k + r) % 3))
            bench_once "${LABELS[$i]}" "${PORTS[$i]}" "$pipe"
        done
        echo "ab: run $r/$REPEAT, -P $pipe done" >&2
    done
done

median() { # label pipeline test
    awk -F'\t' -v s="$1" -v p="$2" -v t="$3" '$1==s && $2==p && $3==t { print $4 }' "$RESULTS" |
        sort -g | awk '{ v[NR]=$1 } END {
            if (NR == 0) { print 0; exit }
            if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
}

echo "Kvasir $HEAD_DESC vs Kvasir $BASE_SHA vs redis-server $(redis-server --version | grep -o 'v=[0-9.]*' | cut -d= -f2),"
echo "release builds, 127.0.0.1, no persistence, $(nproc) CPUs shared with the client;"
echo "redis-benchmark -c $CLIENTS -r 16384 -n $N -q -P {$(echo "$PIPELINES" | tr ' ' ',')}, median of $REPEAT runs, order rotated."
echo
echo "| test | pipeline | Kvasir $HEAD_DESC | Kvasir $BASE_SHA | Redis | new / base | new / Redis |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for pipe in $PIPELINES; do
    awk -F'\t' -v p="$pipe" '$2==p { print $3 }' "$RESULTS" | awk '!seen[$0]++' | while IFS= read -r t; do
        a=$(median new "$pipe" "$t")
        b=$(median base "$pipe" "$t")
        c=$(median redis "$pipe" "$t")
        awk -v t="$t" -v p="$pipe" -v a="$a" -v b="$b" -v c="$c" 'BEGIN {
            printf "| %s | %s | %.0f | %.0f | %.0f | %.2f | %.2f |\n", t, p, a, b, c,
                (b > 0 ? a / b : 0), (c > 0 ? a / c : 0) }'
    done
done
