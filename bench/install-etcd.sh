#!/usr/bin/env bash
# Installs what bench/vs-etcd.sh needs, skipping whatever is already there:
#
#  1. etcd and etcdctl from Debian (etcd-server, etcd-client), when `etcd` is
#     not on PATH.
#  2. etcd's own load generator, `benchmark` (tools/benchmark in the etcd
#     repository), built with `go install` from the Go module proxy into
#     $TOOLS_DIR/bin (default ~/.cache/kvasir-bench-tools/bin).
#
# Which benchmark: etcd 3.4 (Debian bookworm's etcd-server) was published as
# module go.etcd.io/etcd without the /v3 suffix, so the proxy has no usable
# v3.4 tag of it; from 3.5 on, tools/benchmark is a package of the root module
# go.etcd.io/etcd/v3 (there is no separate tools/v3 module holding it). A 3.5
# client speaks the same v3 gRPC KV API as a 3.4 server, so the default is
# go.etcd.io/etcd/v3 $ETCD_BENCH_VERSION (v3.5.11). That module's go.mod has
# replace directives, which `go install pkg@version` refuses, so the tool is
# installed from a small wrapper module (in $TOOLS_DIR/src) that requires it.
#
# Environment: TOOLS_DIR, ETCD_BENCH_VERSION, GO (go binary).
# Prints the path of the benchmark binary on the last line of stdout.
set -euo pipefail

TOOLS_DIR=${TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kvasir-bench-tools}
ETCD_BENCH_VERSION=${ETCD_BENCH_VERSION:-v3.5.11}
BIN_DIR="$TOOLS_DIR/bin"
BENCH_BIN="$BIN_DIR/benchmark"
STAMP="$BIN_DIR/benchmark.version"

say() { echo "install-etcd: $*" >&2; }

sudo_if_needed() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# --- 1. etcd server and etcdctl from Debian --------------------------------------
if command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1; then
    say "etcd already installed: $(etcd --version 2>/dev/null | head -1)"
else
    say "installing etcd-server and etcd-client with apt-get..."
    sudo_if_needed apt-get update -qq
    DEBIAN_FRONTEND=noninteractive sudo_if_needed apt-get install -y -qq etcd-server etcd-client >&2
    say "installed: $(etcd --version 2>/dev/null | head -1)"
fi
# The Debian package enables a systemd unit on 127.0.0.1:2379; vs-etcd.sh
# starts its own members on free ports, so that one is left alone.

# --- 2. etcd's benchmark tool ---------------------------------------------------
if [ -x "$BENCH_BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$ETCD_BENCH_VERSION" ]; then
    say "etcd benchmark $ETCD_BENCH_VERSION already built: $BENCH_BIN"
    echo "$BENCH_BIN"
    exit 0
fi

GO=${GO:-}
if [ -z "$GO" ]; then
    if command -v go >/dev/null 2>&1; then
        GO=$(command -v go)
    elif [ -x /usr/local/go/bin/go ]; then
        GO=/usr/local/go/bin/go
    else
        say "go not found; installing golang-go with apt-get (needs Go >= 1.20)..."
        sudo_if_needed apt-get install -y -qq golang-go >&2
        GO=$(command -v go)
    fi
fi
say "building etcd benchmark (go.etcd.io/etcd/v3/tools/benchmark@$ETCD_BENCH_VERSION) with $("$GO" version)..."

SRC="$TOOLS_DIR/src/etcd-benchmark"
rm -rf "$SRC"
mkdir -p "$SRC" "$BIN_DIR"
cat >"$SRC/go.mod" <<'EOF'
module kvasir-bench-tools/etcd-benchmark

go 1.20
EOF
cat >"$SRC/tools.go" <<'EOF'
//go:build tools

// Package tools pins etcd's benchmark tool for `go install`.
package tools

import _ "go.etcd.io/etcd/v3/tools/benchmark"
EOF
(
    cd "$SRC"
    export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
    say "resolving modules (go get go.etcd.io/etcd/v3@$ETCD_BENCH_VERSION)..."
    "$GO" get "go.etcd.io/etcd/v3@$ETCD_BENCH_VERSION" 2>&1 | tail -3 >&2
    say "compiling (about a minute)..."
    GOBIN="$BIN_DIR" "$GO" install go.etcd.io/etcd/v3/tools/benchmark
)
echo "$ETCD_BENCH_VERSION" >"$STAMP"
"$BENCH_BIN" put --help >/dev/null
say "installed $BENCH_BIN"
echo "$BENCH_BIN"
