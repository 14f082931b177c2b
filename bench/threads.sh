#!/usr/bin/env bash
# I/O threads: does `kvasir server --threads 2` (one data thread plus one I/O
# thread doing the client sockets' reads and writes) beat `--threads 1`, and
# how do both compare with redis-server, with and without its own I/O
# threads? One run on this machine, four servers side by side:
#
#   kvasir-t1   kvasir server --threads 1 (the default)
#   kvasir-t2   kvasir server --threads 2
#   redis       redis-server --save '' --appendonly no
#   redis-io2   the same with --io-threads 2 --io-threads-do-reads yes
#
#  1. redis-benchmark -c $CLIENTS -r 16384 -n $N -t $TESTS -q --csv with -P 1
#     and -P 16, once as a single-threaded client and once with
#     `--threads 2`; each cell is the median of $REPEAT runs, the order of
#     the servers rotated every repetition, FLUSHALL before each run. A
#     markdown table gives requests/s and the ratio to redis-server.
#  2. `kvasir bench sweep` (Garnet's Resp.benchmark form) over
#     $SWEEP_THREADS client threads against kvasir-t1 and kvasir-t2.
#
# Usage: bench/threads.sh
# Environment: N (requests per redis-benchmark test, default 200000),
# REPEAT (default 3), CLIENTS (default 50), PIPELINES (default "1 16"),
# TESTS (default "set,get"), CLIENT_THREADS (redis-benchmark --threads
# values, "1" meaning the default single-threaded client; default "1 2"),
# SWEEP_THREADS (default "1,2,4,8,16,32,64,128"), SWEEP_RUNTIME (seconds per
# thread count, default 15), SWEEP_DBSIZE (default 1048576), SWEEP_OPS
# (default "GET SET"), SWEEP_IO_THREADS (the load generator's runtime
# threads, default 1), BENCH_TIMEOUT (seconds per client run, default 900).
# SWEEP_REPEAT (sweeps per server, the median is reported; default 3).
# SWEEP_THREADS= (empty) skips the sweep.
# THREADED_N_FACTOR (default 8): runs with client --threads > 1 send N x
# this many requests, because redis-benchmark's threads stop only at their
# 250 ms progress tick, which rounds each such run's time up to a multiple
# of 250 ms; a run of a few seconds keeps that step small.
# Kvasir's CPU time per request is reported by thread (the data thread and
# the I/O threads), the figure a many-core estimate starts from.
# Needs redis-cli, redis-benchmark, redis-server: scripts/install-test-deps.sh.
set -euo pipefail

N=${N:-200000}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-"1 16"}
TESTS=${TESTS:-"set,get"}
CLIENT_THREADS=${CLIENT_THREADS:-"1 2"}
SWEEP_THREADS=${SWEEP_THREADS-"1,2,4,8,16,32,64,128"}
SWEEP_RUNTIME=${SWEEP_RUNTIME:-15}
SWEEP_DBSIZE=${SWEEP_DBSIZE:-1048576}
SWEEP_OPS=${SWEEP_OPS:-"GET SET"}
SWEEP_IO_THREADS=${SWEEP_IO_THREADS:-1}
SWEEP_REPEAT=${SWEEP_REPEAT:-3}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-900}
THREADED_N_FACTOR=${THREADED_N_FACTOR:-8}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

require_tools threads redis-cli redis-benchmark redis-server timeout awk git

start_work threads

COMMIT="$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo '+changes')"
echo "threads: building Kvasir $COMMIT (release)..." >&2
(cd "$ROOT" && cargo build --release -q -p kvasir)
KVASIR_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"

ping_ok() { [ "$(redis-cli -h 127.0.0.1 -p "$1" PING 2>/dev/null)" = "PONG" ]; }
wait_ping() { # port pid log
    for _ in $(seq 1 300); do
        ping_ok "$1" && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.05
    done
    echo "threads: a server did not start on port $1" >&2
    show_logs "$3"
    exit 1
}

