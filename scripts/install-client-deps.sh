#!/usr/bin/env bash
# Installs what the cluster-client smoke tests (tests/python/test_cluster_clients.py)
# and the job-framework tests (tests/python/test_frameworks.py) need, from the
# package registries into the usual per-user caches, so that the tests
# themselves build and run offline:
#   - go-redis v9 for tests/clients/go, asynq v0.26.0 for
#     tests/clients/asynq and go-redis's own test suite (its module with its
#     test dependencies) for tests/clients/go-redis-suite, and rueidis's
#     suites (the client, rueidislock, rueidiscompat) for
#     tests/clients/rueidis-suite, redigo's for tests/clients/redigo-suite:
#     `go mod download` into the Go module
#     cache (GOMODCACHE, ~/go/pkg/mod by default);
#   - ioredis, node-redis and BullMQ for tests/clients/node: `npm ci` into
#     tests/clients/node/node_modules (gitignored; npm keeps its download cache in ~/.npm);
#   - Jedis and Lettuce for tests/clients/java: `mvn package` (dependencies
#     and plugins into ~/.m2), which also builds
#     tests/clients/java/target/kvclient-java.jar; Redisson likewise for
#     tests/clients/redisson (target/kvclient-redisson.jar);
#   - redis-py's own test suite for tests/python/test_redis_py_suite.py: the
#     source distribution of the version in tests/clients/redis-py/VERSION
#     (its tests/ folder) unpacked into KVASIR_REDIS_PY_SUITE
#     (~/.cache/kvasir-redis-py-suite), with a virtualenv of the suite's
#     pinned test dependencies (tests/clients/redis-py/requirements.txt);
#   - RQ's own test suite for tests/python/test_rq_suite.py likewise: the
#     source distribution of tests/clients/rq/VERSION unpacked into
#     KVASIR_RQ_SUITE (~/.cache/kvasir-rq-suite) with a virtualenv of
#     tests/clients/rq/requirements.txt;
#   - pytest-redis for tests/python/test_pytest_redis.py: a virtualenv of
#     tests/clients/pytest-redis/requirements.txt
#     (~/.cache/kvasir-pytest-redis-venv).
# Idempotent and quick when the caches are warm: each step is skipped when an
# offline check shows it is already done. Needs go, node/npm, java 17 and mvn
# on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=tests/clients

for tool in go node npm java mvn python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "install-client-deps: $tool not found on PATH" >&2
        exit 1
    fi
done

# Go: the module cache is shared across checkouts; go.sum pins every module.
(
    cd "$CLIENTS/go"
    if GOFLAGS="${GOFLAGS:-} -mod=readonly" GOPROXY=off go build -o /dev/null . >/dev/null 2>&1; then
        echo "install-client-deps: go modules already cached"
    else
        GOFLAGS="${GOFLAGS:-} -mod=readonly" go mod download
        GOFLAGS="${GOFLAGS:-} -mod=readonly" GOPROXY=off go build -o /dev/null .
        echo "install-client-deps: go modules downloaded"
    fi
)
# asynq (tests/clients/asynq pins it): its own internal/rdb test suite runs
# against Kvasir, so its test dependencies are fetched too.
(
    cd "$CLIENTS/asynq"
    if GOFLAGS="${GOFLAGS:-} -mod=readonly" GOPROXY=off go test -c -o /dev/null github.com/hibiken/asynq/internal/rdb >/dev/null 2>&1; then
        echo "install-client-deps: asynq already cached"
    else
        GOFLAGS="${GOFLAGS:-} -mod=readonly" go mod download
        GOFLAGS="${GOFLAGS:-} -mod=readonly" GOPROXY=off go test -c -o /dev/null github.com/hibiken/asynq/internal/rdb
        echo "install-client-deps: asynq downloaded"
    fi
)
# go-redis's own test suite (tests/python/test_go_redis_suite.py): built from
# the module cache with its Ginkgo/Gomega test dependencies.
(
    cd "$CLIENTS/go-redis-suite"
    if GOFLAGS="${GOFLAGS:-} -mod=readonly" GOPROXY=off go test -c -o /dev/null github.com/redis/go-redis/v9 >/dev/null 2>&1; then
        echo "install-client-deps: go-redis suite already cached"
    else
        GOFLAGS="${GOFLAGS:-} -mod=readonly" go mod download
        GOFLAGS="${GOFLAGS:-} -mod=readonly" GOPROXY=off go test -c -o /dev/null github.com/redis/go-redis/v9
        echo "install-client-deps: go-redis suite downloaded"
    fi
)
# redigo's own test suite (tests/python/test_redigo_suite.py), with its
# testify dependency, built from the module cache.
(
    cd "$CLIENTS/redigo-suite"
    if GOFLAGS="${GOFLAGS:-} -mod=readonly" GOPROXY=off go test -c -o /dev/null github.com/gomodule/redigo/redis >/dev/null 2>&1; then
        echo "install-client-deps: redigo suite already cached"
    else
        GOFLAGS="${GOFLAGS:-} -mod=readonly" go mod download
        GOFLAGS="${GOFLAGS:-} -mod=readonly" GOPROXY=off go test -c -o /dev/null github.com/gomodule/redigo/redis
        echo "install-client-deps: redigo suite downloaded"
    fi
)
# rueidis's own test suites (tests/python/test_rueidis_suite.py): the client,
# its lock package and its go-redis-compatible adapter, with their test
# dependencies, built from the module cache.
(
    cd "$CLIENTS/rueidis-suite"
    packages="github.com/redis/rueidis github.com/redis/rueidis/rueidislock github.com/redis/rueidis/rueidiscompat"
    build_all() {
        for p in $packages; do
            GOFLAGS="${GOFLAGS:-} -mod=readonly" GOPROXY=off go test -c -o /dev/null "$p" || return 1
        done
    }
    if build_all >/dev/null 2>&1; then
        echo "install-client-deps: rueidis suites already cached"
    else
        GOFLAGS="${GOFLAGS:-} -mod=readonly" go mod download
        build_all
        echo "install-client-deps: rueidis suites downloaded"
    fi
)

