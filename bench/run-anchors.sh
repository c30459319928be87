#!/usr/bin/env bash
# Performance anchors for the CNS authoritative DNS server.
#
# Serves the synthetic CNS-like zone from bench/gen-zone.py with existing
# authoritative servers (NSD, Knot, BIND from Debian; CoreDNS when COREDNS_BIN
# points at a binary) and measures, per server, zone size and repetition:
#   - load time: from exec until the SOA of both zones answers
#   - correctness: a few names ($OUT/zones/N*/checks.txt) via dig, and how
#     the server sizes UDP answers (bench/tc-probe.py: TC rate, answer sizes)
#   - AXFR time of the forward zone: a counting client (bench/axfr-count.c) and
#     plain `dig axfr`, both pinned to the client CPU
#   - UDP qps with dnsperf (-c 8 -q 200, DURATION s), lost queries, avg latency
#   - latency percentiles at a fixed moderate rate (dnsperf -Q PROBE_QPS -v)
#   - TCP qps with dnsperf -m tcp (TCP_DURATION s)
#   - memory after load: VmRSS / VmHWM / Pss summed over the server's processes
# plus the load generator's own ceiling against a trivial C responder.
#
# The server runs on CPU $SERVER_CPU (taskset), every client on CPU $CLIENT_CPU.
# Everything listens on 127.0.0.1 high ports only and is stopped by PID.
#
# Run:   OUT=/tmp/anchors bash bench/run-anchors.sh   (from the project root)
# Needs (Debian): nsd knot bind9 dnsperf bind9-dnsutils knot-dnsutils, python3, cc.
# Knobs (environment): SIZES REPS DURATION TCP_DURATION PROBE_QPS PROBE_DURATION
#   CLIENTS OUTSTANDING SERVERS SEED OUT COREDNS_BIN SERVER_CPU CLIENT_CPU
#   FWD REV (zone names, with the final dot)
#   ZONES_DIR: serve your own data instead of generating it: for each N in SIZES,
#     $ZONES_DIR/N<N>/ holds forward.zone (zone $FWD), reverse.zone (zone $REV),
#     queries.txt (dnsperf format) and optionally checks.txt
#     ("name TYPE RCODE sorted|joined|short-answers" per line).
#   CUSTOM_CMD: measure any other server (e.g. the new one) the same way. It is a
#     command template that must stay in the foreground and serve both zones;
#     {addr} {port} {fwd} {rev} {dir} are replaced by 127.0.0.1, 5306, the forward
#     and reverse zone files, and a scratch directory. Example:
#     CUSTOM_CMD='./cns-server -listen {addr}:{port} -zone {fwd} -zone {rev}' bash bench/run-anchors.sh
# Output: $OUT/results.tsv (one row per run), $OUT/summary.md (medians),
#   $OUT/versions.txt, $OUT/logs/ (raw dnsperf output, server logs).

set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
[ -f bench/gen-zone.py ] || { echo "bench/gen-zone.py not found" >&2; exit 1; }

SIZES=${SIZES:-"10000 100000"}
REPS=${REPS:-3}
DURATION=${DURATION:-15}
TCP_DURATION=${TCP_DURATION:-5}
PROBE_QPS=${PROBE_QPS:-5000}
PROBE_DURATION=${PROBE_DURATION:-4}
CLIENTS=${CLIENTS:-8}
OUTSTANDING=${OUTSTANDING:-200}
SERVERS=${SERVERS:-"ceiling nsd knot bind coredns custom"}
SEED=${SEED:-20240611}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
OUT=${OUT:-${TMPDIR:-/tmp}/cns-anchors}
COREDNS_BIN=${COREDNS_BIN:-}
CUSTOM_CMD=${CUSTOM_CMD:-}
LOAD_TIMEOUT=${LOAD_TIMEOUT:-180}
# -e: queries carry EDNS0 (dnsperf advertises 4096 bytes). Without it the larger
# service answers (up to 30 A/TXT/SRV records) do not fit in 512 bytes and come
# back truncated, which is not what real resolvers see. Set to "" to disable.
DNSPERF_EDNS=${DNSPERF_EDNS--e}
ADDR=127.0.0.1
FWD=${FWD:-dc.cns.example.}
REV=${REV:-10.in-addr.arpa.}
ZONES_DIR=${ZONES_DIR:-}

