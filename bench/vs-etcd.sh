#!/usr/bin/env bash
# Kvasir vs etcd, side by side on this machine: replicated writes.
#
#  - etcd: a three-member etcd cluster (Debian's etcd-server, WAL fsync on
#    every commit as always) on 127.0.0.1, driven by etcd's own load
#    generator: benchmark put --key-size 16 --val-size 16 --clients C
#    --conns C --total $N --sequential-keys=false --key-space-size $KEYSPACE,
#    against all three members.
#  - kvasir3: a three-node Kvasir cluster (--replicas 3 --shards-per-node 8
#    --wal fsync), driven by `kvasir bench kv --cluster` with C writer
#    connections, 16-byte keys and values, for $DURATION seconds.
#  - kvasir1: a single standalone Kvasir node (`kvasir server` defaults plus
#    $KVASIR1_ARGS), the same `kvasir bench kv` without --cluster.
#
# Workloads: "write" (100% SET / put) at each C in $CLIENTS, and the RheaKV
# mix ("mix": every connection writes with probability $WRITE_RATIO and
# reads otherwise, 16-byte keys and values, key space loaded first) at each C
# in $MIX_CLIENTS, for the Kvasir systems only (etcd's benchmark tool has no
# mixed put/get mode). Each system is started fresh for each of the $REPEAT
# rounds (the order of the systems rotates between rounds), runs all its
# cases, and is stopped before the next one starts, so only one system runs
# at a time. Reported: the median of each number over the rounds, and the
# ratios Kvasir-3-node / etcd and Kvasir-3-node / Kvasir-1-node.
#
# Environment: SYSTEMS (default "etcd kvasir1 kvasir3"; any subset),
# CLIENTS ("16 64"), MIX_CLIENTS ("16 64"; "" skips the mix), WRITE_RATIO
# (0.9), N (etcd puts per run, 100000), DURATION (seconds per Kvasir run, 10),
# REPEAT (3), KEYSPACE (distinct keys, 100000), KVASIR (binary, default
# target/release/kvasir, built if missing), KVASIR1_ARGS and KVASIR3_ARGS
# (extra `kvasir server` flags), KVASIR_BENCH_ARGS (extra `kvasir bench kv`
# flags, e.g. "--io-threads 2"), ETCD_BENCHMARK (path of etcd's benchmark
# tool), ETCD_ARGS (extra etcd flags), BENCH_TIMEOUT (seconds per run, 900),
# START_TIMEOUT (seconds for a cluster to become healthy, 60), KEEP_LOGS
# (directory to copy server logs into).
# Needs etcd, etcdctl and etcd's benchmark tool: bench/install-etcd.sh;
# redis-cli: scripts/install-test-deps.sh.
set -euo pipefail

SYSTEMS=${SYSTEMS:-"etcd kvasir1 kvasir3"}
CLIENTS=${CLIENTS:-"16 64"}
MIX_CLIENTS=${MIX_CLIENTS-"16 64"}
WRITE_RATIO=${WRITE_RATIO:-0.9}
N=${N:-100000}
DURATION=${DURATION:-10}
REPEAT=${REPEAT:-3}
KEYSPACE=${KEYSPACE:-100000}
KVASIR1_ARGS=${KVASIR1_ARGS:-}
KVASIR3_ARGS=${KVASIR3_ARGS:-}
KVASIR_BENCH_ARGS=${KVASIR_BENCH_ARGS:-}
ETCD_ARGS=${ETCD_ARGS:-}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-900}
START_TIMEOUT=${START_TIMEOUT:-60}
KEEP_LOGS=${KEEP_LOGS:-}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_DIR=${TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kvasir-bench-tools}
ETCD_BENCHMARK=${ETCD_BENCHMARK:-$TOOLS_DIR/bin/benchmark}

say() { echo "vs-etcd: $*" >&2; }
die() { say "$*"; exit 1; }

for s in $SYSTEMS; do
    case "$s" in
        etcd | kvasir1 | kvasir3) ;;
        *) die "unknown system '$s' in SYSTEMS (etcd, kvasir1, kvasir3)" ;;
    esac
