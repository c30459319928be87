#!/usr/bin/env python3
"""Plot a busy-data-center run (bench/busydc.sh) as one SVG of three charts
over time, the quiet phase then the churn: answer latency (p50/p99/p999 a
second, lost queries marked), change -> answer on cns and on each secondary
(p50 and p99 of the changes made in each second), and the commit backlog (cns_pending_vms, its peak
in each second) with the changes made per second.

    bench/busydcplot.py busydc.tsv busydc-probes.tsv busydc.svg

No dependencies beyond the standard library (the SVG is written by hand,
as bench/soakplot.py does).
"""
import math
import sys

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]


def read(path):
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        return [dict(zip(head, line.rstrip("\n").split("\t"))) for line in f if line.strip()]


def chart(x0, y0, w, h, title, xmax, series, log=False, lines=(), marks=(), churn_x=None, unit=""):
    """series: [(label, [(x, y)], color, dashed)]; lines: [(y, label)]
    horizontal targets; marks: x positions flagged in red (lost queries)."""
    out = [f'<g transform="translate({x0},{y0})">',
           f'<rect width="{w}" height="{h}" fill="white" stroke="#ccc"/>',
           f'<text x="6" y="14" font-size="12" font-family="sans-serif">{title}</text>']
    ys = [y for _, pts, _, _ in series for _, y in pts if (y > 0 or not log)] + [y for y, _ in lines]
    if not ys:
        ys = [1]
    lo, hi = min(ys), max(ys)
    if log:
        lo, hi = math.log10(max(lo, 1e-3)), math.log10(max(hi, 1e-3))
        lo, hi = math.floor(lo), math.ceil(hi)
    else:
        lo = min(lo, 0)
    if hi <= lo:
        hi = lo + 1
    px = lambda x: 50 + (w - 60) * x / (xmax or 1)
    f = (lambda y: math.log10(max(y, 10 ** lo))) if log else (lambda y: y)
    py = lambda y: h - 20 - (h - 40) * (f(y) - lo) / (hi - lo)
    if churn_x is not None:
        out.append(f'<line x1="{px(churn_x):.1f}" y1="20" x2="{px(churn_x):.1f}" y2="{h-20}" stroke="#999" stroke-dasharray="4,3"/>')
        out.append(f'<text x="{px(churn_x)+4:.1f}" y="30" font-size="10" font-family="sans-serif">churn starts</text>')
    for y, label in lines:
        out.append(f'<line x1="50" y1="{py(y):.1f}" x2="{w-10}" y2="{py(y):.1f}" stroke="#d62728" stroke-dasharray="2,3"/>')
        out.append(f'<text x="{w-120}" y="{py(y)-3:.1f}" font-size="10" fill="#d62728" font-family="sans-serif">{label}</text>')
    for x in marks:
        out.append(f'<line x1="{px(x):.1f}" y1="{h-20}" x2="{px(x):.1f}" y2="{h-28}" stroke="#d62728" stroke-width="2"/>')
    for i, (label, pts, color, dashed) in enumerate(series):
        pts = [(x, y) for x, y in pts if y > 0 or not log]
        dash = ' stroke-dasharray="4,2"' if dashed else ""
        if pts:
            d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.3"{dash} points="{d}"/>')
        out.append(f'<text x="{60 + i * 140}" y="{h-5}" font-size="10" fill="{color}" font-family="sans-serif">{label}</text>')
    ticks = [10 ** e for e in range(int(lo), int(hi) + 1)] if log else [lo, (lo + hi) / 2, hi]
    for v in ticks:
        out.append(f'<text x="2" y="{py(v)+4:.1f}" font-size="10" font-family="sans-serif">{v:.4g}{unit}</text>')
    out.append(f'<text x="{w-45}" y="{h-5}" font-size="10" font-family="sans-serif">{xmax:.0f} s</text>')
    out.append("</g>")
    return "\n".join(out)


def main():
    rows = read(sys.argv[1])
    probes = read(sys.argv[2])
    xs = [float(r["seconds"]) for r in rows]
    xmax = (max(xs) + 1) if xs else 1
    churn = [float(r["seconds"]) for r in rows if r["phase"] == "1"]
    churn_x = min(churn) if churn else None
    w, h = 900, 230
    col = lambda k, scale=1: [(float(r["seconds"]), float(r[k]) * scale) for r in rows]
    lost = [float(r["seconds"]) for r in rows if float(r["lost"]) > 0]
    latency = chart(10, 35, w, h, "answer latency, per second of sending (ms, log); red ticks: seconds with lost queries",
                    xmax, [("p50", col("p50_us", 1e-3), COLORS[0], False), ("p99", col("p99_us", 1e-3), COLORS[1], False),
                           ("p999", col("p999_us", 1e-3), COLORS[3], False)],
                    log=True, lines=[(1, "target p99 1 ms")], marks=lost, churn_x=churn_x)
    servers = ["cns"] + sorted({p["server"] for p in probes} - {"cns"})
    series = []
    for i, srv in enumerate(servers):
        fails = sum(1 for p in probes if p["server"] == srv and p["ok"] != "true")
        note = f", {fails} unanswered" if fails else ""
        for q, dashed in (("p50", True), ("p99", False)):
            key = f"c2a_{srv}_{q}_ms"
            if rows and key in rows[0]:
                pts = [(float(r["seconds"]), float(r[key])) for r in rows if r["phase"] == "1"]
                series.append((f"{srv} {q}{note if q == 'p99' else ''}", pts, COLORS[i % len(COLORS)], dashed))
    c2a = chart(10, 35 + h + 10, w, h, "change → answer by the second of the change: p50 (dashed) and p99 (ms, log)", xmax, series, log=True,
                lines=[(100, "cns target 100 ms"), (1000, "secondary target 1 s")], churn_x=churn_x)
    backlog = chart(10, 35 + 2 * (h + 10), w, h, "commit backlog: cns_pending_vms (peak in each second); changes made per second",
                    xmax, [("pending VMs", col("pending_max"), COLORS[0], False), ("changes/s", col("changes"), COLORS[2], False)],
                    churn_x=churn_x)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w+20}" height="{35 + 3 * (h + 10) + 10}">',
           '<rect width="100%" height="100%" fill="#f8f8f8"/>',
           '<text x="10" y="22" font-size="14" font-family="sans-serif">cns in a busy data center: '
           f'{len(rows)} s, quiet then churn; {len(probes)} probes</text>', latency, c2a, backlog, "</svg>"]
    with open(sys.argv[3], "w") as f:
        f.write("\n".join(svg) + "\n")


main()
