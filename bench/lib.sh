#!/usr/bin/env bash
# Helpers shared by the bench scripts (sourced, not run).

# Free TCP ports on 127.0.0.1 from the OS (bound together so they differ).
free_ports() { # count
    python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
}

show_logs() { # files...
    local f
    for f in "$@"; do
        [ -f "$f" ] || continue
        echo "--- $f (last 30 lines)" >&2
        tail -30 "$f" >&2
    done
}

# Exits unless every tool is on PATH (`who` names the script).
require_tools() { # who tool...
    local who=$1 tool
    shift
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || {
            echo "$who: $tool not found; run scripts/install-test-deps.sh" >&2
            exit 1
        }
    done
}

# Makes the temporary folder $WORK and the list PIDS of processes to stop;
# on exit both are cleaned up (after `cleanup_extra`, if the script
# defines one).
start_work() { # name
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvasir-$1.XXXXXX")
    PIDS=()
    trap stop_work EXIT
    trap 'exit 130' INT TERM
}

stop_work() {
    local pid
    for pid in "${PIDS[@]+"${PIDS[@]}"}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]+"${PIDS[@]}"}"; do wait "$pid" 2>/dev/null || true; done
    if declare -F cleanup_extra >/dev/null; then cleanup_extra; fi
    rm -rf "$WORK"
}
