#!/usr/bin/env bash
# Kvasir vs Redis, side by side on this machine.
#
#  1. Throughput: redis-benchmark -c $CLIENTS -r 16384 -n $N -q --csv
#     -t set,get,incr,lpush,lpop,sadd,spop,lrange, with -P 1 and -P 16,
#     against a release build of Kvasir and against redis-server (no
#     persistence). Each measurement runs $REPEAT times, alternating the
#     servers, and the median is reported. Tests whose commands Kvasir does not
#     have yet (checked with COMMAND INFO) are skipped with a note.
#  2. Memory: $KEYS keys of 16 bytes ("key:%012d") with 16-byte values
#     ("val:%012d"), loaded with `redis-cli --pipe` from a generated RESP file;
#     used_memory from INFO memory before and after gives bytes per key.
#
# Environment: N (requests per test, default 100000), REPEAT (default 3),
# KEYS (default 1000000), CLIENTS (default 50), PIPELINES (default "1 16"),
# TESTS (default: the seed report's redis-benchmark suite), BENCH_TIMEOUT,
# MEMORY_CASES (default "keys zset hashes"; also "stream hll bitmap"),
# ZSET_MEMBERS (1000000), HASHES (100000), STREAM_ENTRIES (1000000),
# HLL_ADDS (1000000 PFADDs over 1000 keys), BITMAP_BITS (838860800, 100 MB).
# TESTS= (empty) measures memory only.
# Needs redis-cli, redis-benchmark, redis-server: scripts/install-test-deps.sh.
set -euo pipefail

N=${N:-100000}
REPEAT=${REPEAT:-3}
KEYS=${KEYS:-1000000}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-"1 16"}
TESTS=${TESTS-"set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange,mset"}
MEMORY_CASES=${MEMORY_CASES:-"keys zset hashes"}
ZSET_MEMBERS=${ZSET_MEMBERS:-1000000}
HASHES=${HASHES:-100000}
STREAM_ENTRIES=${STREAM_ENTRIES:-1000000}
HLL_ADDS=${HLL_ADDS:-1000000}
BITMAP_BITS=${BITMAP_BITS:-838860800}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-900} # seconds per redis-benchmark run (it hangs if a server dies)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

for tool in redis-cli redis-benchmark redis-server awk timeout; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "vs-redis: $tool not found; run scripts/install-test-deps.sh" >&2
        exit 1
    fi
done

echo "vs-redis: building Kvasir (release)..." >&2
(cd "$ROOT" && cargo build --release -q -p kvasir)
KVASIR_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvasir-vs-redis.XXXXXX")
KVASIR_PID=""
REDIS_PID=""
cleanup() {
    for pid in $KVASIR_PID $REDIS_PID; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in $KVASIR_PID $REDIS_PID; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ping_ok() { [ "$(redis-cli -h 127.0.0.1 -p "$1" PING 2>/dev/null)" = "PONG" ]; }

# --- Kvasir: --port 0, read the port it logs ---------------------------------
mkdir -p "$WORK/kvasir"
"$KVASIR_BIN" server --port 0 --bind 127.0.0.1 --save "" --dir "$WORK/kvasir" \
    >"$WORK/kvasir.log" 2>&1 &
KVASIR_PID=$!
KP=""
for _ in $(seq 1 300); do
    KP=$(grep -o 'port=[0-9]*' "$WORK/kvasir.log" 2>/dev/null | head -1 | cut -d= -f2 || true)
    [ -n "$KP" ] && ping_ok "$KP" && break
    KP=""
    kill -0 "$KVASIR_PID" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$KP" ]; then
    echo "vs-redis: Kvasir did not start:" >&2
    cat "$WORK/kvasir.log" >&2
    exit 1
fi

# --- redis-server: a free port (probe, start, retry if taken) ----------------
mkdir -p "$WORK/redis"
RP=""
for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 40000))
    # Something already answers there: try another port.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --daemonize no --dir "$WORK/redis" --logfile "$WORK/redis.log" &
    REDIS_PID=$!
    for _ in $(seq 1 100); do
        if ping_ok "$port"; then RP=$port; break; fi
        kill -0 "$REDIS_PID" 2>/dev/null || break
        sleep 0.05
    done
    [ -n "$RP" ] && break
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=""
done
if [ -z "$RP" ]; then
    echo "vs-redis: redis-server did not start" >&2
    exit 1
fi

KVASIR_VERSION=$(redis-cli -p "$KP" INFO server | tr -d '\r' | awk -F: '$1=="kvasir_version"{print $2; exit}')
REDIS_VERSION=$(redis-cli -p "$RP" INFO server | tr -d '\r' | awk -F: '$1=="redis_version"{print $2; exit}')

