package main

import (
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/tritondatacenter/cns/smf/man"
	"github.com/tritondatacenter/cns/smf/man/mantest"
)

// cns(8) is built from the command line's own help: the committed page is
// what manPage makes now (go generate, or -update, rewrites it),
// names every command but the hidden ones, and groff renders it without
// a warning.
func TestManPageCNS(t *testing.T) {
	page, err := manPage()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"serve", "db info", "db export", "db check", "db restore", "db compact", "adm", "tui", "version", "sim"} {
		if !strings.Contains(page, "\\fB"+man.Word("cns "+cmd)+"\\fR") {
			t.Errorf("the page lacks cns %s", cmd)
		}
	}
	for _, hidden := range []string{"cns man", "cns adm status"} {
		if strings.Contains(page, man.Word(hidden)) {
			t.Errorf("the page lists %s (hidden, or cnsadm(1)'s)", hidden)
		}
	}
	out := mantest.Check(t, manPath, page, *update, "go generate . (or go test -run TestManPageCNS . -update)")
	for _, want := range []string{"SIGHUP", "EXIT STATUS", "96", "CNS_API", "/data/cns/cns.db", "cnsadm(1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the rendered page lacks %q:\n%s", want, out)
		}
	}
}

// Every example of cns(8) is a command line cns accepts, and the page
// shows it.
func TestManExamplesCNS(t *testing.T) {
	page, err := manPage()
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples {
		var cli CLI
		parser, err := kong.New(&cli, kong.Name("cns"), kong.Exit(func(int) { t.Errorf("cns %q exits", ex.Args) }))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parser.Parse(ex.Args); err != nil {
			t.Errorf("cns %s: %v", strings.Join(ex.Args, " "), err)
		}
		if !strings.Contains(page, "\ncns "+man.Word(strings.Join(ex.Args, " "))+"\n") {
			t.Errorf("the page lacks the example cns %s", strings.Join(ex.Args, " "))
		}
	}
}
