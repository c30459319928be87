#!/usr/bin/env python3
"""cns against the best peer, per target, from run-anchors' results.

usage: ratios.py results.tsv [loss.tsv [prep-figures.tsv [restart.tsv]]]
       ratios.py --fixed-rate cpu-per-answer/results.tsv

results.tsv is bench/run-anchors.sh's raw output (one row per
server, size and repetition; "custom" is cns). Every figure is the median
over the repetitions of one run; a ratio is cns / best peer (for times and
memory: cns / peer, lower is better). loss.tsv (bench/run.sh) holds the
fixed-rate runs against cns ("N rate_name qps sent lost"); prep-figures.tsv
the initial load of each size ("N vms seconds commits"); restart.tsv the
bench/first-answer.py restarts ("N rep first_ms all_zones_ms answers p50
p99 max").

The capped yardstick: when bench/run.sh ran the servers inside a
CPU quota (environment CPU_QUOTA, percent of one CPU, or cpu_quota.txt
beside results.tsv), a server's capacity is qps / quota: "answers per capped
CPU-second". The previous rounds' figure, qps / the server's measured CPU
share, is printed beside it. A capped figure whose server did not get most
of its quota (measured share < 90 % of it: the machine's load, not the
quota, held it back) is marked "starved".

--fixed-rate prints bench/cpu-per-answer.sh's yardstick instead: CPU per
answer at the same offered rates for every server, the median of the
repetitions with its range, as answers per CPU-second, counted two ways
(the server's tasks, exact under any load; the machine's busy time, where
the baseline was quiet); cns / each peer; system calls and context
switches per answer (from the one counted run), dnsperf's average latency
interrupts per answer (timer, rescheduling and function call, beyond the
baseline's rate: the wake-ups no task is charged for) and the load
average of the runs.
Prints Markdown.
"""
import csv
import os
import statistics
import sys

PEERS = ("nsd", "knot", "bind")
# the busiest baseline (CPU-seconds per second) a machine-wide figure is taken from
QUIET_BASELINE = 0.25
NAMES = {"nsd": "NSD", "knot": "Knot", "bind": "BIND", "custom": "cns", "ceiling": "ceiling"}


