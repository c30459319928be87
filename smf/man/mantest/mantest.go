// Package mantest checks a manual page in a test: the committed file is
// what its source makes now, groff renders it without a warning, and its
// examples are command lines the program accepts.
package mantest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/tritondatacenter/cns/smf/man"
)

// Check compares the page committed at file (a path from the test's
// directory) with page, the page its source makes now, rewriting the file
// first when update is set. Then it renders the file with groff -ww, as
// man(1) would, and returns the rendered text (without formatting) for
// the caller's own checks. Without groff (or with -short) it skips after
// the comparison.
func Check(t *testing.T, file, page string, update bool, regenerate string) string {
	t.Helper()
	if update {
		if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(file)
	if err != nil || string(committed) != page {
		t.Errorf("%s is stale: run %s", file, regenerate)
	}
	if testing.Short() {
		t.Skip("-short: the page's rendering (groff) is not checked")
	}
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff not installed (Debian package groff-base): the page's rendering is not checked")
	}
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", file)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("groff -man -ww %s: %v: %s", file, err, stderr.String())
	}
	out, err := exec.Command("groff", "-man", "-Tutf8", "-P-cbou", file).Output()
	if err != nil {
		t.Fatalf("groff -man %s: %v", file, err)
	}
	return string(out)
}

// Examples checks a page's EXAMPLES: each is a command line the program
// accepts (grammar is a new, empty value of its kong grammar, so that
// nothing runs) and the page shows it.
func Examples(t *testing.T, page, command string, examples []man.Example, grammar func() any) {
	t.Helper()
	if !strings.Contains(page, "\n.SH EXAMPLES\n") {
		t.Fatal("no EXAMPLES section")
	}
	for _, ex := range examples {
		line := command + " " + strings.Join(ex.Args, " ")
		parser, err := kong.New(grammar(), kong.Name(command), kong.Exit(func(int) { t.Errorf("%s exits", line) }))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parser.Parse(ex.Args); err != nil {
			t.Errorf("%s: %v", line, err)
		}
		if !strings.Contains(page, "\n"+command+" "+man.Word(strings.Join(ex.Args, " "))+"\n") {
			t.Errorf("the page lacks the example %s", line)
		}
	}
}