# --- Which tests Kvasir supports ---------------------------------------------
supports() { # command name
    local first
    first=$(redis-cli -p "$KP" COMMAND INFO "$1" 2>/dev/null | head -1 | tr -d '\r')
    [ "$(echo "$first" | tr '[:upper:]' '[:lower:]')" = "$1" ]
}
NOTES=()
RUN_TESTS=()
IFS=',' read -r -a REQUESTED <<<"$TESTS"
for t in "${REQUESTED[@]}"; do
    case "$t" in
        lrange) needed="lpush lrange" ;; # redis-benchmark fills the list with LPUSH first
        mset) needed="mset" ;;
        *) needed="$t" ;;
    esac
    missing=""
    for c in $needed; do supports "$c" || missing="$missing ${c^^}"; done
    if [ -n "$missing" ]; then
        NOTES+=("skipped \`$t\`: Kvasir does not support${missing} yet")
    else
        RUN_TESTS+=("$t")
    fi
done

echo "# Kvasir vs Redis"
echo
echo "Kvasir ${KVASIR_VERSION:-?} (release build) vs redis-server ${REDIS_VERSION:-?}, both on 127.0.0.1,"
echo "no persistence; $(nproc) CPUs shared by servers and client."
echo "redis-benchmark -c $CLIENTS -r 16384 -n $N -q --csv -P {$(echo $PIPELINES | tr ' ' ',')};"
echo "median of $REPEAT runs, servers alternating, FLUSHALL before each run."
echo
for note in "${NOTES[@]+"${NOTES[@]}"}"; do echo "Note: $note"; done
[ "${#NOTES[@]}" -gt 0 ] && echo

# --- Throughput ----------------------------------------------------------------
RESULTS="$WORK/results.tsv" # server \t pipeline \t test \t rps
: >"$RESULTS"
ORDER="$WORK/order.txt" # test names in first-seen order
: >"$ORDER"

bench_once() { # server-label port pipeline
    local label=$1 port=$2 pipe=$3 out
    redis-cli -p "$port" FLUSHALL >/dev/null
    out=$(timeout "$BENCH_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -r 16384 -n "$N" \
        -P "$pipe" -q --csv -t "$(IFS=,; echo "${RUN_TESTS[*]}")" 2>&1) || {
        echo "vs-redis: redis-benchmark failed against $label:" >&2
        echo "$out" >&2
        exit 1
    }
    echo "$out" | tr -d '\r' | awk -F'","' -v l="$label" -v p="$pipe" '
        /^"test"/ { next }
        /^"/ { t=$1; sub(/^"/, "", t); r=$2; gsub(/"/, "", r); print l "\t" p "\t" t "\t" r }
    ' >>"$RESULTS"
    echo "$out" | tr -d '\r' | awk -F'","' '/^"/ && !/^"test"/ { t=$1; sub(/^"/, "", t); print t }' >>"$ORDER"
}

if [ "${#RUN_TESTS[@]}" -gt 0 ]; then
    for r in $(seq 1 "$REPEAT"); do
        for pipe in $PIPELINES; do
            if [ $((r % 2)) -eq 1 ]; then
                bench_once kvasir "$KP" "$pipe"
                bench_once redis "$RP" "$pipe"
            else
                bench_once redis "$RP" "$pipe"
                bench_once kvasir "$KP" "$pipe"
            fi
            echo "vs-redis: run $r/$REPEAT, -P $pipe done" >&2
        done
    done

    median() { # server pipeline test
        awk -F'\t' -v s="$1" -v p="$2" -v t="$3" '$1==s && $2==p && $3==t { print $4 }' "$RESULTS" |
            sort -g | awk '{ v[NR]=$1 } END {
                if (NR == 0) { print ""; exit }
                if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
    }

    echo "| test | pipeline | Kvasir req/s | Redis req/s | ratio |"
    echo "|---|---:|---:|---:|---:|"
    awk '!seen[$0]++' "$ORDER" >"$ORDER.uniq"
    for pipe in $PIPELINES; do
        while IFS= read -r t; do
            k=$(median kvasir "$pipe" "$t")
            rr=$(median redis "$pipe" "$t")
            [ -z "$k$rr" ] && continue
            ratio=$(awk -v a="$k" -v b="$rr" 'BEGIN { if (b > 0 && a != "") printf "%.2f", a / b; else print "-" }')
            printf '| %s | %s | %.0f | %.0f | %s |\n' "$t" "$pipe" "${k:-0}" "${rr:-0}" "$ratio"
        done <"$ORDER.uniq"
    done
    echo
    echo "ratio = Kvasir / Redis (above 1: Kvasir is faster)."
    echo
fi

# --- Memory --------------------------------------------------------------------
# Each case: a RESP file generated with awk, loaded with `redis-cli --pipe`
# into each server in turn; per element = (used_memory after - before) / elements.
used_memory() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: '$1=="used_memory"{print $2}'; }
used_rss() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: '$1=="used_memory_rss"{print $2}'; }

