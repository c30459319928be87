package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/smf/man"
	"github.com/tritondatacenter/cns/smf/man/mantest"
)

// cns.json(5) is the key table's: the committed page is what ManPage
// makes now (-update rewrites it), names every key and zone setting, its
// examples are files cns accepts, and groff renders it without a warning.
func TestManPage(t *testing.T) {
	page := ManPage()
	for _, k := range Keys {
		if !strings.Contains(page, "\\fB"+man.Word(k.Name)+"\\fR") {
			t.Errorf("the page lacks the key %s", k.Name)
		}
	}
	for _, k := range ZoneKeys {
		if !strings.Contains(page, ".TP\n\\fB"+man.Word(k.Name)+"\\fR (") {
			t.Errorf("the page lacks the zone setting %s", k.Name)
		}
	}
	for _, ex := range ManExamples {
		if _, err := Parse([]byte(ex.JSON), "example"); err != nil {
			t.Errorf("example %q: %v", ex.What, err)
		}
	}
	out := mantest.Check(t, filepath.Join("..", "..", ManPath), page, *update, "go generate ./admin/config (or go test ./admin/config -run TestManPage -update)")
	if !strings.Contains(out, "forward_zones") || !strings.Contains(out, "restarts cns") || strings.Contains(out, "`") {
		t.Errorf("rendered page:\n%s", out)
	}
}
