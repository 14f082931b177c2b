#!/usr/bin/env bash
# Server CPU time per request and req/s, servers alternating:
#   SPECS="label=path/to/kvasir ... redis=redis" T=set REPEAT=5 P=16 N=2000000 bench/cpu-per-request.sh
# SETUP (a redis-cli command run before the load) and BENCH_ARGS (extra
# redis-benchmark arguments) are optional. CPU time is the sum of the
# server threads' /proc/PID/task/*/schedstat run times over the run; each
# line also gives it by thread name (digits dropped: kvasir-io-1 and
# kvasir-io-2 are kvasir-io-). A label=path:ARGS spec passes ARGS (commas
# for spaces) to `kvasir server`, e.g. t2=/tmp/kvasir:--threads,2.
set -u
REPEAT=${REPEAT:-3}; P=${P:-16}; N=${N:-2000000}; T=${T:-set}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu() { local t=0; for f in /proc/$1/task/*/schedstat; do read a b c < $f; t=$((t+a)); done; echo $t; }
# "name=ns ..." per thread name, digits dropped.
cpu_by_thread() { for d in /proc/$1/task/*; do read a b c < $d/schedstat; echo "$(tr -d '0-9' < $d/comm) $a"; done | awk '{t[$1]+=$2} END {for (n in t) printf "%s=%.0f\n", n, t[n]}' | sort; }
# The difference of two cpu_by_thread readings, per request.
per_request() { join -t= -a2 -e0 -o 0,1.2,2.2 <(echo "$1") <(echo "$2") | awk -F= -v n=$3 '{printf " %s=%.0f", $1, ($3-$2)/n}'; }
work=$(mktemp -d); cd $work
for r in $(seq $REPEAT); do
 for spec in $SPECS; do
  label=${spec%%=*}; bin=${spec#*=}; port=$(free_port)
  args=""; case $bin in *:*) args=$(echo "${bin#*:}" | tr , ' '); bin=${bin%%:*};; esac
  if [ "$bin" = redis ]; then redis-server --port $port --bind 127.0.0.1 --save '' --appendonly no $args >/dev/null 2>&1 & else $bin server --port $port --bind 127.0.0.1 --save '' --dir $work $args >/dev/null 2>&1 & fi
  pid=$!; for i in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
  [ -n "${SETUP:-}" ] && redis-cli -p $port $SETUP >/dev/null
  c0=$(cpu $pid); t0=$(cpu_by_thread $pid)
  rps=$(redis-benchmark ${BENCH_ARGS:-} -p $port -c 50 -r 16384 -n $N -P $P -q -t $T 2>/dev/null | tr '\r' '\n' | grep -Eo '[0-9.]+ requests per second' | tail -1 | cut -d' ' -f1)
  c1=$(cpu $pid); t1=$(cpu_by_thread $pid)
  echo "$label $T P=$P rps=$rps cpu_ns_per_req=$(( (c1-c0)/N ))$(per_request "$t0" "$t1" $N)"
  kill $pid; wait $pid 2>/dev/null
 done
done
rm -rf $work