declare -A PORT=([nsd]=5301 [knot]=5302 [bind]=5303 [coredns]=5304 [ceiling]=5305 [custom]=5306)

NSD=/usr/sbin/nsd
KNOTD=/usr/sbin/knotd
NAMED=/usr/sbin/named

mkdir -p "$OUT/logs" "$OUT/run" "$OUT/tmp"
ABS_OUT=$(cd "$OUT" && pwd)
RESULTS=$OUT/results.tsv
START_TS=$(date +%s)

log() { printf '[%s +%4ds] %s\n' "$(date +%H:%M:%S)" $(( $(date +%s) - START_TS )) "$*"; }
onclient() { taskset -c "$CLIENT_CPU" "$@"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

for tool in dnsperf dig kdig taskset python3 cc ss; do
    command -v "$tool" >/dev/null || { echo "missing tool: $tool" >&2; exit 1; }
done
if [ "$(nproc --all)" -lt 2 ]; then echo "need at least 2 CPUs" >&2; exit 1; fi

# ---------------------------------------------------------------- server control
SPID=""
CHILDREN=""

descendants() { # pid -> all descendant pids (one level at a time)
    local todo="$1" p kids all=""
    while [ -n "$todo" ]; do
        local next=""
        for p in $todo; do
            kids=$(ps -o pid= --ppid "$p" 2>/dev/null | tr -s ' \n' ' ')
            all="$all $kids"; next="$next $kids"
        done
        todo=$(echo $next)
    done
    echo $all
}

mem_of_tree() { # pid -> "rss_kib pss_kib hwm_kib nprocs"
    local rss=0 pss=0 hwm=0 n=0 p v
    for p in "$1" $(descendants "$1"); do
        [ -r "/proc/$p/status" ] || continue
        n=$((n + 1))
        v=$(awk '/^VmRSS:/{print $2}' "/proc/$p/status"); rss=$((rss + ${v:-0}))
        v=$(awk '/^VmHWM:/{print $2}' "/proc/$p/status"); [ "${v:-0}" -gt "$hwm" ] && hwm=$v
        v=$(awk '/^Pss:/{print $2}' "/proc/$p/smaps_rollup" 2>/dev/null); pss=$((pss + ${v:-0}))
    done
    echo "$rss $pss $hwm $n"
}

CLK_TCK=$(getconf CLK_TCK)

cpu_ticks_tree() { # pid -> utime+stime ticks summed over the process and its descendants
    local t=0 p v
    for p in "$1" $(descendants "$1"); do
        # strip "pid (comm) " first: comm may contain spaces ("nsd: server 1")
        v=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}'); t=$((t + ${v:-0}))
    done
    echo "$t"
}

cpu_busy_ticks() { # cpu index -> busy ticks (all but idle and iowait) from /proc/stat
    awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat
}

# run a client command, report "<server cpu %> <server-cpu busy %> <client-cpu busy %>"
# over its wall time; the command's output goes to the file given first
run_sampled() { # outfile cmd...
    local of=$1; shift
    local s0 a0 b0 t0 s1 a1 b1 t1 ms
    s0=$(cpu_ticks_tree "$SPID"); a0=$(cpu_busy_ticks "$SERVER_CPU"); b0=$(cpu_busy_ticks "$CLIENT_CPU"); t0=$(now_ms)
    "$@" > "$of" 2>&1
    s1=$(cpu_ticks_tree "$SPID"); a1=$(cpu_busy_ticks "$SERVER_CPU"); b1=$(cpu_busy_ticks "$CLIENT_CPU"); t1=$(now_ms)
    ms=$((t1 - t0)); [ "$ms" -gt 0 ] || ms=1
    awk -v s=$((s1 - s0)) -v a=$((a1 - a0)) -v b=$((b1 - b0)) -v ms="$ms" -v hz="$CLK_TCK" \
        'BEGIN { f = 100000 / (ms * hz); printf "%.0f %.0f %.0f\n", s * f, a * f, b * f }'
}

