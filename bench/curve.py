#!/usr/bin/env python3
"""The cost curve: how each figure of a bench/run.sh run
grows with the number of VMs N.

    bench/curve.py --work WORK [--out OUT] [--svg FILE]
    bench/curve.py --work WORK1 --work WORK2 ...   (sizes run separately,
        e.g. 1M alone: each WORK's run-anchors output is WORK/anchors)

Reads what bench/run.sh wrote for every size of one run:
  WORK/figures.tsv  initial load through `cns serve` (N vms seconds commits)
  WORK/sizes.tsv    db file and zone sizes, and each preparation step's time
  WORK/restart.tsv  bench/first-answer.py restarts (RESTART_QUOTA): first answer,
                    and the warm-up: exec to the log line "zones loaded into
                    memory" (warm_ms; the line's own "took" is the table
                    building alone), RSS right after it, peak RSS (VmHWM)
  WORK/axfr.tsv     warm AXFR of the forward zone, cns in the CPU quota
  WORK/loss.tsv     lost queries at fixed rates
  OUT/results.tsv   run-anchors (cns = "custom" and the peers): UDP and TCP
                    qps (per capped CPU-second: qps / quota), RSS, AXFR, load
and prints Markdown: one row per figure with its value at every N, the
exponent k of a least-squares fit figure ~ N^k on log-log axes, the
exponent between each pair of consecutive sizes, and "faster than linear"
where k > 1.1 (over the whole range or the last step). For throughput
(answers per CPU-second) the cost is the inverse: an answer's cost grows
as N^-k. Then the issue's 1M targets, as ratios to Knot. The SVG (default
WORK/curve.svg) has one log-log chart per figure: cns's points and fit,
the peers' points, and a dashed line through cns's first point of linear growth
(of a constant rate, for answers per CPU-second).
Only the Python standard library is used.
"""
import argparse
import csv
import math
import os
import statistics

PEER_NAMES = {"custom": "cns", "knot": "Knot", "nsd": "NSD", "bind": "BIND"}
COLORS = {"custom": "#1f77b4", "knot": "#d62728", "nsd": "#2ca02c", "bind": "#9467bd"}
FASTER = 1.1  # exponent above which a figure is named as growing faster than N


