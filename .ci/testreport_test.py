#!/usr/bin/env python3
"""Checks .ci/testreport.py on `go test -json` output recorded from the
small packages in .ci/testdata/fixtures, one per way a package can fail:
a test fails, the package does not build, it hits go test's -timeout, its
TestMain fails after every test passed (goleak). .ci/run runs it before
the suite. To record the fixtures again:

    cd .ci/testdata/fixtures
    for p in ok testfail buildfail timeout mainfail; do
        go test -json -timeout 2s ./$p > ../$p.jsonl
    done
"""
import contextlib
import importlib.util
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("testreport", os.path.join(HERE, "testreport.py"))
testreport = importlib.util.module_from_spec(spec)
spec.loader.exec_module(testreport)


def report(fixture):
    """Runs the report on a fixture; returns its exit code and output."""
    out = io.StringIO()
    with open(os.path.join(HERE, "testdata", fixture + ".jsonl")) as f:
        stdin, sys.stdin = sys.stdin, f
        try:
            with contextlib.redirect_stdout(out):
                code = testreport.main()
        finally:
            sys.stdin = stdin
    return code, out.getvalue()


def failed_section(text):
    """The lines of the report's "Failed:" section."""
    if "\nFailed:\n" not in text:
        return []
    return text.split("\nFailed:\n", 1)[1].split("\n\n", 1)[0].splitlines()


class TestReport(unittest.TestCase):
    def test_all_passed(self):
        code, text = report("ok")
        self.assertEqual(code, 0, text)
        self.assertTrue(text.rstrip().endswith("1 passed, 0 failed, 0 skipped"), text)

    def test_failed_test(self):
        code, text = report("testfail")
        self.assertEqual(code, 1, text)
        self.assertIn("  example.com/fixtures/testfail TestBroken", failed_section(text))
        self.assertIn("f_test.go:7: got 1, want 2", text)
        self.assertTrue(text.rstrip().endswith("1 passed, 1 failed, 0 skipped"), text)

    def test_build_failure(self):
        code, text = report("buildfail")
        self.assertEqual(code, 1, text)
        failed = failed_section(text)
        self.assertIn("  example.com/fixtures/buildfail: did not build", failed)
        self.assertTrue(any("cannot use" in l for l in failed), failed)
        self.assertIn("1 package failed outside its tests", text)

    def test_timeout(self):
        code, text = report("timeout")
        self.assertEqual(code, 1, text)
        failed = failed_section(text)
        self.assertIn("  example.com/fixtures/timeout: timed out after 2s (go test -timeout) in TestHangs", failed)

    def test_testmain_failure(self):
        code, text = report("mainfail")
        self.assertEqual(code, 1, text)
        failed = failed_section(text)
        self.assertIn("  example.com/fixtures/mainfail: TestMain failed after every test passed (goleak: goroutines left behind)", failed)
        self.assertTrue(any("TestLeaves" in l for l in failed), failed)

    def test_skip_not_allowed(self):
        lines = [
            '{"Action":"run","Package":"p","Test":"TestX"}',
            '{"Action":"output","Package":"p","Test":"TestX","Output":"    x_test.go:9: p: nsd not installed (apt-get install nsd)\\n"}',
            '{"Action":"skip","Package":"p","Test":"TestX"}',
            '{"Action":"pass","Package":"p"}',
        ]
        out = io.StringIO()
        stdin, sys.stdin = sys.stdin, io.StringIO("\n".join(lines) + "\n")
        try:
            with contextlib.redirect_stdout(out):
                code = testreport.main()
        finally:
            sys.stdin = stdin
        self.assertEqual(code, 1, out.getvalue())
        self.assertIn("p TestX: x_test.go:9: p: nsd not installed", out.getvalue())


if __name__ == "__main__":
    unittest.main()
