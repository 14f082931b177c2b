"""go-redis's own test suite against a real Kvasir.

go-redis (the Go client; tests/clients/go-redis-suite pins the version and
its test dependencies) ships its tests in its module: `go test -c` builds
them, and they run against a standalone Kvasir started with what go-redis's
CI gives redis-server (a config file, DEBUG and MODULE enabled). The suite
dials the fixed address :6379, so Kvasir and the suite run in a network
namespace of their own (and a PID namespace, so nothing outlives the test):
no port of the machine is taken.

`RE_CLUSTER=true` tells the suite not to start what it needs Docker for (a
Redis Cluster on fixed ports, Sentinels, ring shards); `REDIS_VERSION=7.0`
makes the tests of newer Redis versions skip themselves, as they would
against redis-server 7.0. Every Ginkgo spec and Go test runs except:

- NOT_SERVED: the files for what Kvasir does not serve (Redis Stack
  modules, Sentinel, TLS, go-redis's Docker cluster and ring);
- SAME_ON_REDIS: specs that fail against a real redis-server 7.0.15 in the
  same set-up too, each with the reason;
- BY_DESIGN: what Kvasir deliberately does otherwise (docs/compatibility.md).
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from test_frameworks import ROOT, _go_test_binary, _run_beside_kvasir_on_6379  # noqa: E402

SUITE_DIR = os.path.join(ROOT, "tests", "clients", "go-redis-suite")

# Spec files (Ginkgo) and Go tests that need what Kvasir does not serve.
NOT_SERVED_FILES = [
    # Redis Stack modules.
    "probabilistic_test.go", "search_test.go", "search_builders_test.go", "json_test.go", "timeseries_commands_test.go",
    "vectorset_commands_test.go", "vectorset_commands_integration_test.go",
    # Sentinel, TLS, and go-redis's Docker Redis Cluster and ring shards.
    "sentinel_test.go", "tls_test.go", "tls_standalone_test.go", "tls_cluster_test.go",
    "osscluster_test.go", "ring_test.go", "universal_test.go",
]
NOT_SERVED_GO_TESTS = [
    "TestSearch", "TestTimeseries", "TestJSON", "TestTLS", "TestVectorSet",
]
# Ginkgo spec texts (regular expressions) to skip, with the reason.
SAME_ON_REDIS = {
    # The cluster half of race_test.go needs go-redis's Docker cluster.
    "cluster races": "go-redis's Docker Redis Cluster",
}
BY_DESIGN = {
    # REPLICAOF of another server: Kvasir replicates through Raft and
    # refuses it with an error (docs/compatibility.md).
    "should SlaveOf": "master/replica replication",
    "should ReplicaOf": "master/replica replication",
}


def test_go_redis_own_suite(tmp_path):
    binary = _go_test_binary(SUITE_DIR, "github.com/redis/go-redis/v9", str(tmp_path / "go-redis.test"),
                             "go-redis's tests")
    conf = tmp_path / "redis.conf"
    conf.write_text("enable-debug-command yes\nenable-module-command yes\n")
    skip_specs = "|".join(f"({s})" for s in [*SAME_ON_REDIS, *BY_DESIGN])
    suite_args = [
        "-test.count=1", "-test.timeout=15m",
        "-test.skip=" + "|".join(f"^{t}" for t in NOT_SERVED_GO_TESTS),
        "-ginkgo.no-color", "-ginkgo.skip=" + skip_specs,
        *[f"-ginkgo.skip-file=/{f}" for f in NOT_SERVED_FILES],
    ]
    quoted = " ".join(f"'{a}'" for a in suite_args)
    rc, out, server_log = _run_beside_kvasir_on_6379(
        tmp_path, [str(conf)],
        f"cd '{tmp_path}'\nRE_CLUSTER=true REDIS_VERSION=7.0 '{binary}' {quoted}",
        1200, "go-redis suite")
    ran = re.search(r"Ran (\d+) of \d+ Specs", out)
    summary = re.search(r"(\d+) Passed \| (\d+) Failed", out)
    assert rc == 0, f"go-redis suite failed (exit {rc}):\n{out[-30000:]}\n--- server log:\n{server_log[-5000:]}"
    assert ran and int(ran.group(1)) > 500, f"too few specs ran: {ran and ran.group(0)}"
    assert summary and summary.group(2) == "0", out[-5000:]
    assert out.rstrip().splitlines()[-1] == "PASS", out[-5000:]
