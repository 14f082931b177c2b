#!/usr/bin/env bash
# Kvasir failover time: how long writes to a slot stop when its leader dies.
#
# A three-node cluster (--replicas 3 --shards-per-node 8 --wal fsync plus
# $KVASIR_ARGS) on 127.0.0.1. Each of the $TRIES tries picks a slot (rotating
# through $SLOTS: 0, 683 and 1366 are the first slots of shards 1, 2 and 3,
# whose preferred leaders are nodes 1, 2 and 3), and, while a background
# writer keeps SETting keys of that slot ({tag}bg:N, following MOVED like
# redis-cli -c), kill -9s the node that leads the slot. From the kill it
# measures, polling every 10 ms:
#   (a) leader seen: until a surviving node's CLUSTER SLOTS names another
#       (live) node as the slot's leader;
#   (b) first write: until `SET {tag}k v` sent to a surviving node (following
#       MOVED, as redis-cli -c does) first replies OK;
#   writer gap: the background writer's longest time between two OKs (the
#       second one after the kill).
# Then it restarts the killed node with the same flags and data directory,
# waits until the cluster is healthy (every node: cluster_state:ok, all three
# nodes known with addresses, no shard without a leader) and until every node
# leads 8 of the 24 shards again (at most $REBALANCE_TIMEOUT seconds; the
# table says "no(a/b/c)" if leadership stayed unbalanced), and goes on.
# Reported: every try, then median and max of (a), (b) and the writer gap.
#
# Environment: TRIES (default 10), SLOTS (slots to rotate through, "0 683
# 1366"; "0" always kills slot 0's leader), WARMUP (seconds the writer runs
# before the kill, 1), FAIL_TIMEOUT (seconds to wait for (a) and (b), 30),
# KVASIR_ARGS (extra `kvasir server` flags, e.g. "--raft-tick-ms 50
# --election-ticks 10"), KVASIR, START_TIMEOUT (60), REBALANCE_TIMEOUT (30),
# KEEP_LOGS (directory to copy server logs into), SIGNAL (KILL, the default:
# kill -9; TERM: a graceful stop, in which the node hands its shards'
# leadership to the others before it exits).
# LOAD (empty by default): `kvasir bench` arguments of a load that runs
# against the whole cluster during each try, from $WARMUP seconds before the
# kill to $LOAD_AFTER (default 5) seconds after it, e.g. LOAD="kv --writers 50
# --readers 0 --no-load" (the replicated-write benchmark's load); the load's
# ops/s, errors and reconnects are reported per try.
# Needs redis-cli (scripts/install-test-deps.sh) and python3.
set -euo pipefail
LOAD=${LOAD:-}
LOAD_AFTER=${LOAD_AFTER:-5}

TRIES=${TRIES:-10}
SLOTS=${SLOTS:-"0 683 1366"}
WARMUP=${WARMUP:-1}
FAIL_TIMEOUT=${FAIL_TIMEOUT:-30}
SIGNAL=${SIGNAL:-KILL}
case "$SIGNAL" in KILL | TERM) ;; *) echo "SIGNAL must be KILL or TERM" >&2; exit 2 ;; esac

NAME=failover
# shellcheck source=bench/lib-cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-cluster.sh"

node_of_port() { # port -> node id, or "?"
    local i
    for i in "${NODES[@]}"; do [ "${PORT[$i]}" = "$1" ] && { echo "$i"; return; }; done
    echo "?"
}

