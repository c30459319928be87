package cnsadm

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

var update = flag.Bool("update", false, "rewrite smf/man/cnsadm.1 from the command line's help")

// manPath is ManPath from this package's directory.
var manPath = filepath.Join("..", "..", ManPath)

// cnsadm(1) is built from the command line's own help: the committed page
// is what ManPage makes now (go generate, or -update, rewrites it), names
// every verb, and groff renders it without a warning.
func TestManPage(t *testing.T) {
	page, err := ManPage()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(manPath, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(manPath)
	if err != nil || string(committed) != page {
		t.Errorf("%s is stale: run go generate ./admin/cnsadm (or go test ./admin/cnsadm -run TestManPage -update)", ManPath)
	}
	for _, verb := range []string{"status", "vm", "peers", "config", "zones", "history", "wait", "feeds", "services", "backup", "upgrade", "tui"} {
		if !strings.Contains(page, "\\fBcnsadm "+verb+"\\fR") {
			t.Errorf("the page lacks cnsadm %s", verb)
		}
	}
	if strings.Contains(page, "cnsadm man") {
		t.Error("the page lists the hidden man command")
	}
	if testing.Short() {
		t.Skip("-short: the page's rendering (groff) is not checked")
	}
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff not installed (Debian package groff-base): the page's rendering is not checked")
	}
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", manPath)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("groff -man -ww %s: %v: %s", ManPath, err, stderr.String())
	}
	// And what it renders says what cnsadm config prints.
	out, err := exec.Command("groff", "-man", "-Tutf8", "-P-cbou", manPath).Output()
	if err != nil || !strings.Contains(string(out), "EXIT STATUS") || !strings.Contains(string(out), "allow_transfer") {
		t.Errorf("rendered page: %v\n%s", err, out)
	}
}

// Every example of cnsadm(1) is a command line cnsadm accepts, and the
// page shows it.
func TestManExamples(t *testing.T) {
	page, err := ManPage()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "\n.SH EXAMPLES\n") {
		t.Fatal("no EXAMPLES section")
	}
	for _, ex := range examples {
		var cmd Cmd
		parser, err := kong.New(&cmd, kong.Name("cnsadm"), kong.Exit(func(int) { t.Errorf("cnsadm %q exits", ex.Args) }))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parser.Parse(ex.Args); err != nil {
			t.Errorf("cnsadm %s: %v", strings.Join(ex.Args, " "), err)
		}
		if !strings.Contains(page, "\ncnsadm "+roffWord(strings.Join(ex.Args, " "))+"\n") {
			t.Errorf("the page lacks the example cnsadm %s", strings.Join(ex.Args, " "))
		}
	}
}
