#!/usr/bin/env bash
# The UDP answer path's cost: CPU microseconds per answer of
# `cns serve` inside the capped yardstick's CPU quota, saturated and at
# fixed rates, with the system calls and context switches per answer, for
# one or more cns binaries taken in turn (interleaved), on a db that
# bench/run.sh prepared. CPU time and system-call counts are what the
# machine's other load moves least, so base and new compare in one run.
#
# usage: bench/answercost.sh NAME=CNS_BINARY [NAME=CNS_BINARY ...]
#   e.g. bench/answercost.sh base=/tmp/cns-main new=/tmp/cns-head
# Knobs (environment):
#   N (100000): the size; the db is $PREP/N$N/cns.db, the queries
#     $ZONES/N$N/queries.txt (bench/run.sh's WORK/prep and WORK/zones)
#   PREP (/tmp/cns-bench/prep)  ZONES (/tmp/cns-bench/zones)
#   WORK (/tmp/cns-answercost): the copied db, logs, results.tsv
#   REPS (3)  DURATION (8 s per rate)  RATES ("0 36000": 0 saturates with
#     dnsperf -c 8 -q 200 as run-anchors does, others are dnsperf -Q qps)
#   CPU_QUOTA (40)  CPU_PERIOD_US (5000)  SERVER_CPU (0)  CLIENT_CPU (1)
#   PORT (5398)  PERF (1: count system calls and context switches with
#     `perf stat -p`; 0: skip)
# Output: $WORK/results.tsv, one row per binary, repetition and rate:
#   name rep rate qps answered lost cpu_s us_per_answer syscalls_per_answer
#   cs_per_answer recvmmsg_per_answer sendmmsg_per_answer epoll_per_answer
#   futex_per_answer
# and a median summary per name and rate on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
N=${N:-100000}
PREP=${PREP:-/tmp/cns-bench/prep}
ZONES=${ZONES:-/tmp/cns-bench/zones}
WORK=${WORK:-/tmp/cns-answercost}
REPS=${REPS:-3}
DURATION=${DURATION:-8}
RATES=${RATES:-"0 36000"}
PORT=${PORT:-5398}
PERF=${PERF:-1}
export CPU_QUOTA=${CPU_QUOTA:-40} CPU_PERIOD_US=${CPU_PERIOD_US:-5000}
export SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1}
export CPU_CGROUP=${CPU_CGROUP:-/sys/fs/cgroup/cpu/cns-answercost}

