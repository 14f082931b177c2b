#!/usr/bin/env bash
# Runs Kvasir's whole test suite: installs what the tests need (Debian's
# redis-tools for redis-cli / redis-benchmark, redis-py in a virtualenv,
# go-redis / ioredis / Jedis for the cluster-client tests), then every crate's
# tests twice (as is, then with KVASIR_TEST_THREADS=2: servers get --threads
# 2), then the Python client tests (the cluster-client ones twice too).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
cargo test --workspace --all-targets "$@"
# Once more with I/O threads: the harness (crates/kvasir/tests/common) starts
# every server, standalone and cluster, with --threads 2.
KVASIR_TEST_THREADS=2 cargo test --workspace --all-targets "$@"

# redis-py (with RQ for tests/python/test_frameworks.py and Celery for
# tests/python/test_celery.py) live in a virtualenv outside the checkout, made
# once; an older venv without RQ or Celery just gets them added.
VENV="${KVASIR_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kvasir-test-venv}"
if [ ! -x "$VENV/bin/pytest" ] || ! "$VENV/bin/python" -c "import redis, rq, celery" 2>/dev/null; then
    [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "redis>=5,<6" "pytest>=7" "rq==3.0.0" "celery==5.5.3"
fi
# go-redis, ioredis and Jedis for tests/python/test_cluster_clients.py, BullMQ
# for tests/python/test_frameworks.py.
bash scripts/install-client-deps.sh
cargo build -q -p kvasir
KVASIR_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/kvasir" "$VENV/bin/pytest" -q -p no:cacheprovider tests/python
# The cluster-client tests once more with shard and I/O threads, where the
# I/O threads route plain requests to the shards themselves.
KVASIR_TEST_THREADS=2 KVASIR_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/kvasir" "$VENV/bin/pytest" -q -p no:cacheprovider \
    tests/python/test_cluster_clients.py tests/python/test_cluster_redispy.py tests/python/test_cluster_failover_redispy.py
