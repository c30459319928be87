#!/usr/bin/env bash
# CPU per UDP answer at fixed offered rates: cns, NSD, Knot and BIND on the
# same data and queries, each asked at the same absolute rates, none of them
# saturated, so no quota, no load generator's window and no thread count can
# hold one back while another runs free.
#
# For each size N in SIZES, on the data bench/run.sh prepared in WORK
# (prep/N<N>/cns.db and serve.json.in, zones/N<N>/{forward,reverse}.zone
# and queries.txt):
#   1. unless RATES names every rate, each server is saturated once
#      (dnsperf unpaced, SATURATE s) and "90%" becomes 90 % of the slowest
#      server's answers per second at that size;
#   2. REPS repetitions, servers interleaved within each: BASELINE s of the
#      machine with nothing of this script running (the no-server
#      baseline), then the server is started on SERVER_CPU and, once it
#      answers (cns: once its tables are built), dnsperf on CLIENT_CPU
#      offers each rate for DURATION s (dnsperf -Q). The server and dnsperf
#      each run in a cgroup v1 cpuacct group, whose usage is exact.
#   3. one more run per server and rate, not timed, under `perf stat`:
#      system calls (and which) and context switches per answer.
# The figure, per answer:
#   cost = (machine busy - baseline busy) - dnsperf's own CPU
# machine busy is /proc/stat's user+nice+system+irq+softirq over both CPUs
# during the run; the baseline is that of the idle spell scaled to the
# run's length. What is left is the server's threads and the kernel's work
# for its packets wherever it ran (softirq, ksoftirqd). On loopback each
# side's send carries the delivery into the other's socket, so the
# server's threads pay for delivering answers to dnsperf and dnsperf for
# delivering queries to the server; the two are the same kind of work.
# That figure needs idle CPU to measure: on a machine that other work
# keeps busy, the server's CPU displaces theirs and the difference means
# nothing. So a second figure counts the tasks alone, whatever else runs:
#   tasks = the server's cpuacct group + ksoftirqd's time beyond the
#           baseline's rate
# The kernel here has no IRQ time accounting (CONFIG_IRQ_TIME_ACCOUNTING
# unset), so a softirq run on a task's way out of a system call (a
# loopback send's delivery) is the task's: the group holds its own
# packets' softirq work, and ksoftirqd what was deferred. What neither
# holds is the interrupt that wakes an idle CPU for a server's thread.
# bench/ratios.py --fixed-rate prints the medians, spreads and ratios.
#
# usage: WORK=/tmp/cns-bench bench/cpu-per-answer.sh
# Knobs (environment):
#   WORK (${TMPDIR:-/tmp}/cns-bench)  OUT ($WORK/cpu-per-answer)
#   SIZES ("10000 100000 1000000": those prepared in WORK)
#   SERVERS ("cns nsd knot bind")  BIND_SIZES ("100000": BIND only there)
#   RATES ("20000 50000 90%": qps, or a percentage of the slowest
#     server's saturated rate at that size)
#   REPS (5)  DURATION (10 s per rate)  BASELINE (5 s)  SATURATE (5 s)
#   COUNT (1: the perf stat run per server and rate; 0: skip)
#   CNS (a go build of this tree)  SERVER_CPU (0)  CLIENT_CPU (1)
#   PORT (5320)  LOAD_TIMEOUT (1200 s: NSD and BIND parse 1M VMs for
#     minutes)  CGROUP (cpa: the groups are cpuacct/$CGROUP/{server,client}
#     and cpu/$CGROUP/{server,client}, the latter with the largest
#     cpu.shares so that other work on the machine waits)
#   CLIENTS (8)  OUTSTANDING (500)
#   RMEM_DEFAULT (8388608): net.core.rmem_default for the run, put back at
#     the end (0: left alone). Knot asks for no receive buffer; with the
#     208 KiB default it dropped ~300 of dnsperf's first 500 queries.
# Needs root (cgroups), Debian's nsd knot bind9 dnsperf bind9-dnsutils and
# linux-perf (COUNT=1), Go.
# Output: $OUT/results.tsv (one row per run), $OUT/table.md (ratios.py),
#   $OUT/logs/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-${TMPDIR:-/tmp}/cns-bench}
OUT=${OUT:-$WORK/cpu-per-answer}
SIZES=${SIZES:-"10000 100000 1000000"}
SERVERS=${SERVERS:-"cns nsd knot bind"}
BIND_SIZES=${BIND_SIZES:-"100000"}
RATES=${RATES:-"20000 50000 90%"}
REPS=${REPS:-5}
DURATION=${DURATION:-10}
BASELINE=${BASELINE:-5}
SATURATE=${SATURATE:-5}
COUNT=${COUNT:-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${PORT:-5320}
LOAD_TIMEOUT=${LOAD_TIMEOUT:-1200}
CGROUP=${CGROUP:-cpa}
CLIENTS=${CLIENTS:-8}
OUTSTANDING=${OUTSTANDING:-500}
RMEM_DEFAULT=${RMEM_DEFAULT:-8388608}
FWD=dc.cns.example.
REV=10.in-addr.arpa.
READY_LINE='"msg":"stored VMs read"'

HZ=$(getconf CLK_TCK)
log() { printf '[cpu-per-answer %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'cpu-per-answer: %s\n' "$*" >&2; exit 1; }

for t in dnsperf dig taskset python3; do command -v "$t" >/dev/null || die "missing $t (apt-get install dnsperf bind9-dnsutils util-linux python3)"; done
[ "$COUNT" = 0 ] || command -v perf >/dev/null || die "COUNT=1 needs perf (apt-get install linux-perf), or COUNT=0"
for s in $SERVERS; do
    case $s in
    cns) ;;
    *=*) [ -x "${s#*=}" ] || die "SERVERS: ${s#*=} is not an executable cns" ;;
    nsd) [ -x /usr/sbin/nsd ] || die "missing nsd (apt-get install nsd)" ;;
    knot) [ -x /usr/sbin/knotd ] || die "missing knot (apt-get install knot)" ;;
    bind) [ -x /usr/sbin/named ] || die "missing bind9 (apt-get install bind9)" ;;
    *) die "SERVERS: unknown server '$s' (cns nsd knot bind)" ;;
    esac
