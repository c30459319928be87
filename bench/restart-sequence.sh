#!/usr/bin/env bash
# run-anchors' sequence for cns alone (AXFR right after a
# restart, in every repetition), two or more builds interleaved, on the
# data bench/run.sh prepared. Per repetition and build, as
# bench/run-anchors.sh does it in bench/run.sh's CPU quota:
#   1. a spare copy of the prepared db (EVICT=1: then dropped from the page
#      cache, as after a reboot or when the page cache has evicted it),
#      cns serve pinned to SERVER_CPU inside the CPU_QUOTA cgroup
#      (bench/capped/taskset; the cgroup is named after the binary);
#   2. the SOAs of both zones polled every 20 ms (dig on CLIENT_CPU);
#   3. the forward zone's AXFR by bench/axfr-count (the figure
#      run-anchors reports), then `dig axfr`, then dnsperf UDP for
#      DURATION s; cns's CPU time (utime + stime) is read around each;
#   4. once the log says the tables are built, cns is stopped.
# Columns: first_ms (exec to both SOAs), axfr_ms and axfr_cpu_ms (the
# transfer, and cns's CPU meanwhile), dig_ms, dig_cpu_ms, udp_qps,
# udp_cpu_ms, warm_ms (the log's warm-up), axfr_hwm_mib (VmHWM after the
# first transfer), majflt (major page faults until then).
# PROFILE=S also saves a CPU profile of cns's first S seconds through the
# API's /debug/pprof ($OUT/<build>-<rep>/cpu.pprof).
#
# usage: bench/restart-sequence.sh NAME=CNS_BINARY...
# Knobs: WORK (${TMPDIR:-/tmp}/cns-bench) N (1000000) REPS (3) DURATION (8)
#   CPU_QUOTA (40) EVICT (0) PROFILE (0) PORT (5396) SERVER_CPU (0)
#   CLIENT_CPU (1) OUT (a temporary directory, removed unless PROFILE)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-${TMPDIR:-/tmp}/cns-bench}
N=${N:-1000000}
REPS=${REPS:-3}
DURATION=${DURATION:-8}
EVICT=${EVICT:-0}
PROFILE=${PROFILE:-0}
PORT=${PORT:-5396}
API=$((PORT + 1))
export CPU_QUOTA=${CPU_QUOTA:-40} SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1}
[ $# -ge 1 ] || { echo "usage: $0 NAME=CNS_BINARY..." >&2; exit 2; }
P=$WORK/prep/N$N Z=$WORK/zones/N$N
[ -f "$P/cns.db" ] && [ -f "$P/serve.json.in" ] && [ -f "$Z/queries.txt" ] ||
    { echo "no prepared data in $P and $Z (run bench/run.sh with PREP_ONLY=1)" >&2; exit 1; }
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/restart-sequence.XXXXXX")}
mkdir -p "$OUT"
cc -O2 -o "$OUT/axfr-count" "$ROOT/bench/axfr-count.c"
SHIM=$PATH
[ "$CPU_QUOTA" -gt 0 ] && SHIM=$ROOT/bench/capped:$PATH
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    [ "$PROFILE" -gt 0 ] || rm -rf "$OUT"
}
trap cleanup EXIT
onclient() { PATH=$SHIM taskset -c "$CLIENT_CPU" "$@"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# utime + stime in ms, and major faults, of process $1
cpu_ms() { sed 's/^.*) //' "/proc/$1/stat" | awk -v hz="$(getconf CLK_TCK)" '{print int(($12 + $13) * 1000 / hz)}'; }
majflt() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $10}'; }
# a Go duration ("1m2.5s", "2.43s", "666.1ms") in ms; empty stays empty
go_ms() {
    python3 -c 'import re, sys
u = {"h": 3600e3, "m": 60e3, "s": 1e3, "ms": 1, "us": 1e-3, "µs": 1e-3, "ns": 1e-6}
print("%.0f" % sum(float(v) * u[k] for v, k in re.findall(r"([0-9.]+)(ms|us|µs|ns|h|m|s)", sys.argv[1])) if sys.argv[1] else "")' "$1"
}
evict() { python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"; }

printf 'build\trep\tfirst_ms\taxfr_ms\taxfr_cpu_ms\tdig_ms\tdig_cpu_ms\tudp_qps\tudp_cpu_ms\twarm_ms\taxfr_hwm_mib\tmajflt\n' > "$OUT/rows.tsv"
cat "$OUT/rows.tsv"
for r in $(seq 1 "$REPS"); do
    for spec in "$@"; do
        name=${spec%%=*} bin=${spec#*=}
        d=$OUT/$name-$r; rm -rf "$d"; mkdir -p "$d"
        cp "$P/cns.db" "$d/cns.db"
        sed -e "s/@LISTEN@/127.0.0.1:$PORT/" -e "s|\"listen\": \[\]|\"listen\": \"127.0.0.1:$API\"|" "$P/serve.json.in" > "$d/cns.json"
        sync
        [ "$EVICT" = 1 ] && evict "$d/cns.db"
        t0=$(now_ms)
        PATH=$SHIM taskset -c "$SERVER_CPU" "$bin" serve -c "$d/cns.json" 2> "$d/log" &
        PID=$!
        prof=""
        if [ "$PROFILE" -gt 0 ]; then
            (for _ in $(seq 1 500); do
                curl -sf -o "$d/cpu.pprof" "http://127.0.0.1:$API/debug/pprof/profile?seconds=$PROFILE" && break
                sleep 0.01
            done) &
            prof=$!
        fi
        for zone in dc.cns.example. 10.in-addr.arpa.; do
            until onclient dig @127.0.0.1 -p "$PORT" +time=1 +tries=1 +short SOA "$zone" 2>/dev/null | grep -q hostmaster; do
                kill -0 "$PID" 2>/dev/null || { echo "$name exited: $(tail -2 "$d/log")" >&2; exit 1; }
                sleep 0.02
            done
        done
        t1=$(now_ms) c1=$(cpu_ms "$PID")
        ax=$(onclient "$OUT/axfr-count" 127.0.0.1 "$PORT" dc.cns.example.)
        t2=$(now_ms) c2=$(cpu_ms "$PID") mf=$(majflt "$PID")
        hwm=$(awk '/^VmHWM/ {print int($2 / 1024)}' "/proc/$PID/status")
        onclient dig @127.0.0.1 -p "$PORT" +noall +answer +time=60 AXFR dc.cns.example. > /dev/null 2>&1
        t3=$(now_ms) c3=$(cpu_ms "$PID")
        onclient dnsperf -e -s 127.0.0.1 -p "$PORT" -d "$Z/queries.txt" -c 8 -q 200 -l "$DURATION" > "$d/udp.txt" 2>&1
        c4=$(cpu_ms "$PID")
        for _ in $(seq 1 1200); do grep -q '"msg":"zones loaded into memory"' "$d/log" && break; sleep 0.1; done
        [ -n "$prof" ] && wait "$prof"
        warm=$(sed -n 's/.*"took":"\([^"]*\)","msg":"zones loaded into memory".*/\1/p' "$d/log")
        kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
        rm -f "$d/cns.db"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$r" $((t1 - t0)) \
            "$(echo "$ax" | sed -n 's/.* ms=\([0-9.]*\).*/\1/p')" $((c2 - c1)) $((t3 - t2)) $((c3 - c2)) \
            "$(awk '/Queries per second:/ {printf "%.0f", $4}' "$d/udp.txt")" $((c4 - c3)) \
            "$(go_ms "$warm")" "$hwm" "$mf" | tee -a "$OUT/rows.tsv"
    done
done
python3 "$ROOT/bench/medians.py" "$OUT/rows.tsv"
