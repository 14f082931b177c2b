# Helpers shared by bench/failover.sh and bench/catchup.sh (sourced, not run):
# a three-node Kvasir cluster on free 127.0.0.1 ports (--replicas 3
# --shards-per-node 8 --wal fsync plus $KVASIR_ARGS), started, killed and
# restarted one node at a time, with health checks, and resp.py, a small RESP
# client for the measuring Python snippets.
#
# The caller sets NAME (the message prefix) before sourcing. Environment:
# KVASIR (binary, default target/release/kvasir, built if missing),
# KVASIR_ARGS (extra `kvasir server` flags, e.g. "--raft-tick-ms 50
# --election-ticks 10"), START_TIMEOUT (seconds for the cluster to become
# healthy, 60), REBALANCE_TIMEOUT (seconds to wait for every node to lead its
# share of the shards, 30), KEEP_LOGS (directory to copy server logs into).
# Needs redis-cli (scripts/install-test-deps.sh) and python3.

KVASIR_ARGS=${KVASIR_ARGS:-}
START_TIMEOUT=${START_TIMEOUT:-60}
REBALANCE_TIMEOUT=${REBALANCE_TIMEOUT:-30}
KEEP_LOGS=${KEEP_LOGS:-}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

say() { echo "$NAME: $*" >&2; }
die() {
    say "$*"
    exit 1
}

for tool in redis-cli python3 awk timeout; do
    command -v "$tool" >/dev/null 2>&1 && continue
    case "$tool" in
        redis-cli) die "$tool not found; run scripts/install-test-deps.sh" ;;
        *) die "$tool not found" ;;
    esac
done

KVASIR=${KVASIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir}
if [ ! -x "$KVASIR" ]; then
    say "building Kvasir (release)..."
    (cd "$ROOT" && cargo build --release -q -p kvasir)
    KVASIR="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvasir"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvasir-$NAME.XXXXXX")
NODES=(1 2 3)
PORT=() # client port of node i (index i)
BUS=()  # cluster (raft) port of node i
PID=()  # process id of node i, "" while down
LOG=()  # current log file of node i
STARTS=(0 0 0 0)
INITIAL=""