LABELS=(kvasir-t1 kvasir-t2 redis redis-io2)
read -r -a PORTS <<<"$(free_ports 4)"
for i in 0 1 2 3; do mkdir -p "$WORK/${LABELS[$i]}"; done
"$KVASIR_BIN" server --port "${PORTS[0]}" --bind 127.0.0.1 --save "" --dir "$WORK/kvasir-t1" \
    --threads 1 >"$WORK/kvasir-t1.log" 2>&1 &
PIDS+=($!)
wait_ping "${PORTS[0]}" "$!" "$WORK/kvasir-t1.log"
"$KVASIR_BIN" server --port "${PORTS[1]}" --bind 127.0.0.1 --save "" --dir "$WORK/kvasir-t2" \
    --threads 2 >"$WORK/kvasir-t2.log" 2>&1 &
PIDS+=($!)
wait_ping "${PORTS[1]}" "$!" "$WORK/kvasir-t2.log"
redis-server --port "${PORTS[2]}" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --dir "$WORK/redis" --logfile "$WORK/redis.log" &
PIDS+=($!)
wait_ping "${PORTS[2]}" "$!" "$WORK/redis.log"
redis-server --port "${PORTS[3]}" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --io-threads 2 --io-threads-do-reads yes \
    --dir "$WORK/redis-io2" --logfile "$WORK/redis-io2.log" &
PIDS+=($!)
wait_ping "${PORTS[3]}" "$!" "$WORK/redis-io2.log"

