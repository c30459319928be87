#!/usr/bin/env bash
# A busy data center: cns answers at half of its capped
# capacity while the SDC simulator publishes 1,000 VM changes a second on
# its changefeed, with real secondaries (Knot and NSD) following.
#
# Run (from anywhere, as root for the CPU quota):  bench/busydc.sh
#   quick look:  VMS=2000 DURATION=5 CHURN=200 PROBE_SECONDS=2 SAVE=0 bench/busydc.sh
#   a bigger DC: VMS=100000 bench/busydc.sh
#
# What runs (everything on 127.0.0.1):
#   - cns (`go build` of this tree) as `cns serve` against the simulator
#     (feeds/sdc/sdcsim, in the driver's process: VMAPI with resourceObject
#     and its changefeed delivering at once, CNAPI, NAPI, UFDS) of a
#     generated data center of VMS VMs (sdcsim.Generate), on SERVER_CPU,
#     inside a cgroup v1 cpu quota of CPU_QUOTA % (bench/capped/taskset;
#     needs root and /sys/fs/cgroup/cpu, otherwise uncapped);
#   - the driver (bench/busydc, BenchmarkBusyDC) on CLIENT_CPU, in the
#     quota's sibling "client" group (the larger cpu.shares): its load
#     generator sends UDP queries at a fixed rate from OS threads of its
#     own (nanosleep schedule, per-query timestamps, answers timed by the
#     kernel's arrival stamp (SO_TIMESTAMPNS), a histogram, queries
#     unanswered after the run or when their id comes round again count as
#     lost); mix: services 50 %, instances by alias or uuid 40 %, NXDOMAIN
#     10 %;
#   - beside the generator, the RT probe (bench/busydc/rtprobe_test.go):
#     one query every 5 ms from a real-time (SCHED_FIFO) thread of the
#     driver, each after the last was answered, so that the driver's own
#     stalls cannot delay it: its latencies bound cns's from below, the
#     generator's (open loop, bursts after a driver stall) from above;
#   - the secondaries (serve/secondarytest, NOTIFY via also_notify, IXFR)
#     pinned to SECONDARY_CPU, outside the quota.
# Steps: wait for the data center to be listed and committed and the
#   secondaries to hold its serial; saturate cns for PROBE_SECONDS at
#   PROBE_RATE offered qps: its answered qps is the capped capacity, and
#   the load rate is half of it (RATE overrides); then two phases of
#   DURATION s at that rate: quiet, then with CHURN changes a second
#   (create 15 %, destroy 10 %, IP change 20 %, stop 15 %, start 15 %,
#   alias 15 %, service tag 10 %). Every SAMPLE-th change with a visible
#   effect is probed: its name is asked of cns every 2 ms and of each
#   secondary every 10 ms, from the moment the change was handed to the
#   simulator, until the answer shows it. cns's /metrics (cns_pending_vms,
#   cns_commit_duration_seconds) and CPU time are read every 100 ms.
# Targets (the benchmark fails, and says which, when one is missed): no
#   lost queries, answer p99 <= 1 ms, change -> answer p99 <= 100 ms on cns
#   and <= 1 s on each secondary, a backlog that does not grow.
#
# Knobs (environment):
#   VMS (20000)  DURATION (60 s per phase)  CHURN (1000 changes/s)
#   SAMPLE (20)  RATE (0: half the probed capacity)  PROBE_SECONDS (4)
#   PROBE_RATE (150000 offered qps while probing)  SECONDARIES ("knot nsd")
#   CPU_QUOTA (40; 0: no cap)  CPU_PERIOD_US (5000)  SERVER_CPU (0)
#   CLIENT_CPU (1)  SECONDARY_CPU (0)  CPU_CGROUP (/sys/fs/cgroup/cpu/cns-busydc)
#   BATCH_WINDOW_MS, MIN_NOTIFY_MS, REVERSE_V4_PREFIX (cns's batch_window_ms,
#     min_notify_interval and reverse_v4_prefix; unset: cns's defaults,
#     25, 500 and 24: a reverse zone per /24, so a commit touches many)
#   PROFILE (0): seconds of a CPU profile of cns taken a quarter into the
#     churn ($WORK/out/cns-churn.pprof; `go tool pprof -top $WORK/cns FILE`)
#   CNS: a cns binary to run instead of building this tree's (to compare
#     builds: run it once per binary with the same RATE)
#   SEED (20261124)  WORK (${TMPDIR:-/tmp}/cns-busydc)
#   SAVE (1): copy busydc.tsv, busydc.md and busydc.svg into bench/ (the
#     figures BENCHMARKS.md links; the probes, ~8k rows, stay in $OUT)
# Output in $WORK/out: busydc.tsv (a row a second: queries sent, answered,
#   lost, p50/p99/p999, backlog, commits, changes, cns CPU, change ->
#   answer per server), busydc-probes.tsv (every probe), busydc.md (the
#   summary and the targets), busydc.svg (bench/busydcplot.py), bench.log,
#   cns.log. Run time: about 2 x DURATION + the initial load + 1 min.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-${TMPDIR:-/tmp}/cns-busydc}
OUT=$WORK/out
SAVE=${SAVE:-1}
CPU_QUOTA=${CPU_QUOTA:-40}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
SECONDARY_CPU=${SECONDARY_CPU:-0}
CPU_CGROUP=${CPU_CGROUP:-/sys/fs/cgroup/cpu/cns-busydc}
export CPU_QUOTA SERVER_CPU CLIENT_CPU SECONDARY_CPU CPU_CGROUP