def fnum(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def cpu_quota(results):
    """The quota the servers ran in, percent of one CPU (0: uncapped)."""
    q = os.environ.get("CPU_QUOTA")
    if q is None:
        try:
            q = open(os.path.join(os.path.dirname(results) or ".", "cpu_quota.txt")).read().strip()
        except OSError:
            q = "0"
    return fnum(q) or 0


def fixed_rate(path):
    """bench/cpu-per-answer.sh's table: answers per CPU-second at fixed rates."""
    rows = list(csv.DictReader(open(path), delimiter="\t"))
    runs, counts = {}, {}
    for r in rows:
        a = fnum(r["answered"])
        if not a:
            continue
        key = (int(r["N"]), int(r["rate"]), r["server"])
        if r["kind"] == "fixed":
            secs = fnum(r["secs"]) or 1
            ksoft = max(0.0, (fnum(r.get("ksoftirqd_s")) or 0) - (fnum(r.get("baseline_ksoftirqd_s")) or 0))
            # the machine-wide figure only from a quiet machine: with other
            # work about, its CPU moves between the baseline and the run by
            # more than the server's cost
            machine = None
            if (fnum(r["baseline_cpu_s"]) or 0) / secs <= QUIET_BASELINE:
                machine = (fnum(r["machine_cpu_s"]) - fnum(r["baseline_cpu_s"]) - fnum(r["client_cpu_s"])) / a
            runs.setdefault(key, []).append({
                "tasks": (fnum(r["server_cpu_s"]) + ksoft) / a, "machine": machine,
                "ctxsw": fnum(r["server_ctxsw"]) / a,
                "irqs": None if fnum(r.get("irqs")) is None else (fnum(r["irqs"]) - fnum(r["baseline_irqs"])) / a, "lat": fnum(r["avg_latency_ms"]), "lost": fnum(r["lost"]) or 0,
                "load": fnum(r["loadavg"]), "qps": fnum(r["qps"])})
        elif r["kind"] == "count":
            counts[key] = (fnum(r["syscalls"]), a, r["counts"])
    if not runs:
        print("no fixed-rate rows in %s" % path)
        return
    order = list(dict.fromkeys(r["server"] for r in rows))
    peers = [s for s in order if s in PEERS]
    own = [s for s in order if s not in peers]

    def per_cpu(rs, what):
        """answers per CPU-second: median (min-max) of 1 / cost"""
        v = sorted(1 / x[what] for x in rs if x[what] is not None and x[what] > 0)
        return (statistics.median(v), v[0], v[-1]) if v else None

    def fmt(t):
        return "-" if t is None else "%s (%s–%s)" % tuple("{:,.0f}".format(x) for x in t)

    def calls(key):
        if key not in counts:
            return "-"
        sc, a, detail = counts[key]
        parts = []
        for kv in detail.split():
            name, _, v = kv.partition("=")
            if name != "context-switches" and fnum(v):
                parts.append("%s %.2f" % (name, fnum(v) / a))
        return "%.2f (%s)" % (sc / a, ", ".join(parts)) if sc is not None else "-"

    print("CPU per UDP answer at fixed offered rates (bench/cpu-per-answer.sh): answers per CPU-second,"
          " median (min–max) over the repetitions. \"tasks\": the server's cgroup (its threads and the"
          " softirq work their system calls carry) and ksoftirqd beyond the baseline's rate; exact whatever"
          " else runs. \"machine\": the machine's busy time less the no-server baseline's and dnsperf's,"
          " which also holds the interrupts that wake an idle CPU; only from runs whose baseline was quiet"
          " (at most a quarter of a CPU busy): with other work about, its CPU moves between the baseline and"
          " the run by more than the server's cost.")
    print()
    print("| N | offered qps | server | tasks: answers per CPU-s | machine: answers per CPU-s (runs) |"
          " syscalls per answer (which) | context switches per answer | interrupts per answer | avg latency ms | lost |"
          " runs | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    short = []
    for n, rate in sorted({(k[0], k[1]) for k in runs}):
        for srv in order:
            rs = runs.get((n, rate, srv))
            if not rs:
                continue
            got = statistics.median(x["qps"] or 0 for x in rs)
            if got < 0.95 * rate:
                short.append("%s at %s VMs answered %s qps of %s offered" % (
                    NAMES.get(srv, srv), "{:,}".format(n), "{:,.0f}".format(got), "{:,}".format(rate)))
            loads = [x["load"] for x in rs if x["load"] is not None]
            irqs = [x["irqs"] for x in rs if x["irqs"] is not None]
            print("| %s | %s | %s | %s | %s (%d) | %s | %.3f | %s | %.3f | %d | %d | %s |" % (
                "{:,}".format(n), "{:,}".format(rate), NAMES.get(srv, srv), fmt(per_cpu(rs, "tasks")),
                fmt(per_cpu(rs, "machine")), sum(x["machine"] is not None for x in rs), calls((n, rate, srv)),
                statistics.median(x["ctxsw"] for x in rs), "%.3f" % statistics.median(irqs) if irqs else "-",
                statistics.median(x["lat"] or 0 for x in rs),
                sum(x["lost"] for x in rs), len(rs), "%.1f–%.1f" % (min(loads), max(loads)) if loads else "-"))
    if short:
        print()
        print("Saturated, not at the offered rate (median): " + "; ".join(short) + ".")
    print()
    print("Ratios of answers per CPU-second of the tasks, medians (in brackets the worst case: cns's lowest"
          " run against the peer's highest; after the slash the machine-wide medians' ratio, where both"
          " have one), target ≥ 1.2:")
    print()
    print("| N | offered qps | build | " + " | ".join("/ " + NAMES[p] for p in peers) + " | met? |")
    print("|---|---|---|" + "---|" * len(peers) + "---|")
    for n, rate in sorted({(k[0], k[1]) for k in runs}):
        for c in own:
            rs = runs.get((n, rate, c), [])
            if not rs:
                continue
            ct, cm = per_cpu(rs, "tasks"), per_cpu(rs, "machine")
            cells, ok = [], ct is not None
            for p in peers:
                prs = runs.get((n, rate, p), [])
                if not prs:
                    cells.append("-")  # not run at this size (BIND_SIZES)
                    continue
                pt, pm = per_cpu(prs, "tasks"), per_cpu(prs, "machine")
                cell = "-" if ct is None or pt is None else "%.2f (%.2f)" % (ct[0] / pt[0], ct[1] / pt[2])
                if cm is not None and pm is not None:
                    cell += " / %.2f" % (cm[0] / pm[0])
                cells.append(cell)
                ok = ok and pt is not None and ct[0] / pt[0] >= 1.2
            print("| %s | %s | %s | %s | %s |" % ("{:,}".format(n), "{:,}".format(rate), NAMES.get(c, c),
                                                " | ".join(cells), "met" if ok else "**missed**"))
    loads = [x["load"] for rs in runs.values() for x in rs if x["load"] is not None]
    if loads:
        print()
        print("Load average (1 min) at the runs' starts: %.2f–%.2f." % (min(loads), max(loads)))


def main():
    if sys.argv[1] == "--fixed-rate":
        fixed_rate(sys.argv[2])
        return
    quota = cpu_quota(sys.argv[1])
    rows = [r for r in csv.DictReader(open(sys.argv[1]), delimiter="\t") if r.get("status") == "ok"]
    by = {}
    for r in rows:
        by.setdefault((r["server"], r["N"]), []).append(r)

    def fig(srv, n, key):
        rs = by.get((srv, n), [])
        if key == "udp_per_cpu":
            return med([fnum(r["udp_qps"]) / (fnum(r["udp_srv_cpu_pct"]) / 100)
                        for r in rs if fnum(r["udp_qps"]) and fnum(r["udp_srv_cpu_pct"])])
        if key == "tcp_per_cpu":
            return med([fnum(r["tcp_qps"]) / (fnum(r["tcp_srv_cpu_pct"]) / 100)
                        for r in rs if fnum(r["tcp_qps"]) and fnum(r["tcp_srv_cpu_pct"])])
        if key in ("udp_per_quota", "tcp_per_quota"):
            return med(capped(rs, key[:3]))
        return med([fnum(r.get(key)) for r in rs])

    def capped(rs, proto):
        return [fnum(r[proto + "_qps"]) / (quota / 100) for r in rs if quota and fnum(r[proto + "_qps"])]

    def capped_note(srv, n, proto):
        """spread and starvation of one server's capped figure"""
        rs = by.get((srv, n), [])
        v = capped(rs, proto)
        if not v:
            return ""
        cpu = [fnum(r[proto + "_srv_cpu_pct"]) for r in rs if fnum(r[proto + "_srv_cpu_pct"])]
        note = "%s %.0f-%.0f" % (NAMES[srv], min(v), max(v))
        if cpu and statistics.median(cpu) < 0.9 * quota:
            note += " starved (CPU %.0f%% of %.0f%%)" % (statistics.median(cpu), quota)
        return note

    def runs(srv, n):
        return len(by.get((srv, n), []))

    sizes = sorted({n for (s, n) in by if s == "custom"}, key=lambda x: int(x))
    if not sizes:
        print("no cns (custom) rows in %s" % sys.argv[1])
        return

    def show(v, fmt):
        return "-" if v is None else fmt.format(v)

    print("| N | target | cns | best peer | ratio | met? | runs (cns) |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        def best(key, peers, lower):
            vals = [(fig(p, n, key), p) for p in peers if fig(p, n, key) is not None]
            if not vals:
                return None, None
            return (min if lower else max)(vals)

        def line(label, key, peers, lower, fmt, scale=1.0, factor=1.0, absolute=None, only100k=False):
            c = fig("custom", n, key)
            b, who = best(key, peers, lower)
            cs = None if c is None else c * scale
            bs = None if b is None else b * scale
            ratio = None if (c is None or not b) else c / b
            if only100k and n != "100000":
                met = None  # the target is set at 100k VMs; other sizes are shown for reference
            elif absolute is not None:
                met = cs is not None and cs <= absolute
            elif ratio is None:
                met = None
            else:
                met = ratio <= factor if lower else ratio >= factor
            print("| %s | %s | %s | %s | %s | %s | %d |" % (
                n, label, show(cs, fmt),
                "-" if bs is None else "%s (%s)" % (fmt.format(bs), NAMES[who]),
                show(ratio, "{:.2f}"),
                "-" if met is None else ("met" if met else "**missed**"), runs("custom", n)))

        if quota:
            for who in ("nsd", "knot"):
                line("UDP answers per capped CPU-s (qps / %.0f%% quota) ≥ 1.2× %s's" % (quota, NAMES[who]),
                     "udp_per_quota", (who,), False, "{:,.0f}", factor=1.2)
            line("TCP answers per capped CPU-s ≥ 2× Knot's", "tcp_per_quota", ("knot",), False, "{:,.0f}", factor=2)
            for p in ("udp", "tcp"):
                print("| %s | spread of the capped %s figures (min-max) | %s | - | - | - | - |" % (n, p.upper(), "; ".join(
                    x for x in (capped_note(s, n, p) for s in ("custom", "nsd", "knot", "bind")) if x)))
        old = " (old yardstick: per measured server CPU share)" if quota else ""
        line("UDP answers per server-CPU-s ≥ NSD's and Knot's" + old, "udp_per_cpu", ("nsd", "knot"), False, "{:,.0f}")
        line("TCP answers per server-CPU-s ≥ BIND's" + old, "tcp_per_cpu", ("bind",), False, "{:,.0f}")
        line("TCP answers per server-CPU-s ≥ Knot's (DESIGN.md)" + old, "tcp_per_cpu", ("knot",), False, "{:,.0f}")
        line("restart/load to first answer, s (≤ 0.3 s at 100k)", "load_ms", PEERS, True, "{:.3f}",
             scale=0.001, absolute=0.3, only100k=True)
        line("RSS after load, MiB ≤ Knot's", "rss_kib", ("knot",), True, "{:.0f}", scale=1 / 1024,
             only100k=True)
        line("AXFR of the forward zone, s ≤ 1.5× Knot's", "axfr_ms", ("knot",), True, "{:.3f}",
             scale=0.001, factor=1.5)
        lost = [fnum(r["udp_lost"]) for r in by.get(("custom", n), [])]
        sent = [fnum(r["udp_sent"]) for r in by.get(("custom", n), [])]
        print("| %s | lost UDP queries, saturated (info) | %s / %s | - | - | - | %d |" % (
            n, show(sum(v for v in lost if v is not None), "{:.0f}"),
            show(sum(v for v in sent if v is not None), "{:.0f}"), runs("custom", n)))
        pl = [fnum(r["probe_lost"]) for r in by.get(("custom", n), [])]
        print("| %s | lost UDP queries at the fixed probe rate | %s | - | - | %s | %d |" % (
            n, show(sum(v for v in pl if v is not None), "{:.0f}"),
            "met" if pl and all(v == 0 for v in pl if v is not None) else "**missed**", runs("custom", n)))

    if len(sys.argv) > 2:
        try:
            loss = [l.split("\t") for l in open(sys.argv[2]).read().splitlines() if l and not l.startswith("N\t")]
        except OSError:
            loss = []
        if loss:
            print()
            print("Zero lost queries at 50% of the measured ceiling (dnsperf -Q, cns only):")
            print()
            print("| N | rate | qps asked | sent | lost | met? |")
            print("|---|---|---|---|---|---|")
            for f in loss:
                if len(f) < 5:
                    continue
                n, name, q, s, l = f[:5]
                print("| %s | %s | %s | %s | %s | %s |" % (n, name, q, s, l, "met" if l == "0" else "**missed**"))
    if len(sys.argv) > 3:
        try:
            prep = [l.split("\t") for l in open(sys.argv[3]).read().splitlines() if l and not l.startswith("N\t")]
        except OSError:
            prep = []
        if prep:
            print()
            print("Initial load of each size through `cns serve` (inventory file → records → commits):")
            print()
            print("| N | VMs | seconds | VM changes/s | commits | met (≥ 20,000/s)? |")
            print("|---|---|---|---|---|---|")
            for f in prep:
                if len(f) < 4:
                    continue
                n, vms, secs, commits = f[:4]
                rate = float(vms) / float(secs) if float(secs) > 0 else 0
                print("| %s | %s | %s | %.0f | %s | %s |" % (n, vms, secs, rate, commits,
                                                            "met" if rate >= 20000 else "**missed**"))
    if len(sys.argv) > 4:
        restart_table(sys.argv[4])


def restart_table(path):
    try:
        rows = [l.split("\t") for l in open(path).read().splitlines() if l and not l.startswith("N\t")]
    except OSError:
        return
    by = {}
    for f in rows:
        if len(f) >= 8:
            by.setdefault(f[0], []).append(f)
    if not by:
        return
    print()
    print("Restart to first answer (bench/first-answer.py: exec to the first SOA answer, polled every 2 ms;"
          " then one SOA query every 10 ms for 5 s while cns builds its in-memory tables), and the warm-up:"
          " exec to the log's \"zones loaded into memory\", the RSS then and the peak RSS while restarting"
          " (the targets at 1M: first answer ≤ 0.3 s, tables warm ≤ 5 s, RSS ≤ 1 GiB), median (min-max):")
    print()
    print("| N | restarts | first answer ms | both zones ms | p99 / max answer ms in the next 5 s | tables warm ms"
          " | RSS then MiB | peak RSS MiB | met? |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sorted(by, key=int):
        fs = by[n]

        def c(i, scale=1.0):
            v = [float(f[i]) * scale for f in fs if len(f) > i and f[i] not in ("", "nan")]
            if not v:
                return "-"
            return "%.0f (%.0f-%.0f)" % (statistics.median(v), min(v), max(v))

        def m(i, scale=1.0):
            v = [float(f[i]) * scale for f in fs if len(f) > i and f[i] not in ("", "nan")]
            return statistics.median(v) if v else None
        first, warm, rss = m(2), m(8), m(10, 1 / 1024)
        checks = []
        if n in ("100000", "1000000"):
            checks.append(first is not None and first <= 300)
        if n == "1000000":
            checks += [warm is not None and warm <= 5000, rss is not None and rss <= 1024]
        met = "-" if not checks else ("met" if all(checks) else "**missed**")
        print("| %s | %d | %s | %s | %s / %s | %s | %s | %s | %s |" % (
            n, len(fs), c(2), c(3), c(6), c(7), c(8), c(10, 1 / 1024), c(11, 1 / 1024), met))

if __name__ == "__main__":
    main()
