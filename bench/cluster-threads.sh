#!/usr/bin/env bash
# Shard threads in cluster mode: a 3-node cluster (--replicas 3
# --shards-per-node 8 --wal fsync, all on this machine) with each value of
# THREADS for `kvasir server --threads`, one after the other in one run,
# the order rotated every repetition. For each: redis-benchmark --cluster
# -c $CLIENTS -r $KEYSPACE -n $N -P {1,16} over $TESTS, the requests/s
# (median of $REPEAT) and the CPU time the three nodes used per request
# (utime + stime from /proc, summed over the nodes, median), the figure a
# many-core estimate starts from.
#
# With BASE=<kvasir binary> (e.g. one bench/ab.sh built from an older
# revision) that binary runs too, with --threads $BASE_THREADS (default 1),
# as the first column: the before/after of a change on the cluster path,
# in the same run.
#
# Usage: bench/cluster-threads.sh
# Environment: THREADS (default "1 2"), BASE (optional), BASE_THREADS, N (default 100000),
# KEYSPACE (-r, default 16384; a large one makes every SET a new key), REPEAT
# (default 3), N_PIPELINED (-n for a pipeline above 1, default 8 x N:
# redis-benchmark --cluster runs a thread per node, and those threads stop
# only at their 250 ms progress tick, so every run's time is rounded up to
# a multiple of 250 ms; a run of a few seconds keeps that step small),
# CLIENTS (default 50), PIPELINES (default "1 16"), TESTS
# (default "set,get,incr"), plus lib-cluster.sh's KVASIR, KVASIR_ARGS,
# START_TIMEOUT, REBALANCE_TIMEOUT.
# Needs redis-cli, redis-benchmark (scripts/install-test-deps.sh), python3.
set -euo pipefail
NAME=cluster-threads
THREADS=${THREADS:-"1 2"}
BASE=${BASE:-}
BASE_THREADS=${BASE_THREADS:-1}
N=${N:-100000}
N_PIPELINED=${N_PIPELINED:-$((N * 8))}
KEYSPACE=${KEYSPACE:-16384}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-"1 16"}
TESTS=${TESTS:-"set,get,incr"}
command -v redis-benchmark >/dev/null 2>&1 || {
    echo "$NAME: redis-benchmark not found; run scripts/install-test-deps.sh" >&2
    exit 1
}
# shellcheck source=bench/lib-cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-cluster.sh"

TICKS=$(getconf CLK_TCK)
# The three nodes' utime + stime in clock ticks, by kind of thread: "main
# io shard bus other total" (other: the blocking pool that runs fsyncs, the
# allocator's and the log's helpers).
cpu_ticks() {
    local i t stat comm main=0 io=0 shard=0 bus=0 other=0 n
    for i in "${NODES[@]}"; do
        for t in /proc/"${PID[$i]}"/task/*; do
            stat=$(cat "$t/stat" 2>/dev/null) || continue
            comm=$(cat "$t/comm" 2>/dev/null) || continue
            # Fields after the command name (which may hold spaces).
            read -r -a f <<<"${stat##*) }"
            n=$((f[11] + f[12]))
            # The main thread is the task whose id is the process's (its
            # name is the binary's, which need not be "kvasir").
            if [ "${t##*/}" = "${PID[$i]}" ]; then
                main=$((main + n))
                continue
            fi
            case "$comm" in
                kvasir-io-*) io=$((io + n)) ;;
                kvasir-shard-*) shard=$((shard + n)) ;;
                kvasir-bus) bus=$((bus + n)) ;;
                *) other=$((other + n)) ;;
            esac
        done
    done
    echo "$main $io $shard $bus $other $((main + io + shard + bus + other))"
}

fsyncs() { # the three nodes' Raft log fsyncs so far (INFO raft)
    local i total=0 n
    for i in "${NODES[@]}"; do
        n=$(rcli "${PORT[$i]}" INFO raft | awk -F: '$1 == "fsyncs" { print $2 }')
        total=$((total + ${n:-0}))
    done
    echo "$total"
}

