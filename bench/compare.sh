#!/usr/bin/env bash
# Kvasir against its peers with `kvasir bench`: same bench, same machine,
# same run. Starts a release build of Kvasir and each peer (redis-server
# today) side by side on loopback, runs the chosen workloads against every
# one of them in turn (alternating the order, REPEAT times, FLUSHALL before
# each run), and prints one markdown table with the median ops/s of each,
# their ratio and the median p99 latency.
#
# With GENCHECK=1 it first checks that the load generator is not the
# bottleneck: `redis-benchmark -c 50 -P 1|16 -t set|get` against
# redis-server, next to the same shape in `kvasir bench`, with the ratio.
#
# Usage:
#   bench/compare.sh                      # print the markdown
#   bench/compare.sh --append             # ... and append it to docs/benchmarks.md
#   WORKLOADS="kv-set-p1 ycsb-a" REPEAT=5 DURATION=10 bench/compare.sh
#   GENCHECK=1 WORKLOADS= bench/compare.sh   # only the generator check
#
# Environment: WORKLOADS (names below), PEERS (default "kvasir redis"),
# DURATION (seconds per run, default 10), REPEAT (default 3), GENCHECK (0|1),
# GEN_N1 / GEN_N16 (redis-benchmark requests at -P 1 / -P 16),
# CLIENTS (connections, default 50).
#
# Adding a peer: write start_<name> (start it on a free loopback port and
# set PORT[name], PID[name]) and add the name to PEERS. The cluster issue
# adds etcd and a Redis Cluster this way.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
APPEND=0
[ "${1:-}" = "--append" ] && APPEND=1

PEERS=${PEERS:-"kvasir redis"}
WORKLOADS=${WORKLOADS-"kv-set-p1 kv-get-p1 kv-set-p16 kv-get-p16 kv-mixed ycsb-a ycsb-b ycsb-c online"}
DURATION=${DURATION:-10}
REPEAT=${REPEAT:-3}
GENCHECK=${GENCHECK:-0}
GEN_N1=${GEN_N1:-1000000}
GEN_N16=${GEN_N16:-10000000}
CLIENTS=${CLIENTS:-50}

for tool in redis-server redis-cli python3 timeout; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "compare: $tool not found (scripts/install-test-deps.sh installs the Redis tools)" >&2
        exit 1
    fi
done
if [ "$GENCHECK" = 1 ] && ! command -v redis-benchmark >/dev/null 2>&1; then
    echo "compare: redis-benchmark not found" >&2
    exit 1
fi

# The kvasir bench arguments of each workload (host, port, duration and
# report flags are added per run).
workload_args() {
    local k="--key-size 16 --value-size 3 --keyspace 16384"
    case "$1" in
        kv-set-p1) echo "kv --writers $CLIENTS --readers 0 -P 1 $k" ;;
        kv-get-p1) echo "kv --writers 0 --readers $CLIENTS -P 1 $k" ;;
        kv-set-p16) echo "pipelined-kv --writers $CLIENTS --readers 0 -P 16 $k" ;;
        kv-get-p16) echo "pipelined-kv --writers 0 --readers $CLIENTS -P 16 $k" ;;
        kv-mixed) echo "kv --writers 32 --readers 32 --keyspace 100000" ;;
        kv-rheakv) echo "kv --clients 64 --write-ratio 0.9 --key-size 16 --value-size 16 --keyspace 100000" ;;
        ycsb-[a-f]) echo "ycsb --workload ${1#ycsb-} --recordcount 10000 --operationcount 100000000 --threads 32" ;;
        online) echo "online --threads 32 --op-workload GET,SET --op-percent 80,20" ;;
        sweep-get) echo "sweep --op GET --threads 1,4,16,64 --dbsize 100000" ;;
        *) echo "compare: unknown workload $1" >&2; return 1 ;;
    esac
}

duration_flag() {
    case "$1" in
        ycsb-*) echo "--runtime $DURATION" ;;
        online) echo "--runtime $DURATION" ;;
        sweep-*) echo "--runtime $((DURATION / 4 > 0 ? DURATION / 4 : 1))" ;;
        *) echo "--duration $DURATION" ;;
    esac
}