done
has_system() { case " $SYSTEMS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

need="awk timeout python3"
has_system etcd && need="$need etcd etcdctl"
{ has_system kvasir1 || has_system kvasir3; } && need="$need redis-cli"
for tool in $need; do
    command -v "$tool" >/dev/null 2>&1 && continue
    case "$tool" in
        etcd | etcdctl) die "$tool not found; run bench/install-etcd.sh" ;;
        redis-cli) die "$tool not found; run scripts/install-test-deps.sh" ;;
        *) die "$tool not found" ;;
    esac
done
if has_system etcd && [ ! -x "$ETCD_BENCHMARK" ]; then
    die "etcd's benchmark tool not found at $ETCD_BENCHMARK; run bench/install-etcd.sh"
fi

if has_system kvasir1 || has_system kvasir3; then
    KVASIR=${KVASIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir}
    if [ ! -x "$KVASIR" ]; then
        say "building Kvasir (release)..."
        (cd "$ROOT" && cargo build --release -q -p kvasir)
        KVASIR="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"
    fi
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvasir-vs-etcd.XXXXXX")
PIDS=""
stop_all() {
    local pid
    for pid in $PIDS; do kill "$pid" 2>/dev/null || true; done
    for pid in $PIDS; do wait "$pid" 2>/dev/null || true; done
    PIDS=""
}
cleanup() {
    stop_all
    if [ -n "$KEEP_LOGS" ]; then
        mkdir -p "$KEEP_LOGS"
        cp "$WORK"/*.log "$KEEP_LOGS"/ 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Waits until check succeeds; fails (with the logs) if it takes longer than
# START_TIMEOUT or a started process exits.
wait_until() { # what check-function logs...
    local what=$1 check=$2 pid
    shift 2
    local deadline=$((SECONDS + START_TIMEOUT))
    while ! "$check"; do
        for pid in $PIDS; do
            if ! kill -0 "$pid" 2>/dev/null; then
                show_logs "$@"
                die "$what: a process exited during startup"
            fi
        done
        if [ "$SECONDS" -ge "$deadline" ]; then
            show_logs "$@"
            die "$what: not ready after ${START_TIMEOUT}s"
        fi
        sleep 0.2
    done
}

# --- etcd: three members ------------------------------------------------------
ETCD_ENDPOINTS=""
start_etcd() {
    local ports i cluster="" token="kvasir-vs-etcd-$$-$RANDOM"
    read -r -a ports <<<"$(free_ports 6)"
    for i in 1 2 3; do
        cluster="${cluster:+$cluster,}m$i=http://127.0.0.1:${ports[$((2 * i - 1))]}"
    done
    ETCD_ENDPOINTS=""
    for i in 1 2 3; do
        local cp=${ports[$((2 * i - 2))]} pp=${ports[$((2 * i - 1))]}
        ETCD_ENDPOINTS="${ETCD_ENDPOINTS:+$ETCD_ENDPOINTS,}127.0.0.1:$cp"
        mkdir -p "$WORK/etcd$i"
        # shellcheck disable=SC2086 # ETCD_ARGS is a list of flags
        etcd --name "m$i" --data-dir "$WORK/etcd$i" \
            --listen-client-urls "http://127.0.0.1:$cp" --advertise-client-urls "http://127.0.0.1:$cp" \
            --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
            --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "$token" \
            --logger zap --log-level warn $ETCD_ARGS >"$WORK/etcd$i.log" 2>&1 &
        PIDS="$PIDS $!"
    done
    etcd_healthy() { ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" endpoint health >/dev/null 2>&1; }
    wait_until "etcd cluster" etcd_healthy "$WORK"/etcd?.log
}

# --- Kvasir: three nodes, or one ------------------------------------------------
KVASIR_PORT=""
start_kvasir3() {
    local ports i cluster=""
    read -r -a ports <<<"$(free_ports 6)"
    for i in 1 2 3; do
        cluster="${cluster:+$cluster,}$i=127.0.0.1:${ports[$((2 * i - 2))]}@${ports[$((2 * i - 1))]}"
    done
    KVASIR3_PORTS=""
    for i in 1 2 3; do
        local p=${ports[$((2 * i - 2))]} cp=${ports[$((2 * i - 1))]}
        KVASIR3_PORTS="$KVASIR3_PORTS $p"
        mkdir -p "$WORK/kvasir3-$i"
        # shellcheck disable=SC2086 # KVASIR3_ARGS is a list of flags
        "$KVASIR" server --node-id "$i" --port "$p" --bind 127.0.0.1 --cluster-port "$cp" \
            --initial-cluster "$cluster" --replicas 3 --shards-per-node 8 \
            --dir "$WORK/kvasir3-$i" --wal fsync $KVASIR3_ARGS >"$WORK/kvasir3-$i.log" 2>&1 &
        PIDS="$PIDS $!"
    done
    KVASIR_PORT=${ports[0]}
    kvasir3_ok() {
        local p
        for p in $KVASIR3_PORTS; do
            redis-cli -h 127.0.0.1 -p "$p" CLUSTER INFO 2>/dev/null | tr -d '\r' |
                grep -qx 'cluster_state:ok' || return 1
        done
    }
    wait_until "Kvasir cluster" kvasir3_ok "$WORK"/kvasir3-?.log
}

start_kvasir1() {
    local p
    p=$(free_ports 1)
    mkdir -p "$WORK/kvasir1"
    # shellcheck disable=SC2086 # KVASIR1_ARGS is a list of flags
    "$KVASIR" server --port "$p" --bind 127.0.0.1 --save "" --dir "$WORK/kvasir1" $KVASIR1_ARGS \
        >"$WORK/kvasir1.log" 2>&1 &
    PIDS="$PIDS $!"
    KVASIR_PORT=$p
    kvasir1_ok() { [ "$(redis-cli -h 127.0.0.1 -p "$KVASIR_PORT" PING 2>/dev/null)" = "PONG" ]; }
    wait_until "Kvasir node" kvasir1_ok "$WORK/kvasir1.log"
}

stop_system() { # system
    stop_all
    rm -rf "$WORK/$1"*/
}

