#!/usr/bin/env python3
"""Reads `go test -json` on stdin and prints what a person reads from a
plain `go test` run: each package's closing line, the whole output of every
failed test, and a closing "N passed, N failed, N skipped" line. Before
that line, each failed test is named again with its assertion lines (a
_test.go file's t.Error and t.Fatal output, a data race, a panic): a failed test that logs much
(a secondary's log) would otherwise push them out of a reader's view, and
a CI page shows only the end.

It fails (exit 1) when any test failed; when a package failed outside its
tests, naming the package and why (it did not build, it hit go test's
-timeout, or its TestMain failed after every test passed, as the goroutine
leak check does); and when a test skipped for a reason CI is supposed to
provide (a missing Debian package, a tmpfs it cannot mount, a loopback
address it cannot bind): .ci/run installs everything the tests need, so
such a skip is work not done. The few skips that CI cannot avoid are
listed in ALLOWED, each with why. .ci/testreport_test.py checks it on
`go test -json` output recorded from small packages (.ci/testdata).
"""
import json
import re
import sys

# (test name pattern, reason pattern): a skip matching both is expected.
ALLOWED = [
    # NSD before 4.9 (Debian 12 ships 4.6) cannot consume RFC 9432 catalog
    # zones; the tests run against BIND and Knot. A newer NSD runs them.
    (r"^(TestCatalog|TestInteropCatalog)/nsd$", r"NSD needs 4\.9 or later"),
    # The test of the skip itself: secondarytest.Start and Installed must
    # skip, naming the Debian package, when a server binary is missing (a
    # fake path).
    (r"^TestMissingBinary/\w+$", r"/nonexistent/"),
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


TIMED_OUT = re.compile(r"^panic: test timed out after (\S+)")


def package_failure(pkg, ev, tests_failed, running, loose, build):
    """Why package pkg failed outside its tests, and the lines that show
    it; None when failed tests explain the failure."""
    if ev.get("FailedBuild"):
        lines = [l for l in build.get(ev["FailedBuild"], []) if not l.startswith("# ")]
        return "did not build", lines
    for test, lines in running.items():
        for l in lines:
            m = TIMED_OUT.match(l)
            if m:
                return f"timed out after {m.group(1)} (go test -timeout) in {test}", [l.rstrip()]
    if running:
        name = ", ".join(sorted(running))
        return f"exited during {name}", [l.rstrip() for ls in running.values() for l in ls][-15:]
    if tests_failed:
        return None
    # Every test passed: TestMain (or the process) failed after them,
    # e.g. goleak's check for goroutines left behind.
    after = loose
    for i, l in enumerate(loose):
        if l.startswith("PASS"):
            after = loose[i + 1:]
    said = [l.rstrip() for l in after if not l.startswith(("FAIL", "ok "))]
    why = "TestMain failed after every test passed"
    if any(l.startswith("goleak:") for l in said):
        why += " (goleak: goroutines left behind)"
    return why, said[:15]


def main():
    out = {}  # (package, test) -> output lines
    loose = {}  # package -> output lines outside any test
    build = {}  # ImportPath -> build output lines
    failed_in = {}  # package -> tests failed
    passed = failed = skipped = 0
    bad_skips = []
    failures = []
    broken = []  # (package, why, lines)
    for line in sys.stdin:
        try:
            ev = json.loads(line)
        except ValueError:
            print(line, end="")  # build errors and the like come as text
            continue
        pkg, test, action = ev.get("Package", ""), ev.get("Test"), ev.get("Action")
        if action == "build-output":
            build.setdefault(ev.get("ImportPath", ""), []).append(ev.get("Output", ""))
            print(ev.get("Output", ""), end="")
            continue
        if action == "output":
            text = ev.get("Output", "")
            if test:
                out.setdefault((pkg, test), []).append(text)
            else:
                loose.setdefault(pkg, []).append(text)
                if re.match(r"^(ok|FAIL|\?|---|panic|# )", text) or "build failed" in text:
                    print(text, end="")
            continue
        if not test:
            if action == "fail":
                running = {t: ls for (p, t), ls in out.items() if p == pkg}
                found = package_failure(pkg, ev, failed_in.get(pkg, 0), running, loose.get(pkg, []), build)
                if found:
                    why, lines = found
                    broken.append((pkg, why, lines))
                    for ls in running.values():
                        print("".join(ls), end="")
            continue
        if action == "pass":
            passed += 1
            out.pop((pkg, test), None)
        elif action == "fail":
            failed += 1
            failed_in[pkg] = failed_in.get(pkg, 0) + 1
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
    if failures or broken:
        print("\nFailed:")
        for pkg, why, lines in broken:
            print(f"  {pkg}: {why}")
            for l in lines:
                print("      " + (l if len(l) <= 400 else l[:400] + " ..."))
        for f, said in failures:
            print("  " + f)
            for l in said:
                print("      " + l)
    tail = f", {len(broken)} package{'s' if len(broken) > 1 else ''} failed outside {'their' if len(broken) > 1 else 'its'} tests" if broken else ""
    print(f"\n{passed} passed, {failed} failed, {skipped} skipped{tail}")
    return 1 if failed or bad_skips or broken else 0


if __name__ == "__main__":
    sys.exit(main())