echo "compare: building Kvasir (release)..." >&2
(cd "$ROOT" && cargo build --release -q -p kvasir)
KVASIR_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvasir-compare.XXXXXX")
declare -A PORT PID
cleanup() {
    for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PID[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ping_ok() { [ "$(redis-cli -h 127.0.0.1 -p "$1" PING 2>/dev/null)" = "PONG" ]; }

free_port() {
    local port
    for _ in $(seq 1 50); do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
    return 1
}

start_kvasir() {
    mkdir -p "$WORK/kvasir"
    "$KVASIR_BIN" server --port 0 --bind 127.0.0.1 --save "" --dir "$WORK/kvasir" >"$WORK/kvasir.log" 2>&1 &
    PID[kvasir]=$!
    local p=""
    for _ in $(seq 1 300); do
        p=$(grep -o 'port=[0-9]*' "$WORK/kvasir.log" 2>/dev/null | head -1 | cut -d= -f2 || true)
        [ -n "$p" ] && ping_ok "$p" && break
        p=""
        sleep 0.1
    done
    [ -n "$p" ] || { echo "compare: Kvasir did not start" >&2; cat "$WORK/kvasir.log" >&2; exit 1; }
    PORT[kvasir]=$p
}

start_redis() {
    mkdir -p "$WORK/redis"
    local p
    p=$(free_port)
    redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no \
        --daemonize no --dir "$WORK/redis" --logfile "$WORK/redis.log" &
    PID[redis]=$!
    for _ in $(seq 1 100); do ping_ok "$p" && break; sleep 0.05; done
    ping_ok "$p" || { echo "compare: redis-server did not start" >&2; exit 1; }
    PORT[redis]=$p
}

for peer in $PEERS; do "start_$peer"; done

version_of() { # kvasir_version when the server has one, else redis_version
    redis-cli -p "${PORT[$1]}" INFO server | tr -d '\r' |
        awk -F: '$1=="redis_version" { r=$2 } $1=="kvasir_version" { k=$2 }
            END { if (k != "") print "kvasir " k; else print "redis " r }'
}

json_field() { # file python-expression-on-d
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

median() {
    sort -g | awk '{ v[NR]=$1 } END {
        if (NR == 0) { print ""; exit }
        if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
}

{
echo "## kvasir bench: $(echo "$PEERS" | tr ' ' '/') on $(date -u +%Y-%m-%d)"
echo
echo "Machine: $(nproc) CPUs shared by the servers and the load generator, loopback."
for peer in $PEERS; do echo "- $peer: $(version_of "$peer")"; done
echo

# --- Generator check: redis-benchmark vs kvasir bench against redis-server ----
if [ "$GENCHECK" = 1 ]; then
    RP=${PORT[redis]:-}
    [ -n "$RP" ] || { echo "compare: GENCHECK needs the redis peer" >&2; exit 1; }
    GEN="$WORK/gen.tsv"
    : >"$GEN"
    for r in $(seq 1 "$REPEAT"); do
        for pipe in 1 16; do
            n=$GEN_N1
            [ "$pipe" = 16 ] && n=$GEN_N16
            for t in set get; do
                rb() {
                    redis-benchmark -h 127.0.0.1 -p "$RP" -c "$CLIENTS" -P "$pipe" -t "$t" -n "$n" \
                        -r 16384 -q --csv 2>/dev/null | tr -d '\r' |
                        awk -F'","' '/^"(SET|GET)"/ { gsub(/"/, "", $2); print $2 }'
                }
                kb() {
                    local role="--writers $CLIENTS --readers 0"
                    [ "$t" = get ] && role="--writers 0 --readers $CLIENTS"
                    # shellcheck disable=SC2086
                    "$KVASIR_BIN" bench kv --port "$RP" $role -P "$pipe" --key-size 16 --value-size 3 \
                        --keyspace 16384 --duration "$DURATION" --no-progress --json "$WORK/gen.json" >/dev/null
                    json_field "$WORK/gen.json" 'd["ops_per_sec"]'
                }
                if [ $((r % 2)) -eq 1 ]; then
                    a=$(rb); b=$(kb)
                else
                    b=$(kb); a=$(rb)
                fi
                printf '%s\t%s\t%s\t%s\n' "$t" "$pipe" "$a" "$b" >>"$GEN"
                echo "compare: gencheck $t -P $pipe run $r: redis-benchmark $a, kvasir bench $b" >&2
            done
        done
    done
    echo "### Load generator check (against redis-server, -c $CLIENTS, median of $REPEAT)"
    echo
    echo "redis-benchmark: \`redis-benchmark -c $CLIENTS -P {1,16} -t {set,get} -n {$GEN_N1,$GEN_N16} -r 16384 --csv\`;"
    echo "kvasir bench: \`kvasir bench kv --writers $CLIENTS --readers 0\` (SET) or \`--writers 0 --readers $CLIENTS\` (GET)"
    echo "\`-P {1,16} --key-size 16 --value-size 3 --keyspace 16384 --duration $DURATION\` (the same keys"
    echo "\`key:000000012345\` and 3-byte values; kvasir bench also checks every GET's value)."
    echo
    echo "| test | pipeline | redis-benchmark req/s | kvasir bench ops/s | ratio |"
    echo "|---|---:|---:|---:|---:|"
    for pipe in 1 16; do
        for t in set get; do
            a=$(awk -F'\t' -v t="$t" -v p="$pipe" '$1==t && $2==p {print $3}' "$GEN" | median)
            b=$(awk -F'\t' -v t="$t" -v p="$pipe" '$1==t && $2==p {print $4}' "$GEN" | median)
            ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')
            printf '| %s | %s | %.0f | %.0f | %s |\n' "${t^^}" "$pipe" "$a" "$b" "$ratio"
        done
    done
    echo
    echo "ratio = kvasir bench / redis-benchmark (the issue asks for at least 0.90)."
    echo
fi

# --- Workloads against every peer --------------------------------------------
if [ -n "$WORKLOADS" ]; then
    RES="$WORK/results.tsv" # workload \t peer \t ops/s \t p99 us \t errors
    : >"$RES"
    for r in $(seq 1 "$REPEAT"); do
        for w in $WORKLOADS; do
            args=$(workload_args "$w")
            order=$PEERS
            [ $((r % 2)) -eq 0 ] && order=$(echo "$PEERS" | tr ' ' '\n' | tac | tr '\n' ' ')
            for peer in $order; do
                redis-cli -p "${PORT[$peer]}" FLUSHALL >/dev/null
                out="$WORK/$w-$peer-$r.json"
                # shellcheck disable=SC2086
                if ! timeout $((DURATION * 20 + 120)) "$KVASIR_BIN" bench $args --port "${PORT[$peer]}" \
                    $(duration_flag "$w") --server-pid "${PID[$peer]}" --label "$peer" --no-progress \
                    --json "$out" >"$WORK/$w-$peer-$r.txt" 2>&1; then
                    echo "compare: $w against $peer failed:" >&2
                    tail -3 "$WORK/$w-$peer-$r.txt" >&2
                fi
                [ -f "$out" ] || continue
                ops=$(json_field "$out" 'd["runs"][-1]["ops_per_sec"]')
                p99=$(json_field "$out" '(lambda l: l.get("ALL", next(iter(l.values()))))(d["runs"][-1]["latency_us"])["p99_us"]')
                errs=$(json_field "$out" 'd["errors"]["total"]')
                printf '%s\t%s\t%s\t%s\t%s\n' "$w" "$peer" "$ops" "$p99" "$errs" >>"$RES"
                echo "compare: $w / $peer run $r: $ops ops/s, p99 $p99 us, errors $errs" >&2
            done
        done
    done
    set -- $PEERS
    first=$1
    echo "### Workloads (median of $REPEAT runs of ${DURATION} s, peers alternating, FLUSHALL before each)"
    echo
    header="| workload |"
    rule="|---|"
    for peer in $PEERS; do header="$header $peer ops/s |"; rule="$rule---:|"; done
    for peer in $PEERS; do
        [ "$peer" = "$first" ] && continue
        header="$header $first / $peer |"
        rule="$rule---:|"
    done
    for peer in $PEERS; do header="$header $peer p99 us |"; rule="$rule---:|"; done
    header="$header errors |"
    rule="$rule---:|"
    echo "$header"
    echo "$rule"
    for w in $WORKLOADS; do
        declare -A OPS=() P99=()
        line="| $w |"
        errs=0
        for peer in $PEERS; do
            OPS[$peer]=$(awk -F'\t' -v w="$w" -v p="$peer" '$1==w && $2==p {print $3}' "$RES" | median)
            P99[$peer]=$(awk -F'\t' -v w="$w" -v p="$peer" '$1==w && $2==p {print $4}' "$RES" | median)
            e=$(awk -F'\t' -v w="$w" -v p="$peer" '$1==w && $2==p {s+=$5} END {print s+0}' "$RES")
            errs=$((errs + e))
            line="$line $(printf '%.0f' "${OPS[$peer]:-0}") |"
        done
        for peer in $PEERS; do
            [ "$peer" = "$first" ] && continue
            line="$line $(awk -v a="${OPS[$first]:-0}" -v b="${OPS[$peer]:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }') |"
        done
        for peer in $PEERS; do line="$line $(printf '%.0f' "${P99[$peer]:-0}") |"; done
        echo "$line $errs |"
    done
    echo
    echo "Workload flags (plus --duration/--runtime $DURATION, --server-pid, --json):"
    echo
    for w in $WORKLOADS; do echo "- $w: \`kvasir bench $(workload_args "$w")\`"; done
    echo
fi
} | {
    if [ "$APPEND" = 1 ]; then
        tee -a "$ROOT/docs/benchmarks.md"
    else
        cat
    fi
}
