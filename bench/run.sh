#!/usr/bin/env bash
# cns side by side with NSD, Knot and BIND on the same data.
#
# For each N in SIZES:
#   1. bench/geninv writes a synthetic data center of N VMs (~50 per owner,
#      services of 3-30 members, half the VMs with an alias, IPv4 from
#      10.0.0.0/8, one VM in ten with IPv6 too);
#   2. `cns serve` loads it into a fresh db (inventory_file feed, forward
#      zone dc.cns.example, reverse_v4_prefix 8 so every PTR lands in
#      10.in-addr.arpa) until the log says the last batch is committed with
#      nothing pending; it is then stopped (SIGTERM);
#   3. `cns db export` writes both zones as text, and bench/gen-queries.py a
#      dnsperf query file from the exported names (svc A 50, inst A 25, SRV
#      10, TXT 5, NXDOMAIN 10, PTR 5) and checks.txt;
# then bench/run-anchors.sh serves those zones with NSD, Knot and
# BIND and the prepared db with cns (bench/cns-custom.sh: restart from the
# db), and answers the identical query mix from each. Finally cns is asked
# at fixed rates (half its own saturated UDP rate, half the load
# generator's ceiling) to count lost queries, restarted a few times under
# bench/first-answer.py (time to the first answer, polled every 2 ms), and
# bench/ratios.py prints each target as a ratio to the best peer.
#
# Run (from anywhere):  bench/run.sh
#   quick look:         SIZES=2000 REPS=1 DURATION=3 TCP_DURATION=2 bench/run.sh
# Needs: Go (1.26+) and, from Debian,
#   apt-get install nsd knot bind9 dnsperf bind9-dnsutils knot-dnsutils python3 gcc
#   (INSTALL=1 runs that command, with sudo when not root). The system
#   services those packages start are not used: everything listens on
#   127.0.0.1 high ports (run-anchors: 5301-5306; the load step PREP_PORT).
# Knobs (environment):
#   SIZES ("10000 100000")  REPS (3)  SEED (20240611)
#   WORK (${TMPDIR:-/tmp}/cns-bench): binaries, prepared dbs (prep/), zones (zones/)
#   OUT ($WORK/anchors): run-anchors' output: summary.md, results.tsv, logs/
#   REBUILD=1: prepare the data again even when WORK holds it for this cns build
#   PREP_ONLY=1: stop after preparing the data
#   CNS_FEED (none): "none" serves the db alone during the measurements;
#     "file" also runs the inventory file feed (it recomputes every VM at
#     start, finds nothing changed, commits nothing, but costs CPU while
#     run-anchors measures)
#   LOSS_DURATION (10): seconds of each fixed-rate loss run (0: skip them)
#   RESTART_REPS (3): restarts of cns per size timed by bench/first-answer.py
#     (first answer polled every 2 ms from one socket; 0: skip)
#   CPU_QUOTA (40): the capped yardstick: every server run-anchors
#     starts runs in a cgroup v1 cpu quota of CPU_QUOTA % of one CPU
#     (bench/capped/taskset, put first in PATH for run-anchors only), so the
#     server, never dnsperf, is the bottleneck, and its capacity is
#     qps / quota. Needs root and /sys/fs/cgroup/cpu (cgroup v1). 0: no cap,
#     the previous rounds' yardstick (qps / measured server CPU share).
#     The loss runs are not capped; the restarts: RESTART_QUOTA.
#   OUTSTANDING (1000 when CPU_QUOTA > 0, else run-anchors' 200) and
#   RMEM_DEFAULT (8388608 when CPU_QUOTA > 0): dnsperf's window of queries in
#     flight, and net.core.rmem_default (the receive buffer of a socket that
#     asks for none: Knot's) for the run, put back at the end. With 200 in
#     flight Knot used 24-29 % of a 40 % quota (ratios.py: "starved"): the
#     window ran dry while the quota paused it; a wider one overflowed
#     Knot's 208 KiB default buffer and the lost queries held their places
#     in the window for dnsperf's 5 s timeout. 100k VMs, 40 %: 200 in
#     flight 43.2k qps at 24 % CPU; 1000 in flight and 8 MiB buffers 51.2k
#     qps at 37 %, none lost. RMEM_DEFAULT=0 leaves the sysctl alone.
#   RESTART_QUOTA (100 when CPU_QUOTA > 0, else 0): the CPU quota of cns while
#     bench/first-answer.py restarts it. 100 is one whole CPU, but in the
#     cgroup whose cpu.shares put it before the machine's other work: on a
#     loaded machine a plain taskset left cns ~10 % of CPU 0 (the tables of
#     100k VMs took 9.5 s of wall time for 0.7 s of CPU). 0: plain taskset.
#   AXFR_REPS (3): transfers of the forward zone from a warm cns per size (the
#     tables built, the server in the same CPU quota as in run-anchors):
#     $WORK/axfr.tsv; 0: skip. At 1M VMs run-anchors' own AXFR of cns is sent
#     while the tables are still being built, so it times the warm-up.
#   WARM_TIMEOUT (600 s): how long a restarted cns may take to build its tables
#   PREP_PORT (5390)  PREP_TIMEOUT (900 s, or N/250 s when larger: 4000 s at
#   1M)  ANCHORS (bench/run-anchors.sh)
#   LOAD_TIMEOUT (run-anchors: seconds for a server to answer both SOAs;
#     180 by default there, 1200 here when a size is 500k or more: BIND and
#     NSD parse a 1M-VM zone for minutes inside a 40 % quota)
#   and every knob of run-anchors (DURATION, TCP_DURATION, SERVERS, SERVER_CPU,
#   CLIENT_CPU, ...), passed through.
# Output: $OUT/summary.md (run-anchors' table), $OUT/ratios.md (targets as
#   ratios), $WORK/figures.tsv (initial loads), $WORK/sizes.tsv (db and zone
#   sizes, and how long each preparation step took), $WORK/loss.tsv,
#   $WORK/restart.tsv (with the warm-up: exec to "zones loaded into memory",
#   RSS after it and the peak while restarting), $WORK/axfr.tsv (warm
#   AXFR), and $WORK/curve.md + $WORK/curve.svg (bench/curve.py: every
#   figure against N on log-log axes, with its growth exponent).
# The cost curve to a million VMs, one command:
#   SIZES="10000 100000 1000000" REPS=3 bench/run.sh
#   then bench/cost-curve.svg and bench/cost-curve.md from its output:
#   python3 bench/curve.py --work $WORK --svg bench/cost-curve.svg > bench/cost-curve.md
#   Run time (2-core VM, load average 10-16 from other work, 2026-11-24):
#   preparing 1M once per cns build ~33 min (geninv 6 s, the initial load
#   through cns serve 30.6 min = 525 CPU-s, db export 18 s, gen-queries
#   141 s); 100k 2.6 min, 10k 20 s. Measuring all three sizes with REPS=1
#   DURATION=5 TCP_DURATION=3: 12 min (run-anchors 8.5 min, of which 1M:
#   NSD 91 s, Knot 49 s, BIND 104 s, cns 80 s; loss, restarts and warm
#   AXFR 3.2 min). With the defaults (REPS=3, DURATION=15) expect ~35 min
#   of measuring on top of the preparation.
#   Disk: 2.6 GB db per copy at 1M, REPS+1 copies at once (~10 GB with
#   REPS=3), 0.5 GB inventory, 0.8 GB of zones twice; memory: the load step
#   peaks at 7.9 GB RSS at 1M, gen-queries 2.6 GB, NSD serves 1M in 4.5 GB.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ANCHORS=${ANCHORS:-$ROOT/bench/run-anchors.sh}
SIZES=${SIZES:-"10000 100000"}
REPS=${REPS:-3}
SEED=${SEED:-20240611}
WORK=${WORK:-${TMPDIR:-/tmp}/cns-bench}
OUT=${OUT:-$WORK/anchors}
PREP_PORT=${PREP_PORT:-5390}
PREP_TIMEOUT=${PREP_TIMEOUT:-}
AXFR_REPS=${AXFR_REPS:-3}
WARM_TIMEOUT=${WARM_TIMEOUT:-600}
WARM_LINE='"msg":"zones loaded into memory"'
# cns reads the feeds' stored state (every VM's hash, the hysteresis) once
# the tables are built: the steady state (RSS, a warm transfer) starts here
READY_LINE='"msg":"stored VMs read"'
CNS_FEED=${CNS_FEED:-none}
REBUILD=${REBUILD:-0}
PREP_ONLY=${PREP_ONLY:-0}
INSTALL=${INSTALL:-0}
LOSS_DURATION=${LOSS_DURATION:-10}
RESTART_REPS=${RESTART_REPS:-3}
SERVER_CPU=${SERVER_CPU:-0}
CPU_QUOTA=${CPU_QUOTA:-40}
RESTART_QUOTA=${RESTART_QUOTA:-$([ "$CPU_QUOTA" -gt 0 ] 2>/dev/null && echo 100 || echo 0)}
CPU_CGROUP=${CPU_CGROUP:-/sys/fs/cgroup/cpu/cns-bench}
CLIENT_CPU=${CLIENT_CPU:-1}
if [ "$CPU_QUOTA" -gt 0 ] 2>/dev/null; then
    OUTSTANDING=${OUTSTANDING:-1000}
    RMEM_DEFAULT=${RMEM_DEFAULT:-8388608}
    export OUTSTANDING
