#!/usr/bin/env python3
"""Plot a soak's samples (TestSoak's TSV) as one SVG of small charts, and
print each metric's first and last value after warm-up and its slope
(least squares, per hour) as a Markdown table.

    bench/soakplot.py soak.tsv soak.svg [warmup_fraction]

No dependencies beyond the standard library (the SVG is written by hand).
"""
import sys

METRICS = [
    ("rss_kib", "RSS (MiB)", 1 / 1024),
    ("goroutines", "goroutines", 1),
    ("open_files", "open files", 1),
    ("db_bytes", "db file (MiB)", 1 / (1 << 20)),
    ("journal_entries", "journal entries (all zones)", 1),
    ("journal_bytes", "journal (KiB, all zones)", 1 / 1024),
    ("p99_us", "p99 answer latency (ms)", 1 / 1000),
    ("queries", "queries per interval", 1),
    # Newer TSVs split RSS and carry the heap's own figures (runtime.MemStats).
    ("rss_anon_kib", "RSS anonymous: heap, stacks (MiB)", 1 / 1024),
    ("rss_file_kib", "RSS file-backed: binary, mmapped db (MiB)", 1 / 1024),
    ("rss_db_kib", "RSS of the mmapped db (MiB)", 1 / 1024),
    ("heap_live", "heap live after a forced GC (MiB)", 1 / (1 << 20)),
    ("heap_inuse", "heap in use, spans (MiB)", 1 / (1 << 20)),
    ("heap_released", "heap released to the OS (MiB)", 1 / (1 << 20)),
]


def read(path):
    with open(path) as f:
        head = f.readline().strip().split("\t")
        rows = [dict(zip(head, map(float, line.split("\t")))) for line in f if line.strip()]
    return rows


def slope(xs, ys):
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def chart(x0, y0, w, h, title, xs, ys, warm_x):
    out = [f'<g transform="translate({x0},{y0})">',
           f'<rect width="{w}" height="{h}" fill="white" stroke="#ccc"/>',
           f'<text x="6" y="14" font-size="12" font-family="sans-serif">{title}</text>']
    if xs:
        lo, hi = min(ys), max(ys)
        if hi == lo:
            hi = lo + 1
        lo = min(lo, 0) if lo >= 0 and lo < hi * 0.5 else lo
        xmax = max(xs) or 1
        px = lambda x: 40 + (w - 50) * x / xmax
        py = lambda y: h - 20 - (h - 40) * (y - lo) / (hi - lo)
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
        out.append(f'<line x1="{px(warm_x):.1f}" y1="20" x2="{px(warm_x):.1f}" y2="{h-20}" stroke="#ddd" stroke-dasharray="3,3"/>')
        out.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{pts}"/>')
        for v in (lo, hi):
            out.append(f'<text x="2" y="{py(v)+4:.1f}" font-size="10" font-family="sans-serif">{v:.4g}</text>')
        out.append(f'<text x="{w-60}" y="{h-5}" font-size="10" font-family="sans-serif">{xmax/60:.0f} min</text>')
    out.append("</g>")
    return "\n".join(out)


def main():
    rows = read(sys.argv[1])
    metrics = [m for m in METRICS if not rows or m[0] in rows[0]]
    warm = float(sys.argv[3]) if len(sys.argv) > 3 else 0.2
    xs = [r["seconds"] for r in rows]
    start = int(len(rows) * warm)
    warm_x = xs[start] if rows else 0
    w, h, cols = 360, 170, 2
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{cols*w+30}" height="{(len(metrics)+1)//2*h+50}">',
           '<rect width="100%" height="100%" fill="#f8f8f8"/>',
           f'<text x="10" y="22" font-size="14" font-family="sans-serif">cns soak: {len(rows)} samples over {xs[-1]/60 if xs else 0:.0f} min (dashed: end of warm-up)</text>']
    print("| metric | after warm-up | at the end | slope per hour |")
    print("|---|---|---|---|")
    for i, (key, title, scale) in enumerate(metrics):
        ys = [r[key] * scale for r in rows]
        svg.append(chart(10 + (i % cols) * (w + 10), 35 + (i // cols) * h, w, h - 10, title, xs, ys, warm_x))
        tail_x, tail_y = xs[start:], ys[start:]
        if tail_y:
            print(f"| {title} | {tail_y[0]:.4g} | {tail_y[-1]:.4g} | {slope(tail_x, tail_y)*3600:+.3g} |")
    svg.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(svg) + "\n")


main()