def fnum(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def read_tsv(path):
    """rows of a TSV with a header, as dicts ([] when the file is missing)"""
    try:
        with open(path) as f:
            return list(csv.DictReader(f, delimiter="\t"))
    except OSError:
        return []


def read_plain(path, cols):
    """rows of a header-less TSV (figures.tsv) as dicts"""
    try:
        with open(path) as f:
            return [dict(zip(cols, l.rstrip("\n").split("\t"))) for l in f if l.strip() and not l.startswith("N\t")]
    except OSError:
        return []


def by_n(rows, key):
    """{N: median of key}"""
    out = {}
    for r in rows:
        out.setdefault(int(r["N"]), []).append(fnum(r.get(key)))
    return {n: med(v) for n, v in out.items() if med(v) is not None}


class Figure:
    """One curve: a title, a unit, cns's values and the peers' by N."""

    def __init__(self, title, unit, cost=True):
        self.title, self.unit, self.cost = title, unit, cost
        self.series = {}  # server -> {N: value}

    def add(self, server, values):
        if values:
            self.series[server] = values


def fit(points):
    """least-squares slope of log(y) on log(x), or None"""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else None


def steps(points):
    """the exponent between each pair of consecutive sizes"""
    pts = sorted((x, y) for x, y in points if y and y > 0)
    return [(a[0], b[0], math.log(b[1] / a[1]) / math.log(b[0] / a[0])) for a, b in zip(pts, pts[1:])]


def gather(dirs):
    """dirs: [(WORK, OUT)]; the rows of every run together"""
    quotas = set()
    results, figures, sizes, restart, axfr = [], [], [], [], []
    for work, out in dirs:
        try:
            quotas.add(float(open(os.path.join(out, "cpu_quota.txt")).read().strip()))
        except (OSError, ValueError):
            pass
        results += [r for r in read_tsv(os.path.join(out, "results.tsv")) if r.get("status") == "ok"]
        figures += read_plain(os.path.join(work, "figures.tsv"), ["N", "vms", "seconds", "commits", "cpu_s"])
        sizes += read_tsv(os.path.join(work, "sizes.tsv"))
        restart += read_tsv(os.path.join(work, "restart.tsv"))
        axfr += read_tsv(os.path.join(work, "axfr.tsv"))
    if len(quotas) > 1:
        raise SystemExit("the runs used different CPU quotas (%s): not one yardstick" % sorted(quotas))
    quota = quotas.pop() if quotas else 0.0
    # a size prepared by more than one run: keep one sizes row per N
    sizes = list({r["N"]: r for r in sizes}.values())

    def anchors(server, key, scale=1.0, per=None):
        rows = [r for r in results if r["server"] == server and r["N"].isdigit()]
        vals = {}
        for r in rows:
            v = fnum(r.get(key))
            if v is None:
                continue
            if per == "quota":
                v = v / (quota / 100) if quota else None
            elif per:
                cpu = fnum(r.get(per))
                v = v / (cpu / 100) if cpu else None
            if v is not None:
                vals.setdefault(int(r["N"]), []).append(v * scale)
        return {n: med(v) for n, v in vals.items()}

    def scaled(d, s):
        return {n: v * s for n, v in d.items()}

    peers = ("custom", "knot", "nsd", "bind")
    figs = []
    f = Figure("initial load through cns serve", "s")
    f.add("custom", by_n(figures, "seconds"))
    figs.append(f)
    f = Figure("initial load, CPU seconds of cns", "CPU s")
    f.add("custom", by_n(figures, "cpu_s"))
    figs.append(f)
    f = Figure("restart to first answer (first-answer.py, one CPU)", "ms")
    f.add("custom", by_n(restart, "first_ms"))
    figs.append(f)
    f = Figure("restart/load to both SOAs (run-anchors, in the quota)", "ms")
    for s in peers:
        f.add(s, anchors(s, "load_ms"))
    figs.append(f)
    f = Figure("tables warm: exec to 'zones loaded into memory' (one CPU)", "ms")
    f.add("custom", by_n(restart, "warm_ms"))
    figs.append(f)
    f = Figure("tables warm, CPU time of cns from exec", "CPU ms")
    f.add("custom", by_n(restart, "warm_cpu_ms"))
    figs.append(f)
    f = Figure("tables warm, in the CPU quota (axfr step)", "ms")
    f.add("custom", by_n(axfr, "warm_ms"))
    figs.append(f)
    # the axfr step samples once the feeds' stored state is read too (cns
    # reads it after the tables are built); restart.tsv at the tables only
    f = Figure("RSS after warm-up (cns alone; peers: run-anchors, after the queries)", "MiB")
    f.add("custom", scaled(by_n(axfr, "rss_kib"), 1 / 1024) or scaled(by_n(restart, "rss_kib"), 1 / 1024))
    for s in peers[1:]:
        f.add(s, anchors(s, "rss_kib", 1 / 1024))
    figs.append(f)
    f = Figure("RSS serving (run-anchors, after the queries)", "MiB")
    f.add("custom", anchors("custom", "rss_kib", 1 / 1024))
    figs.append(f)
    f = Figure("peak RSS while restarting (VmHWM)", "MiB")
    f.add("custom", scaled(by_n(axfr, "hwm_kib"), 1 / 1024) or scaled(by_n(restart, "hwm_kib"), 1 / 1024))
    figs.append(f)
    f = Figure("db file", "MB")
    f.add("custom", scaled(by_n(sizes, "db_bytes"), 1e-6))
    figs.append(f)
    f = Figure("warm AXFR of the forward zone (cns in the quota; peers: run-anchors)", "ms")
    f.add("custom", by_n(axfr, "axfr_ms"))
    for s in peers[1:]:
        f.add(s, anchors(s, "axfr_ms"))
    figs.append(f)
    f = Figure("AXFR right after SOA answers (run-anchors)", "ms")
    f.add("custom", anchors("custom", "axfr_ms"))
    figs.append(f)
    f = Figure("AXFR bytes on the wire", "MB")
    for s in peers:
        f.add(s, anchors(s, "axfr_bytes", 1e-6))
    figs.append(f)
    per = "quota" if quota else "udp_srv_cpu_pct"
    label = "per capped CPU-s" if quota else "per server CPU-s"
    f = Figure("UDP answers " + label, "answers/s", cost=False)
    for s in peers:
        f.add(s, anchors(s, "udp_qps", per=per))
    figs.append(f)
    f = Figure("TCP answers " + label, "answers/s", cost=False)
    for s in peers:
        f.add(s, anchors(s, "tcp_qps", per=("quota" if quota else "tcp_srv_cpu_pct")))
    figs.append(f)
    return [f for f in figs if f.series.get("custom") or f.series], sizes, quota


def show(v):
    if v is None:
        return "-"
    if v >= 100:
        return "{:,.0f}".format(v)
    return "{:.3g}".format(v)


def table(figs, ns):
    print("| figure | unit | " + " | ".join("N=%s" % short_n(n) for n in ns) +
          " | exponent k (fit) | k per step | grows |")
    print("|---|---|" + "---|" * len(ns) + "---|---|---|")
    named = []
    for f in figs:
        for s, vals in f.series.items():
            k = fit(vals.items())
            st = steps(vals.items())
            if f.cost:
                worst = max([k or 0] + [x[2] for x in st])
                grows = "-" if k is None else ("**faster than linear**" if worst > FASTER else
                                               ("about linear" if worst > 0.9 else "slower than linear"))
            else:
                grows = "-" if k is None else "cost per answer ~ N^%.2f" % -k
            if f.cost and k is not None and worst > FASTER:
                named.append("%s, %s (k %.2f; %s)" % (PEER_NAMES[s], f.title, k, step_text(st)))
            print("| %s%s | %s | %s | %s | %s | %s |" % (
                "" if s == "custom" else PEER_NAMES[s] + ": ", f.title, f.unit,
                " | ".join(show(vals.get(n)) for n in ns),
                "-" if k is None else "%.2f" % k, step_text(st) or "-", grows))
    return named


def short_n(n):
    return "%dM" % (n // 1000000) if n % 1000000 == 0 else ("%dk" % (n // 1000) if n % 1000 == 0 else str(n))


def step_text(st):
    return ", ".join("%s→%s %.2f" % (short_n(a), short_n(b), k) for a, b, k in st)


def targets(figs, n):
    """the targets at the largest size, as cns / Knot"""
    get = {f.title: f.series for f in figs}

    def val(title_start, server="custom"):
        for t, s in get.items():
            if t.startswith(title_start):
                return s.get(server, {}).get(n)
        return None

    rss, rss_knot = val("RSS after warm-up"), val("RSS after warm-up", "knot")
    first, warm = val("restart to first answer"), val("tables warm: exec")
    ax, ax_knot = val("warm AXFR"), val("warm AXFR", "knot")
    rows = [
        ("RSS serving after warm-up ≤ 1 GiB", rss, "MiB", rss is not None and rss <= 1024),
        ("RSS ≤ 0.7 × Knot's", (rss / rss_knot) if rss and rss_knot else None, "× Knot",
         rss and rss_knot and rss / rss_knot <= 0.7),
        ("restart to first answer ≤ 0.3 s", first, "ms", first is not None and first <= 300),
        ("tables warm ≤ 5 s", warm, "ms", warm is not None and warm <= 5000),
        ("warm AXFR of the forward zone ≤ 0.5 × Knot's", (ax / ax_knot) if ax and ax_knot else None, "× Knot",
         ax and ax_knot and ax / ax_knot <= 0.5),
    ]
    print("| target at N=%s | cns | | met? |" % short_n(n))
    print("|---|---|---|---|")
    for name, v, unit, ok in rows:
        print("| %s | %s | %s | %s |" % (name, show(v), unit, "-" if v is None else ("met" if ok else "**missed**")))


def svg(figs, ns, path):
    w, h, cols = 380, 230, 3
    rows = (len(figs) + cols - 1) // cols
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">' %
           (cols * (w + 10) + 10, rows * (h + 10) + 60),
           '<rect width="100%" height="100%" fill="#f8f8f8"/>',
           '<text x="10" y="20" font-size="14">cns cost curve: each figure against N VMs, log-log '
           '(dashed grey through cns\'s first point: linear growth, or a constant rate for answers/s; k: cns\'s exponent)</text>']
    x = 14
    for s in ("custom", "knot", "nsd", "bind"):
        out.append('<circle cx="%d" cy="38" r="4" fill="%s"/><text x="%d" y="42" font-size="11">%s</text>' %
                   (x, COLORS[s], x + 8, PEER_NAMES[s]))
        x += 60
    for i, f in enumerate(figs):
        out.append(chart(10 + (i % cols) * (w + 10), 55 + (i // cols) * (h + 10), w, h, f, ns))
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")


def chart(x0, y0, w, h, f, ns):
    ys = [v for s in f.series.values() for v in s.values() if v and v > 0]
    out = ['<g transform="translate(%d,%d)">' % (x0, y0),
           '<rect width="%d" height="%d" fill="white" stroke="#ccc"/>' % (w, h)]
    title = f.title if len(f.title) <= 58 else f.title[:56] + "…"
    out.append('<text x="6" y="14" font-size="11">%s (%s)</text>' % (esc(title), esc(f.unit)))
    if not ys or len(ns) < 1:
        out.append("</g>")
        return "\n".join(out)
    lx0, lx1 = math.log10(min(ns)) - 0.15, math.log10(max(ns)) + 0.15
    ly0, ly1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    if ly1 == ly0:
        ly1 += 1
    left, right, top, bottom = 48, 10, 24, 22

    def px(n):
        return left + (w - left - right) * (math.log10(n) - lx0) / (lx1 - lx0)

    def py(v):
        return h - bottom - (h - top - bottom) * (math.log10(v) - ly0) / (ly1 - ly0)

    for d in range(int(ly0), int(ly1) + 1):
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>' % (left, py(10 ** d), w - right, py(10 ** d)))
        out.append('<text x="2" y="%.1f" font-size="9">%s</text>' % (py(10 ** d) + 3, show(10 ** d)))
    for n in ns:
        out.append('<text x="%.1f" y="%d" font-size="9" text-anchor="middle">%s</text>' % (px(n), h - 8, short_n(n)))
    base = f.series.get("custom")
    if base:
        n0 = min(base)
        ref = 1 if f.cost else 0  # linear cost; constant throughput
        pts = [(n, base[n0] * (n / n0) ** ref) for n in (min(ns), max(ns))]
        pts = [(n, v) for n, v in pts if v > 0]
        clip = [(n, min(max(v, 10 ** ly0), 10 ** ly1)) for n, v in pts]
        out.append('<polyline fill="none" stroke="#999" stroke-dasharray="4,3" points="%s"/>' %
                   " ".join("%.1f,%.1f" % (px(n), py(v)) for n, v in clip))
    for s, vals in f.series.items():
        pts = sorted((n, v) for n, v in vals.items() if v and v > 0)
        if len(pts) > 1:
            out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' %
                       (COLORS[s], " ".join("%.1f,%.1f" % (px(n), py(v)) for n, v in pts)))
        for n, v in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (px(n), py(v), COLORS[s]))
    if base:
        k = fit(base.items())
        if k is not None:
            out.append('<text x="%d" y="%d" font-size="10" text-anchor="end" fill="%s">cns k = %.2f</text>' %
                       (w - right, h - bottom - 4, COLORS["custom"], k))
    out.append("</g>")
    return "\n".join(out)


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, action="append", help="bench/run.sh's WORK directory (repeatable)")
    ap.add_argument("--out", help="run-anchors' OUT directory (default WORK/anchors; one --work only)")
    ap.add_argument("--svg", help="the plot (default: the first WORK/curve.svg)")
    a = ap.parse_args()
    if a.out and len(a.work) > 1:
        ap.error("--out goes with a single --work")
    dirs = [(w, a.out or os.path.join(w, "anchors")) for w in a.work]
    figs, sizes, quota = gather(dirs)
    ns = sorted({n for f in figs for s in f.series.values() for n in s})
    if not ns:
        print("no figures in %s and %s" % (a.work, out))
        return
    print("Cost curve (cns unless a server is named; medians over the repetitions%s):" %
          (", servers in run-anchors capped at %.0f %% of a CPU" % quota if quota else ""))
    print()
    named = table(figs, ns)
    print()
    print("Where the figures come from: initial load = bench/run.sh's load step (\"inventory applied\" to the last"
          " \"committed\" with nothing pending, in cns's log; CPU = utime+stime of cns then); restart to first"
          " answer and tables warm = bench/first-answer.py (exec to the first SOA answer, polled every 2 ms; exec"
          " to the moment cns's log holds \"zones loaded into memory\", polled every 10 ms; RSS, VmHWM and CPU"
          " from /proc/PID at that moment); the warm AXFR = bench/axfr-count after that log line, cns in the CPU"
          " quota; UDP/TCP, peers' RSS, load and AXFR = run-anchors (results.tsv).")
    print()
    print("Faster than linear (exponent > %.1f over the range or one step): %s" %
          (FASTER, "; ".join(named) if named else "none"))
    if sizes:
        print()
        print("Preparation steps, wall seconds (geninv, load through cns serve, db export, gen-queries):")
        print()
        print("| N | db bytes | bytes per VM | forward RRs | forward zone bytes | geninv | load | export | queries |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in sizes:
            vms = fnum(r.get("vms")) or fnum(r["N"])
            db = fnum(r.get("db_bytes"))
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["N"], show(db), show(db / vms) if db and vms else "-", r.get("forward_rrs", "-"),
                r.get("forward_zone_bytes", "-"), r.get("geninv_s", "-"), r.get("load_s", "-"),
                r.get("export_s", "-"), r.get("queries_s", "-")))
    print()
    targets(figs, max(ns))
    path = a.svg or os.path.join(a.work[0], "curve.svg")
    svg(figs, ns, path)
    print()
    print("Plot: %s" % path)


if __name__ == "__main__":
    main()