# Node: node_modules is rebuilt only when package-lock.json changed.
(
    cd "$CLIENTS/node"
    stamp=node_modules/.kvasir-lock.sha256
    want=$(sha256sum package-lock.json | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d node_modules/ioredis ] && [ -d node_modules/redis ] && [ -d node_modules/bullmq ]; then
        echo "install-client-deps: node_modules up to date"
    else
        npm ci --no-audit --no-fund --loglevel=error
        echo "$want" >"$stamp"
        echo "install-client-deps: npm ci done (ioredis $(node -p 'require("ioredis/package.json").version'), node-redis $(node -p 'require("redis/package.json").version'), bullmq $(node -p 'require("bullmq/package.json").version'))"
    fi
)

# Java: try offline first; go online only for what ~/.m2 lacks. Jedis and
# Lettuce in tests/clients/java; Redisson in a project of its own (its netty
# apart from Lettuce's).
maven_package() {
    (
        cd "$CLIENTS/$1"
        if mvn -q -B -o -Dstyle.color=never package >/dev/null 2>&1; then
            echo "install-client-deps: $1: maven dependencies already cached"
        else
            mvn -q -B -Dstyle.color=never package
            echo "install-client-deps: $1: maven dependencies downloaded"
        fi
        test -f "target/$2"
    )
}
maven_package java kvclient-java.jar
maven_package redisson kvclient-redisson.jar
# A Python package's own test suite, from its source distribution: the
# version in tests/clients/<dir>/VERSION unpacked into <home> with a venv of
# tests/clients/<dir>/requirements.txt; redone only when either changed.
python_suite() {
    local dir=$1 package=$2 home=$3
    local version stamp want
    version=$(cat "$CLIENTS/$dir/VERSION")
    stamp="$home/.ready"
    want="$version $(sha256sum "$CLIENTS/$dir/requirements.txt" | cut -d' ' -f1)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d "$home/$package-$version/tests" ]; then
        echo "install-client-deps: $package $version test suite ready"
        return
    fi
    rm -rf "$home"
    mkdir -p "$home"
    python3 -m venv "$home/venv"
    "$home/venv/bin/pip" install --quiet --disable-pip-version-check -r "$CLIENTS/$dir/requirements.txt"
    "$home/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
        -d "$home" "$package==$version"
    tar -xzf "$home/$package-$version.tar.gz" -C "$home"
    test -d "$home/$package-$version/tests"
    echo "$want" >"$stamp"
    echo "install-client-deps: $package $version test suite downloaded"
}
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}"
# pytest-redis (tests/python/test_pytest_redis.py): a venv of its pinned
# requirements, redone only when they changed.
(
    home="${KVASIR_PYTEST_REDIS_VENV:-$CACHE/kvasir-pytest-redis-venv}"
    want=$(sha256sum "$CLIENTS/pytest-redis/requirements.txt" | cut -d' ' -f1)
    if [ -f "$home/.ready" ] && [ "$(cat "$home/.ready")" = "$want" ]; then
        echo "install-client-deps: pytest-redis ready"
    else
        rm -rf "$home"
        python3 -m venv "$home"
        "$home/bin/pip" install --quiet --disable-pip-version-check -r "$CLIENTS/pytest-redis/requirements.txt"
        echo "$want" >"$home/.ready"
        echo "install-client-deps: pytest-redis installed"
    fi
)
python_suite redis-py redis "${KVASIR_REDIS_PY_SUITE:-$CACHE/kvasir-redis-py-suite}"
python_suite rq rq "${KVASIR_RQ_SUITE:-$CACHE/kvasir-rq-suite}"
echo "install-client-deps: go-redis, ioredis, node-redis, bullmq, jedis, lettuce, redisson, and redis-py's and rq's suites ready"
