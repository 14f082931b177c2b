#!/usr/bin/env bash
# Runs Kvasir's whole test suite: installs what the tests need (Debian's
# redis-tools for redis-cli / redis-benchmark), then every crate's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
cargo test --workspace --all-targets "$@"