[ $# -ge 1 ] || { sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;$d' >&2; exit 2; }
queries=$ZONES/N$N/queries.txt
[ -f "$queries" ] || { echo "answercost: no $queries (bench/run.sh prepares it)" >&2; exit 1; }
[ -f "$PREP/N$N/cns.db" ] || { echo "answercost: no $PREP/N$N/cns.db" >&2; exit 1; }
mkdir -p "$WORK"
db=$WORK/N$N.db
# One copy, opened by every binary in turn (cns writes its db on open).
[ -f "$db" ] || cp "$PREP/N$N/cns.db" "$db"
# No API listener (port 80 may be another cns's), the db where it is.
sed "s|@LISTEN@|127.0.0.1:$PORT|; s|\"db_path\": *\"[^\"]*\"|\"db_path\": \"$db\", \"api_server\": {\"listen\": []}|" \
    "$PREP/N$N/serve.json.in" > "$WORK/cns.json"
results=$WORK/results.tsv
[ -f "$results" ] || printf 'name\trep\trate\tqps\tanswered\tlost\tcpu_s\tus_per_answer\tsyscalls_per_answer\tcs_per_answer\trecvmmsg_per_answer\tsendmmsg_per_answer\tepoll_per_answer\tfutex_per_answer\n' > "$results"

capped() { PATH=$here/capped:$PATH taskset "$@"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
clk=$(getconf CLK_TCK)
pid=""
stop() {
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    pid=""
}
trap stop EXIT

measure() { # name rep rate
    local name=$1 rep=$2 rate=$3 out=$WORK/dnsperf-$1-$2-$3.txt perfout=$WORK/perf-$1-$2-$3.txt
    local q=(-c 8 -q 200)
    [ "$rate" != 0 ] && q+=(-Q "$rate")
    local t0 t1
    t0=$(cpu_ticks "$pid")
    if [ "$PERF" = 1 ]; then
        capped -c "$CLIENT_CPU" perf stat -x, -o "$perfout" -p "$pid" \
            -e raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_sendmmsg,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex \
            -- dnsperf -e -s 127.0.0.1 -p "$PORT" -d "$queries" "${q[@]}" -l "$DURATION" > "$out" 2>&1
    else
        capped -c "$CLIENT_CPU" dnsperf -e -s 127.0.0.1 -p "$PORT" -d "$queries" "${q[@]}" -l "$DURATION" > "$out" 2>&1
    fi
    t1=$(cpu_ticks "$pid")
    local qps answered lost
    qps=$(awk '/Queries per second:/ { print $4 }' "$out")
    answered=$(awk '/Queries completed:/ { print $3 }' "$out")
    lost=$(awk '/Queries lost:/ { print $3 }' "$out")
    local ev=(0 0 0 0 0 0)
    if [ "$PERF" = 1 ]; then
        mapfile -t ev < <(awk -F, '/sys_enter,|context-switches|recvmmsg|sendmmsg|epoll_pwait|futex/ { print $1 }' "$perfout")
    fi
    awk -v n="$name" -v r="$rep" -v rate="$rate" -v qps="$qps" -v a="$answered" -v l="$lost" \
        -v t=$((t1 - t0)) -v clk="$clk" -v sc="${ev[0]}" -v cs="${ev[1]}" -v rm="${ev[2]}" -v sm="${ev[3]}" -v ep="${ev[4]}" -v fx="${ev[5]}" \
        'BEGIN { c = t / clk; a = (a > 0 ? a : 1);
                 printf "%s\t%s\t%s\t%.0f\t%d\t%d\t%.2f\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n",
                   n, r, rate, qps, a, l, c, c * 1e6 / a, sc / a, cs / a, rm / a, sm / a, ep / a, fx / a }' | tee -a "$results"
}

for rep in $(seq 1 "$REPS"); do
    for spec in "$@"; do
        name=${spec%%=*} bin=${spec#*=}
        log=$WORK/cns-$name-$rep.log
        capped -c "$SERVER_CPU" "$bin" serve -c "$WORK/cns.json" > "$log" 2>&1 &
        pid=$!
        for _ in $(seq 1 600); do
            grep -qs 'zones loaded into memory' "$log" && break
            kill -0 "$pid" 2>/dev/null || { echo "answercost: $name exited, see $log" >&2; exit 1; }
            sleep 0.2
        done
        # $! is the wrapper's shell or cns itself; the log names cns.
        pid=$(sed -n 's/.*"pid":\([0-9]*\).*zones loaded into memory.*/\1/p' "$log" | head -1)
        [ -n "$pid" ] || { echo "answercost: $name did not warm up, see $log" >&2; exit 1; }
        sleep 1
        for rate in $RATES; do
            measure "$name" "$rep" "$rate"
        done
        stop
    done
done

echo "medians (min-max) per name and rate:"
awk -F'\t' 'NR > 1 { k = $1 "\t" $3; qps[k] = qps[k] " " $4; us[k] = us[k] " " $8; sc[k] = sc[k] " " $9; cs[k] = cs[k] " " $10; lost[k] = lost[k] " " $6 }
    function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return sprintf("%s (%s-%s)", a[int((n + 1) / 2)], a[1], a[n]) }
    END { for (k in qps) printf "%s\t%s\t%s\t%s\t%s\t%s\n", k, med(qps[k]), med(us[k]), med(sc[k]), med(cs[k]), lost[k] }' "$results" |
    sort -k1,1 -k2,2n | sed '1i name\trate\tqps\tus/answer\tsyscalls/answer\tctx switches/answer\tlost per rep' 
