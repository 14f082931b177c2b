#!/usr/bin/env bash
# EVALSHA throughput of two (or more) Kvasir builds and redis-server in the
# same run, for an A/B of a scripting change on a shared machine: each
# `label=path` is a Kvasir binary (e.g. before=/tmp/kvasir-old
# after=target/release/kvasir); redis-server (no persistence) is always
# added. The scripts are those of bench/vs-redis-commands.sh: `<sha:incr>`
# (`return redis.call('INCR', KEYS[1])`) and `<sha:10 commands>`. Each
# case runs $REPEAT times per pipeline depth, the servers' order reversed
# every other repetition; the medians and the ratios to redis-server are
# printed.
#
# Environment: N (requests per run, 200000), REPEAT (3), CLIENTS (50),
# PIPELINES ("1 16"), CASES ("incr ten").
set -euo pipefail
set -f

N=${N:-200000}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-"1 16"}
CASES=${CASES:-"incr ten"}
[ $# -ge 1 ] || {
    echo "usage: $0 label=kvasir-binary ..." >&2
    exit 2
}
for tool in redis-cli redis-benchmark redis-server; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "scripts-ab: $tool not found; run scripts/install-test-deps.sh" >&2
        exit 1
    }
done

# shellcheck source=bench/lib-scripts.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-scripts.sh"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/scripts-ab.XXXXXX")
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

declare -A PORT
LABELS=""
for spec in "$@"; do
    label=${spec%%=*}
    bin=${spec#*=}
    port=$(free_port)
    mkdir -p "$WORK/$label"
    "$bin" server --port "$port" --bind 127.0.0.1 --save "" --dir "$WORK/$label" >"$WORK/$label.log" 2>&1 &
    PIDS="$PIDS $!"
    PORT[$label]=$port
    LABELS="$LABELS $label"
done
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
    --logfile "$WORK/redis.log" &
PIDS="$PIDS $!"
PORT[redis]=$port
LABELS="$LABELS redis"

for label in $LABELS; do
    for _ in $(seq 1 100); do
        [ "$(redis-cli -p "${PORT[$label]}" PING 2>/dev/null)" = PONG ] && break
        sleep 0.1
    done
    redis-cli -p "${PORT[$label]}" SCRIPT LOAD "$INCR_SCRIPT" >/dev/null
    redis-cli -p "${PORT[$label]}" SCRIPT LOAD "$TEN_SCRIPT" >/dev/null
done
sha() { printf '%s' "$1" | sha1sum | cut -d' ' -f1; }
command_of() {
    case "$1" in
        incr) echo "EVALSHA $(sha "$INCR_SCRIPT") 1 k:__rand_int__" ;;
        ten) echo "EVALSHA $(sha "$TEN_SCRIPT") 1 t:__rand_int__ v" ;;
        *) echo "scripts-ab: unknown case $1" >&2; exit 2 ;;
    esac
}

RESULTS="$WORK/results.tsv"
: >"$RESULTS"
for r in $(seq 1 "$REPEAT"); do
    if [ $((r % 2)) -eq 1 ]; then order=$LABELS; else order=$(echo $LABELS | tr ' ' '\n' | tac); fi
    for pipe in $PIPELINES; do
        for c in $CASES; do
            for label in $order; do
                # shellcheck disable=SC2046 # the command is split into words
                out=$(redis-benchmark -p "${PORT[$label]}" -c "$CLIENTS" -r 16384 -n "$N" \
                    -P "$pipe" -q --csv $(command_of "$c") 2>&1)
                rps=$(echo "$out" | tr -d '\r' | awk -F'","' '/^"/ && !/^"test"/ { r=$2; gsub(/"/, "", r); print r; exit }')
                [ -n "$rps" ] || { echo "scripts-ab: no result from $label: $out" >&2; exit 1; }
                printf '%s\t%s\t%s\t%s\n' "$label" "$pipe" "$c" "$rps" >>"$RESULTS"
            done
        done
    done
    echo "scripts-ab: run $r/$REPEAT done" >&2
done

median() { # label pipeline case
    awk -F'\t' -v s="$1" -v p="$2" -v t="$3" '$1==s && $2==p && $3==t { print $4 }' "$RESULTS" |
        sort -g | awk '{ v[NR]=$1 } END { if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
}
printf '| case | -P |'
for label in $LABELS; do printf ' %s req/s |' "$label"; done
for label in $LABELS; do [ "$label" = redis ] || printf ' %s/redis |' "$label"; done
echo
printf '|---|---:|'
for label in $LABELS; do printf -- '---:|'; done
for label in $LABELS; do [ "$label" = redis ] || printf -- '---:|'; done
echo
for pipe in $PIPELINES; do
    for c in $CASES; do
        rr=$(median redis "$pipe" "$c")
        printf '| %s | %s |' "$c" "$pipe"
        for label in $LABELS; do printf ' %.0f |' "$(median "$label" "$pipe" "$c")"; done
        for label in $LABELS; do
            [ "$label" = redis ] || printf ' %s |' "$(awk -v a="$(median "$label" "$pipe" "$c")" -v b="$rr" 'BEGIN { printf "%.2f", a / b }')"
        done
        echo
    done
done
