#!/usr/bin/env bash
# Kvasir vs Redis with the append-only file on (`appendonly yes`), side by
# side on this machine: redis-benchmark -c $CLIENTS -r 16384 -n $N -t
# $TESTS at -P 1 and -P 16 against a release build of Kvasir and against
# redis-server, both started with `--appendonly yes --appendfsync $FSYNC
# --save ""` in folders of their own. Each measurement runs $REPEAT times,
# servers alternating (each run on fresh servers and empty folders), and
# the median is reported with the ratio.
#
# Environment: FSYNC ("everysec always"), N (100000; ten times that at
# -P 16), REPEAT (3), CLIENTS (50), TESTS (set,incr,lpush), KVASIR (a
# binary instead of this checkout's release build).
# Needs redis-cli, redis-benchmark, redis-server: scripts/install-test-deps.sh.
set -euo pipefail

NAME=vs-redis-aof
FSYNC=${FSYNC:-"everysec always"}
N=${N:-100000}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set,incr,lpush}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
require_tools "$NAME" redis-cli redis-benchmark redis-server python3

if [ -z "${KVASIR:-}" ]; then
    echo "$NAME: building Kvasir (release)..." >&2
    (cd "$ROOT" && cargo build --release -q -p kvasir)
    KVASIR="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"
fi

start_work "$NAME"

# Starts `which` (kvasir|redis) with the append-only file in a fresh folder;
# sets SERVER_PID and SERVER_PORT.
start_server() { # which fsync
    local dir="$WORK/$1-data"
    rm -rf "$dir" && mkdir -p "$dir"
    SERVER_PORT=$(free_ports 1)
    local args=(--port "$SERVER_PORT" --bind 127.0.0.1 --dir "$dir"
        --appendonly yes --appendfsync "$2" --save "")
    if [ "$1" = kvasir ]; then
        "$KVASIR" server "${args[@]}" >"$WORK/$1.log" 2>&1 &
    else
        redis-server "${args[@]}" >"$WORK/$1.log" 2>&1 &
    fi
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    local i
    for i in $(seq 100); do
        redis-cli -p "$SERVER_PORT" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    show_logs "$WORK/$1.log"
    echo "$NAME: $1 did not start" >&2
    exit 1
}

stop_server() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
}

# requests/s of one test, one run.
run_one() { # which fsync pipeline test
    start_server "$1" "$2"
    local n=$N
    [ "$3" -gt 1 ] && n=$((N * 10))
    local rps
    rps=$(redis-benchmark -p "$SERVER_PORT" -c "$CLIENTS" -r 16384 -n "$n" -P "$3" \
        -t "$4" -q --csv | awk -F'","' 'NR==2 {print $2}' | tr -d '"')
    stop_server
    echo "${rps%.*}"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "2 CPUs shared by servers and client; redis-benchmark -c $CLIENTS -r 16384 -n $N (-P 1), $((N * 10)) (-P 16);"
echo "median of $REPEAT runs, servers alternating, fresh servers and folders each run."
echo "Both: --appendonly yes --save \"\"; Kvasir $("$KVASIR" --version 2>/dev/null | head -1), $(redis-server --version | awk '{print $3}')."
echo
echo "| appendfsync | test | -P | Kvasir req/s | Redis req/s | Kvasir/Redis |"
echo "|---|---|---:|---:|---:|---:|"
for fsync in $FSYNC; do
    for p in 1 16; do
        for t in ${TESTS//,/ }; do
            k=() r=()
            for _ in $(seq "$REPEAT"); do
                k+=("$(run_one kvasir "$fsync" "$p" "$t")")
                r+=("$(run_one redis "$fsync" "$p" "$t")")
            done
            km=$(printf '%s\n' "${k[@]}" | median)
            rm_=$(printf '%s\n' "${r[@]}" | median)
            ratio=$(awk -v a="$km" -v b="$rm_" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
            echo "| $fsync | $t | $p | $km | $rm_ | $ratio |"
            echo "$NAME: $fsync $t -P $p: kvasir ${k[*]} redis ${r[*]}" >&2
        done
    done
done
