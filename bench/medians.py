#!/usr/bin/env python3
"""Median (min-max) per build of every column of a TSV of repetitions.

usage: bench/medians.py ROWS.tsv
The TSV has a header row; its "build" and "rep" columns name a row, every
other column is a figure. Prints a markdown table, one row per build in the
order the builds first appear. Shared by the bench scripts that compare
builds interleaved (restart-axfr.sh, restart-sequence.sh).
"""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
cols = [c for c in rows[0] if c not in ("build", "rep")]
print("\n| build | " + " | ".join(cols) + " |")
print("|---|" + "---|" * len(cols))
for b in dict.fromkeys(r["build"] for r in rows):
    cells = []
    for c in cols:
        v = [float(r[c]) for r in rows if r["build"] == b and r[c]]
        f = "%.0f" if v and max(v) >= 1000 else "%g"
        cells.append((f + " (" + f + "-" + f + ")") % (statistics.median(v), min(v), max(v)) if v else "-")
    print("| %s | %s |" % (b, " | ".join(cells)))
