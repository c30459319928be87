#!/usr/bin/env bash
# The initial load of a fresh data center through `cns serve` (target
# ≥ 20k VMs/s), measured in a way the machine's load moves least:
# the CPU seconds the cns process spent (utime + stime from /proc/PID/stat)
# per VM, beside the wall time and VMs/s.
#
# Each repetition starts `cns serve` on a fresh db with bench/run.sh's load
# config (inventory file feed, forward zone dc.cns.example, reverse
# 10.in-addr.arpa) and stops it the moment the log says the last batch is
# committed with nothing pending (a "committed" line with "pending":0 after
# "inventory applied", as bench/run.sh's prepare step waits for).
#   wall_s   exec → that line (parse, compute and commit: the whole load)
#   load_s   "inventory applied" → that line (bench/run.sh's figure)
#   cpu_s    the process's utime + stime at that moment
#   peak_rss_mib, written_mib: VmHWM, and the bytes it wrote (wchar)
#   settled_peak_mib: VmHWM once what follows a first load is done too
#     (the tables built, "zones loaded into memory after a backlog", and
#     the live compaction, "db compacted", or 30 s without one): the
#     first load's peak as a memory cap sees it
#   cg_peak_mib, cg_oom_kills: with LIMIT, the cgroup's own peak (page
#     cache included, which the kernel reclaims at the limit) and the
#     processes the kernel killed for it
#
# Run:      bench/load.sh                    (N=100000, REPS=3)
#           N=10000 REPS=5 bench/load.sh
#           CNS="old=/tmp/cns-old new=/tmp/cns-new" bench/load.sh  (interleaved)
#           PROFILE=40 bench/load.sh          (a CPU profile of the first 40 s
#                                              of each run, through the API's
#                                              /debug/pprof: $WORK/<name>-<rep>.pprof;
#                                              cns is stopped once it is written;
#                                              and the allocations: .allocs)
# Knobs:    N (100000)  REPS (3)  SEED (20240611)  WORK (/tmp/cns-load)
#           CNS ("head=<binary built from this tree>"): name=binary pairs,
#             run in turn within each repetition
#           PORT (5471): DNS port of the load; API on PORT+1 (pprof)
#           TIMEOUT (900 s per run)
#           LIMIT: run cns in a memory cgroup of this many bytes (K, M, G
#             suffixes), a child of this shell's cgroup (v2, or v1's memory
#             controller; needs root), removed after each run: cns gives
#             its heap 3/4 of it (docs/deploying.md, "Memory to plan for")
#           KEEP (0): 1 keeps each run's db ($WORK/run-<name>-<rep>/cns.db,
#             ~2 GB at 1M VMs); by default it is removed once measured, and
#             only the log stays
# Output:   one TSV row per run on stdout and in $WORK/load.tsv, then the
#           median (min–max) of each figure per binary.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${N:-100000}
REPS=${REPS:-3}
SEED=${SEED:-20240611}
WORK=${WORK:-${TMPDIR:-/tmp}/cns-load}
PORT=${PORT:-5471}
TIMEOUT=${TIMEOUT:-900}
KEEP=${KEEP:-0}
PROFILE=${PROFILE:-0}
[[ $PROFILE =~ ^[0-9]+$ ]] || { echo "PROFILE must be a number of seconds" >&2; exit 2; }
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

if [ -z "${CNS:-}" ]; then
    (cd "$ROOT" && go build -o "$WORK/cns-head" .)
    CNS="head=$WORK/cns-head"
fi
INV=$WORK/inv-$N-$SEED.json
if [ ! -s "$INV" ]; then
    (cd "$ROOT" && go run ./bench/geninv -n "$N" -seed "$SEED") > "$INV.tmp"
    mv "$INV.tmp" "$INV"
fi

if ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q .; then
    echo "load.sh: port $PORT is in use (another run? set PORT)" >&2
    exit 1
fi

