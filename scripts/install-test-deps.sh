#!/usr/bin/env bash
# Installs the external tools the integration tests and benchmarks use:
# redis-cli, redis-benchmark (Debian package redis-tools) and redis-server
# (package redis-server). Idempotent: does nothing when all three are on PATH.
# Never leaves a redis-server service running (Debian's postinst may start one
# on port 6379 on machines with an init system).
set -euo pipefail

missing=()
for tool in redis-cli redis-benchmark redis-server; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-test-deps: redis-cli, redis-benchmark and redis-server already installed"
    exit 0
fi
echo "install-test-deps: missing ${missing[*]}; installing redis-tools and redis-server"

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-deps: apt-get not found; install redis-tools and redis-server (Redis 7) by hand" >&2
    exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "install-test-deps: not root and sudo not found; run as root" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends redis-tools redis-server >/dev/null

# Stop (and disable) the service the package may have started.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    "${SUDO[@]}" systemctl stop redis-server >/dev/null 2>&1 || true
    "${SUDO[@]}" systemctl disable redis-server >/dev/null 2>&1 || true
fi
if command -v service >/dev/null 2>&1; then
    "${SUDO[@]}" service redis-server stop >/dev/null 2>&1 || true
fi

for tool in redis-cli redis-benchmark redis-server; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "install-test-deps: $tool still missing after install" >&2
        exit 1
    fi
done
echo "install-test-deps: installed $(redis-server --version | awk '{print $3}')"
