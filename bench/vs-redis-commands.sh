#!/usr/bin/env bash
# Kvasir vs Redis on single commands redis-benchmark runs as given
# (`redis-benchmark ... CMD args`): scripts (EVALSHA of a one-command and of
# a ten-command script), streams (XADD, XRANGE of 10 entries), bitmaps
# (SETBIT, BITCOUNT), HyperLogLog (PFADD, PFCOUNT) and geo (GEOADD,
# GEOSEARCH). A Kvasir release build and redis-server (no persistence) run
# side by side; each case runs $REPEAT times per pipeline depth, servers
# alternating, and the median is reported with the ratio. With CLUSTER=1 a
# 3-node Kvasir cluster (RF=3, --wal fsync) is measured too, driven with
# `redis-benchmark --cluster`, which replaces `{tag}` in the keys with a hash
# tag of a slot the node it sends to serves (so every script's keys share a
# slot, on the right node).
#
# Environment: N (requests per run at -P 1, 100000), N_PIPELINED (requests
# per run at -P > 1, 10 x N), REPEAT (3), CLIENTS (50),
# PIPELINES ("1 16"), CASES (space-separated case names, default all),
# CLUSTER (0 or 1), BENCH_TIMEOUT (seconds per run, 600), KVASIR (a binary
# to run instead of building this checkout's release build).
# Needs redis-cli, redis-benchmark, redis-server: scripts/install-test-deps.sh.
set -euo pipefail
# Commands contain `*` (XADD): no pathname expansion anywhere.
set -f

NAME=vs-redis-commands
N=${N:-100000}
# Pipelined runs are ten times as fast: ten times the requests keep them
# long enough to measure (1,000,000 at -P 16 take ~1 s on one node).
N_PIPELINED=${N_PIPELINED:-$((N * 10))}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-"1 16"}
CLUSTER=${CLUSTER:-0}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-600}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

for tool in redis-cli redis-benchmark redis-server sha1sum awk timeout; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "$NAME: $tool not found; run scripts/install-test-deps.sh" >&2
        exit 1
    }
done

if [ -z "${KVASIR:-}" ]; then
    echo "$NAME: building Kvasir (release)..." >&2
    (cd "$ROOT" && cargo build --release -q -p kvasir)
    KVASIR="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"
fi
export KVASIR

# shellcheck source=bench/lib-cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-cluster.sh"

# shellcheck source=bench/lib-scripts.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-scripts.sh"
sha() { printf '%s' "$1" | sha1sum | cut -d' ' -f1; }
INCR_SHA=$(sha "$INCR_SCRIPT")
TEN_SHA=$(sha "$TEN_SCRIPT")

# name | command (redis-benchmark replaces __rand_int__). Order matters: the
# XRANGE case reads the streams XADD filled, BITCOUNT the bitmaps, etc. The
# plain key-value cases (set incr lpush get) are not in the default list:
# run them with CASES="set incr lpush get" CLUSTER=1 (the replicated-write
# comparison of docs/benchmarks.md).
ALL_CASES="evalsha-incr evalsha-10 xadd xrange setbit bitcount pfadd pfcount geoadd geosearch"
CASES=${CASES:-$ALL_CASES}
command_of() { # case
    case "$1" in
        set) echo "SET k:{tag}:__rand_int__ v" ;;
        incr) echo "INCR n:{tag}:__rand_int__" ;;
        lpush) echo "LPUSH l:{tag}:__rand_int__ v" ;;
        get) echo "GET k:{tag}:__rand_int__" ;;
        evalsha-incr) echo "EVALSHA $INCR_SHA 1 k:{tag}:__rand_int__" ;;
        evalsha-10) echo "EVALSHA $TEN_SHA 1 t:{tag}:__rand_int__ v" ;;
        xadd) echo "XADD s:{tag}:__rand_int__ * f v" ;;
        xrange) echo "XRANGE s:{tag}:__rand_int__ - + COUNT 10" ;;
        setbit) echo "SETBIT b:{tag}:__rand_int__ 12345 1" ;;
        bitcount) echo "BITCOUNT b:{tag}:__rand_int__" ;;
        pfadd) echo "PFADD h:{tag}:__rand_int__ __rand_int__" ;;
        pfcount) echo "PFCOUNT h:{tag}:__rand_int__" ;;
        geoadd) echo "GEOADD g:{tag}:__rand_int__ 13.361389 38.115556 m:__rand_int__" ;;
        geosearch) echo "GEOSEARCH g:{tag}:__rand_int__ FROMLONLAT 15 37 BYRADIUS 200 km ASC" ;;
        *) die "unknown case $1" ;;
    esac
}

# --- the single servers --------------------------------------------------------
read -r KP RP <<<"$(free_ports 2)"
mkdir -p "$WORK/kvasir" "$WORK/redis"
"$KVASIR" server --port "$KP" --bind 127.0.0.1 --save "" --dir "$WORK/kvasir" >"$WORK/kvasir.log" 2>&1 &
EXTRA_PIDS="$EXTRA_PIDS $!"
redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --dir "$WORK/redis" --logfile "$WORK/redis.log" &
EXTRA_PIDS="$EXTRA_PIDS $!"
ping_ok() { [ "$(rcli "$1" PING)" = "PONG" ]; }
kvasir_up() { ping_ok "$KP"; }
redis_up() { ping_ok "$RP"; }
wait_until "Kvasir" kvasir_up 30
wait_until "redis-server" redis_up 30