done
ACCT=/sys/fs/cgroup/cpuacct/$CGROUP
SCHED=/sys/fs/cgroup/cpu/$CGROUP
[ -w "$(dirname "$ACCT")/cgroup.procs" ] && [ -w "$(dirname "$SCHED")/cgroup.procs" ] ||
    die "needs writable cgroup v1 cpu and cpuacct controllers under /sys/fs/cgroup (root; mount | grep cgroup)"
for n in $SIZES; do
    for f in "$WORK/prep/N$n/cns.db" "$WORK/prep/N$n/serve.json.in" "$WORK/zones/N$n/queries.txt" \
        "$WORK/zones/N$n/forward.zone" "$WORK/zones/N$n/reverse.zone"; do
        [ -f "$f" ] || die "no $f: prepare the data first (WORK=$WORK SIZES=\"$SIZES\" PREP_ONLY=1 bench/run.sh)"
    done
done
if ss -Hlnu "sport = :$PORT" | grep -q .; then die "port $PORT is in use (PORT)"; fi

mkdir -p "$OUT/logs" "$OUT/run"
OUT=$(cd "$OUT" && pwd)
if [ -z "${CNS:-}" ]; then
    CNS=$OUT/cns
    (cd "$ROOT" && go build -o "$CNS" .) || die "go build failed"
fi
for g in server client; do
    mkdir -p "$ACCT/$g" "$SCHED/$g"
    echo 262144 > "$SCHED/$g/cpu.shares"
done
echo 262144 > "$SCHED/cpu.shares"