stop_server() {
    [ -n "$SPID" ] || return 0
    CHILDREN=$(descendants "$SPID")
    kill -TERM "$SPID" 2>/dev/null
    local i
    for i in $(seq 1 150); do
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$SPID" 2>/dev/null; then
        log "  $SPID did not stop on TERM, sending KILL"
        kill -KILL "$SPID" 2>/dev/null
    fi
    wait "$SPID" 2>/dev/null
    # forked servers (NSD) may leave children exiting a little later: give
    # them a moment, then stop them by PID too
    local c
    for c in $CHILDREN; do
        for i in $(seq 1 20); do kill -0 "$c" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$c" 2>/dev/null; then
            log "  stopping leftover child $c"
            kill -TERM "$c" 2>/dev/null
            for i in $(seq 1 50); do kill -0 "$c" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$c" 2>/dev/null && kill -KILL "$c" 2>/dev/null
        fi
    done
    SPID=""
}
trap 'stop_server; exit 130' INT TERM
trap 'stop_server' EXIT

soa_answers() { # port zone
    onclient dig @"$ADDR" -p "$1" +time=1 +tries=1 +short SOA "$2" 2>/dev/null | grep -q hostmaster
}

wait_loaded() { # port -> 0 ok, 1 timeout, 2 died
    local port=$1 deadline=$(( $(date +%s) + LOAD_TIMEOUT )) z
    for z in "$FWD" "$REV"; do
        until soa_answers "$port" "$z"; do
            kill -0 "$SPID" 2>/dev/null || return 2
            [ "$(date +%s)" -ge "$deadline" ] && return 1
            sleep 0.02
        done
    done
    return 0
}

# ---------------------------------------------------------------- configs
write_config() { # server dir zonedir port
    local srv=$1 dir=$2 zd=$3 port=$4
    case $srv in
    nsd) cat > "$dir/nsd.conf" <<EOF
server:
    ip-address: $ADDR@$port
    do-ip4: yes
    do-ip6: no
    server-count: 1
    username: ""
    chroot: ""
    database: ""
    zonesdir: "$dir"
    zonelistfile: "$dir/zone.list"
    xfrdfile: "$dir/xfrd.state"
    xfrdir: "$dir"
    pidfile: "$dir/nsd.pid"
    logfile: "$dir/nsd.log"
    verbosity: 1
    # Debian's NSD is built with RRL and enables it by default (200 qps per /24):
    # a benchmark from one source address must switch it off.
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: "$FWD"
    zonefile: "$zd/forward.zone"
    provide-xfr: $ADDR NOKEY
zone:
    name: "$REV"
    zonefile: "$zd/reverse.zone"
    provide-xfr: $ADDR NOKEY
EOF
    ;;
    knot) cat > "$dir/knot.conf" <<EOF
server:
    rundir: "$dir"
    listen: $ADDR@$port
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: info
database:
    storage: "$dir"
acl:
  - id: local_xfr
    address: $ADDR
    action: transfer
template:
  - id: default
    storage: "$dir"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    acl: local_xfr
zone:
  - domain: $FWD
    file: "$zd/forward.zone"
  - domain: $REV
    file: "$zd/reverse.zone"
EOF
    ;;
    bind) cat > "$dir/named.conf" <<EOF