# --- One measurement: appends "system workload clients ops/s writes/s p50ms p99ms" ---
RESULTS="$WORK/results.tsv"
: >"$RESULTS"

bench_etcd() { # clients
    local c=$1 out
    out=$(timeout "$BENCH_TIMEOUT" "$ETCD_BENCHMARK" --endpoints "$ETCD_ENDPOINTS" \
        --clients "$c" --conns "$c" --precise \
        put --key-size 16 --val-size 16 --total "$N" --sequential-keys=false \
        --key-space-size "$KEYSPACE" 2>&1) || {
        echo "$out" | tail -40 >&2
        die "etcd benchmark failed (clients $c)"
    }
    out=$(echo "$out" | tr -d '\r')
    if echo "$out" | grep -q '^Error distribution'; then
        say "etcd benchmark reported errors (clients $c):"
        echo "$out" | sed -n '/^Error distribution/,$p' | head -10 >&2
    fi
    echo "$out" | awk -v c="$c" '
        /Requests\/sec:/ { rps = $2 }
        /^ *50% in / { p50 = $3 * 1000 }
        /^ *99% in / { p99 = $3 * 1000 }
        END {
            if (rps == "" || p50 == "" || p99 == "") exit 1
            printf "etcd\twrite\t%s\t%s\t%s\t%.4f\t%.4f\n", c, rps, rps, p50, p99
        }' >>"$RESULTS" || {
        echo "$out" | tail -40 >&2
        die "could not parse etcd benchmark output"
    }
}

