#!/usr/bin/env bash
# What idle client connections cost: Kvasir and redis-server side by side.
# For each server (fresh, on a free loopback port, `--maxclients` raised),
# $CLIENTS connections each send one PING and then stay open and silent.
# Reported per connection: INFO used_memory and the process's RSS growth
# right after the PINGs (busy), after 4 s idle (both servers give an idle
# client's query buffer back after 2 s) and after 16 s (jemalloc's decay
# has returned freed pages by then, with background threads); medians of
# $REPEAT rounds, each round on new servers, the servers' order alternating.
#
# Environment: KVASIR (binary; default: the release build), CLIENTS (5000),
# REPEAT (3), SERVERS ("kvasir redis"; a second Kvasir build is
# `kvasir:<binary>`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/bench/lib.sh"
require_tools idle-clients redis-server redis-cli python3

CLIENTS=${CLIENTS:-5000}
REPEAT=${REPEAT:-3}
SERVERS=${SERVERS:-"kvasir redis"}
if [ -z "${KVASIR:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p kvasir)
    KVASIR="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"
fi
ulimit -n $((CLIENTS + 1000))
start_work idle-clients

# One round against the server on $1 with pid $2: six numbers (bytes per
# client): used_memory busy, 4 s, 16 s; RSS busy, 4 s, 16 s.
round() { # port pid
    python3 - "$1" "$2" "$CLIENTS" <<'EOF'
import socket, sys, time
port, pid, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def rss():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
def used():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
    data = b""
    while b"used_memory:" not in data or not data.endswith(b"\r\n"):
        data += s.recv(1 << 16)
    s.close()
    for line in data.decode().splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
time.sleep(1)
base_used, base_rss = used(), rss()
conns = []
for _ in range(n):
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"*1\r\n$4\r\nPING\r\n")
    conns.append(c)
for c in conns:
    c.recv(64)
points = [(used(), rss())]
time.sleep(4)
points.append((used(), rss()))
time.sleep(12)
points.append((used(), rss()))
per = lambda v, b: str(round((v - b) / n))
print(" ".join([per(u, base_used) for u, _ in points] + [per(r, base_rss) for _, r in points]))
EOF
}

start_server() { # kind port -> pid
    local kind=$1 port=$2
    case "$kind" in
    redis)
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --maxclients $((CLIENTS + 100)) --dir "$WORK" >"$WORK/redis.log" 2>&1 &
        ;;
    kvasir)
        "$KVASIR" server --port "$port" --bind 127.0.0.1 --save "" \
            --maxclients $((CLIENTS + 100)) --dir "$WORK" >"$WORK/kvasir.log" 2>&1 &
        ;;
    kvasir:*)
        "${kind#kvasir:}" server --port "$port" --bind 127.0.0.1 --save "" \
            --maxclients $((CLIENTS + 100)) --dir "$WORK" >"$WORK/kvasir2.log" 2>&1 &
        ;;
    esac
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 100); do
        redis-cli -p "$port" PING >/dev/null 2>&1 && break
        sleep 0.1
    done
    echo "$pid"
}

read -r -a KINDS <<<"$SERVERS"
declare -A RESULTS
for r in $(seq 1 "$REPEAT"); do
    order=("${KINDS[@]}")
    if [ $((r % 2)) -eq 0 ]; then
        order=()
        for ((i = ${#KINDS[@]} - 1; i >= 0; i--)); do order+=("${KINDS[$i]}"); done
    fi
    for kind in "${order[@]}"; do
        port=$(free_ports 1)
        pid=$(start_server "$kind" "$port")
        line=$(round "$port" "$pid")
        echo "idle-clients: round $r, $kind: $line" >&2
        RESULTS[$kind]+="$line"$'\n'
        kill "$pid"
        wait "$pid" 2>/dev/null || true
    done
done

median() { # column
    sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
echo "# Idle client connections: $CLIENTS, bytes per connection (medians of $REPEAT)"
echo
echo "| server | used_memory busy | used_memory 4 s idle | used_memory 16 s idle | RSS busy | RSS 4 s idle | RSS 16 s idle |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for kind in "${KINDS[@]}"; do
    row="| $kind"
    for col in 1 2 3 4 5 6; do
        row+=" | $(printf '%s' "${RESULTS[$kind]}" | awk -v c="$col" 'NF { print $c }' | median)"
    done
    echo "$row |"
done
