package cnsadm

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/smf/man/mantest"
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
	for _, verb := range []string{"status", "vm", "peers", "config", "zones", "history", "wait", "feeds", "services", "backup", "upgrade", "tui"} {
		if !strings.Contains(page, "\\fBcnsadm "+verb+"\\fR") {
			t.Errorf("the page lacks cnsadm %s", verb)
		}
	}
	if strings.Contains(page, "cnsadm man") {
		t.Error("the page lists the hidden man command")
	}
	out := mantest.Check(t, manPath, page, *update, "go generate ./admin/cnsadm (or go test ./admin/cnsadm -run TestManPage -update)")
	// And what it renders says what cnsadm config prints.
	if !strings.Contains(out, "EXIT STATUS") || !strings.Contains(out, "allow_transfer") || !strings.Contains(out, "cns.json(5)") {
		t.Errorf("rendered page:\n%s", out)
	}
}

// Every example of cnsadm(1) is a command line cnsadm accepts, and the
// page shows it.
func TestManExamples(t *testing.T) {
	page, err := ManPage()
	if err != nil {
		t.Fatal(err)
	}
	mantest.Examples(t, page, "cnsadm", examples, func() any { return &Cmd{} })
}
