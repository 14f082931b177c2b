#!/usr/bin/env bash
# CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT on a loaded shard: a 3-node
# cluster (--replicas 3 --shards-per-node 8 --wal fsync) is loaded with
# $KEYS keys (`kvasir bench kv --cluster` writes its keyspace with MSET), then
# each of the binaries named in SPECS answers $CALLS COUNTKEYSINSLOT and
# GETKEYSINSLOT calls for slot 0 on its leader; reported: the mean time per
# call (one connection, one call in flight), the count it answered, and the
# leader's used_memory after the load (every node holds every shard).
#
# Usage: SPECS="before=/path/to/kvasir after=/path/to/kvasir" bench/slot-counts.sh
# Environment: SPECS (label=binary ..., default "kvasir=" this checkout's
# release build), KEYS (1000000), CALLS (20), GET_COUNT (GETKEYSINSLOT's
# count, 10), plus lib-cluster.sh's settings.
# Needs redis-cli (scripts/install-test-deps.sh) and python3.
set -euo pipefail
NAME=slot-counts
KEYS=${KEYS:-1000000}
CALLS=${CALLS:-20}
GET_COUNT=${GET_COUNT:-10}
# shellcheck source=bench/lib-cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-cluster.sh"
SPECS=${SPECS:-"kvasir=$KVASIR"}

echo "| build | keys | COUNTKEYSINSLOT 0 | ms per COUNTKEYSINSLOT | ms per GETKEYSINSLOT 0 $GET_COUNT | keys listed | used_memory MB |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for spec in $SPECS; do
    label=${spec%%=*}
    KVASIR=${spec#*=}
    cluster_init
    start_cluster
    wait_balanced >/dev/null
    say "$label: loading $KEYS keys..."
    "$KVASIR" bench kv --cluster --port "${PORT[1]}" --keyspace "$KEYS" --writers 0 --readers 1 \
        --duration 1 --no-progress >/dev/null
    lport=$(slot_leader_port "${PORT[1]}" 0)
    read -r count count_ms get_ms listed used_mb <<<"$(python3 - "$lport" "$CALLS" "$GET_COUNT" <<'EOF'
import os, sys, time
sys.path.insert(0, os.environ["WORK"])
import resp
port, calls, get_count = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = resp.Conn(port, timeout=60)
t = time.perf_counter()
for _ in range(calls):
    n = c.cmd("CLUSTER", "COUNTKEYSINSLOT", "0")
count_ms = (time.perf_counter() - t) / calls * 1000
t = time.perf_counter()
for _ in range(calls):
    keys = c.cmd("CLUSTER", "GETKEYSINSLOT", "0", get_count)
get_ms = (time.perf_counter() - t) / calls * 1000
info = c.cmd("INFO", "memory")
info = info.decode() if isinstance(info, bytes) else info
used = next(int(l.split(":")[1]) for l in info.splitlines() if l.startswith("used_memory:"))
print(n, f"{count_ms:.3f}", f"{get_ms:.3f}", len(keys), f"{used / 1e6:.1f}")
EOF
)"
    echo "| $label | $KEYS | $count | $count_ms | $get_ms | $listed | $used_mb |"
    stop_all
    rm -rf "$WORK"/node*
done