SPID=""
stop_server() {
    [ -n "$SPID" ] || return 0
    local p
    # every process in the group: NSD forks its server and xfrd
    for p in $(cat "$ACCT/server/cgroup.procs"); do kill -TERM "$p" 2>/dev/null || true; done
    for _ in $(seq 1 300); do
        [ -z "$(cat "$ACCT/server/cgroup.procs")" ] && break
        sleep 0.1
    done
    for p in $(cat "$ACCT/server/cgroup.procs"); do kill -KILL "$p" 2>/dev/null || true; done
    wait "$SPID" 2>/dev/null || true
    SPID=""
}
RMEM_WAS=""
cleanup() {
    stop_server
    [ -z "$RMEM_WAS" ] || sysctl -qw net.core.rmem_default="$RMEM_WAS"
    local g
    for g in server client; do rmdir "$ACCT/$g" "$SCHED/$g" 2>/dev/null || true; done
    rmdir "$ACCT" "$SCHED" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$RMEM_DEFAULT" -gt 0 ]; then
    RMEM_WAS=$(sysctl -n net.core.rmem_default)
    sysctl -qw net.core.rmem_default="$RMEM_DEFAULT" || die "cannot set net.core.rmem_default (RMEM_DEFAULT=0 leaves it)"
fi

# in_group GROUP CPU CMD...: CMD in the cgroups named GROUP, pinned to CPU
in_group() {
    local g=$1 cpu=$2
    shift 2
    (echo "$BASHPID" > "$ACCT/$g/cgroup.procs" && echo "$BASHPID" > "$SCHED/$g/cgroup.procs" && exec taskset -c "$cpu" "$@")
}

write_config() { # server dir N
    local s=$1 d=$2 z=$WORK/zones/N$3
    case $s in
    cns)
        cp "$WORK/prep/N$3/cns.db" "$d/cns.db"
        sed "s/@LISTEN@/127.0.0.1:$PORT/" "$WORK/prep/N$3/serve.json.in" > "$d/cns.json" ;;
    nsd) cat > "$d/nsd.conf" <<EOF
server:
    ip-address: 127.0.0.1@$PORT
    do-ip4: yes
    do-ip6: no
    server-count: 1
    username: ""
    chroot: ""
    database: ""
    zonesdir: "$d"
    zonelistfile: "$d/zone.list"
    xfrdfile: "$d/xfrd.state"
    xfrdir: "$d"
    pidfile: "$d/nsd.pid"
    logfile: "$d/nsd.log"
    verbosity: 1
    # Debian's NSD answers at most 200 qps per /24 by default (RRL)
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: "$FWD"
    zonefile: "$z/forward.zone"
zone:
    name: "$REV"
    zonefile: "$z/reverse.zone"
EOF
    ;;
    knot) cat > "$d/knot.conf" <<EOF
server:
    rundir: "$d"
    listen: 127.0.0.1@$PORT
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: info
database:
    storage: "$d"
template:
  - id: default
    storage: "$d"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: $FWD
    file: "$z/forward.zone"
  - domain: $REV
    file: "$z/reverse.zone"
EOF
    ;;
    bind) cat > "$d/named.conf" <<EOF
options {
    directory "$d";
    pid-file "$d/named.pid";
    session-keyfile "$d/session.key";
    managed-keys-directory "$d";
    listen-on port $PORT { 127.0.0.1; };
    listen-on-v6 { none; };
    recursion no;
    dnssec-validation no;
    notify no;
};
controls { };
zone "$FWD" { type primary; file "$z/forward.zone"; };
zone "$REV" { type primary; file "$z/reverse.zone"; };
EOF
    ;;
    esac
}

soa_answers() { # zone
    dig @127.0.0.1 -p "$PORT" +time=1 +tries=1 +short SOA "$1" 2>/dev/null | grep -q hostmaster
}