stop_all() {
    local i
    for i in "${NODES[@]}"; do [ -n "${PID[$i]:-}" ] && kill "${PID[$i]}" 2>/dev/null || true; done
    for i in "${NODES[@]}"; do [ -n "${PID[$i]:-}" ] && wait "${PID[$i]}" 2>/dev/null || true; done
    PID=()
}
EXTRA_PIDS="" # helper processes (writers) the caller started
cleanup() {
    local pid
    for pid in $EXTRA_PIDS; do kill "$pid" 2>/dev/null || true; done
    for pid in $EXTRA_PIDS; do wait "$pid" 2>/dev/null || true; done
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

rcli() { # port args... (empty output when the node does not answer)
    local p=$1
    shift
    timeout 5 redis-cli -h 127.0.0.1 -p "$p" "$@" 2>/dev/null | tr -d '\r' || true
}

# Waits until check succeeds; fails (with the logs) after `timeout` seconds or
# when a running node exits.
wait_until() { # what check-function timeout
    local what=$1 check=$2 limit=$3 i
    local deadline=$((SECONDS + limit))
    while ! "$check"; do
        for i in "${NODES[@]}"; do
            if [ -n "${PID[$i]:-}" ] && ! kill -0 "${PID[$i]}" 2>/dev/null; then
                show_logs "${LOG[$i]}"
                die "$what: node $i exited"
            fi
        done
        if [ "$SECONDS" -ge "$deadline" ]; then
            show_logs "${LOG[@]}"
            die "$what: not ready after ${limit}s"
        fi
        sleep 0.1
    done
}

cluster_init() { # extra server flags for this cluster
    local ports i
    CLUSTER_FLAGS=$*
    read -r -a ports <<<"$(free_ports 6)"
    INITIAL=""
    for i in "${NODES[@]}"; do
        PORT[i]=${ports[$((2 * i - 2))]}
        BUS[i]=${ports[$((2 * i - 1))]}
        INITIAL="${INITIAL:+$INITIAL,}$i=127.0.0.1:${PORT[i]}@${BUS[i]}"
    done
}

start_node() { # i  (same flags and data directory every time)
    local i=$1
    STARTS[i]=$((STARTS[i] + 1))
    LOG[i]="$WORK/node$i-${STARTS[i]}.log"
    mkdir -p "$WORK/node$i"
    # shellcheck disable=SC2086 # flag lists
    "$KVASIR" server --node-id "$i" --port "${PORT[i]}" --bind 127.0.0.1 --cluster-port "${BUS[i]}" \
        --initial-cluster "$INITIAL" --replicas 3 --shards-per-node 8 \
        --dir "$WORK/node$i" --wal fsync $CLUSTER_FLAGS $KVASIR_ARGS >"${LOG[i]}" 2>&1 &
    PID[i]=$!
}

kill9_node() { # i
    local i=$1
    kill -9 "${PID[i]}" 2>/dev/null || true
    wait "${PID[i]}" 2>/dev/null || true
    PID[i]=""
}

# A running node is ready when it says cluster_state:ok, knows all three
# nodes with their client addresses, none marked failed, and every shard it
# holds has a leader.
node_ready() { # i
    local p=${PORT[$1]} info nodes
    info=$(rcli "$p" CLUSTER INFO)
    echo "$info" | grep -qx 'cluster_state:ok' || return 1
    nodes=$(rcli "$p" CLUSTER NODES)
    [ "$(echo "$nodes" | grep -c .)" -eq "${#NODES[@]}" ] || return 1
    echo "$nodes" | grep -q ':0@' && return 1
    echo "$nodes" | awk '$3 ~ /fail/ { bad = 1 } END { exit bad }' || return 1
    rcli "$p" INFO cluster | grep -qx 'cluster_shards_without_leader:0'
}

cluster_healthy() {
    local i
    for i in "${NODES[@]}"; do
        [ -n "${PID[$i]:-}" ] || return 1
        node_ready "$i" || return 1
    done
}

shards_led() { # i -> number of shards node i leads (its own INFO)
    rcli "${PORT[$1]}" INFO cluster | awk -F: '$1 == "cluster_shards_led" { print $2 }'
}

leader_counts() { # -> "n1/n2/n3"
    local i out=""
    for i in "${NODES[@]}"; do out="${out:+$out/}$(shards_led "$i")"; done
    echo "$out"
}

# Every node leads its share (24 shards / 3 nodes = 8).
balanced() {
    local i share
    share=$(($(rcli "${PORT[1]}" INFO cluster | awk -F: '$1 == "cluster_shards" { print $2 }') / ${#NODES[@]}))
    [ "$share" -gt 0 ] || return 1
    for i in "${NODES[@]}"; do [ "$(shards_led "$i")" = "$share" ] || return 1; done
}

# Waits up to REBALANCE_TIMEOUT for balanced leadership; prints the seconds it
# took, or "no(n1/n2/n3)" (and warns) when it did not happen.
wait_balanced() {
    local t0=$EPOCHREALTIME
    local deadline=$((SECONDS + REBALANCE_TIMEOUT))
    while ! balanced; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            local c
            c=$(leader_counts)
            say "leadership not rebalanced after ${REBALANCE_TIMEOUT}s (shards led per node: $c); going on"
            echo "no($c)"
            return 0
        fi
        sleep 0.1
    done
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", b - a }'
}

start_cluster() {
    local i
    for i in "${NODES[@]}"; do start_node "$i"; done
    wait_until "Kvasir cluster" cluster_healthy "$START_TIMEOUT"
}

# The leader's client port for a slot in CLUSTER SLOTS as node `port` sees it.
slot_leader_port() { # port slot
    python3 - "$1" "$2" <<'EOF'
import sys, os
sys.path.insert(0, os.environ["WORK"])
import resp
print(resp.slot_leader(resp.Conn(int(sys.argv[1])).cmd("CLUSTER", "SLOTS"), int(sys.argv[2])) or "")
EOF
}

# A hash tag whose slot is `slot` (checked with CLUSTER KEYSLOT).
tag_for_slot() { # slot
    local tag
    tag=$(python3 - "$1" <<'EOF'
import sys, os
sys.path.insert(0, os.environ["WORK"])
import resp
print(resp.tag_for_slot(int(sys.argv[1])))
EOF
    )
    [ "$(rcli "${PORT[1]}" CLUSTER KEYSLOT "{$tag}k")" = "$1" ] ||
        die "hash tag {$tag} is not in slot $1 (CLUSTER KEYSLOT)"
    echo "$tag"
}

export WORK
cat >"$WORK/resp.py" <<'EOF'
"""Minimal RESP2 client for the bench scripts."""
import socket


class RespError(Exception):
    pass


class Conn:
    def __init__(self, port, host="127.0.0.1", timeout=5.0):
        self.port = port
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RespError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode(errors="replace")
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ConnectionError(f"bad reply {line!r}")

    def cmd(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        r = self._reply()
        if isinstance(r, RespError):
            raise r
        return r


def slot_leader(slots, slot):
    """Client port of the slot's leader in a CLUSTER SLOTS reply, or None."""
    for entry in slots or []:
        if entry[0] <= slot <= entry[1] and len(entry) > 2:
            return int(entry[2][1])
    return None


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def tag_for_slot(slot):
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    for a in alphabet:
        for b in alphabet:
            for c in alphabet:
                if crc16((a + b + c).encode()) % 16384 == slot:
                    return a + b + c
    raise SystemExit(f"no 3-character hash tag for slot {slot}")


class ClusterClient:
    """Sends a command to `port`, follows MOVED like redis-cli -c (at most
    `hops` redirections), keeps one connection per node, drops it on errors."""

    def __init__(self, port, timeout=5.0, hops=5):
        self.port, self.timeout, self.hops, self.conns = port, timeout, hops, {}

    def _conn(self, port):
        c = self.conns.get(port)
        if c is None:
            c = self.conns[port] = Conn(port, timeout=self.timeout)
        return c

    def cmd(self, *args):
        port = self.port
        for _ in range(self.hops + 1):
            try:
                return self._conn(port).cmd(*args)
            except RespError as e:
                msg = str(e)
                if msg.startswith("MOVED ") or msg.startswith("ASK "):
                    port = int(msg.split()[2].rsplit(":", 1)[1])
                    continue
                raise
            except (OSError, ConnectionError):
                c = self.conns.pop(port, None)
                if c:
                    c.close()
                raise
        raise RespError("too many redirections")

    def close(self):
        for c in self.conns.values():
            c.close()
        self.conns = {}
EOF
