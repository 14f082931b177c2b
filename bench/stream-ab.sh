#!/usr/bin/env bash
# XADD A/B: two Kvasir binaries and redis-server side by side in one run,
# order rotated every repetition, FLUSHALL before each run; medians of
# REPEAT. Two cases: XADD to 100,000 random streams (`many`: new keys and
# short streams) and XADD MAXLEN ~ 1000 to one stream (`trim`: node
# boundaries and approximate trims on every call). Prints a markdown table
# (new / base and new / redis).
#
# Usage: bench/stream-ab.sh <base kvasir binary> <new kvasir binary>
# Environment: REPEAT (5), N (requests at -P 1, 200000; five times that at
# -P 16). Needs redis-server, redis-cli, redis-benchmark
# (scripts/install-test-deps.sh).
set -euo pipefail
set -f
BASE=${1:?usage: bench/stream-ab.sh <base> <new>} NEW=${2:?usage: bench/stream-ab.sh <base> <new>} REPEAT=${REPEAT:-5} N=${N:-200000}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pb=$(port); pn=$(port); pr=$(port)
d=$(mktemp -d)
$BASE server --port $pb --bind 127.0.0.1 --save "" --dir $d >/dev/null 2>&1 & kb=$!
$NEW server --port $pn --bind 127.0.0.1 --save "" --dir $d >/dev/null 2>&1 & kn=$!
redis-server --port $pr --bind 127.0.0.1 --save "" --appendonly no --dir $d >/dev/null 2>&1 & kr=$!
trap 'kill $kb $kn $kr 2>/dev/null; rm -rf $d' EXIT
sleep 1
echo "| case | pipeline | base XADD/s | new XADD/s | redis XADD/s | new / base | new / redis |"
echo "|---|---:|---:|---:|---:|---:|---:|"
declare -A R
names=(base new redis); ports=($pb $pn $pr)
for P in 1 16; do
  n=$N; [ $P -gt 1 ] && n=$((N*5))
  for c in "many" "trim"; do
    for rep in $(seq $REPEAT); do
      for k in 0 1 2; do
        i=$(( (k + rep) % 3 )); name=${names[$i]}; p=${ports[$i]}
        redis-cli -p $p flushall >/dev/null
        if [ $c = many ]; then cmd="XADD s:__rand_int__ * f v"; else cmd="XADD s MAXLEN ~ 1000 * f v"; fi
        rps=$(redis-benchmark -p $p -c 50 -n $n -P $P -r 100000 -q $cmd 2>/dev/null | grep -o '[0-9.]* requests per second' | awk '{print $1}')
        R[$c,$P,$name]="${R[$c,$P,$name]:-} $rps"
      done
    done
    med() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
    b=$(echo ${R[$c,$P,base]} | med); nw=$(echo ${R[$c,$P,new]} | med); r=$(echo ${R[$c,$P,redis]} | med)
    echo "| $c | $P | $b | $nw | $r | $(python3 -c "print(f'{$nw/$b:.2f}')") | $(python3 -c "print(f'{$nw/$r:.2f}')") |"
  done
done