# start_server SERVER N: on SERVER_CPU in the server groups, serving both
# zones, warm (cns: its tables built); sets SPID. SERVER is a name from
# SERVERS: NAME=BINARY is a cns build of its own.
start_server() {
    local s=${1%%=*} n=$2 d=$OUT/run/${1%%=*} bin=$CNS
    [[ $1 == *=* ]] && bin=${1#*=} s=cns
    rm -rf "$d"; mkdir -p "$d"
    write_config "$s" "$d" "$n"
    case $s in
    cns) (cd "$d" && in_group server "$SERVER_CPU" "$bin" serve -c "$d/cns.json") > "$d/log" 2>&1 & ;;
    nsd) in_group server "$SERVER_CPU" /usr/sbin/nsd -d -c "$d/nsd.conf" > "$d/log" 2>&1 & ;;
    knot) in_group server "$SERVER_CPU" /usr/sbin/knotd -c "$d/knot.conf" > "$d/log" 2>&1 & ;;
    bind) in_group server "$SERVER_CPU" /usr/sbin/named -g -4 -n 1 -c "$d/named.conf" > "$d/log" 2>&1 & ;;
    esac
    SPID=$!
    local deadline=$(( $(date +%s) + LOAD_TIMEOUT ))
    if [ "$s" = cns ]; then
        until grep -qF "$READY_LINE" "$d/log"; do
            kill -0 "$SPID" 2>/dev/null || die "cns exited (log: $d/log)"
            [ "$(date +%s)" -lt "$deadline" ] || die "cns: tables not built after $LOAD_TIMEOUT s (log: $d/log)"
            sleep 0.1
        done
    fi
    local z
    for z in "$FWD" "$REV"; do
        until soa_answers "$z"; do
            kill -0 "$SPID" 2>/dev/null || die "$s exited (log: $d/log)"
            [ "$(date +%s)" -lt "$deadline" ] || die "$s: $z not served after $LOAD_TIMEOUT s (log: $d/log)"
            sleep 0.2
        done
    done
}

# machine busy, USER_HZ ticks: all but idle, iowait and steal. The idle
# times are exact (the kernel's nohz accounting), so the work interrupts
# do on an idle CPU (a wake-up's IPI, a packet's softirq) counts as busy;
# the tick-sampled user/system columns would miss most of it.
busy() { awk -v n="$(nproc --all)" -v t="$(cut -d' ' -f1 /proc/uptime)" -v hz="$HZ" '$1 == "cpu" { printf "%.0f\n", t * hz * n - $5 - $6 - $9; exit }' /proc/stat; }
softirq() { awk '$1 == "cpu" { print $8; exit }' /proc/stat; }
# local timer, rescheduling and function call interrupts, every CPU's:
# the wake-ups neither figure's tasks are charged for
irqs() { awk '$1 ~ /^(LOC|RES|CAL):$/ { for (i = 2; i < NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s + 0 }' /proc/interrupts; }
# ksoftirqd's time on CPU, ns, every CPU's (exact: schedstat)
ksoftirqd() { local p sum=0; for p in $(pgrep '^ksoftirqd/'); do sum=$(( sum + $(cut -d' ' -f1 "/proc/$p/schedstat") )); done; echo "$sum"; }
usage() { cat "$ACCT/$1/cpuacct.usage"; } # ns
now_ns() { date +%s%N; }
ctxsw() { # voluntary + involuntary switches of every thread in the server group
    local p t sum=0
    for p in $(cat "$ACCT/server/cgroup.procs"); do
        for t in /proc/"$p"/task/*/status; do
            sum=$(( sum + $(awk '/ctxt_switches/ { s += $2 } END { print s + 0 }' "$t" 2>/dev/null || echo 0) ))
        done
    done
    echo "$sum"
}
BASE_PER_S=0 # machine busy per second in the last baseline, in USER_HZ ticks
BASE_KSOFT_PER_S=0 # ksoftirqd's ns per second in it
BASE_IRQS_PER_S=0 # interrupts (irqs) per second in it

baseline() {
    local b0 k0 i0 t0 b1 k1 i1 t1
    b0=$(busy); k0=$(ksoftirqd); i0=$(irqs); t0=$(now_ns)
    sleep "$BASELINE"
    b1=$(busy); k1=$(ksoftirqd); i1=$(irqs); t1=$(now_ns)
    BASE_IRQS_PER_S=$(awk -v i=$((i1 - i0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.1f", i / (t / 1e9) }')
    BASE_PER_S=$(awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.4f", b / (t / 1e9) }')
    BASE_KSOFT_PER_S=$(awk -v k=$((k1 - k0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.1f", k / (t / 1e9) }')
}

# dnsperf_run FILE RATE SECONDS [perf-stat-output]: dnsperf in the client group
dnsperf_run() {
    local f=$1 rate=$2 secs=$3 q=(-c "$CLIENTS" -q "$OUTSTANDING")
    [ "$rate" = 0 ] || q+=(-Q "$rate")
    local cmd=(dnsperf -e -s 127.0.0.1 -p "$PORT" -d "$QUERIES" "${q[@]}" -l "$secs")
    if [ -n "${4:-}" ]; then
        local pids
        pids=$(paste -sd, "$ACCT/server/cgroup.procs")
        in_group client "$CLIENT_CPU" perf stat -x, -o "$4" -p "$pids" \
            -e raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_recvmsg,syscalls:sys_enter_sendmmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_sendmsg,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,syscalls:sys_enter_poll,syscalls:sys_enter_ppoll \
            -- "${cmd[@]}" > "$f" 2>&1 || true
    else
        in_group client "$CLIENT_CPU" "${cmd[@]}" > "$f" 2>&1 || true
    fi
}
field() { awk -v k="$2" 'index($0, k) { sub(/.*: */, ""); split($0, a, " "); print a[1]; exit }' "$1"; }