TSV=$WORK/load.tsv
printf 'name\trep\tvms\twall_s\tload_s\tcpu_s\tcpu_us_per_vm\tvms_per_s\tcommits\tpeak_rss_mib\twritten_mib\tsettled_peak_mib\tcg_peak_mib\tcg_oom_kills\n' > "$TSV"
cat "$TSV"
for rep in $(seq 1 "$REPS"); do
    for pair in $CNS; do
        name=${pair%%=*} bin=${pair#*=}
        run=$WORK/run-$name-$rep
        rm -rf "$run"; mkdir -p "$run"
        cat > "$run/config.json" <<EOF
{
	"my_name": "ns1.cns.example",
	"hostmaster": "hostmaster@cns.example",
	"forward_zones": {"dc.cns.example": {"networks": ["*"]}},
	"reverse_zones": {},
	"allow_transfer": ["127.0.0.1"],
	"use_alias": true,
	"reverse_v4_prefix": 8,
	"db_path": "$run/cns.db",
	"dns_listen": ["127.0.0.1:$PORT"],
	"api_server": {"listen": "127.0.0.1:$((PORT + 1))"},
	"inventory_file": "$INV",
	"log_level": "info"
}
EOF
        prof=""
        [ "$PROFILE" -gt 0 ] && prof=$WORK/$name-$rep.pprof
        python3 - "$bin" "$run" "$N" "$TIMEOUT" "$((PORT + 1))" "$prof" "$PROFILE" "${LIMIT:-}" <<'EOF' | sed "s/^/$name\t$rep\t/" | tee -a "$TSV"
import json, os, subprocess, sys, threading, time, urllib.request
binary, run, n, timeout, api, prof, secs, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6], int(sys.argv[7]), sys.argv[8]
tick = os.sysconf("SC_CLK_TCK")
log = open(run + "/cns.log", "wb")
cmd = [binary, "serve", "-c", run + "/config.json"]
cg = None  # (directory, peak file, the file that counts oom_kill)
if limit:
    size = int(limit[:-1]) << {"K": 10, "M": 20, "G": 30}[limit[-1]] if limit[-1] in "KMG" else int(limit)
    for line in open("/proc/self/cgroup"):
        hier, ctrl, path = line.strip().split(":", 2)
        if hier == "0" and ctrl == "" and os.path.exists("/sys/fs/cgroup" + path + "/memory.max"):
            d = "/sys/fs/cgroup" + path + "/cns-load-%d" % os.getpid()
            os.mkdir(d); open(d + "/memory.max", "w").write(str(size)); open(d + "/memory.swap.max", "w").write("0")
            cg = (d, "memory.peak", "memory.events")
        elif "memory" in ctrl.split(","):
            d = "/sys/fs/cgroup/memory" + path + "/cns-load-%d" % os.getpid()
            os.mkdir(d); open(d + "/memory.limit_in_bytes", "w").write(str(size))
            cg = (d, "memory.max_usage_in_bytes", "memory.oom_control")
        if cg:
            break
    if not cg:
        sys.exit("LIMIT: no memory cgroup to make a child of")
    cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cg[0]] + cmd
def cgroup_figures():
    if not cg:
        return "", ""
    peak = int(open(cg[0] + "/" + cg[1]).read()) / 1048576
    text = open(cg[0] + "/" + cg[2]).read().split()
    return "%.0f" % peak, text[text.index("oom_kill") + 1]
t0 = time.monotonic()
p = subprocess.Popen(cmd, stderr=log, stdout=subprocess.DEVNULL)
if prof:
    def profile():
        for _ in range(500):  # the API listens shortly after exec
            try:
                data = urllib.request.urlopen("http://127.0.0.1:%s/debug/pprof/profile?seconds=%d" % (api, secs), timeout=secs + 60).read()
                open(prof, "wb").write(data)
                return
            except Exception:
                time.sleep(0.01)
    profiler = threading.Thread(target=profile, daemon=True)
    profiler.start()
