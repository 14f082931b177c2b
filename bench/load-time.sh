#!/usr/bin/env bash
# How long a start with data takes, and what clients see meanwhile:
# Kvasir and redis-server side by side, each started $REPEAT times in a
# folder holding the same dump.rdb (redis-benchmark SET of $KEYS random
# keys with $VALUE-byte values, saved by Kvasir; redis-server loads
# Kvasir's files). Reported per server, medians of the rounds: the time
# from the process start to the first PING answered PONG, the load time
# the server logs ("DB loaded from disk"), how many PINGs were answered
# -LOADING before (a server that serves clients while it loads answers
# them; one that does not leaves the connection waiting), and the longest
# of those PING round trips.
#
# Environment: KVASIR (binary; default: the release build), KEYS
# (2000000 draws of redis-benchmark -r), VALUE (64), REPEAT (3), SERVERS
# ("kvasir redis"; a second Kvasir build is `kvasir:<binary>`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/bench/lib.sh"
require_tools load-time redis-server redis-cli redis-benchmark python3

KEYS=${KEYS:-2000000}
VALUE=${VALUE:-64}
REPEAT=${REPEAT:-3}
SERVERS=${SERVERS:-"kvasir redis"}
if [ -z "${KVASIR:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p kvasir)
    KVASIR="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"
fi
start_work load-time

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# The data, once.
read -r port < <(free_ports 1)
mkdir -p "$WORK/data"
"$KVASIR" server --port "$port" --dir "$WORK/data" --save "" >"$WORK/data/log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
redis-benchmark -p "$port" -c 50 -P 64 -r "$KEYS" -n "$KEYS" -t set -d "$VALUE" -q >/dev/null 2>&1
keys=$(redis-cli -p "$port" DBSIZE)
redis-cli -p "$port" SAVE >/dev/null
kill "${PIDS[-1]}" && wait "${PIDS[-1]}" 2>/dev/null || true
size=$(stat -c %s "$WORK/data/dump.rdb")

# One start: ms to the first PONG, PINGs answered -LOADING before it, the
# longest of their round trips (ms), from `start_ns` (when the caller
# started the server); connecting is retried until the port accepts.
round() { # port start_ns
    python3 - "$1" "$2" <<'EOF'
import socket, sys, time
port, start_ns = int(sys.argv[1]), int(sys.argv[2])
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port))
        break
    except OSError:
        time.sleep(0.001)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
loading, worst = 0, 0.0
while True:
    t = time.perf_counter()
    s.sendall(b"PING\r\n")
    data = b""
    while not data.endswith(b"\r\n"):
        data += s.recv(4096)
    if data.startswith(b"+PONG"):
        break
    assert data.startswith(b"-LOADING"), data
    loading += 1
    worst = max(worst, (time.perf_counter() - t) * 1000)
    time.sleep(0.001)
print(f"{(time.time_ns() - start_ns) / 1e6:.0f} {loading} {worst:.2f}")
EOF
}

echo "dump.rdb: $keys keys, $size bytes"
echo
echo "| server | start to first PONG ms | logged load s | PINGs answered -LOADING | longest of them ms |"
echo "|---|---:|---:|---:|---:|"
for server in $SERVERS; do
    : >"$WORK/rounds"
    for i in $(seq 1 "$REPEAT"); do
        read -r port < <(free_ports 1)
        dir="$WORK/$server-$i"
        mkdir -p "$dir"
        cp "$WORK/data/dump.rdb" "$dir/"
        start_ns=$(date +%s%N)
        case "$server" in
            redis) redis-server --port "$port" --dir "$dir" --save "" --appendonly no >"$dir/log" 2>&1 & ;;
            kvasir) "$KVASIR" server --port "$port" --dir "$dir" --save "" >"$dir/log" 2>&1 & ;;
            kvasir:*) "${server#kvasir:}" server --port "$port" --dir "$dir" --save "" >"$dir/log" 2>&1 & ;;
        esac
        PIDS+=($!)
        read -r first loading worst < <(round "$port" "$start_ns")
        logged=$(grep -o 'DB loaded from disk: [0-9.]* seconds' "$dir/log" | awk '{print $5}')
        echo "$first $logged $loading $worst" >>"$WORK/rounds"
        kill "${PIDS[-1]}" 2>/dev/null || true
        wait "${PIDS[-1]}" 2>/dev/null || true
        rm -rf "$dir"
    done
    first=$(awk '{print $1}' "$WORK/rounds" | median)
    logged=$(awk '{print $2}' "$WORK/rounds" | median)
    loading=$(awk '{print $3}' "$WORK/rounds" | median)
    worst=$(awk '{print $4}' "$WORK/rounds" | median)
    echo "| $server | $first | $logged | $loading | $worst |"
done
