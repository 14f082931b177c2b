#!/usr/bin/env bash
# Alternating A/B of server binaries (and redis-server) under one
# redis-benchmark test, without building anything:
#
#   REPEAT=5 P=16 N=1000000 bench/alternate.sh "path/to/kvasir-new path/to/kvasir-old redis" -t set
#
# Each repeat starts every server in turn on a free port (in a scratch
# folder, so no dump.rdb is picked up), runs `redis-benchmark -c 50 -r
# 16384 -n N -P P -q <args>`, and stops it; the median requests/s of each
# server is printed with its runs. `redis` means redis-server from PATH.
set -euo pipefail
bins=${1:?usage: bench/alternate.sh "bin1 bin2 redis" <redis-benchmark args>}
shift
REPEAT=${REPEAT:-5}
P=${P:-16}
N=${N:-1000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -A res
for _ in $(seq "$REPEAT"); do
    for b in $bins; do
        port=$(free_port)
        if [ "$b" = redis ]; then
            redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
        else
            "$b" server --port "$port" --bind 127.0.0.1 --save "" >/dev/null 2>&1 &
        fi
        pid=$!
        for _ in $(seq 100); do
            [ "$(redis-cli -p "$port" PING 2>/dev/null)" = PONG ] && break
            sleep 0.05
        done
        v=$(redis-benchmark -p "$port" -c 50 -r 16384 -n "$N" -P "$P" -q "$@" 2>&1 \
            | tr '\r' '\n' | grep "requests per second" | tail -1 \
            | sed 's/.*: \([0-9.]*\) requests.*/\1/')
        res[$b]="${res[$b]:-} $v"
        kill "$pid"
        wait "$pid" 2>/dev/null || true
    done
done
for b in $bins; do
    median=$(echo ${res[$b]} | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "$b: median $median [${res[$b]} ]"
done