fi
RMEM_DEFAULT=${RMEM_DEFAULT:-0}
FWD_ZONE=dc.cns.example
REV_ZONE=10.in-addr.arpa
export SIZES REPS SEED SERVER_CPU CLIENT_CPU CPU_CGROUP

log() { printf '[run.sh %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
now_s() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; } # from to -> seconds
die() { printf 'run.sh: %s\n' "$*" >&2; exit 1; }

[[ $CPU_QUOTA =~ ^[0-9]+$ ]] && [ "$CPU_QUOTA" -le 100 ] || die "CPU_QUOTA must be a percentage of one CPU (0-100), not '$CPU_QUOTA'"
if [ "$CPU_QUOTA" -gt 0 ]; then
    [ -w "$(dirname "$CPU_CGROUP")/cgroup.procs" ] ||
        die "CPU_QUOTA=$CPU_QUOTA needs a writable cgroup v1 cpu controller at $(dirname "$CPU_CGROUP") (root; mount | grep cgroup); CPU_QUOTA=0 runs uncapped"
fi
case $CNS_FEED in none|file) ;; *) die "CNS_FEED must be none or file, not '$CNS_FEED'" ;; esac
MAX_N=0
for n in $SIZES; do
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -gt 0 ] || die "SIZES: '$n' is not a number of VMs"
    [ "$n" -gt "$MAX_N" ] && MAX_N=$n
