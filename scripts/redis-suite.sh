#!/usr/bin/env bash
# Runs Redis 7.0's own test suite (tests/unit of the redis-server sources,
# Debian's `redis` source package) against Kvasir: the suite's harness
# starts each server as `src/redis-server <generated redis.conf>`, which here
# is Kvasir (`kvasir server` takes a redis.conf and redis-server's flags).
# Prints one line per unit (tests passed, failed, exceptions, timeouts) and
# keeps each unit's log. It is a compatibility report, not part of
# scripts/test.sh: units that need Redis replication, AOF or modules fail by
# design (docs/compatibility.md lists the results and why).
#
#   scripts/redis-suite.sh                     # every unit
#   UNITS="unit/type/list unit/multi" scripts/redis-suite.sh
#   EXTERNAL=1 scripts/redis-suite.sh          # against one running server
#                                              # (runtest --host/--port)
#
# Environment: KVASIR (binary; default: the release build, built if
# missing), OUT (logs; default /tmp/kvasir-redis-suite), UNIT_TIMEOUT
# (seconds per unit, default 400), SRC (where the sources are unpacked),
# RUNTEST_ARGS (more runtest flags, e.g. --baseport 23111 to run two at once).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kvasir-ci-target}"
KVASIR="${KVASIR:-$CARGO_TARGET_DIR/release/kvasir}"
OUT="${OUT:-/tmp/kvasir-redis-suite}"
SRC="${SRC:-$HOME/.cache/kvasir-redis-src}"
UNIT_TIMEOUT="${UNIT_TIMEOUT:-400}"

bash scripts/install-test-deps.sh
command -v tclsh >/dev/null || { apt-get update -qq && apt-get install -y -qq tcl >/dev/null; }
[ -x "$KVASIR" ] || cargo build --release -q -p kvasir

# The sources of the redis-server Debian installed (7.0.15 on bookworm).
if [ ! -d "$SRC/tests" ]; then
    if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
        sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
            > /etc/apt/sources.list.d/kvasir-deb-src.sources
        apt-get update -qq
    fi
    work=$(mktemp -d)
    (cd "$work" && apt-get source --download-only -qq redis >/dev/null 2>&1)
    mkdir -p "$SRC"
    tar -xzf "$work"/redis_*.orig.tar.gz -C "$SRC" --strip-components=1
    rm -rf "$work"
fi

# The harness runs src/redis-server, src/redis-cli, src/redis-benchmark.
mkdir -p "$SRC/src"
printf '#!/bin/sh\nexec "%s" server "$@"\n' "$KVASIR" > "$SRC/src/redis-server"
chmod +x "$SRC/src/redis-server"
for tool in redis-cli redis-benchmark redis-check-rdb redis-check-aof; do
    [ -x "/usr/bin/$tool" ] && ln -sf "/usr/bin/$tool" "$SRC/src/$tool"
done

mkdir -p "$OUT"
: > "$OUT/summary"
port_args=()
server_pid=
ext_dir=
# EXTERNAL: a fresh server for every unit, so that one unit's leftovers (a
# CLIENT PAUSE, a maxmemory) do not fail the next.
start_external() {
    [ -n "$server_pid" ] && { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true; }
    [ -n "$ext_dir" ] && rm -rf "$ext_dir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    ext_dir=$(mktemp -d)
    "$KVASIR" server --port "$port" --dir "$ext_dir" --enable-debug-command yes >> "$OUT/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    port_args=(--host 127.0.0.1 --port "$port")
}
trap '[ -n "$server_pid" ] && kill $server_pid 2>/dev/null; [ -n "$ext_dir" ] && rm -rf "$ext_dir"' EXIT

cd "$SRC"
units=${UNITS:-$(cd tests && ls unit/*.tcl unit/type/*.tcl | sed 's/\.tcl$//')}
total_ok=0 total_err=0
for unit in $units; do
    log="$OUT/$(echo "$unit" | tr / _).log"
    [ -n "${EXTERNAL:-}" ] && start_external
    rc=0
    # --durable: a test that raises (a command Kvasir refuses by design,
    # such as REPLICAOF of another server) fails alone instead of ending its
    # unit. Tests tagged needs:repl use Redis's own replication, which
    # Kvasir replaces with Raft.
    timeout "$UNIT_TIMEOUT" ./runtest --single "$unit" --clients 1 --timeout 40 --durable \
        --tags -needs:repl "${port_args[@]}" ${RUNTEST_ARGS:-} > "$log" 2>&1 || rc=$?
    pkill -f "$KVASIR server tests/tmp" 2>/dev/null || true
    # One line per test as it runs ("[ok]: name", "[err]: name"); the
    # failures are listed again at the end, prefixed "***", not counted.
    ok=$(grep -cP '^\[(\x1b\[[0-9;]*m)?ok' "$log" || true)
    err=$(grep -cP '^\[(\x1b\[[0-9;]*m)?err' "$log" || true)
    exc=$(grep -cP '^\[(\x1b\[[0-9;]*m)?exception' "$log" || true)
    to=$(grep -cP '^\[(\x1b\[[0-9;]*m)?TIMEOUT' "$log" || true)
    total_ok=$((total_ok + ok)); total_err=$((total_err + err))
    line="$unit ok=$ok err=$err exception=$exc timeout=$to"
    echo "$line" | tee -a "$OUT/summary"
done
echo "total: $total_ok passed, $total_err failed (logs in $OUT)" | tee -a "$OUT/summary"
cd "$ROOT"
