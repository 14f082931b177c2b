#!/usr/bin/env bash
# Shard threads in cluster mode: a 3-node cluster (--replicas 3
# --shards-per-node 8 --wal fsync, all on this machine) with each value of
# THREADS for `kvasir server --threads`, one after the other in one run,
# the order rotated every repetition. For each: redis-benchmark --cluster
# -c $CLIENTS -r 16384 -n $N -P {1,16} over $TESTS, the requests/s
# (median of $REPEAT) and the CPU time the three nodes used per request
# (utime + stime from /proc, summed over the nodes, median), the figure a
# many-core estimate starts from.
#
# Usage: bench/cluster-threads.sh
# Environment: THREADS (default "1 2"), N (default 100000), REPEAT
# (default 3), CLIENTS (default 50), PIPELINES (default "1 16"), TESTS
# (default "set,get,incr"), plus lib-cluster.sh's KVASIR, KVASIR_ARGS,
# START_TIMEOUT, REBALANCE_TIMEOUT.
# Needs redis-cli, redis-benchmark (scripts/install-test-deps.sh), python3.
set -euo pipefail
NAME=cluster-threads
THREADS=${THREADS:-"1 2"}
N=${N:-100000}
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
cpu_ticks() { # the three nodes' utime + stime, in clock ticks
    local i total=0 stat
    for i in "${NODES[@]}"; do
        stat=$(cat "/proc/${PID[$i]}/stat")
        # Fields after the command name (which may hold spaces).
        read -r -a f <<<"${stat##*) }"
        total=$((total + f[11] + f[12]))
    done
    echo "$total"
}

RESULTS="$WORK/results"
: >"$RESULTS"
for rep in $(seq 1 "$REPEAT"); do
    read -r -a order <<<"$THREADS"
    # Rotate the order every repetition.
    shift_by=$(((rep - 1) % ${#order[@]}))
    order=("${order[@]:shift_by}" "${order[@]:0:shift_by}")
    for t in "${order[@]}"; do
        cluster_init --threads "$t"
        start_cluster
        took=$(wait_balanced)
        say "repetition $rep, --threads $t: cluster ready, leaders balanced in ${took}s"
        for p in $PIPELINES; do
            for test in ${TESTS//,/ }; do
                rcli "${PORT[1]}" FLUSHALL >/dev/null
                before=$(cpu_ticks)
                out=$(timeout 900 redis-benchmark --cluster -h 127.0.0.1 -p "${PORT[1]}" \
                    -c "$CLIENTS" -r 16384 -n "$N" -t "$test" -P "$p" -q --csv 2>/dev/null |
                    tail -n 1)
                after=$(cpu_ticks)
                rps=$(echo "$out" | awk -F'"' '{ print $4 }')
                us=$(awk -v t="$((after - before))" -v hz="$TICKS" -v n="$N" \
                    'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
                echo "$t $p $test $rps $us" >>"$RESULTS"
                say "  --threads $t -P $p $test: $rps requests/s, $us us CPU per request"
            done
        done
        stop_all
        rm -rf "$WORK"/node*
    done
done

echo
echo "3 nodes, RF=3, --wal fsync, 24 shards; redis-benchmark --cluster -c $CLIENTS -r 16384 -n $N -q; medians of $REPEAT runs, order rotated."
echo "CPU is the three nodes' utime+stime per request (all on this machine)."
echo
header="| test |"
rule="|---|"
for t in $THREADS; do
    header="$header --threads $t req/s | CPU us/req |"
    rule="$rule---:|---:|"
done
first=${THREADS%% *}
for t in $THREADS; do [ "$t" = "$first" ] || {
    header="$header $t / $first |"
    rule="$rule---:|"
}; done
echo "$header"
echo "$rule"
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else print v[int((NR + 1) / 2)] }'; }
for p in $PIPELINES; do
    for test in ${TESTS//,/ }; do
        row="| ${test^^} -P $p |"
        base=""
        for t in $THREADS; do
            rps=$(awk -v t="$t" -v p="$p" -v s="$test" '$1 == t && $2 == p && $3 == s { print $4 }' "$RESULTS" | median)
            us=$(awk -v t="$t" -v p="$p" -v s="$test" '$1 == t && $2 == p && $3 == s { print $5 }' "$RESULTS" | median)
            [ -n "$base" ] || base=$rps
            row="$row $rps | $us |"
        done
        for t in $THREADS; do [ "$t" = "$first" ] || {
            rps=$(awk -v t="$t" -v p="$p" -v s="$test" '$1 == t && $2 == p && $3 == s { print $4 }' "$RESULTS" | median)
            row="$row $(awk -v a="$rps" -v b="$base" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }') |"
        }; done
        echo "$row"
    done
done