options {
    directory "$dir";
    pid-file "$dir/named.pid";
    session-keyfile "$dir/session.key";
    managed-keys-directory "$dir";
    listen-on port $port { $ADDR; };
    listen-on-v6 { none; };
    recursion no;
    dnssec-validation no;
    notify no;
    allow-transfer { $ADDR; };
};
controls { };
zone "$FWD" { type primary; file "$zd/forward.zone"; };
zone "$REV" { type primary; file "$zd/reverse.zone"; };
EOF
    ;;
    coredns) cat > "$dir/Corefile" <<EOF
$FWD:$port {
    bind $ADDR
    # NSD, Knot and BIND cap UDP answers at 1232 bytes by default; CoreDNS would
    # honour the client's 4096. bufsize makes it answer the same way (TC=1 above 1232).
    bufsize 1232
    file $zd/forward.zone {
        reload 0
    }
    transfer {
        to *
    }
}
$REV:$port {
    bind $ADDR
    bufsize 1232
    file $zd/reverse.zone {
        reload 0
    }
}
EOF
    ;;
    esac
}

start_server() { # server dir zonedir -> sets SPID
    local srv=$1 dir=$2
    case $srv in
    nsd)     taskset -c "$SERVER_CPU" "$NSD" -d -c "$dir/nsd.conf" > "$dir/stdout.log" 2>&1 & ;;
    knot)    taskset -c "$SERVER_CPU" "$KNOTD" -c "$dir/knot.conf" > "$dir/stdout.log" 2>&1 & ;;
    bind)    taskset -c "$SERVER_CPU" "$NAMED" -g -4 -n 1 -c "$dir/named.conf" > "$dir/stdout.log" 2>&1 & ;;
    coredns) (cd "$dir" && exec taskset -c "$SERVER_CPU" "$COREDNS_BIN" -conf "$dir/Corefile") > "$dir/stdout.log" 2>&1 & ;;
    ceiling) taskset -c "$SERVER_CPU" "$ABS_OUT/tmp/trivial-responder" "$ADDR" "${PORT[ceiling]}" > "$dir/stdout.log" 2>&1 & ;;
    custom)
        local c=$CUSTOM_CMD zd=$3
        c=${c//\{addr\}/$ADDR}; c=${c//\{port\}/${PORT[custom]}}
        c=${c//\{fwd\}/$zd/forward.zone}; c=${c//\{rev\}/$zd/reverse.zone}; c=${c//\{dir\}/$dir}
        echo "$c" > "$dir/command.txt"
        taskset -c "$SERVER_CPU" bash -c "exec $c" > "$dir/stdout.log" 2>&1 & ;;
    esac
    SPID=$!
}

# ---------------------------------------------------------------- measurements
run_checks() { # port checksfile logfile -> prints "ok" or "FAIL(n/m)"
    local port=$1 file=$2 logf=$3 fails=0 total=0 q t rc exp got st
    : > "$logf"
    while read -r q t rc exp; do
        total=$((total + 1))
        got=$(onclient dig @"$ADDR" -p "$port" +time=2 +tries=1 +short "$q" "$t" | LC_ALL=C sort | paste -sd'|')
        [ -z "$got" ] && got=-
        st=$(onclient dig @"$ADDR" -p "$port" +time=2 +tries=1 +noall +comments "$q" "$t" \
             | sed -n 's/.*status: \([A-Z]*\),.*/\1/p')
        if [ "$got" = "$exp" ] && [ "$st" = "$rc" ]; then
            echo "ok   $q $t $rc" >> "$logf"
        else
            fails=$((fails + 1))
            printf 'FAIL %s %s\n  want %s %s\n  got  %s %s\n' "$q" "$t" "$rc" "$exp" "$st" "$got" >> "$logf"
        fi
    done < "$file"
    if [ "$fails" -eq 0 ]; then echo "ok($total)"; else echo "FAIL($fails/$total)"; fi
}

dnsperf_field() { # file -> "qps sent lost avg_ms resp_bytes"
    awk '
        /Queries sent:/      { sent = $3 }
        /Queries lost:/      { lost = $3 }
        /Queries per second:/ { qps = $4 }
        /Average Latency/    { avg = $4 * 1000 }
        /Average packet size:/ { resp = $7 }
        END { printf "%.0f %d %d %.3f %s\n", qps, sent, lost, avg, (resp == "" ? "-" : resp) }
    ' "$1"
}

percentiles() { # dnsperf -v output -> "p50_ms p99_ms p999_ms"
    awk '/^> / && $2 != "T" { print $NF * 1000 }' "$1" | LC_ALL=C sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "- - -"; exit }
            i50 = int(NR * 0.50); if (i50 < 1) i50 = 1
            i99 = int(NR * 0.99); if (i99 < 1) i99 = 1
            i999 = int(NR * 0.999); if (i999 < 1) i999 = 1
            printf "%.3f %.3f %.3f\n", v[i50], v[i99], v[i999]
        }'
}