memory_case() { # title unit commands elements awk-program
    local title=$1 unit=$2 commands=$3 elements=$4 program=$5
    local load="$WORK/load.resp"
    awk -v n="$commands" "BEGIN { $program }" >"$load"
    echo "## Memory: $title"
    echo
    echo "Loaded with \`redis-cli --pipe\`; $unit = (used_memory after - used_memory before) / $elements."
    echo
    echo "| server | used_memory before | used_memory after | bytes/$unit | RSS after | DBSIZE |"
    echo "|---|---:|---:|---:|---:|---:|"
    declare -A per_el
    for label in kvasir redis; do
        if [ "$label" = kvasir ]; then port=$KP; else port=$RP; fi
        redis-cli -p "$port" FLUSHALL >/dev/null
        sleep 0.5
        before=$(used_memory "$port")
        summary=$(redis-cli -p "$port" --pipe <"$load" 2>&1 | tail -1)
        case "$summary" in
            *"errors: 0, replies: $commands"*) ;;
            *) echo "vs-redis: loading into $label failed: $summary" >&2; exit 1 ;;
        esac
        sleep 0.5
        after=$(used_memory "$port")
        rss=$(used_rss "$port")
        dbsize=$(redis-cli -p "$port" DBSIZE)
        per=$(awk -v a="$after" -v b="$before" -v n="$elements" 'BEGIN { printf "%.1f", (a - b) / n }')
        per_el[$label]=$per
        printf '| %s | %s | %s | %s | %s | %s |\n' "$label" "$before" "$after" "$per" "$rss" "$dbsize"
        redis-cli -p "$port" FLUSHALL >/dev/null
    done
    echo
    awk -v k="${per_el[kvasir]}" -v r="${per_el[redis]}" -v u="$unit" 'BEGIN {
        if (r > 0) printf "bytes/%s ratio Kvasir / Redis: %.2f (below 1: Kvasir uses less memory)\n", u, k / r }'
    echo
}

for case_name in $MEMORY_CASES; do
    case "$case_name" in
        keys)
            memory_case "$KEYS keys, 16-byte keys (key:%012d), 16-byte values (val:%012d)" \
                key "$KEYS" "$KEYS" \
                'for (i = 0; i < n; i++) printf "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$16\r\nval:%012d\r\n", i, i' ;;
        zset)
            memory_case "$ZSET_MEMBERS members in one sorted set (ZADD z <i> member:<i>)" \
                member "$ZSET_MEMBERS" "$ZSET_MEMBERS" \
                'for (i = 0; i < n; i++) { m = sprintf("member:%d", i); s = sprintf("%d", i);
                   printf "*4\r\n$4\r\nZADD\r\n$1\r\nz\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(s), s, length(m), m }' ;;
        hashes)
            memory_case "$HASHES hashes of 10 fields of 100 bytes (YCSB records: HSET user<i> field0..field9)" \
                hash "$HASHES" "$HASHES" \
                'v = ""; for (j = 0; j < 100; j++) v = v "x";
                 for (i = 0; i < n; i++) { k = sprintf("user%d", i);
                   printf "*22\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n", length(k), k;
                   for (f = 0; f < 10; f++) printf "$6\r\nfield%d\r\n$100\r\n%s\r\n", f, v }' ;;
        stream)
            # Two 8-byte fields per entry, IDs from the server clock.
            memory_case "$STREAM_ENTRIES entries in one stream (XADD s * f1 <8 bytes> f2 <8 bytes>)" \
                entry "$STREAM_ENTRIES" "$STREAM_ENTRIES" \
                'for (i = 0; i < n; i++) printf "*7\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$2\r\nf1\r\n$8\r\n%08d\r\n$2\r\nf2\r\n$8\r\n%08d\r\n", i, i' ;;
        hll)
            memory_case "$HLL_ADDS PFADDs of distinct elements into 1000 HyperLogLogs (PFADD hll:<i%1000> e:<i>)" \
                key "$HLL_ADDS" 1000 \
                'for (i = 0; i < n; i++) { k = sprintf("hll:%d", i % 1000); e = sprintf("e:%d", i);
                   printf "*3\r\n$5\r\nPFADD\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(e), e }' ;;
        bitmap)
            memory_case "one bitmap of $BITMAP_BITS bits (SETBIT bm <last bit> 1, then 1000 bits set across it)" \
                bitmap 1001 1 \
                'last = '"$BITMAP_BITS"' - 1; s = sprintf("%d", last);
                 printf "*4\r\n$6\r\nSETBIT\r\n$2\r\nbm\r\n$%d\r\n%s\r\n$1\r\n1\r\n", length(s), s;
                 for (i = 0; i < 1000; i++) { o = sprintf("%d", int(last / 1000) * i);
                   printf "*4\r\n$6\r\nSETBIT\r\n$2\r\nbm\r\n$%d\r\n%s\r\n$1\r\n1\r\n", length(o), o }' ;;
        *) echo "vs-redis: unknown memory case $case_name" >&2; exit 1 ;;
    esac
done
