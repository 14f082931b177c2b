#!/usr/bin/env bash
# Runs the randomized partition / chaos test (crates/kvasir/tests/cluster_chaos.rs)
# many times, one test process per run, and summarizes the results:
#
#   scripts/chaos.sh --runs 100 [--seconds 60] [--seed S]
#
# Run i uses seed S+i; a failing run is replayed with
#   CHAOS_SEED=<its seed> CHAOS_RUNS=1 CHAOS_SECONDS=<seconds> cargo test -p kvasir --test cluster_chaos -- --nocapture
# Needs root (network namespaces). Respects CARGO_TARGET_DIR. Each run's full
# output goes to $CHAOS_LOG_DIR (default /tmp/kvasir-chaos-<S>); the lines
# printed here are meant to be appended to docs as they are. A failed run's
# line says why: violations, lost_writes, crashed (nodes that exited on their
# own), heal_to_served_ms=never, unconverged_shards.
set -euo pipefail
cd "$(dirname "$0")/.."

# Everything is in main, called on the last line: bash reads a script as it
# runs, so a long run would otherwise pick up edits made to this file meanwhile.
main() {
    runs=10
    seconds=60
    seed=$(( $(date +%s) % 1000000000 ))
    while [ $# -gt 0 ]; do
        case "$1" in
            --runs) runs="$2"; shift 2 ;;
            --seconds) seconds="$2"; shift 2 ;;
            --seed) seed="$2"; shift 2 ;;
            -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#'; exit 0 ;;
            *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
        esac
    done

    # Build once; cargo prints the test binary's path ("Executable ... (path)").
    bin=$(cargo test -p kvasir --test cluster_chaos --no-run 2>&1 \
        | tee /dev/stderr | sed -n 's/.*Executable .*(\(.*cluster_chaos-[^)]*\)).*/\1/p' | tail -1)
    if [ -z "$bin" ] || [ ! -x "$bin" ]; then
        echo "chaos.sh: could not find the cluster_chaos test binary" >&2
        exit 1
    fi

    logs="${CHAOS_LOG_DIR:-/tmp/kvasir-chaos-$seed}"
    mkdir -p "$logs"
    echo "# scripts/chaos.sh --runs $runs --seconds $seconds --seed $seed ($(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo '?'), logs in $logs)"

    failed=0
    violations=0
    lost=0
    crashed=0
    skipped=0
    heal_ms=()
    for ((i = 0; i < runs; i++)); do
        s=$((seed + i))
        log="$logs/run-$s.log"
        # Bounded: the run itself, plus the heal wait, the check and start-up.
        set +e
        CHAOS_RUNS=1 CHAOS_SEED=$s CHAOS_SECONDS=$seconds \
            timeout --kill-after=10 $((seconds + 240)) "$bin" --exact \
            randomized_faults_keep_history_linearizable_and_writes_durable \
            --nocapture --test-threads=1 >"$log" 2>&1
        rc=$?
        set -e
        if grep -q '^SKIP ' "$log"; then
            grep '^SKIP ' "$log" | head -1
            skipped=1
            break
        fi
        line=$(grep '^CHAOS run=' "$log" | tail -1 || true)
        if [ -z "$line" ]; then
            echo "run $i seed=$s FAILED (rc=$rc) before its summary line; see $log"
            failed=$((failed + 1))
            continue
        fi
        v=$(sed -n 's/.* violations=\([0-9]*\).*/\1/p' <<<"$line")
        l=$(sed -n 's/.* lost_writes=\([0-9]*\).*/\1/p' <<<"$line")
        h=$(sed -n 's/.* heal_to_served_ms=\([0-9a-z]*\).*/\1/p' <<<"$line")
        c=$(sed -n 's/.* crashed=\([0-9]*\).*/\1/p' <<<"$line")
        crashed=$((crashed + ${c:-0}))
        violations=$((violations + v))
        lost=$((lost + l))
        [ "$h" != never ] && heal_ms+=("$h")
        status=ok
        [ "$rc" -ne 0 ] && { status="FAILED (rc=$rc, see $log)"; failed=$((failed + 1)); }
        # Each process ran one run (its run=0): number the lines by this loop.
        line="${line#CHAOS run=0 }"
        echo "run=$i $line status=$status"
    done

    if [ "$skipped" -eq 1 ]; then
        exit 0
    fi
    median=-
    max=-
    if [ "${#heal_ms[@]}" -gt 0 ]; then
        sorted=$(printf '%s\n' "${heal_ms[@]}" | sort -n)
        median=$(sed -n "$(( ${#heal_ms[@]} / 2 + 1 ))p" <<<"$sorted")
        max=$(tail -1 <<<"$sorted")
    fi
    echo "summary: runs=$runs seconds=$seconds seeds=$seed..$((seed + runs - 1)) failed=$failed violations=$violations lost_writes=$lost crashed_nodes=$crashed heal_to_served_ms median=$median max=$max"
    [ "$failed" -eq 0 ]
}

main "$@"
