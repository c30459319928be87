#!/usr/bin/env bash
# Two or more cns builds, interleaved, on the data bench/run.sh prepared:
# what a restart costs before the forward zone can be transferred, how many
# bytes the transfer puts on the wire, and the memory the warm-up peaks at
# (AXFR right after a restart, AXFR bytes, peak RSS while
# restarting). Per repetition and build:
#   1. a spare copy of the prepared db, cns serve pinned to SERVER_CPU
#      (inside the CPU_QUOTA cgroup when CPU_QUOTA > 0, bench/capped/taskset);
#   2. SOA of the forward zone polled every 2 ms; the moment it answers,
#      bench/axfr-count asks for the AXFR: "first" is exec to the
#      first answer, "axfr_cold" the transfer, "ready" exec to transfer done;
#   3. once the log says the tables are built and then the feeds' stored
#      state read (and 1 s more), VmHWM (the restart's peak) and VmRSS
#      (steady), then a second AXFR (warm).
#
# usage: bench/restart-axfr.sh NAME=CNS_BINARY...   e.g.
#   bench/restart-axfr.sh base=/tmp/cns-base new=/tmp/cns-new
# Knobs: WORK (${TMPDIR:-/tmp}/cns-bench, bench/run.sh's) N (100000) REPS (5)
#   PORT (5391) SERVER_CPU (0) CLIENT_CPU (1) CPU_QUOTA (0)
# Output: one TSV row per run on stdout, then medians (min-max) per build.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-${TMPDIR:-/tmp}/cns-bench}
N=${N:-100000}
REPS=${REPS:-5}
PORT=${PORT:-5391}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CPU_QUOTA=${CPU_QUOTA:-0}
ZONE=dc.cns.example
export SERVER_CPU CLIENT_CPU CPU_QUOTA
[ $# -ge 1 ] || { echo "usage: $0 NAME=CNS_BINARY..." >&2; exit 2; }
P=$WORK/prep/N$N
[ -f "$P/cns.db" ] && [ -f "$P/serve.json.in" ] || { echo "no prepared data in $P (run bench/run.sh with PREP_ONLY=1)" >&2; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/restart-axfr.XXXXXX")
cc -O2 -o "$T/axfr-count" "$ROOT/bench/axfr-count.c"
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
SHIM=$PATH
[ "$CPU_QUOTA" -gt 0 ] && SHIM=$ROOT/bench/capped:$PATH
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }

printf 'build\trep\tfirst_ms\taxfr_cold_ms\tready_ms\tbytes\tmsgs\twarm_ms\tpeak_mib\tsteady_mib\n' > "$T/rows.tsv"
for r in $(seq 1 "$REPS"); do
    for spec in "$@"; do
        name=${spec%%=*} bin=${spec#*=}
        d=$T/run; rm -rf "$d"; mkdir -p "$d"
        cp "$P/cns.db" "$d/cns.db"
        sed "s/@LISTEN@/127.0.0.1:$PORT/" "$P/serve.json.in" > "$d/cns.json"
        sync
        t0=$(now_ms)
        PATH=$SHIM taskset -c "$SERVER_CPU" "$bin" serve -c "$d/cns.json" 2> "$d/log" &
        PID=$!
        until dig @127.0.0.1 -p "$PORT" +time=1 +tries=1 +short SOA "$ZONE" 2>/dev/null | grep -q hostmaster; do
            kill -0 "$PID" 2>/dev/null || { echo "$name exited: $(tail -2 "$d/log")" >&2; exit 1; }
            sleep 0.002
        done
        t1=$(now_ms)
        cold=$(taskset -c "$CLIENT_CPU" "$T/axfr-count" 127.0.0.1 "$PORT" "$ZONE")
        t2=$(now_ms)
        for _ in $(seq 1 600); do grep -q '"msg":"zones loaded into memory"' "$d/log" && break; sleep 0.1; done
        # builds before cns read it after the tables never log it: 20 s at most
        for _ in $(seq 1 200); do grep -q '"msg":"stored VMs read"' "$d/log" && break; sleep 0.1; done
        sleep 1
        peak=$(awk '/^VmHWM/ {print int($2 / 1024)}' "/proc/$PID/status")
        steady=$(awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/$PID/status")
        warm=$(taskset -c "$CLIENT_CPU" "$T/axfr-count" 127.0.0.1 "$PORT" "$ZONE")
        kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$r" $((t1 - t0)) "$(echo "$cold" | field ms)" $((t2 - t0)) \
            "$(echo "$warm" | field bytes)" "$(echo "$warm" | field msgs)" "$(echo "$warm" | field ms)" "$peak" "$steady" | tee -a "$T/rows.tsv"
    done
done
python3 "$ROOT/bench/medians.py" "$T/rows.tsv"