measure() { # server N rep
    local srv=$1 n=$2 rep=$3 port=${PORT[$1]}
    local tag="$srv-N$n-r$rep"
    local dir="$ABS_OUT/run/$srv-N$n" zd="$ABS_OUT/zones/N$n"
    [ "$srv" = ceiling ] && { tag="$srv-r$rep"; dir="$ABS_OUT/run/ceiling"; zd="$ABS_OUT/zones/N${FIRST_SIZE}"; }
    rm -rf "$dir"; mkdir -p "$dir"
    write_config "$srv" "$dir" "$zd" "$port"

    local t0 t1 rc load_ms=- axfr_ms=- axfr_rrs=- axfr_bytes=- axfr_cpu_ms=- axfr_dig_ms=- axfr_dig_rrs=- check=-
    local tc_pct=- tc_avg=- tc_max=- tc_over=-
    t0=$(now_ms)
    start_server "$srv" "$dir" "$zd"
    if [ "$srv" = ceiling ]; then
        sleep 0.3; rc=0
    else
        wait_loaded "$port"; rc=$?
    fi
    t1=$(now_ms)
    if [ $rc -ne 0 ]; then
        log "  $tag: server did not come up (rc=$rc); see $OUT/logs/$tag-server.log"
        cp "$dir/stdout.log" "$OUT/logs/$tag-server.log" 2>/dev/null
        stop_server
        printf '%s\t%s\t%s\tstartfail\n' "$srv" "$n" "$rep" >> "$RESULTS"
        return
    fi
    [ "$srv" != ceiling ] && load_ms=$((t1 - t0))

    if [ "$srv" != ceiling ]; then
        if [ "$rep" = 1 ]; then
            check=$(run_checks "$port" "$zd/checks.txt" "$OUT/logs/$tag-checks.txt")
            # keep one full answer per query kind, to compare what each server puts in a response
            awk '$2 == "SRV" || ($2 == "A" && $1 ~ /\.svc\./) || $3 == "NXDOMAIN" { print $1, $2 }' "$zd/checks.txt" |
                while read -r q t; do
                    onclient dig @"$ADDR" -p "$port" +norec +edns=0 +bufsize=4096 +nocookie "$q" "$t"
                done > "$OUT/logs/$tag-sample-answers.txt" 2>&1
            # how the server sizes UDP answers (TC rate, sizes) on the first queries of the mix
            local tcl
            tcl=$(onclient python3 bench/tc-probe.py "$port" "$zd/queries.txt" 3000 "$ADDR" 2>&1)
            tc_pct=$(echo "$tcl" | sed -n 's/.*tc_pct=\([^ ]*\).*/\1/p'); tc_pct=${tc_pct:--}
            tc_avg=$(echo "$tcl" | sed -n 's/.*avg_bytes=\([^ ]*\).*/\1/p'); tc_avg=${tc_avg:--}
            tc_max=$(echo "$tcl" | sed -n 's/.*max_bytes=\([^ ]*\).*/\1/p'); tc_max=${tc_max:--}
            tc_over=$(echo "$tcl" | sed -n 's/.*over1232_pct=\([^ ]*\).*/\1/p'); tc_over=${tc_over:--}
        fi
        # AXFR of the forward zone (the SOA is counted twice).
        # 1) bench/axfr-count.c: counts records without formatting them, so the
        #    wall time is the server's; its CPU time for the transfer is sampled too
        local ax s0 s1
        s0=$(cpu_ticks_tree "$SPID")
        ax=$(onclient "$ABS_OUT/tmp/axfr-count" "$ADDR" "$port" "$FWD" 2>&1)
        s1=$(cpu_ticks_tree "$SPID")
        axfr_ms=$(echo "$ax" | sed -n 's/.* ms=\([0-9.]*\).*/\1/p'); axfr_ms=${axfr_ms:--}
        axfr_rrs=$(echo "$ax" | sed -n 's/^rrs=\([0-9]*\) .*/\1/p'); axfr_rrs=${axfr_rrs:--}
        axfr_bytes=$(echo "$ax" | sed -n 's/.* bytes=\([0-9]*\) .*/\1/p'); axfr_bytes=${axfr_bytes:--}
        axfr_cpu_ms=$(( (s1 - s0) * 1000 / CLK_TCK ))
        # 2) plain `dig axfr` as an operator would run it (client-bound: text formatting)
        t0=$(now_ms)
        onclient dig @"$ADDR" -p "$port" +noall +answer +time=60 AXFR "$FWD" > "$OUT/tmp/axfr.txt" 2>&1
        t1=$(now_ms)
        axfr_dig_ms=$((t1 - t0))
        axfr_dig_rrs=$(grep -vc '^;' "$OUT/tmp/axfr.txt")
        rm -f "$OUT/tmp/axfr.txt"
    fi

    # UDP throughput
    local u="$OUT/logs/$tag-udp.txt" ucpu
    ucpu=$(run_sampled "$u" onclient dnsperf $DNSPERF_EDNS -s "$ADDR" -p "$port" -d "$zd/queries.txt" \
        -c "$CLIENTS" -q "$OUTSTANDING" -l "$DURATION")
    local udp; udp=$(dnsperf_field "$u")

    # latency percentiles at a fixed, moderate rate
    local pf="$OUT/tmp/probe.txt" probe="- - -" probe_lost=-
    onclient dnsperf $DNSPERF_EDNS -s "$ADDR" -p "$port" -d "$zd/queries.txt" -c "$CLIENTS" -q "$OUTSTANDING" \
        -Q "$PROBE_QPS" -l "$PROBE_DURATION" -v > "$pf" 2>&1
    probe=$(percentiles "$pf")
    probe_lost=$(awk '/Queries lost:/ { print $3 }' "$pf")
    grep -v '^> ' "$pf" > "$OUT/logs/$tag-probe.txt"; rm -f "$pf"

    # TCP throughput
    local tcp="- - - - -" tcpu="- - -"
    if [ "$srv" != ceiling ] && [ "$TCP_DURATION" -gt 0 ]; then
        local tf="$OUT/logs/$tag-tcp.txt"
        tcpu=$(run_sampled "$tf" onclient dnsperf $DNSPERF_EDNS -m tcp -s "$ADDR" -p "$port" \
            -d "$zd/queries.txt" -c "$CLIENTS" -q "$OUTSTANDING" -l "$TCP_DURATION")
        tcp=$(dnsperf_field "$tf")
    fi

    local mem; mem=$(mem_of_tree "$SPID")
    stop_server
    cp "$dir/stdout.log" "$OUT/logs/$tag-server.log" 2>/dev/null
    [ -f "$dir/nsd.log" ] && cp "$dir/nsd.log" "$OUT/logs/$tag-nsd.log"

    # columns: see header below
    local udp_a=($udp) tcp_a=($tcp) pr=($probe) mem_a=($mem) uc=($ucpu) tc=($tcpu)
    printf '%s\t%s\t%s\tok\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "$srv" "$n" "$rep" "$load_ms" "$axfr_ms" "$axfr_rrs" "$axfr_bytes" "$axfr_cpu_ms" "$axfr_dig_ms" "$axfr_dig_rrs" \
        "${udp_a[0]}" "${udp_a[1]}" "${udp_a[2]}" "${udp_a[3]}" "${udp_a[4]}" \
        "${uc[0]}" "${uc[1]}" "${uc[2]}" \
        "${tcp_a[0]}" "${tcp_a[2]}" "${tcp_a[3]}" "${tc[0]}" "${tc[1]}" "${tc[2]}" \
        "${pr[0]}" "${pr[1]}" "${pr[2]}" "$probe_lost" \
        "${mem_a[0]}" "${mem_a[1]}" "${mem_a[2]}" "${mem_a[3]}" "$check" \
        "$tc_pct" "$tc_avg" "$tc_max" "$tc_over" >> "$RESULTS"
    log "  $tag: load ${load_ms}ms axfr ${axfr_ms}ms/${axfr_rrs}rr (srv cpu ${axfr_cpu_ms}ms, dig ${axfr_dig_ms}ms) udp ${udp_a[0]}qps (srv cpu ${uc[0]}%, client cpu ${uc[2]}%) lost ${udp_a[2]} tcp ${tcp_a[0]}qps p99 ${pr[1]}ms rss $((mem_a[0] / 1024))MiB check $check"
}