bench_kvasir() { # system workload clients
    local sys=$1 workload=$2 c=$3 json="$WORK/run.json" out mode
    local cluster_flag=""
    [ "$sys" = kvasir3 ] && cluster_flag="--cluster"
    if [ "$workload" = write ]; then
        mode="--writers $c --readers 0"
    else
        mode="--clients $c --write-ratio $WRITE_RATIO"
    fi
    rm -f "$json"
    # shellcheck disable=SC2086 # flag lists
    out=$(timeout "$BENCH_TIMEOUT" "$KVASIR" bench kv --host 127.0.0.1 --port "$KVASIR_PORT" $cluster_flag \
        $mode --key-size 16 --value-size 16 --keyspace "$KEYSPACE" --duration "$DURATION" \
        --no-progress --label "$sys" --json "$json" $KVASIR_BENCH_ARGS 2>&1) || {
        echo "$out" | tail -40 >&2
        die "kvasir bench failed ($sys, $workload, clients $c)"
    }
    python3 - "$json" "$sys" "$workload" "$c" >>"$RESULTS" <<'EOF' || die "could not read $json"
import json, sys
path, system, workload, clients = sys.argv[1:]
report = json.load(open(path))
run = report["runs"][-1]
errors = run["errors"]["total"]
if errors:
    print(f"vs-etcd: {system} {workload} c={clients}: {errors} errors: {run['errors']}"
          f" first: {run.get('first_error')}", file=sys.stderr)
lat = run["latency_us"]["ALL"]
writes = run["ops"].get("write", 0) / run["duration_s"]
print(f"{system}\t{workload}\t{clients}\t{run['ops_per_sec']:.2f}\t{writes:.2f}"
      f"\t{lat['p50_us'] / 1000:.4f}\t{lat['p99_us'] / 1000:.4f}")
EOF
}

run_system() { # system round
    local sys=$1 r=$2 c
    say "round $r/$REPEAT: starting $sys..."
    case "$sys" in
        etcd) start_etcd ;;
        kvasir1) start_kvasir1 ;;
        kvasir3) start_kvasir3 ;;
    esac
    if [ "$sys" = etcd ]; then
        ETCD_VERSION=$(ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" endpoint status -w json 2>/dev/null |
            python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["version"])' 2>/dev/null || echo "?")
        echo "$ETCD_VERSION" >"$WORK/etcd.version"
        for c in $CLIENTS; do
            bench_etcd "$c"
            say "round $r/$REPEAT: $sys write c=$c: $(tail -1 "$RESULTS" | cut -f4-)"
        done
    else
        redis-cli -h 127.0.0.1 -p "$KVASIR_PORT" INFO server 2>/dev/null | tr -d '\r' |
            awk -F: '$1=="kvasir_version"{print $2; exit}' >"$WORK/kvasir.version" || true
        for c in $CLIENTS; do
            bench_kvasir "$sys" write "$c"
            say "round $r/$REPEAT: $sys write c=$c: $(tail -1 "$RESULTS" | cut -f4-)"
        done
        for c in $MIX_CLIENTS; do
            bench_kvasir "$sys" mix "$c"
            say "round $r/$REPEAT: $sys mix c=$c: $(tail -1 "$RESULTS" | cut -f4-)"
        done
    fi
    stop_system "$sys"
}

read -r -a SYS_LIST <<<"$SYSTEMS"
for r in $(seq 1 "$REPEAT"); do
    k=${#SYS_LIST[@]}
    for i in $(seq 0 $((k - 1))); do
        run_system "${SYS_LIST[$(((i + r - 1) % k))]}" "$r"
    done
done

# --- Report -----------------------------------------------------------------------
median() { # system workload clients column(4..7)
    awk -F'\t' -v s="$1" -v w="$2" -v c="$3" -v col="$4" '$1==s && $2==w && $3==c { print $col }' "$RESULTS" |
        sort -g | awk '{ v[NR]=$1 } END {
            if (NR == 0) { print ""; exit }
            if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
}
label() {
    case "$1" in
        etcd) echo "etcd 3 members" ;;
        kvasir1) echo "Kvasir 1 node" ;;
        kvasir3) echo "Kvasir 3 nodes" ;;
    esac
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b > 0) printf "%.2f", a / b; else print "-" }'; }

