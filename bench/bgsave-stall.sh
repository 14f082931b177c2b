#!/usr/bin/env bash
# How long a background save stops the server: Kvasir and redis-server side
# by side, each loaded with the same data (redis-benchmark SET of $KEYS
# random keys with $VALUE-byte values), then $REPEAT rounds of BGSAVE while
# another client sends PING in a loop (from before the BGSAVE to the end
# of the save). Reported per server, medians of the rounds:
# the BGSAVE reply time, the longest PING round trip while the save runs,
# INFO's latest_fork_usec, and the whole save's time (until
# rdb_bgsave_in_progress goes back to 0).
#
# OP=appendonly measures CONFIG SET appendonly yes instead (the first base
# of the append-only file; each round ends with CONFIG SET appendonly no);
# OP=sync a SYNC as `redis-cli --rdb` sends it (the reply time is the time
# to the image's length line, the save's time until the whole image came).
#
# Environment: KVASIR (binary; default: the release build), KEYS (3000000
# draws of redis-benchmark -r, ~2.6M distinct keys), VALUE (64), REPEAT (3),
# SERVERS ("kvasir redis"; a second Kvasir build is `kvasir:<binary>`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/bench/lib.sh"
require_tools bgsave-stall redis-server redis-cli redis-benchmark python3

KEYS=${KEYS:-3000000}
VALUE=${VALUE:-64}
REPEAT=${REPEAT:-3}
SERVERS=${SERVERS:-"kvasir redis"}
OP=${OP:-bgsave}
if [ -z "${KVASIR:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p kvasir)
    KVASIR="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"
fi
start_work bgsave-stall

# One round: BGSAVE's reply time, the longest PING while the save runs,
# the save's time (ms), latest_fork_usec.
round() { # port
    python3 - "$1" "$OP" <<'EOF'
import socket, sys, time
port, op = int(sys.argv[1]), sys.argv[2]
def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s
def call(s, cmd):
    s.sendall(cmd)
    data = b""
    while not data.endswith(b"\r\n") or (data.startswith(b"$") and data.count(b"\r\n") < 2):
        data += s.recv(1 << 16)
    return data
import threading
control, pinger = conn(), conn()
done = threading.Event()
worst = [0.0]
def ping():
    # From before BGSAVE until the save ended: what any client sees.
    while not done.is_set():
        t = time.perf_counter()
        call(pinger, b"PING\r\n")
        worst[0] = max(worst[0], (time.perf_counter() - t) * 1000)
        time.sleep(0.001)
thread = threading.Thread(target=ping)
thread.start()
time.sleep(0.05)
start = time.perf_counter()
if op == "sync":
    # redis-cli --rdb's request: the image's length line, then the image.
    control.sendall(b"SYNC\r\n")
    data = b""
    while b"\r\n" not in data.lstrip(b"\n"):
        data += control.recv(1 << 16)
    header, rest = data.lstrip(b"\n").split(b"\r\n", 1)
    reply = b"+" if header.startswith(b"$") else header
    want, got = int(header[1:]), len(rest)
    while got < want:
        chunk = control.recv(1 << 20)
        if not chunk:
            break
        got += len(chunk)
    assert got >= want, (got, want)
    control.close()
    control = conn()
    busy = ()
elif op == "appendonly":
    reply = call(control, b"CONFIG SET appendonly yes\r\n")
    busy = ("aof_rewrite_in_progress:1", "aof_rewrite_scheduled:1")
else:
    reply = call(control, b"BGSAVE\r\n")
    busy = ("rdb_bgsave_in_progress:1",)
reply_ms = (time.perf_counter() - start) * 1000
assert reply.startswith(b"+"), reply
while any(b in call(control, b"INFO persistence\r\n").decode() for b in busy):
    time.sleep(0.005)
done.set()
thread.join()
worst = worst[0]
save_ms = (time.perf_counter() - start) * 1000
stats = call(control, b"INFO stats\r\n").decode()
fork = next(l.split(":")[1] for l in stats.splitlines() if l.startswith("latest_fork_usec:"))
if op == "appendonly":
    call(control, b"CONFIG SET appendonly no\r\n")
print(f"{reply_ms:.1f} {worst:.2f} {save_ms:.0f} {fork.strip()}")
EOF
}

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

echo "| server | keys | used_memory | $OP reply ms | longest PING during the save ms | latest_fork_usec | save ms |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for server in $SERVERS; do
    read -r port < <(free_ports 1)
    dir="$WORK/$server-$port"
    mkdir -p "$dir"
    case "$server" in
        redis) redis-server --port "$port" --dir "$dir" --save "" --appendonly no >"$dir/log" 2>&1 & ;;
        kvasir) "$KVASIR" server --port "$port" --dir "$dir" --save "" >"$dir/log" 2>&1 & ;;
        kvasir:*) "${server#kvasir:}" server --port "$port" --dir "$dir" --save "" >"$dir/log" 2>&1 & ;;
    esac
    PIDS+=($!)
    for _ in $(seq 1 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
    redis-benchmark -p "$port" -c 50 -P 64 -r "$KEYS" -n "$KEYS" -t set -d "$VALUE" -q >/dev/null 2>&1
    keys=$(redis-cli -p "$port" DBSIZE)
    used=$(redis-cli -p "$port" INFO memory | awk -F: '/^used_memory_human:/ {print $2}' | tr -d '\r')
    : >"$WORK/rounds"
    for _ in $(seq 1 "$REPEAT"); do round "$port" >>"$WORK/rounds"; done
    reply=$(awk '{print $1}' "$WORK/rounds" | median)
    ping=$(awk '{print $2}' "$WORK/rounds" | median)
    save=$(awk '{print $3}' "$WORK/rounds" | median)
    fork=$(awk '{print $4}' "$WORK/rounds" | median)
    echo "| $server | $keys | $used | $reply | $ping | $fork | $save |"
    kill "${PIDS[-1]}" 2>/dev/null || true
    wait "${PIDS[-1]}" 2>/dev/null || true
done