RESULTS=$OUT/results.tsv
[ -f "$RESULTS" ] || printf 'N\tserver\trep\tkind\trate\tqps\tanswered\tlost\tsecs\tmachine_cpu_s\tbaseline_cpu_s\tclient_cpu_s\tserver_cpu_s\tsoftirq_s\tserver_ctxsw\tavg_latency_ms\tmax_latency_ms\tloadavg\tsyscalls\tcounts\tksoftirqd_s\tbaseline_ksoftirqd_s\tirqs\tbaseline_irqs\n' > "$RESULTS"

# measure N SERVER REP KIND RATE: one dnsperf run against the running server
measure() {
    local n=$1 s=${2%%=*} rep=$3 kind=$4 rate=$5 secs=$DURATION
    local f=$OUT/logs/N$n-$s-r$rep-$kind-$rate.txt perfout=""
    [ "$kind" = saturate ] && secs=$SATURATE
    [ "$kind" = count ] && perfout=$OUT/logs/N$n-$s-$rate.perf
    local b0 s0 c0 x0 w0 k0 i0 t0 b1 s1 c1 x1 w1 k1 i1 t1 la
    la=$(cut -d' ' -f1 /proc/loadavg)
    b0=$(busy); w0=$(softirq); k0=$(ksoftirqd); i0=$(irqs); s0=$(usage server); c0=$(usage client); x0=$(ctxsw); t0=$(now_ns)
    dnsperf_run "$f" "$rate" "$secs" ${perfout:+"$perfout"}
    b1=$(busy); w1=$(softirq); k1=$(ksoftirqd); i1=$(irqs); s1=$(usage server); c1=$(usage client); x1=$(ctxsw); t1=$(now_ns)
    local qps answered lost avg maxl
    qps=$(field "$f" "Queries per second:")
    answered=$(field "$f" "Queries completed:")
    lost=$(field "$f" "Queries lost:")
    avg=$(awk '/Average Latency/ { printf "%.3f", $4 * 1000 }' "$f")
    maxl=$(awk '/Average Latency/ { gsub(/[(),]/, ""); printf "%.3f", $8 * 1000 }' "$f")
    [ -n "$answered" ] || { log "N=$n $s $kind $rate: dnsperf failed (log: $f)"; return 0; }
    local sc=- counts=-
    if [ -n "$perfout" ]; then
        sc=$(awk -F, '$3 == "raw_syscalls:sys_enter" { print $1 }' "$perfout")
        counts=$(awk -F, '$1 ~ /^[0-9]+$/ && $1 > 0 && $3 != "raw_syscalls:sys_enter" { sub(/^syscalls:sys_enter_/, "", $3); printf "%s%s=%s", sep, $3, $1; sep = " " }' "$perfout")
    fi
    awk -v OFS='\t' -v n="$n" -v s="$s" -v rep="$rep" -v kind="$kind" -v rate="$rate" -v qps="$qps" -v a="$answered" \
        -v lost="$lost" -v secs="$(( (t1 - t0) / 1000000 ))" -v b=$((b1 - b0)) -v base="$BASE_PER_S" -v hz="$HZ" \
        -v cl=$((c1 - c0)) -v sv=$((s1 - s0)) -v w=$((w1 - w0)) -v x=$((x1 - x0)) -v avg="$avg" -v maxl="$maxl" \
        -v la="$la" -v sc="$sc" -v counts="$counts" -v k=$((k1 - k0)) -v bk="$BASE_KSOFT_PER_S" -v irq=$((i1 - i0)) -v bi="$BASE_IRQS_PER_S" \
        'BEGIN { t = secs / 1000; printf "%s\t%s\t%s\t%s\t%s\t%.0f\t%d\t%d\t%.3f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%d\t%s\t%s\t%s\t%s\t%s\t%.4f\t%.4f\t%d\t%.0f\n",
                 n, s, rep, kind, rate, qps, a, lost, t, b / hz, base * t / hz, cl / 1e9, sv / 1e9, w / hz, x, avg, maxl, la, sc, counts, k / 1e9, bk * t / 1e9, irq, bi * t }' >> "$RESULTS"
    log "N=$n $s rep $rep $kind ${rate}: $(tail -1 "$RESULTS" | awk -F'\t' '{ a = ($7 > 0 ? $7 : 1); k = $21 - $22; if (k < 0) k = 0; printf "%s qps, lost %s, us per answer: tasks %.2f, machine %.2f, dnsperf %.2f; %.2f ctx switches and %.2f interrupts per answer, load %s", $6, $8, ($13 + k) * 1e6 / a, ($10 - $11 - $12) * 1e6 / a, $12 * 1e6 / a, $15 / a, ($23 - $24) / a, $18 }')"
}