echo "# Kvasir vs etcd: replicated writes"
echo
echo "$(nproc) CPUs shared by all servers and the load generator; one system running at a time."
has_system etcd && echo "- etcd $(cat "$WORK/etcd.version" 2>/dev/null || echo ?), 3 members on 127.0.0.1 (WAL fsync per commit): \`benchmark put --key-size 16 --val-size 16 --clients C --conns C --total $N --sequential-keys=false --key-space-size $KEYSPACE\` (etcd's tool from go.etcd.io/etcd/v3 $(cat "$ETCD_BENCHMARK.version" 2>/dev/null || echo "?")), all three endpoints."
has_system kvasir3 && echo "- Kvasir $(cat "$WORK/kvasir.version" 2>/dev/null || echo ?) 3 nodes: \`kvasir server --replicas 3 --shards-per-node 8 --wal fsync${KVASIR3_ARGS:+ $KVASIR3_ARGS}\`, \`kvasir bench kv --cluster\`."
has_system kvasir1 && echo "- Kvasir $(cat "$WORK/kvasir.version" 2>/dev/null || echo ?) 1 node: \`kvasir server${KVASIR1_ARGS:+ $KVASIR1_ARGS}\` (standalone), \`kvasir bench kv\`."
{ has_system kvasir1 || has_system kvasir3; } && echo "- kvasir bench kv: 16-byte keys and values, $KEYSPACE keys, ${DURATION}s per run; write: --writers C; mix (RheaKV): --clients C --write-ratio $WRITE_RATIO after loading the key space${KVASIR_BENCH_ARGS:+; extra flags: $KVASIR_BENCH_ARGS}."
echo
echo "Median of $REPEAT rounds; each system started fresh in each round. p50/p99 over all requests."
echo
echo "| workload | clients | system | writes/s | ops/s | p50 ms | p99 ms |"
echo "|---|---:|---|---:|---:|---:|---:|"
for workload in write mix; do
    if [ "$workload" = write ]; then cl=$CLIENTS; else cl=$MIX_CLIENTS; fi
    for c in $cl; do
        for s in etcd kvasir1 kvasir3; do
            has_system "$s" || continue
            ops=$(median "$s" "$workload" "$c" 4)
            [ -z "$ops" ] && continue
            w=$(median "$s" "$workload" "$c" 5)
            p50=$(median "$s" "$workload" "$c" 6)
            p99=$(median "$s" "$workload" "$c" 7)
            name=$workload
            [ "$workload" = mix ] && name="RheaKV mix ($WRITE_RATIO writes)"
            printf '| %s | %s | %s | %.0f | %.0f | %.3f | %.3f |\n' "$name" "$c" "$(label "$s")" "$w" "$ops" "$p50" "$p99"
        done
    done
done
echo
if has_system kvasir3 && { has_system etcd || has_system kvasir1; }; then
    echo "| workload | clients | writes/s Kvasir-3 / etcd | p99 Kvasir-3 / etcd | writes/s Kvasir-3 / Kvasir-1 | p99 Kvasir-3 / Kvasir-1 |"
    echo "|---|---:|---:|---:|---:|---:|"
    for workload in write mix; do
        if [ "$workload" = write ]; then cl=$CLIENTS; else cl=$MIX_CLIENTS; fi
        for c in $cl; do
            k3=$(median kvasir3 "$workload" "$c" 5)
            [ -z "$k3" ] && continue
            k3p=$(median kvasir3 "$workload" "$c" 7)
            printf '| %s | %s | %s | %s | %s | %s |\n' "$workload" "$c" \
                "$(ratio "$k3" "$(median etcd "$workload" "$c" 5)")" \
                "$(ratio "$k3p" "$(median etcd "$workload" "$c" 7)")" \
                "$(ratio "$k3" "$(median kvasir1 "$workload" "$c" 5)")" \
                "$(ratio "$k3p" "$(median kvasir1 "$workload" "$c" 7)")"
        done
    done
    echo
    echo "writes/s ratio above 1: Kvasir 3 nodes is faster; p99 ratio below 1: Kvasir 3 nodes is faster."
fi