if [ "$CLUSTER" = 1 ]; then
    cluster_init
    for i in "${NODES[@]}"; do start_node "$i"; done
    wait_until "the cluster" cluster_healthy "$START_TIMEOUT"
fi

load_scripts() { # port
    [ "$(rcli "$1" SCRIPT LOAD "$INCR_SCRIPT")" = "$INCR_SHA" ] || die "SCRIPT LOAD failed on $1"
    [ "$(rcli "$1" SCRIPT LOAD "$TEN_SCRIPT")" = "$TEN_SHA" ] || die "SCRIPT LOAD failed on $1"
}

RESULTS="$WORK/results.tsv" # label \t pipeline \t case \t rps
: >"$RESULTS"

bench_once() { # label port pipeline case [--cluster]
    local label=$1 port=$2 pipe=$3 case=$4 extra=${5:-} out rps
    # shellcheck disable=SC2046,SC2086 # the command is split into words
    out=$(timeout "$BENCH_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "$port" $extra -c "$CLIENTS" \
        -r 16384 -n "$(if [ "$pipe" -gt 1 ]; then echo "$N_PIPELINED"; else echo "$N"; fi)" -P "$pipe" -q --csv $(command_of "$case") 2>&1) ||
        die "redis-benchmark failed against $label ($case): $out"
    rps=$(echo "$out" | tr -d '\r' | awk -F'","' '/^"/ && !/^"test"/ { r=$2; gsub(/"/, "", r); print r; exit }')
    [ -n "$rps" ] || die "no result from redis-benchmark against $label ($case): $out"
    printf '%s\t%s\t%s\t%s\n' "$label" "$pipe" "$case" "$rps" >>"$RESULTS"
}

flush() { # port
    rcli "$1" FLUSHALL >/dev/null
}

for r in $(seq 1 "$REPEAT"); do
    for pipe in $PIPELINES; do
        # Each server runs every case in order on an empty keyspace, so the
        # reading cases find what the writing ones stored.
        if [ $((r % 2)) -eq 1 ]; then order="kvasir redis"; else order="redis kvasir"; fi
        [ "$CLUSTER" = 1 ] && order="$order cluster"
        for label in $order; do
            case "$label" in
                kvasir) port=$KP ;;
                redis) port=$RP ;;
                cluster) port=${PORT[1]} ;;
            esac
            if [ "$label" = cluster ]; then
                for i in "${NODES[@]}"; do flush "${PORT[$i]}"; load_scripts "${PORT[$i]}"; done
            else
                flush "$port"
                load_scripts "$port"
            fi
            for c in $CASES; do
                if [ "$label" = cluster ]; then
                    bench_once "$label" "$port" "$pipe" "$c" --cluster
                else
                    bench_once "$label" "$port" "$pipe" "$c"
                fi
            done
        done
        say "run $r/$REPEAT, -P $pipe done"
    done
done

median() { # label pipeline case
    awk -F'\t' -v s="$1" -v p="$2" -v t="$3" '$1==s && $2==p && $3==t { print $4 }' "$RESULTS" |
        sort -g | awk '{ v[NR]=$1 } END {
            if (NR == 0) { print ""; exit }
            if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
}

KV_VERSION=$(rcli "$KP" INFO server | awk -F: '$1=="kvasir_version"{print $2; exit}')
RS_VERSION=$(rcli "$RP" INFO server | awk -F: '$1=="redis_version"{print $2; exit}')
echo "# Kvasir vs Redis: scripts, streams, bitmaps, HyperLogLog, geo"
echo
echo "Kvasir ${KV_VERSION:-?} (release) vs redis-server ${RS_VERSION:-?} (no persistence), 127.0.0.1,"
echo "$(nproc) CPUs shared by servers and client; redis-benchmark -c $CLIENTS -r 16384 -n $N (-P 1), -n $N_PIPELINED (pipelined);"
echo "median of $REPEAT runs, servers alternating."
[ "$CLUSTER" = 1 ] && echo "Cluster: 3 Kvasir nodes, RF=3, --wal fsync, redis-benchmark --cluster."
echo
if [ "$CLUSTER" = 1 ]; then
    echo "| case | command | -P | Kvasir req/s | Redis req/s | Kvasir/Redis | Kvasir 3 nodes req/s |"
    echo "|---|---|---:|---:|---:|---:|---:|"
else
    echo "| case | command | -P | Kvasir req/s | Redis req/s | Kvasir/Redis |"
    echo "|---|---|---:|---:|---:|---:|"
fi
for pipe in $PIPELINES; do
    for c in $CASES; do
        k=$(median kvasir "$pipe" "$c")
        rr=$(median redis "$pipe" "$c")
        ratio=$(awk -v a="$k" -v b="$rr" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
        cmdline=$(command_of "$c" | sed "s/$INCR_SHA/<sha:incr>/; s/$TEN_SHA/<sha:10 commands>/")
        if [ "$CLUSTER" = 1 ]; then
            cl=$(median cluster "$pipe" "$c")
            printf '| %s | `%s` | %s | %.0f | %.0f | %s | %.0f |\n' "$c" "$cmdline" "$pipe" "$k" "$rr" "$ratio" "${cl:-0}"
        else
            printf '| %s | `%s` | %s | %.0f | %.0f | %s |\n' "$c" "$cmdline" "$pipe" "$k" "$rr" "$ratio"
        fi
    done
done