def cpu():
    f = open("/proc/%d/stat" % p.pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick  # utime, stime (fields 14, 15)
def written():  # bytes cns wrote (write(2), pwrite(2)), MiB
    for line in open("/proc/%d/io" % p.pid):
        if line.startswith("wchar:"):
            return int(line.split()[1]) / 1048576
def hwm():
    for line in open("/proc/%d/status" % p.pid):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
import atexit
def cleanup():  # never leave cns behind, nor its cgroup
    if p.poll() is None:
        p.kill()
        p.wait()
    if cg:
        for _ in range(100):
            try:
                os.rmdir(cg[0]); break
            except OSError:
                time.sleep(0.1)
atexit.register(cleanup)
import signal
signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped"))  # (atexit runs then)
pos = 0; buf = b""; applied = None; commits = 0; vms = 0; done = None
tables = None  # when the log said the tables are built after the backlog
def records():  # the log's records written since the last call
    global pos, buf, tables
    with open(run + "/cns.log", "rb") as f:
        f.seek(pos); chunk = f.read(); pos += len(chunk)
    buf += chunk
    *lines, buf = buf.split(b"\n")
    for line in lines:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("msg") == "zones loaded into memory after a backlog":
            tables = time.monotonic()  # (it may come before the last commit's line)
        yield r
while done is None:
    if p.poll() is not None:
        sys.exit("cns exited (%s) during the load; log: %s/cns.log" % (p.returncode, run))
    if time.monotonic() - t0 > timeout:
        p.kill(); sys.exit("no final commit after %.0f s; log: %s/cns.log" % (timeout, run))
    for r in records():
        if r.get("msg") == "inventory rejected":
            p.kill(); sys.exit("inventory rejected; log: %s/cns.log" % run)
        if r.get("msg") == "inventory applied" and applied is None:
            applied = time.monotonic()
        elif r.get("msg") == "committed" and applied is not None:
            commits += 1; vms += r.get("vms", 0)
            if r.get("pending") == 0:
                done = time.monotonic(); c = cpu(); rss = hwm(); wr = written()
                break
    if done is None:
        time.sleep(0.005)
# What follows a first load: the tables built, then the live compaction.
settled = None
while settled is None and p.poll() is None and time.monotonic() - t0 < timeout:
    for r in records():
        if r.get("msg") == "db compacted":
            settled = hwm()
    if settled is None and tables is not None and time.monotonic() - tables > 30:
        settled = hwm()
    time.sleep(0.05)
cg_peak, cg_oom = cgroup_figures()
if prof:
    profiler.join()
    # what the load allocated, by where (go tool pprof -sample_index=alloc_space)
    data = urllib.request.urlopen("http://127.0.0.1:%s/debug/pprof/allocs" % api, timeout=60).read()
    open(prof.replace(".pprof", ".allocs"), "wb").write(data)
p.terminate(); p.wait()
wall = done - t0
print("%d\t%.3f\t%.3f\t%.3f\t%.1f\t%.0f\t%d\t%.0f\t%.0f\t%s\t%s\t%s" % (vms, wall, done - applied, c, c / n * 1e6, n / wall, commits, rss, wr,
      "%.0f" % settled if settled is not None else "", cg_peak, cg_oom), flush=True)
EOF
        [ "$KEEP" = 1 ] || rm -f "$run/cns.db"
    done
done

echo
echo "median (min-max) of $REPS runs, N=$N:"
python3 - "$TSV" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
for name in dict.fromkeys(r["name"] for r in rows):
    rs = [r for r in rows if r["name"] == name]
    out = []
    for k in ("wall_s", "load_s", "cpu_s", "cpu_us_per_vm", "vms_per_s", "peak_rss_mib", "written_mib", "settled_peak_mib", "cg_peak_mib"):
        v = sorted(float(r[k]) for r in rs if r[k] != "")
        if not v:
            continue
        out.append("%s %g (%g-%g)" % (k, statistics.median(v), v[0], v[-1]))
    print(name + ": " + ", ".join(out))
EOF