# Kills node $victim's process and measures; prints
# "a_ms b_ms gap_ms new_leader_port writer_ok writer_errors" ("-" = not seen).
measure() { # slot tag victim other survivors(comma list)
    python3 - "$1" "$2" "${PID[$3]}" "${PORT[$3]}" "${PORT[$4]}" "$5" "$WARMUP" "$FAIL_TIMEOUT" "$SIGNAL" <<'EOF'
import os, signal, sys, threading, time
sys.path.insert(0, os.environ["WORK"])
import resp

slot, tag, pid, killed, other = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
survivors = [int(p) for p in sys.argv[6].split(",")]
warmup, limit = float(sys.argv[7]), float(sys.argv[8])
stop_signal = signal.SIGTERM if sys.argv[9] == "TERM" else signal.SIGKILL
PERIOD = 0.010
done = threading.Event()
t0 = None
res = {"a": None, "b": None, "leader": None}
bg = {"ok": 0, "err": 0, "prev": None, "gap": None, "last": None}


def writer():
    cl = resp.ClusterClient(other, timeout=5)
    n = 0
    while not done.is_set():
        n += 1
        try:
            cl.cmd("SET", f"{{{tag}}}bg:{n}", "v")
            now = time.monotonic()
            bg["ok"] += 1
            # The longest time between two OKs, the second after the kill.
            if t0 is not None and now >= t0 and bg["prev"] is not None:
                bg["gap"] = max(bg["gap"] or 0.0, now - bg["prev"])
            bg["prev"] = bg["last"] = now
        except Exception:
            bg["err"] += 1
            time.sleep(PERIOD)


def ticks():
    """Sleeps to the next 10 ms tick after t0; False once the time is up."""
    k = 0
    while True:
        k += 1
        now = time.monotonic()
        if now - t0 > limit:
            return
        nxt = t0 + k * PERIOD
        if nxt > now:
            time.sleep(nxt - now)
        else:
            k = int((now - t0) / PERIOD)
        yield


def poll_slots():
    conns = {}
    for _ in ticks():
        for p in survivors:
            try:
                c = conns.get(p) or conns.setdefault(p, resp.Conn(p, timeout=2))
                leader = resp.slot_leader(c.cmd("CLUSTER", "SLOTS"), slot)
            except Exception:
                c = conns.pop(p, None)
                if c:
                    c.close()
                continue
            if leader is not None and leader != killed:
                res["a"], res["leader"] = time.monotonic() - t0, leader
                return


def probe():
    cl = resp.ClusterClient(other, timeout=5)
    for _ in ticks():
        try:
            if cl.cmd("SET", f"{{{tag}}}k", "v") == "OK":
                res["b"] = time.monotonic() - t0
                return
        except Exception:
            pass


w = threading.Thread(target=writer, daemon=True)
w.start()
time.sleep(warmup)
if bg["ok"] == 0:
    print(f"failover: the background writer got no OK in {warmup}s ({bg['err']} errors)", file=sys.stderr)
t0 = time.monotonic()
os.kill(pid, stop_signal)
threads = [threading.Thread(target=f, daemon=True) for f in (poll_slots, probe)]
for t in threads:
    t.start()
for t in threads:
    t.join()
# Let the writer get going again after the failover.
seen = max([v for v in (res["a"], res["b"]) if v is not None] or [limit])
while (bg["last"] or 0) - t0 < seen + 0.2 and time.monotonic() - t0 < limit + 1:
    time.sleep(PERIOD)
done.set()
w.join(timeout=6)
ms = lambda v: "-" if v is None else f"{v * 1000:.0f}"
gap = bg["gap"] if (bg["last"] or 0) - t0 >= seen else None
print(ms(res["a"]), ms(res["b"]), ms(gap), res["leader"] or "-", bg["ok"], bg["err"])
EOF
}

# A load run's JSON report -> "ops/s errors reconnects" ("-" without one).
load_summary() { # json
    python3 - "$1" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print("-")
else:
    e = r["errors"]
    print(f"{r['ops_per_sec']:.0f} ops/s, {e['total']} errors, {e['reconnects']} reconnects")
EOF
}

cluster_init
say "starting a three-node cluster (${KVASIR_ARGS:-default raft settings})..."
start_cluster
say "cluster healthy; leadership balanced: $(wait_balanced)"

