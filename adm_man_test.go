package main

import (
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// Every example of cnsadm(1) is a command line the CLI accepts, and the
// page shows it.
func TestCnsadmManExamples(t *testing.T) {
	page, err := cnsadmManPage()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "\n.SH EXAMPLES\n") {
		t.Fatal("no EXAMPLES section")
	}
	for _, ex := range cnsadmExamples {
		var cli CLI
		parser, err := kong.New(&cli, kong.Name("cnsadm"), kong.Exit(func(int) { t.Errorf("cnsadm %q exits", ex.Args) }))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parser.Parse(append([]string{"adm"}, ex.Args...)); err != nil {
			t.Errorf("cnsadm %s: %v", strings.Join(ex.Args, " "), err)
		}
		if !strings.Contains(page, "\ncnsadm "+roffWord(strings.Join(ex.Args, " "))+"\n") {
			t.Errorf("the page lacks the example cnsadm %s", strings.Join(ex.Args, " "))
		}
	}
}
