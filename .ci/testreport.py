#!/usr/bin/env python3
"""Reads `go test -json` on stdin and prints what a person reads from a
plain `go test` run: each package's closing line, the whole output of every
failed test, and a closing "N passed, N failed, N skipped" line. Before
that line, each failed test is named again with its assertion lines (a
_test.go file's t.Error and t.Fatal output, a data race, a panic): a failed test that logs much
(a secondary's log) would otherwise push them out of a reader's view, and
a CI page shows only the end.

It fails (exit 1) when any test failed, or when a test skipped for a reason
CI is supposed to provide (a missing Debian package, a tmpfs it cannot
mount, a loopback address it cannot bind): .ci/run installs everything the
tests need, so such a skip is work not done. The few skips that CI cannot
avoid are listed in ALLOWED, each with why.
"""
import json
import re
import sys

# (test name pattern, reason pattern): a skip matching both is expected.
ALLOWED = [
    # NSD 4.6 (Debian 12) cannot consume RFC 9432 catalog zones; the test
    # runs against BIND and Knot.
    (r"^TestCatalog/nsd$", r"catalog"),
    # The test of the skip itself: secondarytest.Start must skip, naming the
    # Debian package, when a server binary is missing (a fake path).
    (r"^TestMissingBinary/skips$", r"/nonexistent/"),
]


def allowed(test, reason):
    return any(re.search(t, test) and re.search(r, reason, re.I) for t, r in ALLOWED)


# A test file's t.Error/t.Fatal line ("    name_test.go:123: message"),
# the race detector's verdict ("testing.go:1617: race detected during
# execution of test") or a panic.
ASSERTION = re.compile(r"^\s+([\w.-]+_test|testing)\.go:\d+: |^panic: ")


def assertions(lines, most=6, width=400):
    """The first assertion lines of a failed test's output, shortened."""
    said = [l.strip() for l in lines if ASSERTION.match(l)]
    return [l if len(l) <= width else l[:width] + " ..." for l in said[:most]]


def main():
    out = {}  # (package, test) -> output lines
    passed = failed = skipped = 0
    bad_skips = []
    failures = []
    for line in sys.stdin:
        try:
            ev = json.loads(line)
        except ValueError:
            print(line, end="")  # build errors and the like come as text
            continue
        pkg, test, action = ev.get("Package", ""), ev.get("Test"), ev.get("Action")
        if action == "output":
            text = ev.get("Output", "")
            if test:
                out.setdefault((pkg, test), []).append(text)
            elif re.match(r"^(ok|FAIL|\?|---|panic|# )", text) or "build failed" in text:
                print(text, end="")
            continue
        if not test:
            continue
        if action == "pass":
            passed += 1
            out.pop((pkg, test), None)
        elif action == "fail":
            failed += 1
            lines = out.pop((pkg, test), [])
            failures.append((f"{pkg} {test}", assertions(lines)))
            print("".join(lines), end="")
        elif action == "skip":
            skipped += 1
            lines = out.pop((pkg, test), [])
            reason = " ".join(l.strip() for l in lines if not l.startswith(("=== ", "--- ")))
            if not allowed(test, reason):
                bad_skips.append(f"{pkg} {test}: {reason or '(no reason given)'}")
    if bad_skips:
        print("\nTests skipped for a reason CI must provide (install it in .ci/run, or allow it in .ci/testreport.py with why):")
        for s in bad_skips:
            print("  " + s)
    if failures:
        print("\nFailed:")
        for f, said in failures:
            print("  " + f)
            for l in said:
                print("      " + l)
    print(f"\n{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or bad_skips else 0


if __name__ == "__main__":
    sys.exit(main())