# --- 1. redis-benchmark ----------------------------------------------------
RESULTS="$WORK/results.tsv" # label \t client threads \t pipeline \t test \t rps
: >"$RESULTS"
CPU="$WORK/cpu.tsv" # label \t client threads \t pipeline \t data us/req \t io us/req
: >"$CPU"
TICKS=$(getconf CLK_TCK)
thread_ticks() { # pid -> "data io" (utime + stime in clock ticks)
    local t stat comm data=0 io=0
    for t in /proc/"$1"/task/*; do
        stat=$(cat "$t/stat" 2>/dev/null) || continue
        comm=$(cat "$t/comm" 2>/dev/null) || continue
        read -r -a f <<<"${stat##*) }"
        case "$comm" in
            kvasir-io-*) io=$((io + f[11] + f[12])) ;;
            *) data=$((data + f[11] + f[12])) ;;
        esac
    done
    echo "$data $io"
}
bench_once() { # label port client-threads pipeline
    local out threads_flag=() pid="" before=() after=() tests n=$N
    if [ "$3" -gt 1 ]; then
        threads_flag=(--threads "$3")
        n=$((N * THREADED_N_FACTOR))
    fi
    case "$1" in kvasir-t1) pid=${PIDS[0]} ;; kvasir-t2) pid=${PIDS[1]} ;; esac
    redis-cli -p "$2" FLUSHALL >/dev/null
    [ -z "$pid" ] || read -r -a before <<<"$(thread_ticks "$pid")"
    out=$(timeout "$BENCH_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "$2" -c "$CLIENTS" -r 16384 -n "$n" \
        "${threads_flag[@]+"${threads_flag[@]}"}" -P "$4" -q --csv -t "$TESTS" 2>&1) || {
        echo "threads: redis-benchmark failed against $1:" >&2
        echo "$out" >&2
        exit 1
    }
    echo "$out" | tr -d '\r' | awk -F'","' -v l="$1" -v c="$3" -v p="$4" '
        /^"test"/ { next }
        /^"/ { t=$1; sub(/^"/, "", t); r=$2; gsub(/"/, "", r); print l "\t" c "\t" p "\t" t "\t" r }
    ' >>"$RESULTS"
    if [ -n "$pid" ]; then
        read -r -a after <<<"$(thread_ticks "$pid")"
        tests=$(echo "$TESTS" | tr ',' '\n' | grep -c .)
        awk -v l="$1" -v c="$3" -v p="$4" -v d="$((after[0] - before[0]))" \
            -v i="$((after[1] - before[1]))" -v hz="$TICKS" -v n="$((n * tests))" 'BEGIN {
            printf "%s\t%s\t%s\t%.2f\t%.2f\n", l, c, p, d / hz * 1e6 / n, i / hz * 1e6 / n }' >>"$CPU"
    fi
}

for r in $(seq 1 "$REPEAT"); do
    for ct in $CLIENT_THREADS; do
        for pipe in $PIPELINES; do
            for k in 0 1 2 3; do
                i=$(((k + r) % 4))
                bench_once "${LABELS[$i]}" "${PORTS[$i]}" "$ct" "$pipe"
            done
            echo "threads: run $r/$REPEAT, client threads $ct, -P $pipe done" >&2
        done
    done
done

median() { # label client-threads pipeline test
    awk -F'\t' -v s="$1" -v c="$2" -v p="$3" -v t="$4" \
        '$1==s && $2==c && $3==p && $4==t { print $5 }' "$RESULTS" |
        sort -g | awk '{ v[NR]=$1 } END {
            if (NR == 0) { print 0; exit }
            if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
}

echo "# Kvasir I/O threads"
echo
echo "Kvasir $COMMIT (release) vs redis-server $(redis-server --version | grep -o 'v=[0-9.]*' | cut -d= -f2),"
echo "127.0.0.1, no persistence, $(nproc) CPUs shared by the servers and the client."
echo "redis-benchmark -c $CLIENTS -r 16384 -n $N (client threads > 1: $((N * THREADED_N_FACTOR))) -q -t $TESTS, client --threads {$(echo "$CLIENT_THREADS" | tr ' ' ',')}"
echo "(1: the default single-threaded client), -P {$(echo "$PIPELINES" | tr ' ' ',')};"
echo "median of $REPEAT runs, order of the servers rotated. Ratios are to redis (no I/O threads)."
echo
echo "| test | client threads | pipeline | Kvasir t1 | Kvasir t2 | Redis | Redis io2 | t1 / Redis | t2 / Redis | t2 / t1 | Redis io2 / Redis |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for ct in $CLIENT_THREADS; do
    for pipe in $PIPELINES; do
        awk -F'\t' -v c="$ct" -v p="$pipe" '$2==c && $3==p { print $4 }' "$RESULTS" |
            awk '!seen[$0]++' | while IFS= read -r t; do
            a=$(median kvasir-t1 "$ct" "$pipe" "$t")
            b=$(median kvasir-t2 "$ct" "$pipe" "$t")
            c=$(median redis "$ct" "$pipe" "$t")
            d=$(median redis-io2 "$ct" "$pipe" "$t")
            awk -v t="$t" -v ct="$ct" -v p="$pipe" -v a="$a" -v b="$b" -v c="$c" -v d="$d" 'BEGIN {
                printf "| %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |\n",
                    t, ct, p, a, b, c, d, (c > 0 ? a / c : 0), (c > 0 ? b / c : 0),
                    (a > 0 ? b / a : 0), (c > 0 ? d / c : 0) }'
        done
    done
done

echo
echo "Kvasir's CPU time per request (us; all tests of a run together; medians): the data thread and the I/O threads."
echo
echo "| server | client threads | pipeline | data thread | I/O threads |"
echo "|---|---:|---:|---:|---:|"
for l in kvasir-t1 kvasir-t2; do
    for ct in $CLIENT_THREADS; do
        for pipe in $PIPELINES; do
            d=$(awk -F'\t' -v s="$l" -v c="$ct" -v p="$pipe" '$1==s && $2==c && $3==p { print $4 }' "$CPU" |
                sort -g | awk '{ v[NR]=$1 } END { print (NR ? v[int((NR+1)/2)] : 0) }')
            i=$(awk -F'\t' -v s="$l" -v c="$ct" -v p="$pipe" '$1==s && $2==c && $3==p { print $5 }' "$CPU" |
                sort -g | awk '{ v[NR]=$1 } END { print (NR ? v[int((NR+1)/2)] : 0) }')
            echo "| $l | $ct | $pipe | $d | $i |"
        done
    done
done

# --- 2. kvasir bench sweep ----------------------------------------------------
[ -z "$SWEEP_THREADS" ] && exit 0
SWEEP="$WORK/sweep.tsv" # label \t op \t client threads \t ops/sec
: >"$SWEEP"
for sr in $(seq 1 "$SWEEP_REPEAT"); do
for op in $SWEEP_OPS; do
    for k in 0 1; do
        i=$(((k + sr) % 2))
        out="$WORK/sweep-${LABELS[$i]}-$op.txt"
        # The preload (MSET of the whole keyspace) runs once per server.
        load=()
        if [ "$sr" -gt 1 ] || [ "$op" != "$(echo "$SWEEP_OPS" | awk '{ print $1 }')" ]; then load=(--skipload); fi
        timeout "$BENCH_TIMEOUT" "$KVASIR_BIN" bench sweep --port "${PORTS[$i]}" --op "$op" \
            --threads "$SWEEP_THREADS" --runtime "$SWEEP_RUNTIME" --dbsize "$SWEEP_DBSIZE" \
            --io-threads "$SWEEP_IO_THREADS" --server-pid "${PIDS[$i]}" --no-progress \
            "${load[@]+"${load[@]}"}" >"$out" 2>"$out.err" || {
            echo "threads: kvasir bench sweep failed against ${LABELS[$i]}:" >&2
            cat "$out.err" >&2
            exit 1
        }
        # Garnet's lines: "Operation type: GET", "Num threads: N",
        # "Throughput: 1,234.5 ops/sec" (thousands grouped); the MSET
        # preload is left out.
        awk -v l="${LABELS[$i]}" -v want="$op" '
            /^Operation type:/ { op=$3 }
            /^Num threads:/ { n=$3 }
            /^Throughput:/ && op==want { v=$2; gsub(/,/, "", v); print l "\t" op "\t" n "\t" v }
        ' "$out" >>"$SWEEP"
        echo "threads: sweep $sr/$SWEEP_REPEAT $op against ${LABELS[$i]} done" >&2
    done
done
done

echo
echo "## kvasir bench sweep"
echo
echo "kvasir bench sweep --threads $SWEEP_THREADS --runtime $SWEEP_RUNTIME --dbsize $SWEEP_DBSIZE"
echo "--io-threads $SWEEP_IO_THREADS (the load generator's runtime threads); ops/sec, median of $SWEEP_REPEAT sweeps."
echo
echo "| op | client threads | Kvasir t1 | Kvasir t2 | t2 / t1 |"
echo "|---|---:|---:|---:|---:|"
for op in $SWEEP_OPS; do
    for n in $(echo "$SWEEP_THREADS" | tr ',' ' '); do
        a=$(awk -F'\t' -v o="$op" -v n="$n" '$1=="kvasir-t1" && $2==o && $3==n { print $4 }' "$SWEEP" |
            sort -g | awk '{ v[NR]=$1 } END { print (NR ? v[int((NR+1)/2)] : 0) }')
        b=$(awk -F'\t' -v o="$op" -v n="$n" '$1=="kvasir-t2" && $2==o && $3==n { print $4 }' "$SWEEP" |
            sort -g | awk '{ v[NR]=$1 } END { print (NR ? v[int((NR+1)/2)] : 0) }')
        awk -v o="$op" -v n="$n" -v a="${a:-0}" -v b="${b:-0}" 'BEGIN {
            printf "| %s | %s | %.0f | %.0f | %.2f |\n", o, n, a, b, (a > 0 ? b / a : 0) }'
    done
done