RESULTS="$WORK/results.tsv"
: >"$RESULTS"
read -r -a SLOT_LIST <<<"$SLOTS"
declare -A TAGS
for t in $(seq 1 "$TRIES"); do
    slot=${SLOT_LIST[$(((t - 1) % ${#SLOT_LIST[@]}))]}
    [ -n "${TAGS[$slot]:-}" ] || TAGS[$slot]=$(tag_for_slot "$slot")
    tag=${TAGS[$slot]}
    lport=$(slot_leader_port "${PORT[1]}" "$slot")
    victim=$(node_of_port "$lport")
    [ "$victim" != "?" ] || die "try $t: no leader for slot $slot in CLUSTER SLOTS"
    survivors=()
    for i in "${NODES[@]}"; do [ "$i" != "$victim" ] && survivors+=("$i"); done
    other=${survivors[0]}
    sports=$(for i in "${survivors[@]}"; do echo "${PORT[$i]}"; done | paste -sd,)
    say "try $t/$TRIES: slot $slot ({$tag}), SIG$SIGNAL to node $victim (leader), writing through node $other..."
    load_pid=""
    if [ -n "$LOAD" ]; then
        # shellcheck disable=SC2086 # LOAD is a list of arguments
        "$KVASIR" bench $LOAD --cluster --port "${PORT[$other]}" --no-progress \
            --duration "$(awk -v w="$WARMUP" -v a="$LOAD_AFTER" 'BEGIN { printf "%d", w + a + 0.999 }')" \
            --json "$WORK/load-$t.json" >"$WORK/load-$t.txt" 2>&1 &
        load_pid=$!
        EXTRA_PIDS="$EXTRA_PIDS $load_pid"
    fi
    read -r a b gap nport wok werr <<<"$(measure "$slot" "$tag" "$victim" "$other" "$sports")"
    load="-"
    if [ -n "$load_pid" ]; then
        wait "$load_pid" || say "try $t: the load run failed (its output: $WORK/load-$t.txt)"
        load=$(load_summary "$WORK/load-$t.json")
    fi
    wait "${PID[$victim]}" 2>/dev/null || true
    PID[victim]=""
    nl=$([ "$nport" = "-" ] && echo "-" || node_of_port "$nport")
    rs=$EPOCHREALTIME
    start_node "$victim"
    wait_until "try $t: cluster after restarting node $victim" cluster_healthy "$START_TIMEOUT"
    rejoin=$(awk -v a="$rs" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    rebal=$(wait_balanced)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$slot" "$victim" "$nl" "$a" "$b" "$gap" \
        "$wok" "$werr" "$rejoin" "$rebal" "$load" >>"$RESULTS"
    say "try $t/$TRIES: leader seen ${a} ms (node $nl), first write ${b} ms, writer gap ${gap} ms; restarted node healthy after ${rejoin}s, rebalanced: $rebal${LOAD:+; load: $load}"
done

# --- Report -----------------------------------------------------------------------
stat() { # column -> "median max" over the tries that saw it
    awk -F'\t' -v c="$1" '$c != "-" { print $c }' "$RESULTS" | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "- -"; exit }
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%.0f %.0f\n", m, v[NR]
        }'
}
missed() { awk -F'\t' -v c="$1" '$c == "-"' "$RESULTS" | wc -l; }

echo "# Kvasir failover: SIG$SIGNAL to the leader under writes"
echo
echo "$(nproc) CPUs shared by the three nodes and the clients. \`kvasir server --replicas 3 --shards-per-node 8 --wal fsync${KVASIR_ARGS:+ $KVASIR_ARGS}\`."
echo "Times from the SIG$SIGNAL; polls every 10 ms. (a) a surviving node's CLUSTER SLOTS names a live leader for the slot;"
echo "(b) \`SET {tag}k v\` through a surviving node (following MOVED) replies OK; writer gap: a background writer's"
echo "(SET {tag}bg:N in a loop) longest time between two OKs around the kill. The killed node is restarted between tries."
echo
if [ -n "$LOAD" ]; then
    echo "Load during each try: \`kvasir bench $LOAD --cluster\` from ${WARMUP}s before the kill to ${LOAD_AFTER}s after it."
    echo
fi
echo "| try | slot | killed node | new leader | (a) leader seen ms | (b) first write ms | writer gap ms | writer OKs / errors | restarted node healthy s | rebalanced s |${LOAD:+ load |}"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|${LOAD:+---|}"
while IFS=$'\t' read -r t slot victim nl a b gap wok werr rejoin rebal load; do
    echo "| $t | $slot | $victim | $nl | $a | $b | $gap | $wok / $werr | $rejoin | $rebal |${LOAD:+ $load |}"
done <"$RESULTS"
echo
echo "| | median ms | max ms | tries without it |"
echo "|---|---:|---:|---:|"
for col in "5 (a) new leader in CLUSTER SLOTS" "6 (b) first successful write" "7 background writer gap"; do
    read -r m x <<<"$(stat "${col%% *}")"
    echo "| ${col#* } | $m | $x | $(missed "${col%% *}") |"
done