done
if [ -z "${LOAD_TIMEOUT:-}" ] && [ "$MAX_N" -ge 500000 ]; then LOAD_TIMEOUT=1200; fi
[ -z "${LOAD_TIMEOUT:-}" ] || export LOAD_TIMEOUT

# ---------------------------------------------------------------- prerequisites
PKGS="nsd knot bind9 dnsperf bind9-dnsutils knot-dnsutils python3 gcc"
missing=()
need() { # package command-or-path
    if [[ $2 == /* ]]; then [ -x "$2" ] || missing+=("$1"); else command -v "$2" >/dev/null || missing+=("$1"); fi
}
need nsd /usr/sbin/nsd
need knot /usr/sbin/knotd
need bind9 /usr/sbin/named
need dnsperf dnsperf
need bind9-dnsutils dig
need knot-dnsutils kdig
need python3 python3
need gcc cc
need util-linux taskset
need iproute2 ss
if [ ${#missing[@]} -gt 0 ]; then
    cmd="apt-get install -y ${missing[*]}"
    [ "$(id -u)" -eq 0 ] || cmd="sudo $cmd"
    if [ "$INSTALL" = 1 ]; then
        log "installing: ${missing[*]}"
        $cmd || die "'$cmd' failed"
    else
        die "missing Debian packages: ${missing[*]}
  install them with:  $cmd
  (the full set:      apt-get install $PKGS; or run with INSTALL=1)"
    fi
fi
command -v go >/dev/null || die "Go is not installed: get Go 1.26 or newer from https://go.dev/dl/ (Debian's golang package may be older)"
[ -f "$ANCHORS" ] || die "run-anchors.sh not found at $ANCHORS (set ANCHORS)"
[ "$(nproc --all)" -ge 2 ] || die "need at least 2 CPUs (server and load generator are pinned apart)"
if ss -Hlnu "sport = :$PREP_PORT" 2>/dev/null | grep -q . || ss -Hlnt "sport = :$PREP_PORT" 2>/dev/null | grep -q .; then
    die "port $PREP_PORT (PREP_PORT, the load step) is in use"
fi

mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# ---------------------------------------------------------------- processes we start
PREP_PID=""
stop_prep() {
    [ -n "$PREP_PID" ] || return 0
    if kill -0 "$PREP_PID" 2>/dev/null; then
        kill -TERM "$PREP_PID" 2>/dev/null || true
        local i
        for i in $(seq 1 600); do kill -0 "$PREP_PID" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$PREP_PID" 2>/dev/null; then
            log "cns ($PREP_PID) did not stop on TERM within 60 s; sending KILL"
            kill -KILL "$PREP_PID" 2>/dev/null || true
        fi
    fi
    wait "$PREP_PID" 2>/dev/null || true
    PREP_PID=""
}
RMEM_WAS=""
restore_rmem() { [ -z "$RMEM_WAS" ] || sysctl -qw net.core.rmem_default="$RMEM_WAS"; }
trap 'stop_prep; restore_rmem' EXIT
trap 'stop_prep; restore_rmem; exit 130' INT TERM

# ---------------------------------------------------------------- build
log "building cns and geninv into $WORK/bin"
mkdir -p "$WORK/bin"
(cd "$ROOT" && go build -o "$WORK/bin/cns" . && go build -o "$WORK/bin/geninv" ./bench/geninv) || die "go build failed"
CNS=$WORK/bin/cns
CNS_SUM=$(sha256sum "$CNS" | cut -c1-16)

# ---------------------------------------------------------------- prepare one size
# config shared by the load step and the measured server (cns-custom.sh)
write_config() { # file listen db inventory
    cat > "$1" <<EOF
{
	"my_name": "ns1.cns.example",
	"hostmaster": "hostmaster@cns.example",
	"forward_zones": {"$FWD_ZONE": {"networks": ["*"]}},
	"reverse_zones": {},
	"allow_transfer": ["127.0.0.1"],
	"use_alias": true,
	"reverse_v4_prefix": 8,
	"db_path": "$3",
	"dns_listen": ["$2"],
	"api_server": {"listen": []},
	"inventory_file": "$4",
	"log_level": "info"
}
EOF
}

# initial-load figures from the load step's log: "vms seconds commits"
# (prepare appends the CPU seconds cns used, a cost the machine's load does not move)
load_figures() { # logfile
    python3 - "$1" <<'EOF'
import datetime, json, sys
applied = None; vms = 0; commits = 0; last = None
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    t = datetime.datetime.strptime(r["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    if r.get("msg") == "inventory applied" and applied is None:
        applied = t
    elif r.get("msg") == "committed" and applied is not None:
        vms += r.get("vms", 0); commits += 1; last = t
        if r.get("pending") == 0:
            break
if applied is None or last is None:
    sys.exit("no inventory/commit lines in " + sys.argv[1])
print("%d\t%.3f\t%d" % (vms, (last - applied).total_seconds(), commits))
EOF
}

prepare() { # n
    local n=$1 p=$WORK/prep/N$1 z=$WORK/zones/N$1
    local stamp="n=$n seed=$SEED cns=$CNS_SUM feed=$CNS_FEED"
    if [ "$REBUILD" != 1 ] && [ -f "$p/stamp" ] && [ "$(cat "$p/stamp")" = "$stamp" ] && [ -f "$z/queries.txt" ]; then
        log "N=$n: reusing $p (same cns build and seed; REBUILD=1 to redo)"
        return 0
    fi
    rm -rf "$p" "$z"
    mkdir -p "$p" "$z"
    local t_gen t_load t_export t_queries
    log "N=$n: generating the inventory"
    t_gen=$(now_s)
    "$WORK/bin/geninv" -n "$n" -seed "$SEED" > "$p/inventory.json"
    t_load=$(now_s)

    log "N=$n: loading it into a fresh db with cns serve (127.0.0.1:$PREP_PORT)"
    write_config "$p/load.json" "127.0.0.1:$PREP_PORT" cns.db inventory.json
    "$CNS" serve -c "$p/load.json" 2> "$p/load.log" &
    PREP_PID=$!
    local timeout=${PREP_TIMEOUT:-$(( n / 250 > 900 ? n / 250 : 900 ))}
    local deadline=$(( $(date +%s) + timeout )) applied=""
    while :; do
        if ! kill -0 "$PREP_PID" 2>/dev/null; then
            PREP_PID=""
            tail -5 "$p/load.log" >&2
            die "N=$n: cns serve exited during the load (log: $p/load.log)"
        fi
        [ -n "$applied" ] || applied=$(grep -n '"msg":"inventory applied"' "$p/load.log" | head -1 | cut -d: -f1 || true)
        if [ -n "$applied" ] && tail -n "+$applied" "$p/load.log" | grep '"msg":"committed"' | grep -Eq '"pending":0[,}]'; then
            break
        fi
        if grep -q '"msg":"inventory rejected"' "$p/load.log"; then
            die "N=$n: cns rejected the inventory (log: $p/load.log)"
        fi
        [ "$(date +%s)" -lt "$deadline" ] || die "N=$n: not committed after $timeout s (PREP_TIMEOUT; log: $p/load.log)"
        sleep 0.2
    done
    local cpu
    cpu=$(sed 's/^.*) //' "/proc/$PREP_PID/stat" | awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($12 + $13) / hz }')
    stop_prep
    local fig
    fig=$(load_figures "$p/load.log")
    printf '%s\t%s\t%s\n' "$n" "$fig" "$cpu" > "$p/figures.tsv"
    log "N=$n: loaded (VMs, seconds, commits, CPU seconds: $(echo "$fig" | tr '\t' ' ') $cpu)"

    t_export=$(now_s)
    "$CNS" db --db "$p/cns.db" zones > "$p/zones.txt"
    "$CNS" db --db "$p/cns.db" export "$FWD_ZONE" > "$z/forward.zone"
    "$CNS" db --db "$p/cns.db" export "$REV_ZONE" > "$z/reverse.zone"
    local f
    for f in forward reverse; do
        grep -qP '\tSOA\t' "$z/$f.zone" || die "N=$n: $z/$f.zone has no SOA"
    done
    t_queries=$(now_s)
    python3 "$ROOT/bench/gen-queries.py" --fwd "$z/forward.zone" --rev "$z/reverse.zone" \
        --out "$z" --vms "$n" --seed "$SEED"
    echo "seed=$SEED" >> "$z/stats.txt"
    # the wall time of each step (geninv, load incl. start and stop, db
    # export, gen-queries), for scheduling a run at 1M
    printf '%s\t%s\t%s\t%s\n' "$(elapsed "$t_gen" "$t_load")" "$(elapsed "$t_load" "$t_export")" \
        "$(elapsed "$t_export" "$t_queries")" "$(elapsed "$t_queries" "$(now_s)")" > "$p/steps.tsv"
    log "N=$n: $(grep -E '^(forward_rrs|reverse_rrs)=' "$z/stats.txt" | tr '\n' ' ')"

    # the measured server: same config, db moved in by cns-custom.sh
    local inv=no-inventory.json # missing: the file feed reports it and keeps the db as it is
    [ "$CNS_FEED" = file ] && inv=$p/inventory.json
    write_config "$p/serve.json.in" @LISTEN@ cns.db "$inv"
    echo "$stamp" > "$p/stamp"
}

for n in $SIZES; do
    prepare "$n"
done
: > "$WORK/figures.tsv"
printf 'N\tvms\tdb_bytes\tforward_rrs\treverse_rrs\tforward_zone_bytes\tgeninv_s\tload_s\texport_s\tqueries_s\n' > "$WORK/sizes.tsv"
for n in $SIZES; do
    cat "$WORK/prep/N$n/figures.tsv" >> "$WORK/figures.tsv"
    p=$WORK/prep/N$n z=$WORK/zones/N$n
    steps=$(cat "$p/steps.tsv" 2>/dev/null || printf -- '-\t-\t-\t-') # prepared by an older run.sh
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$(cut -f2 "$p/figures.tsv")" "$(stat -c %s "$p/cns.db")" \
        "$(sed -n 's/^forward_rrs=//p' "$z/stats.txt")" "$(sed -n 's/^reverse_rrs=//p' "$z/stats.txt")" \
        "$(stat -c %s "$z/forward.zone")" "$steps" >> "$WORK/sizes.tsv"
done
if [ "$PREP_ONLY" = 1 ]; then
    log "data prepared in $WORK/zones and $WORK/prep (PREP_ONLY=1: stopping here)"
    exit 0
fi

# one spare copy of each db per repetition: cns-custom.sh renames one into
# place, so no copy is timed as part of the restart. The copies of all sizes
# and one more of the largest (the loss, restart and AXFR steps) must fit.
need_kib=0
for n in $SIZES; do
    need_kib=$(( need_kib + REPS * $(du -k "$WORK/prep/N$n/cns.db" | cut -f1) ))
done
need_kib=$(( need_kib + $(du -k "$WORK/prep/N$MAX_N/cns.db" | cut -f1) ))
free_kib=$(df -Pk "$WORK" | awk 'NR == 2 { print $4 }')
[ "$free_kib" -gt "$need_kib" ] ||
    die "the spare copies of the dbs need $((need_kib / 1024)) MiB in $WORK, $((free_kib / 1024)) MiB free (lower REPS or set WORK)"
for n in $SIZES; do
    p=$WORK/prep/N$n
    rm -rf "$p/spare"; mkdir -p "$p/spare"
    for r in $(seq 1 "$REPS"); do cp "$p/cns.db" "$p/spare/$r.db"; done
done

# ---------------------------------------------------------------- side by side
if [ "$RMEM_DEFAULT" -gt 0 ]; then
    RMEM_WAS=$(sysctl -n net.core.rmem_default)
    sysctl -qw net.core.rmem_default="$RMEM_DEFAULT" || die "cannot set net.core.rmem_default (RMEM_DEFAULT=0 leaves it)"
fi
log "running $ANCHORS (OUT=$OUT, servers capped at CPU_QUOTA=$CPU_QUOTA % of CPU $SERVER_CPU, ${OUTSTANDING:-200} queries in flight)"
echo "$CPU_QUOTA" > "$OUT/cpu_quota.txt"
rc=0
ANCHORS_PATH=$PATH
[ "$CPU_QUOTA" -gt 0 ] && ANCHORS_PATH=$ROOT/bench/capped:$PATH
PATH=$ANCHORS_PATH CPU_QUOTA=$CPU_QUOTA ZONES_DIR=$WORK/zones OUT=$OUT FWD=$FWD_ZONE. REV=$REV_ZONE. \
    CUSTOM_CMD="$ROOT/bench/cns-custom.sh $CNS $WORK/prep {addr} {port} {fwd} {dir}" \
    bash "$ANCHORS" || rc=$?
[ "$rc" -eq 0 ] || log "run-anchors.sh exited with status $rc"
drop_cgroups() { # log the throttling each server saw (the quota held), then drop the groups
    [ "$CPU_QUOTA" -gt 0 ] || return 0
    local cg
    for cg in "$CPU_CGROUP"/*/; do
        [ -f "$cg/cpu.stat" ] || continue
        log "cgroup $(basename "$cg"): $(tr '\n' ' ' < "$cg/cpu.stat")"
        rmdir "$cg" 2>/dev/null || true
    done
}
drop_cgroups
[ -f "$OUT/results.tsv" ] || die "no $OUT/results.tsv"

# ---------------------------------------------------------------- lost queries at fixed rates
# half of cns's own saturated UDP rate and half of the load generator's
# ceiling (trivial C responder), each for LOSS_DURATION s against a fresh cns
median_of() { # server N column -> integer median over the ok rows (N "-": any)
    awk -F'\t' -v s="$1" -v n="$2" -v c="$3" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 == s && ($2 == n || n == "-") && $4 == "ok" && $(col[c]) + 0 > 0 { print $(col[c]) + 0 }' "$OUT/results.tsv" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR) print int((NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
LOSS=$WORK/loss.tsv
printf 'N\trate\tqps\tsent\tlost\n' > "$LOSS"
if [ "$LOSS_DURATION" -gt 0 ] && [[ " ${SERVERS:-custom} " == *" custom "* ]]; then
    ceiling=$(median_of ceiling - udp_qps || true)
    for n in $SIZES; do
        own=$(median_of custom "$n" udp_qps || true)
        [ -n "$own" ] || { log "N=$n: no cns UDP figure; skipping the loss runs"; continue; }
        d=$WORK/loss-N$n
        rm -rf "$d"; mkdir -p "$d"
        cp "$WORK/prep/N$n/cns.db" "$WORK/prep/N$n/spare/loss.db"
        taskset -c "$SERVER_CPU" "$ROOT/bench/cns-custom.sh" "$CNS" "$WORK/prep" 127.0.0.1 "$PREP_PORT" \
            "$WORK/zones/N$n/forward.zone" "$d" > "$d/server.log" 2>&1 &
        PREP_PID=$!
        # measure the steady state: wait until the in-memory tables are built
        # (at 1M VMs on a loaded machine that takes longer than a minute)
        deadline=$(( $(date +%s) + WARM_TIMEOUT ))
        until grep -qF "$READY_LINE" "$d/server.log" 2>/dev/null; do
            kill -0 "$PREP_PID" 2>/dev/null || die "N=$n: cns exited (log: $d/server.log)"
            [ "$(date +%s)" -lt "$deadline" ] || die "N=$n: tables not built after $WARM_TIMEOUT s (WARM_TIMEOUT; log: $d/server.log)"
            sleep 0.1
        done
        dig @127.0.0.1 -p "$PREP_PORT" +time=1 +tries=3 +short SOA "$FWD_ZONE" 2>/dev/null | grep -q hostmaster ||
            die "N=$n: cns does not answer on 127.0.0.1:$PREP_PORT (log: $d/server.log)"
        for pair in "half-own:$((own / 2))" ${ceiling:+"half-ceiling:$((ceiling / 2))"}; do
            name=${pair%%:*} q=${pair#*:}
            taskset -c "$CLIENT_CPU" dnsperf ${DNSPERF_EDNS--e} -s 127.0.0.1 -p "$PREP_PORT" -d "$WORK/zones/N$n/queries.txt" \
                -c "${CLIENTS:-8}" -q "${OUTSTANDING:-200}" -Q "$q" -l "$LOSS_DURATION" > "$d/$name.txt" 2>&1 || true
            sent=$(awk '/Queries sent:/ {print $3}' "$d/$name.txt")
            lost=$(awk '/Queries lost:/ {print $3}' "$d/$name.txt")
            printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$name" "$q" "${sent:--}" "${lost:--}" >> "$LOSS"
            log "N=$n: $name $q qps for ${LOSS_DURATION}s: sent ${sent:--} lost ${lost:--}"
        done
        stop_prep
    done
fi

# ---------------------------------------------------------------- restart to first answer, closer
# run-anchors' load time polls with one dig process per try; this asks every
# 2 ms from one socket, then keeps asking every 10 ms while cns warms up
RESTART=$WORK/restart.tsv
RESTART_PATH=$PATH
[ "$RESTART_QUOTA" -gt 0 ] && RESTART_PATH=$ROOT/bench/capped:$PATH
printf 'N\trep\tfirst_ms\tall_zones_ms\tanswers\tp50_ms\tp99_ms\tmax_ms\twarm_ms\twarm_took_ms\trss_kib\thwm_kib\twarm_cpu_ms\n' > "$RESTART"
if [ "$RESTART_REPS" -gt 0 ]; then
    for n in $SIZES; do
        for r in $(seq 1 "$RESTART_REPS"); do
            d=$WORK/restart-N$n
            rm -rf "$d"; mkdir -p "$d"
            cp "$WORK/prep/N$n/cns.db" "$WORK/prep/N$n/spare/restart.db"
            line=$(PATH=$RESTART_PATH CPU_QUOTA=$RESTART_QUOTA taskset -c "$CLIENT_CPU" python3 "$ROOT/bench/first-answer.py" --port "$PREP_PORT" \
                --zones "$FWD_ZONE,$REV_ZONE" --duration 5 --log "$d/server.log" \
                --warm-line "$WARM_LINE" --timeout "$WARM_TIMEOUT" -- \
                taskset -c "$SERVER_CPU" "$ROOT/bench/cns-custom.sh" "$CNS" "$WORK/prep" 127.0.0.1 "$PREP_PORT" \
                "$WORK/zones/N$n/forward.zone" "$d") || { log "N=$n: first-answer probe failed (log: $d/server.log)"; continue; }
            printf '%s\t%s\t%s\n' "$n" "$r" "$line" >> "$RESTART"
            log "N=$n restart $r: first answer $(echo "$line" | cut -f1) ms, both zones $(echo "$line" | cut -f2) ms, answers during the next 5 s p99 $(echo "$line" | cut -f5) ms max $(echo "$line" | cut -f6) ms; tables warm $(echo "$line" | cut -f7) ms, RSS then $(( $(echo "$line" | cut -f9 | tr -dc 0-9) / 1024 )) MiB, peak $(( $(echo "$line" | cut -f10 | tr -dc 0-9) / 1024 )) MiB"
        done
    done
fi

# ---------------------------------------------------------------- warm AXFR
# run-anchors sends its AXFR as soon as both SOAs answer: for cns that is
# before the in-memory tables are built (at 1M VMs it times the warm-up).
# Here cns restarts in the same CPU quota as in run-anchors, the transfer
# waits for the log's "zones loaded into memory", and bench/axfr-count
# (bench/axfr-count.c, on the client CPU) times it: the figure to
# hold against Knot's run-anchors AXFR, which Knot only answers once loaded.
AXFR=$WORK/axfr.tsv
printf 'N\trep\twarm_ms\taxfr_ms\taxfr_bytes\taxfr_rrs\taxfr_msgs\taxfr_srv_cpu_ms\trss_kib\thwm_kib\trss_after_axfr_kib\n' > "$AXFR"
proc_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null || echo -; } # pid VmRSS|VmHWM
cpu_ms() { sed 's/^.*) //' "/proc/$1/stat" | awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($12 + $13) * 1000 / hz }'; }
if [ "$AXFR_REPS" -gt 0 ] && [[ " ${SERVERS:-custom} " == *" custom "* ]]; then
    cc -O2 -o "$WORK/bin/axfr-count" "$(dirname "$ANCHORS")/axfr-count.c" || die "cannot build axfr-count"
    for n in $SIZES; do
        d=$WORK/axfr-N$n
        rm -rf "$d"; mkdir -p "$d"
        cp "$WORK/prep/N$n/cns.db" "$WORK/prep/N$n/spare/axfr.db"
        t0=$(now_s)
        PATH=$ANCHORS_PATH CPU_QUOTA=$CPU_QUOTA taskset -c "$SERVER_CPU" "$ROOT/bench/cns-custom.sh" "$CNS" "$WORK/prep" \
            127.0.0.1 "$PREP_PORT" "$WORK/zones/N$n/forward.zone" "$d" > "$d/server.log" 2>&1 &
        PREP_PID=$!
        deadline=$(( $(date +%s) + WARM_TIMEOUT ))
        until grep -qF "$WARM_LINE" "$d/server.log"; do
            kill -0 "$PREP_PID" 2>/dev/null || die "N=$n: cns exited while warming up (log: $d/server.log)"
            [ "$(date +%s)" -lt "$deadline" ] || die "N=$n: tables not built after $WARM_TIMEOUT s (WARM_TIMEOUT; log: $d/server.log)"
            sleep 0.05
        done
        warm_ms=$(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
        until grep -qF "$READY_LINE" "$d/server.log"; do
            kill -0 "$PREP_PID" 2>/dev/null || die "N=$n: cns exited after the warm-up (log: $d/server.log)"
            [ "$(date +%s)" -lt "$deadline" ] || die "N=$n: stored VMs not read after $WARM_TIMEOUT s (log: $d/server.log)"
            sleep 0.05
        done
        rss=$(proc_kib "$PREP_PID" VmRSS) hwm=$(proc_kib "$PREP_PID" VmHWM)
        for r in $(seq 1 "$AXFR_REPS"); do
            c0=$(cpu_ms "$PREP_PID")
            ax=$(taskset -c "$CLIENT_CPU" "$WORK/bin/axfr-count" 127.0.0.1 "$PREP_PORT" "$FWD_ZONE." 2>&1) ||
                { log "N=$n: AXFR $r failed: $ax"; continue; }
            c1=$(cpu_ms "$PREP_PID")
            field() { echo "$ax" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$r" "$warm_ms" "$(field ms)" "$(field bytes)" \
                "$(field rrs)" "$(field msgs)" "$((c1 - c0))" "$rss" "$hwm" "$(proc_kib "$PREP_PID" VmRSS)" >> "$AXFR"
            log "N=$n: warm AXFR $r: $ax (server CPU $((c1 - c0)) ms; tables warm after ${warm_ms} ms in the quota, RSS $((rss / 1024)) MiB)"
        done
        stop_prep
    done
    drop_cgroups
fi

CPU_QUOTA=$CPU_QUOTA python3 "$ROOT/bench/ratios.py" "$OUT/results.tsv" "$LOSS" "$WORK/figures.tsv" "$RESTART" > "$OUT/ratios.md" || true
cat "$OUT/ratios.md"
echo
python3 "$ROOT/bench/curve.py" --work "$WORK" --out "$OUT" > "$WORK/curve.md" || log "curve.py failed"
cat "$WORK/curve.md"
echo
log "cost curve:          $WORK/curve.md, $WORK/curve.svg"
log "run-anchors summary: $OUT/summary.md"
log "targets as ratios:   $OUT/ratios.md"
log "raw rows:            $OUT/results.tsv (logs in $OUT/logs, versions in $OUT/versions.txt)"
exit "$rc"
