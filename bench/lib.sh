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