# ---------------------------------------------------------------- main
# which servers can run
ACTIVE=""
for s in $SERVERS; do
    case $s in
    nsd)  [ -x "$NSD" ]   && ACTIVE="$ACTIVE nsd"  || log "skip nsd: $NSD not found" ;;
    knot) [ -x "$KNOTD" ] && ACTIVE="$ACTIVE knot" || log "skip knot: $KNOTD not found" ;;
    bind) [ -x "$NAMED" ] && ACTIVE="$ACTIVE bind" || log "skip bind: $NAMED not found" ;;
    coredns)
        if [ -n "$COREDNS_BIN" ] && [ -x "$COREDNS_BIN" ]; then ACTIVE="$ACTIVE coredns"
        else log "skip coredns: set COREDNS_BIN to a coredns binary to include it"; fi ;;
    ceiling) ACTIVE="$ACTIVE ceiling" ;;
    custom)
        if [ -n "$CUSTOM_CMD" ]; then ACTIVE="$ACTIVE custom"
        else log "skip custom: set CUSTOM_CMD to measure another server"; fi ;;
    *) log "unknown server $s" ;;
    esac
done

# refuse to start if a port is already taken
for s in $ACTIVE; do
    if ss -Hlnu "sport = :${PORT[$s]}" 2>/dev/null | grep -q . || ss -Hlnt "sport = :${PORT[$s]}" 2>/dev/null | grep -q .; then
        echo "port ${PORT[$s]} for $s is already in use" >&2; exit 1
    fi