rm -rf "$OUT"
mkdir -p "$OUT"
if [ -n "${CNS:-}" ]; then
    cp "$CNS" "$WORK/cns"
    (cd "$ROOT" && go test -c -o "$WORK/busydc.test" ./bench/busydc)
else
    (cd "$ROOT" && go build -o "$WORK/cns" . && go test -c -o "$WORK/busydc.test" ./bench/busydc)
fi

launcher=$ROOT/bench/capped/taskset
if [ "$CPU_QUOTA" != 0 ] && { [ "$(id -u)" != 0 ] || [ ! -d /sys/fs/cgroup/cpu ]; }; then
    echo "busydc: no cgroup v1 cpu controller or not root: cns runs uncapped" >&2
    CPU_QUOTA=0
fi
CNS_CGROUP=""
[ "$CPU_QUOTA" != 0 ] && CNS_CGROUP=$CPU_CGROUP/cns # bench/capped/taskset names it after the binary
export CNS_CGROUP
echo "busydc: $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg), CPU_QUOTA=$CPU_QUOTA, $(cd "$ROOT" && git rev-parse --short HEAD)" | tee "$OUT/bench.log"

# The secondaries' logs, printed when a target is missed, stay in
# $OUT/secondaries rather than in bench.log.
set +e
CNS_BIN=$WORK/cns CNS_LAUNCHER=$launcher OUT=$OUT \
    "$launcher" -c "$CLIENT_CPU" "$WORK/busydc.test" -test.run '^$' -test.bench BusyDC -test.benchtime 1x -test.v \
    2>&1 | grep -v '^        20[0-9][0-9]-\|^        \[20' | tee -a "$OUT/bench.log"
status=${PIPESTATUS[0]}
set -e

if [ -s "$OUT/busydc.tsv" ]; then
    python3 "$ROOT/bench/busydcplot.py" "$OUT/busydc.tsv" "$OUT/busydc-probes.tsv" "$OUT/busydc.svg"
    if [ "$SAVE" = 1 ]; then
        cp "$OUT/busydc.tsv" "$OUT/busydc.md" "$OUT/busydc.svg" "$ROOT/bench/"
    fi
    echo "busydc: $OUT/busydc.md, $OUT/busydc.svg"
fi
exit "$status"
