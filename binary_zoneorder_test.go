package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/admin/cnsadm"
)

// The order of forward_zones is data: a NIC's zones are tried in it, and
// CloudAPI makes the first inst. suffix a new VM's dns_domain. Zones
// zz.example.com then aa.example.com keep that order through cnsadm's
// edits of the file (a peer added, a zone added last, one renamed in its
// place), and so do the suffixes new VMs get, GET /zones and cnsadm zones.
func TestForwardZoneOrderFile(t *testing.T) {
	dir := t.TempDir()
	cfgPath := testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) {
		c["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
	})
	cfg := mustObject(t, string(must(os.ReadFile(cfgPath))))
	cfg.Set("forward_zones", mustObject(t, `{"zz.example.com": {"networks": ["*"]}, "aa.example.com": {"networks": ["*"]}}`))
	if err := os.WriteFile(cfgPath, must(json.MarshalIndent(cfg, "", "\t")), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startCNS(t, cfgPath)
	api := "http://" + p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
	p.waitCommitted(0)
	c := admin.NewClient(api, "")
	ctx := context.Background()
	adm := func(args ...string) string {
		t.Helper()
		out, stderr, code := runCNS(t, append([]string{"adm", "--api", api, "--config-file", cfgPath}, args...)...)
		if code != 0 {
			t.Fatalf("cnsadm %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
	check := func(step string, zones ...string) {
		t.Helper()
		var want []string
		for _, z := range zones {
			want = append(want, "svc.alice."+z, "inst.alice."+z)
		}
		got, err := c.SuffixesForVM(ctx, aliceUUID, []string{"5840750e-9b5f-413b-9413-4c392c07ca35"})
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: suffixes %q %v, want %q", step, got, err, want)
		}
		file, err := cnsadm.FileStore{Path: cfgPath}.Load()
		if err != nil {
			t.Fatal(err)
		}
		if got := file.Object("forward_zones").Keys(); !slices.Equal(got, zones) {
			t.Errorf("%s: the file's forward_zones %q, want %q", step, got, zones)
		}
		var listed []string
		for _, l := range strings.Split(adm("zones"), "\n")[1:] {
			if f := strings.Fields(l); len(f) > 0 {
				listed = append(listed, f[0])
			}
		}
		if want := append(slices.Clone(zones), cnsadm.ReverseZoneLabel); !slices.Equal(listed, want) {
			t.Errorf("%s: cnsadm zones lists %q, want %q", step, listed, want)
		}
		api, err := c.Zones(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, z := range api {
			names = append(names, z.Name)
		}
		if len(names) <= len(zones) || !slices.Equal(names[:len(zones)], zones) || !strings.HasSuffix(names[len(zones)], ".arpa") {
			t.Errorf("%s: GET /zones lists %q, want %q then the reverse zones", step, names, zones)
		}
	}
	// edit runs cnsadm (which returns once the server has reloaded) and
	// waits for the commit that serves a change of the records.
	edit := func(records bool, args ...string) {
		t.Helper()
		mark := p.mark()
		adm(args...)
		if records {
			p.waitCommitted(mark)
		}
	}
	check("as configured", "zz.example.com", "aa.example.com")
	edit(false, "zones", "zz.example.com", "peers+=127.0.0.1")
	check("a peer added", "zz.example.com", "aa.example.com")
	edit(true, "zones", "-a", "mm.example.com", "networks=*")
	check("a zone added", "zz.example.com", "aa.example.com", "mm.example.com")
	edit(true, "zones", "aa.example.com", "zone=bb.example.com")
	check("a zone renamed", "zz.example.com", "bb.example.com", "mm.example.com")
	edit(true, "config", "use_alias=false")
	check("another key edited", "zz.example.com", "bb.example.com", "mm.example.com")
}

// Through SAPI: the PUT carries forward_zones in the order SAPI gave
// them, so config-agent renders them in that order.
func TestForwardZoneOrderSAPI(t *testing.T) {
	sapi := startSAPI(t, `{"forward_zones": {"zz.example.com": {"networks": ["*"]}, "aa.example.com": {"networks": ["*"]}}}`, `{}`)
	cfg := testConfig(t, t.TempDir(), "", nil)
	adm := func(args ...string) string {
		t.Helper()
		out, stderr, code := runCNS(t, append([]string{"adm", "--api", "http://127.0.0.1:1", "--config-file", cfg}, args...)...)
		if code != 0 {
			t.Fatalf("cnsadm %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
	if out := adm("zones"); strings.Index(out, "zz.example.com") > strings.Index(out, "aa.example.com") {
		t.Errorf("cnsadm zones:\n%s", out)
	}
	adm("zones", "zz.example.com", "peers+=127.0.0.1")
	adm("zones", "-a", "mm.example.com", "networks=*")
	puts := sapi.putBodies()
	want := []string{
		`{"metadata":{"forward_zones":{"zz.example.com":{"networks":["*"],"peers":["127.0.0.1"]},"aa.example.com":{"networks":["*"]}}}}`,
		`{"metadata":{"forward_zones":{"zz.example.com":{"networks":["*"],"peers":["127.0.0.1"]},"aa.example.com":{"networks":["*"]},"mm.example.com":{"networks":["*"]}}}}`,
	}
	if !slices.Equal(puts, want) {
		t.Errorf("PUTs:\n%s\nwant\n%s", strings.Join(puts, "\n"), strings.Join(want, "\n"))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