done

cc -O2 -o "$OUT/tmp/trivial-responder" bench/trivial-responder.c || exit 1
cc -O2 -o "$OUT/tmp/axfr-count" bench/axfr-count.c || exit 1

FIRST_SIZE=${SIZES%% *}
for n in $SIZES; do
    zd="$OUT/zones/N$n"
    if [ -n "$ZONES_DIR" ]; then
        # bring-your-own data: $ZONES_DIR/N$n/{forward.zone,reverse.zone,queries.txt[,checks.txt]}
        for f in forward.zone reverse.zone queries.txt; do
            [ -f "$ZONES_DIR/N$n/$f" ] || { echo "missing $ZONES_DIR/N$n/$f" >&2; exit 1; }
        done
        rm -rf "$zd"; mkdir -p "$zd"; cp "$ZONES_DIR/N$n"/* "$zd"/
        [ -f "$zd/checks.txt" ] || : > "$zd/checks.txt"
        [ -f "$zd/stats.txt" ] || printf 'vms=%s\nforward_rrs=%s\nreverse_rrs=%s\nforward_bytes=%s\n' "$n" \
            "$(grep -cv '^[;$]' "$zd/forward.zone")" "$(grep -cv '^[;$]' "$zd/reverse.zone")" "$(wc -c < "$zd/forward.zone")" > "$zd/stats.txt"
        continue
    fi
    if [ ! -f "$zd/stats.txt" ] || ! grep -qx "seed=$SEED" "$zd/stats.txt" || ! grep -qx "vms=$n" "$zd/stats.txt"; then
        log "generating zone N=$n seed=$SEED"
        python3 bench/gen-zone.py -n "$n" --seed "$SEED" --out "$zd" || exit 1
    fi
done

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r)"
    echo "nproc: $(nproc --all)"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "mem: $(awk '/MemTotal/ {print $2, $3}' /proc/meminfo)"
    echo "loadavg-before: $(cat /proc/loadavg)"
    echo "nsd: $("$NSD" -v 2>&1 | head -1)"
    echo "knot: $("$KNOTD" -V 2>&1 | head -1)"
    echo "bind: $("$NAMED" -v 2>&1 | head -1)"
    echo "dnsperf: $(dnsperf -H 2>&1 | awk '/^Version/ {print $2}')"
    echo "dig: $(dig -v 2>&1 | head -1)"
    echo "kdig: $(kdig -V 2>&1 | head -1)"
    [ -n "$COREDNS_BIN" ] && [ -x "$COREDNS_BIN" ] && echo "coredns: $("$COREDNS_BIN" -version 2>&1 | tr '\n' ' ')"
    [ -n "$CUSTOM_CMD" ] && echo "custom: $CUSTOM_CMD"
    echo "settings: SIZES='$SIZES' REPS=$REPS DURATION=$DURATION TCP_DURATION=$TCP_DURATION PROBE_QPS=$PROBE_QPS PROBE_DURATION=$PROBE_DURATION CLIENTS=$CLIENTS OUTSTANDING=$OUTSTANDING DNSPERF_EDNS='$DNSPERF_EDNS' SEED=$SEED SERVER_CPU=$SERVER_CPU CLIENT_CPU=$CLIENT_CPU"
    for n in $SIZES; do echo "zone N=$n: $(grep -E '^(forward_rrs|reverse_rrs|forward_bytes)=' "$OUT/zones/N$n/stats.txt" | tr '\n' ' ')"; done
} > "$OUT/versions.txt"
cat "$OUT/versions.txt"

printf 'server\tN\trep\tstatus\tload_ms\taxfr_ms\taxfr_rrs\taxfr_bytes\taxfr_srv_cpu_ms\taxfr_dig_ms\taxfr_dig_rrs\tudp_qps\tudp_sent\tudp_lost\tudp_avg_ms\tresp_bytes\tudp_srv_cpu_pct\tudp_cpu0_pct\tudp_cpu1_pct\ttcp_qps\ttcp_lost\ttcp_avg_ms\ttcp_srv_cpu_pct\ttcp_cpu0_pct\ttcp_cpu1_pct\tp50_ms\tp99_ms\tp999_ms\tprobe_lost\trss_kib\tpss_kib\thwm_kib\tnprocs\tcheck\ttc_pct\ttc_avg_bytes\ttc_max_bytes\tover1232_pct\n' > "$RESULTS"

# repetition is the outer loop so slow drifts on a noisy machine spread over all servers
for rep in $(seq 1 "$REPS"); do
    log "=== repetition $rep/$REPS"
    for s in $ACTIVE; do
        if [ "$s" = ceiling ]; then
            measure ceiling - "$rep"
            continue
        fi
        for n in $SIZES; do
            measure "$s" "$n" "$rep"
        done
    done
done

echo "loadavg-after: $(cat /proc/loadavg)" >> "$OUT/versions.txt"
python3 bench/summarize.py "$RESULTS" "$OUT/versions.txt" > "$OUT/summary.md"
cat "$OUT/summary.md"
log "done; raw rows in $RESULTS"