RESULTS="$WORK/results"
: >"$RESULTS"
NEW=$KVASIR
# Configurations: a label per column; "base" is BASE with --threads
# $BASE_THREADS.
CONFIGS="${BASE:+base }$THREADS"
for rep in $(seq 1 "$REPEAT"); do
    read -r -a order <<<"$CONFIGS"
    # Rotate the order every repetition.
    shift_by=$(((rep - 1) % ${#order[@]}))
    order=("${order[@]:shift_by}" "${order[@]:0:shift_by}")
    for t in "${order[@]}"; do
        if [ "$t" = base ]; then
            KVASIR=$BASE
            cluster_init --threads "$BASE_THREADS"
        else
            KVASIR=$NEW
            cluster_init --threads "$t"
        fi
        start_cluster
        took=$(wait_balanced)
        say "repetition $rep, --threads $t: cluster ready, leaders balanced in ${took}s"
        for p in $PIPELINES; do
            n=$N
            [ "$p" -gt 1 ] && n=$N_PIPELINED
            for test in ${TESTS//,/ }; do
                rcli "${PORT[1]}" FLUSHALL >/dev/null
                read -r -a before <<<"$(cpu_ticks)"
                syncs_before=$(fsyncs)
                out=$(timeout 900 redis-benchmark --cluster -h 127.0.0.1 -p "${PORT[1]}" \
                    -c "$CLIENTS" -r "$KEYSPACE" -n "$n" -t "$test" -P "$p" -q --csv 2>/dev/null |
                    tail -n 1)
                read -r -a after <<<"$(cpu_ticks)"
                syncs=$(($(fsyncs) - syncs_before))
                rps=$(echo "$out" | awk -F'"' '{ print $4 }')
                per=()
                for k in 0 1 2 3 4 5; do
                    per+=("$(awk -v t="$((after[k] - before[k]))" -v hz="$TICKS" -v n="$n" \
                        'BEGIN { printf "%.1f", t / hz * 1e6 / n }')")
                done
                us=${per[5]}
                per_k=$(awk -v s="$syncs" -v n="$n" 'BEGIN { printf "%.1f", s * 1000 / n }')
                echo "$t $p $test $rps $us ${per[0]} ${per[1]} ${per[2]} ${per[3]} ${per[4]} $per_k" >>"$RESULTS"
                say "  $t -P $p $test: $rps requests/s, $us us CPU per request (main ${per[0]}, io ${per[1]}, shard threads ${per[2]}, bus ${per[3]}, other ${per[4]}), $per_k fsyncs per 1000 requests"
            done
        done
        stop_all
        rm -rf "$WORK"/node*
    done
done

echo
echo "3 nodes, RF=3, --wal fsync, 24 shards; redis-benchmark --cluster -c $CLIENTS -r $KEYSPACE -n $N (-P > 1: $N_PIPELINED) -q; medians of $REPEAT runs, order rotated."
echo "CPU is the three nodes' utime+stime per request (all on this machine)."
[ -z "$BASE" ] || echo "base: $BASE with --threads $BASE_THREADS."
echo
label() { if [ "$1" = base ]; then echo "base"; else echo "--threads $1"; fi; }
header="| test |"
rule="|---|"
for t in $CONFIGS; do
    header="$header $(label "$t") req/s | CPU us/req |"
    rule="$rule---:|---:|"
done
first=${CONFIGS%% *}
for t in $CONFIGS; do [ "$t" = "$first" ] || {
    header="$header $(label "$t") / $(label "$first") |"
    rule="$rule---:|"
}; done
echo "$header"
echo "$rule"
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else print v[int((NR + 1) / 2)] }'; }
for p in $PIPELINES; do
    for test in ${TESTS//,/ }; do
        row="| ${test^^} -P $p |"
        base=""
        for t in $CONFIGS; do
            rps=$(awk -v t="$t" -v p="$p" -v s="$test" '$1 == t && $2 == p && $3 == s { print $4 }' "$RESULTS" | median)
            us=$(awk -v t="$t" -v p="$p" -v s="$test" '$1 == t && $2 == p && $3 == s { print $5 }' "$RESULTS" | median)
            [ -n "$base" ] || base=$rps
            row="$row $rps | $us |"
        done
        for t in $CONFIGS; do [ "$t" = "$first" ] || {
            rps=$(awk -v t="$t" -v p="$p" -v s="$test" '$1 == t && $2 == p && $3 == s { print $4 }' "$RESULTS" | median)
            row="$row $(awk -v a="$rps" -v b="$base" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }') |"
        }; done
        echo "$row"
    done
done

echo
echo "CPU per request by thread (us, summed over the three nodes, medians): main / I/O / shard threads / bus thread / other (the fsync pool, helpers); Raft log fsyncs of the three nodes per 1000 requests."
echo
echo "| test | config | main | I/O | shard threads | bus | other | fsyncs per 1000 requests |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for p in $PIPELINES; do
    for test in ${TESTS//,/ }; do
        for t in $CONFIGS; do
            row="| ${test^^} -P $p | $(label "$t") |"
            for col in 6 7 8 9 10 11; do
                v=$(awk -v t="$t" -v p="$p" -v s="$test" -v c="$col" '$1 == t && $2 == p && $3 == s { print $c }' "$RESULTS" | median)
                row="$row $v |"
            done
            echo "$row"
        done
    done
done
