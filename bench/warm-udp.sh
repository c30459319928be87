#!/usr/bin/env bash
# UDP answers per capped CPU-second of a warm cns, on the
# data bench/run.sh prepared. run-anchors starts measuring UDP as soon as a
# server answers both SOAs; NSD and Knot answer only once their zone is
# loaded, but cns answers from its db at once and builds its tables in the
# background, so at 1M VMs inside the 40 % quota run-anchors' UDP run can
# fall while cns is still answering from the store (and after the AXFR
# that run-anchors sends first, which the warm-up gives way to). This
# measures cns the way the peers are measured: loaded. Per repetition:
#   1. a copy of $WORK/prep/N<N>/cns.db, `cns serve` started with
#      bench/capped/taskset on SERVER_CPU inside the CPU_QUOTA cgroup (the
#      same wrapper run-anchors uses under bench/run.sh);
#   2. wait for the log's "stored VMs read" (the tables are built and the
#      updater has read its state: cns is fully started);
#   3. dnsperf as run-anchors runs it (-e -c 8 -q 200 -l DURATION, the
#      prepared queries.txt) on CLIENT_CPU; qps / quota is the figure.
#      MODE=tcp runs it as run-anchors' TCP step does (-m tcp): at 1M VMs
#      that step catches cns warming up too.
# usage: bench/warm-udp.sh [CNS_BINARY]   (default: go build of this tree)
# Knobs: WORK (${TMPDIR:-/tmp}/cns-bench) N (1000000) REPS (3) DURATION (8)
#   MODE (udp; tcp)
#   CPU_QUOTA (40) PORT (5397) SERVER_CPU (0) CLIENT_CPU (1) WARM_TIMEOUT (300 s)
# Output: one line per repetition, then the median (min-max).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-${TMPDIR:-/tmp}/cns-bench}
N=${N:-1000000}
REPS=${REPS:-3}
DURATION=${DURATION:-8}
CPU_QUOTA=${CPU_QUOTA:-40}
PORT=${PORT:-5397}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
WARM_TIMEOUT=${WARM_TIMEOUT:-300}
MODE=${MODE:-udp}
case $MODE in udp|tcp) ;; *) echo "warm-udp: MODE must be udp or tcp, not '$MODE'" >&2; exit 2 ;; esac
export CPU_QUOTA SERVER_CPU CLIENT_CPU
prep=$WORK/prep/N$N
queries=$WORK/zones/N$N/queries.txt
[ -f "$prep/cns.db" ] && [ -f "$queries" ] || { echo "warm-udp: no prepared data for N=$N in $WORK (run bench/run.sh)" >&2; exit 1; }
cns=${1:-}
if [ -z "$cns" ]; then
    cns=$WORK/cns-warm-udp
    (cd "$ROOT" && go build -o "$cns" .)
fi
capped="$ROOT/bench/capped/taskset"
run=$(mktemp -d "${TMPDIR:-/tmp}/warm-udp.XXXXXX")
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$run"' EXIT

qps=()
for rep in $(seq 1 "$REPS"); do
    cp "$prep/cns.db" "$run/cns.db"
    sed "s/@LISTEN@/127.0.0.1:$PORT/" "$prep/serve.json.in" > "$run/cns.json"
    "$capped" -c "$SERVER_CPU" "$cns" serve -c "$run/cns.json" > "$run/log" 2>&1 &
    pid=$!
    for _ in $(seq 1 $((WARM_TIMEOUT * 10))); do
        grep -q '"stored VMs read"' "$run/log" && break
        kill -0 "$pid" 2>/dev/null || { echo "warm-udp: cns exited" >&2; tail "$run/log" >&2; exit 1; }
        sleep 0.1
    done
    grep -q '"stored VMs read"' "$run/log" || { echo "warm-udp: not started in $WARM_TIMEOUT s" >&2; exit 1; }
    out=$("$capped" -c "$CLIENT_CPU" dnsperf -e -m "$MODE" -s 127.0.0.1 -p "$PORT" -d "$queries" -c 8 -q 200 -l "$DURATION" 2>&1)
    q=$(awk '/Queries per second/ {print $4}' <<<"$out")
    lost=$(awk '/Queries lost/ {print $3}' <<<"$out")
    capped_qps=$(python3 -c "print(round($q / ($CPU_QUOTA / 100)))")
    echo "N=$N $MODE rep $rep: $q qps, lost $lost, per capped CPU-s $capped_qps"
    qps+=("$capped_qps")
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
    pid=""
done
python3 - "${MODE^^}" "${qps[@]}" <<'EOF'
import statistics, sys
v = sorted(int(x) for x in sys.argv[2:])
print(f"{sys.argv[1]} answers per capped CPU-s, warm: median {statistics.median(v):,.0f} ({v[0]:,}-{v[-1]:,})")
EOF
