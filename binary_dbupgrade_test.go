package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/tritondatacenter/cns/db"
)

// dbViewCommands are the offline views `cns db` gives of the schema-1
// fixture; testdata/db-schema1.golden is what cns at 930173c (schema 1)
// printed for them, but for a VM's names, listed since in the
// reference's order (instance names first) rather than by name, and its
// owner line (login and UUID), printed since.
var dbViewCommands = [][]string{
	{"zones"}, {"check"},
	{"export", "us-west-1.cns.example.com"}, {"export", "us-west-1.int.example.com"},
	{"export", "100.51.198.in-addr.arpa"}, {"export", "0.0.0.0.0.0.1.0.8.b.d.0.1.0.0.2.ip6.arpa"},
	{"journal", "us-west-1.cns.example.com"},
	{"vm", "b752d788-c0e4-4307-8c56-353a4ea66c02"}, {"--json", "vm", "b752d788-c0e4-4307-8c56-353a4ea66c02"},
	{"vm", "ea31bc42-738a-4575-b5d9-5255f63a8e26"}, {"--json", "vm", "ea31bc42-738a-4575-b5d9-5255f63a8e26"},
	{"vm", "05376f2a-e500-4960-9e17-c0a25b1816bf"}, {"--json", "vm", "05376f2a-e500-4960-9e17-c0a25b1816bf"},
	{"vm", "3c0f9e52-7a1d-4b8e-9f26-5d4c3b2a1e07"}, {"--json", "vm", "3c0f9e52-7a1d-4b8e-9f26-5d4c3b2a1e07"},
	{"vm", "6da8b7df-c541-498f-90ef-01d5730ef236"}, {"--json", "vm", "6da8b7df-c541-498f-90ef-01d5730ef236"},
	{"vm", "fb576cd8-2cf6-4182-b2a9-c6ba9c73834e"}, // destroyed: not in the db
}

// relativeAge is the one line of `cns db vm` that depends on when it runs.
var relativeAge = regexp.MustCompile(`(?m)^(last_visit: +).* ago$`)

func dbViews(t *testing.T, path string) string {
	t.Helper()
	var b strings.Builder
	for _, args := range dbViewCommands {
		out, stderr, code := runCNS(t, append([]string{"db", "--db", path}, args...)...)
		fmt.Fprintf(&b, "### cns db %s\n%s%s### exit %d\n", strings.Join(args, " "), out, strings.ReplaceAll(stderr, path, "DB"), code)
	}
	return relativeAge.ReplaceAllString(b.String(), "${1}AGO")
}

// Ensure a db written by schema 1 (db/testdata/schema1.db.gz) shows in
// every `cns db` view exactly what the cns that wrote it showed, both
// before `cns serve` upgrades it (read-only: nothing is written) and
// after, and that cns serve upgrades it in place on open and serves it at
// once, without a feed.
func TestDBSchema1UpgradeKeepsViews(t *testing.T) {
	golden, err := os.ReadFile("testdata/db-schema1.golden")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cns.db")
	f, err := os.Open("db/testdata/schema1.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got := dbViews(t, path)
	if *update {
		if err := os.WriteFile("testdata/db-schema1.golden", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		golden = []byte(got)
	}
	if got != string(golden) {
		t.Errorf("schema-1 file read by this cns (-update rewrites the golden; then review):\n%s", diffLines(string(golden), got))
	}
	if after, _ := os.ReadFile(path); string(after) != string(data) {
		t.Fatal("cns db changed the file")
	}
	if out, _, _ := runCNS(t, "db", "--db", path, "info"); !strings.Contains(out, "schema:  1\n") {
		t.Errorf("fixture info:\n%s", out)
	}

	cfg := testConfig(t, dir, "", nil) // its db is the fixture; no feed
	p := startCNS(t, cfg)
	if r := p.query("udp", "cloudapi.us-west-1.cns.example.com", 1); len(r.Answer) != 1 {
		t.Errorf("upgraded db does not answer at once: %v", r)
	}
	p.stop(syscall.SIGTERM)
	if out, _, _ := runCNS(t, "db", "--db", path, "info"); !strings.Contains(out, fmt.Sprintf("schema:  %d\n", db.SchemaVersion)) {
		t.Errorf("after cns serve, info:\n%s", out)
	}
	if got := dbViews(t, path); got != string(golden) {
		t.Errorf("upgraded file:\n%s", diffLines(string(golden), got))
	}
}

// diffLines shows the first lines where want and got differ.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i, n := 0, 0; i < max(len(w), len(g)) && n < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %q\n  got  %q\n", i+1, wl, gl)
			n++
		}
	}
	return b.String()
}
