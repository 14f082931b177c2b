#!/usr/bin/env bash
# The seed reports' replicated scenarios on a three-node Kvasir cluster
# (--replicas 3 --shards-per-node 8 --wal fsync: 24 Raft groups, 8 led by
# each node, as in RheaKV's setup), driven by `kvasir bench --cluster`, with
# the figures the seeds published printed next to Kvasir's:
#
#  - YugabyteDB 0.9.5 RedisKeyValue (writers/readers 256/0, 192/16, 128/64,
#    64/128, 0/256; ~64-byte key+value: --key-size 24 --value-size 40) and
#    RedisPipelinedKeyValue (24/0, 14/3, 10/6, 4/12, 0/16 connections with
#    -P 16): 3 x n1-standard-16 (16 vCPUs, SSDs), RF=3.
#  - SOFAJRaft RheaKV, scenario 1: 24 groups, 90% put / 10% linearizable get,
#    16-byte keys and values, 8 client machines with client batching,
#    MemoryDB: "400K+ ops, p95 below 8 ms" on 3 x 16-core servers. Kvasir:
#    `kv --write-ratio 0.9` (one request in flight per connection) at 16 and
#    64 connections, and `pipelined-kv --write-ratio 0.9 -P 16` at 64
#    connections as the counterpart of client batching.
#
# Everything (three servers and the load generator) shares this machine's
# CPUs; the seeds had 48 server cores and separate client machines.
#
# Environment: DURATION (seconds per run, 10), REPEAT (3), CASES (names
# below, default all), KVASIR (binary; built if missing), KVASIR_ARGS (extra
# server flags), START_TIMEOUT. Needs redis-cli and python3.
set -euo pipefail

NAME=seeds-replicated
DURATION=${DURATION:-10}
REPEAT=${REPEAT:-3}
ALL_CASES="yb-kv-256-0 yb-kv-192-16 yb-kv-128-64 yb-kv-64-128 yb-kv-0-256 yb-pkv-24-0 yb-pkv-14-3 yb-pkv-10-6 yb-pkv-4-12 yb-pkv-0-16 rhea-16 rhea-64 rhea-batch-64"
CASES=${CASES:-$ALL_CASES}

# shellcheck source=bench/lib-cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-cluster.sh"

# kvasir bench arguments of a case.
args_of() {
    local yb="--key-size 24 --value-size 40 --keyspace 100000"
    local rhea="--key-size 16 --value-size 16 --keyspace 100000 --write-ratio 0.9"
    case "$1" in
        yb-kv-*) local w r
            IFS=- read -r _ _ w r <<<"$1"
            echo "kv --writers $w --readers $r $yb" ;;
        yb-pkv-*) local w r
            IFS=- read -r _ _ w r <<<"$1"
            echo "pipelined-kv --writers $w --readers $r -P 16 $yb" ;;
        rhea-batch-*) echo "pipelined-kv --clients ${1##*-} -P 16 $rhea" ;;
        rhea-*) echo "kv --clients ${1##*-} $rhea" ;;
        *) die "unknown case $1" ;;
    esac
}

# What the seed published for a case: write ops/s, write ms, read ops/s,
# read ms (means), or a note.
seed_of() {
    case "$1" in
        yb-kv-256-0) echo "92456 | 2.77 | - | -" ;;
        yb-kv-192-16) echo "74182 | 2.59 | 15747 | 1.02" ;;
        yb-kv-128-64) echo "43200 | 3.01 | 59762 | 1.07" ;;
        yb-kv-64-128) echo "23426 | 2.73 | 112991 | 1.13" ;;
        yb-kv-0-256) echo "- | - | 214842 | 1.19" ;;
        yb-pkv-24-0) echo "566124 | 20.50 | - | -" ;;
        yb-pkv-14-3) echo "311772 | 22.42 | 84996 | 17.28" ;;
        yb-pkv-10-6) echo "310023 | 15.52 | 133715 | 21.84" ;;
        yb-pkv-4-12) echo "175429 | 10.77 | 155186 | 38.10" ;;
        yb-pkv-0-16) echo "- | - | 231743 | 33.93" ;;
        rhea-*) echo "400K+ ops in all (90% writes), p95 < 8 ms | | |" ;;
    esac
}

cluster_init
for i in "${NODES[@]}"; do start_node "$i"; done
wait_until "the cluster" cluster_healthy "$START_TIMEOUT"
wait_balanced >/dev/null || true

RESULTS="$WORK/results.tsv" # case \t write ops/s \t write mean ms \t read ops/s \t read mean ms \t errors
: >"$RESULTS"
for r in $(seq 1 "$REPEAT"); do
    for c in $CASES; do
        json="$WORK/$c-$r.json"
        # shellcheck disable=SC2046 # the arguments are split into words
        "$KVASIR" bench $(args_of "$c") --cluster --host 127.0.0.1 --port "${PORT[1]}" \
            --duration "$DURATION" --json "$json" --no-progress >"$WORK/$c-$r.out" 2>&1 ||
            die "kvasir bench failed for $c: $(tail -5 "$WORK/$c-$r.out")"
        python3 - "$json" "$c" >>"$RESULTS" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
run = d["runs"][0]
secs = run["duration_s"] or 1
lat = run["latency_us"]
def ms(kind):
    l = lat.get(kind) or {}
    return (l.get("mean_us") or 0) / 1000
ops = run["ops"]
print("\t".join([sys.argv[2], "%.0f" % (ops.get("write", 0) / secs), "%.2f" % ms("write"),
                 "%.0f" % (ops.get("read", 0) / secs), "%.2f" % ms("read"),
                 str(run["errors"]["total"])]))
EOF
        say "run $r/$REPEAT: $c done"
    done
done

median() { # case column
    awk -F'\t' -v c="$1" -v k="$2" '$1==c { print $k }' "$RESULTS" | sort -g | awk '{ v[NR]=$1 } END {
        if (NR == 0) { print "-"; exit }
        if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
}

KV_VERSION=$(rcli "${PORT[1]}" INFO server | awk -F: '$1=="kvasir_version"{print $2; exit}')
echo "# The seed reports' replicated scenarios"
echo
echo "Kvasir ${KV_VERSION:-?} (release), 3 nodes on 127.0.0.1, --replicas 3 --shards-per-node 8 --wal fsync,"
echo "$(nproc) CPUs shared by the three servers and the load generator; ${DURATION}s per run,"
echo "median of $REPEAT runs. Seed figures: YugabyteDB 0.9.5 on 3 x n1-standard-16 (16 vCPUs, SSD);"
echo "RheaKV on 3 x 16-core servers and 8 client machines. Means of the run (ms)."
echo
echo "| case | kvasir bench | Kvasir writes/s | write ms | Kvasir reads/s | read ms | errors | seed writes/s | seed write ms | seed reads/s | seed read ms |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in $CASES; do
    printf '| %s | `%s` | %s | %s | %s | %s | %s | %s |\n' "$c" "$(args_of "$c")" \
        "$(median "$c" 2)" "$(median "$c" 3)" "$(median "$c" 4)" "$(median "$c" 5)" "$(median "$c" 6)" \
        "$(seed_of "$c")"
done