for n in $SIZES; do
    QUERIES=$WORK/zones/N$n/queries.txt
    servers=""
    for s in $SERVERS; do
        [ "$s" = bind ] && [[ " $BIND_SIZES " != *" $n "* ]] && continue
        servers="$servers $s"
    done
    # the rates at this size: a percentage is of the slowest server's
    # saturated rate, measured first
    rates=""
    if [[ $RATES == *%* ]]; then
        slowest=""
        for s in $servers; do
            log "N=$n: $s saturated for $SATURATE s"
            start_server "$s" "$n"
            measure "$n" "$s" 0 saturate 0
            stop_server
            sat=$(tail -1 "$RESULTS" | cut -f6)
            if [ -z "$slowest" ] || [ "$sat" -lt "$slowest" ]; then slowest=$sat; fi
        done
        [ -n "$slowest" ] || die "N=$n: no saturated rate"
    fi
    for r in $RATES; do
        if [[ $r == *% ]]; then rates="$rates $(( slowest * ${r%\%} / 100 ))"; else rates="$rates $r"; fi
    done
    log "N=$n: rates$rates qps; servers$servers"
    for rep in $(seq 1 "$REPS"); do
        for s in $servers; do
            baseline
            start_server "$s" "$n"
            for r in $rates; do measure "$n" "$s" "$rep" fixed "$r"; done
            if [ "$COUNT" != 0 ] && [ "$rep" = 1 ]; then
                for r in $rates; do measure "$n" "$s" "$rep" count "$r"; done
            fi
            stop_server
        done
    done
done
python3 "$ROOT/bench/ratios.py" --fixed-rate "$RESULTS" | tee "$OUT/table.md"
