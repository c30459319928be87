package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/records"
)

// computedDC computes with records.Compute and records.ComputeNode what
// the embedded default data center must publish: every (owner, type) with
// its records, the union over VMs and compute nodes, one PTR per address. It shares the naming rules with the
// server, so it checks the store, the served RRsets and the answers, not
// the rules themselves: those are held to hand-written answers by
// feeds/records/testdata/dc.golden and TestDefaultDataCenterLiterals.
type rrKey struct {
	owner string
	qtype uint16
}

func computedDC(t *testing.T) (map[rrKey][]string, []records.Result, *dc.Inventory) {
	t.Helper()
	cfg, err := config.Load("testdata/cns.json")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := dc.LoadInventory("testdata/inventory.json")
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.RecordsConfig()
	networks := map[string]*dc.Network{}
	for i := range inv.Networks {
		networks[inv.Networks[i].UUID] = &inv.Networks[i]
	}
	w := (&records.World{Networks: networks}).WithPools(inv.NetworkPools)
	users := map[string]*dc.User{}
	for i := range inv.Users {
		users[inv.Users[i].UUID] = &inv.Users[i]
	}
	servers := map[string]*dc.Server{}
	for i := range inv.Servers {
		servers[inv.Servers[i].UUID] = &inv.Servers[i]
	}
	type ptrCand struct {
		pref   uint8
		target []byte
		text   string
	}
	want := map[rrKey][]string{}
	ptrs := map[string][]ptrCand{}
	var results []records.Result
	for i := range inv.VMs {
		vm := &inv.VMs[i]
		down := false
		if s := servers[vm.ServerUUID]; s != nil {
			down = dc.ServerState(s, time.Now()) == dc.CNDown
		}
		res := records.Compute(&rc, w, records.Input{VM: vm, Owner: users[vm.OwnerUUID], CNDown: down})
		results = append(results, res)
		for _, r := range res.Records {
			h := r.RR.Header()
			text := strings.ReplaceAll(r.RR.String(), "\t", " ")
			if h.Rrtype == dns.TypePTR {
				tw, _ := db.ZoneWire(strings.TrimSuffix(r.RR.(*dns.PTR).Ptr, "."))
				ptrs[h.Name] = append(ptrs[h.Name], ptrCand{r.Pref, tw, text})
				continue
			}
			k := rrKey{h.Name, h.Rrtype}
			if !slices.Contains(want[k], text) {
				want[k] = append(want[k], text)
			}
		}
	}
	for i := range inv.Servers {
		for _, r := range records.ComputeNode(&rc, &inv.Servers[i]).Records {
			k := rrKey{r.RR.Header().Name, r.RR.Header().Rrtype}
			want[k] = append(want[k], strings.ReplaceAll(r.RR.String(), "\t", " "))
		}
	}
	for owner, cands := range ptrs {
		sort.Slice(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			if a.pref != b.pref {
				return a.pref < b.pref
			}
			if len(a.target) != len(b.target) {
				return len(a.target) < len(b.target)
			}
			return bytes.Compare(a.target, b.target) < 0
		})
		want[rrKey{owner, dns.TypePTR}] = []string{cands[0].text}
	}
	for k := range want {
		sort.Strings(want[k])
	}
	return want, results, inv
}

// Every name the default data center publishes is answered with exactly
// its records, over UDP and TCP; unlisted VMs' names do not exist.
func TestDefaultDataCenterAnswers(t *testing.T) {
	want, results, inv := computedDC(t)
	dir := t.TempDir()
	p := startCNS(t, testConfig(t, dir, "testdata/inventory.json", nil))
	p.waitCommitted(0)

	if len(want) < 100 {
		t.Fatalf("only %d (owner, type) pairs expected: the demo DC lost its records?", len(want))
	}
	for k, records := range want {
		for _, proto := range []string{"udp", "tcp"} {
			r := p.query(proto, k.owner, k.qtype)
			var got []string
			for _, rr := range r.Answer {
				got = append(got, strings.ReplaceAll(rr.String(), "\t", " "))
			}
			sort.Strings(got)
			if r.Rcode != dns.RcodeSuccess || !r.Authoritative || !slices.Equal(got, records) {
				t.Errorf("%s %s over %s: rcode %s aa %v\n got %q\nwant %q", k.owner, dns.TypeToString[k.qtype], proto,
					dns.RcodeToString[r.Rcode], r.Authoritative, got, records)
			}
		}
	}

	// VMs listed nowhere have no instance names; NODATA for names that
	// exist with other types; the apex answers SOA and NS.
	cfg, _ := config.Load("testdata/cns.json")
	checked := 0
	for i, res := range results {
		if res.ListInstance {
			continue
		}
		vm := &inv.VMs[i]
		for _, z := range cfg.Forward {
			name := vm.UUID + ".inst." + vm.OwnerUUID + "." + z.Name + "."
			if _, listed := want[rrKey{name, dns.TypeA}]; listed {
				continue // another VM's record cannot be at this name; keep the check honest
			}
			if r := p.query("udp", name, dns.TypeA); r.Rcode != dns.RcodeNameError {
				t.Errorf("unlisted vm %s (%v): %s answered %s", vm.UUID, res.Reasons, name, dns.RcodeToString[r.Rcode])
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("the demo DC has no unlisted VM to check")
	}
	for _, z := range cfg.Forward {
		if r := p.query("udp", z.Name, dns.TypeSOA); len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Ns != cfg.MyName+"." {
			t.Errorf("%s SOA: %v", z.Name, r.Answer)
		}
		if r := p.query("udp", z.Name, dns.TypeNS); len(r.Answer) != 1 {
			t.Errorf("%s NS: %v", z.Name, r.Answer)
		}
		if r := p.query("udp", "inst.alice."+z.Name, dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || len(r.Ns) != 1 {
			t.Errorf("empty non-terminal inst.alice.%s: %s, %d answers", z.Name, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
	}
	// The VM whose services tag is invalid is reported by name.
	p.waitLog(time.Second, func(l logLine) bool {
		return l.str("msg") == "vm input problems" && strings.Contains(fmt.Sprint(l["problems"]), "legacy_app")
	})
}

var serialRE = regexp.MustCompile(`(IN\tSOA\t\S+ \S+ )\d+`)

// Every exported zone matches its golden file and named-checkzone accepts
// it.
func TestExportGoldenAndNamedCheckzone(t *testing.T) {
	dir := t.TempDir()
	p := startCNS(t, testConfig(t, dir, "testdata/inventory.json", nil))
	p.waitCommitted(0)
	p.stop(syscall.SIGTERM)

	dbPath := filepath.Join(dir, "cns.db")
	out, stderr, code := runCNS(t, "db", "--db", dbPath, "zones")
	if code != 0 {
		t.Fatalf("cns db zones: exit %d: %s", code, stderr)
	}
	var zones []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		zones = append(zones, strings.Fields(line)[0])
	}
	if len(zones) < 4 {
		t.Fatalf("zones: %q", zones)
	}
	checkzone, _ := exec.LookPath("named-checkzone")
	for _, z := range zones {
		text, stderr, code := runCNS(t, "db", "--db", dbPath, "export", z)
		if code != 0 {
			t.Fatalf("export %s: exit %d: %s", z, code, stderr)
		}
		// The serial is the clock; everything else is fixed.
		norm := serialRE.ReplaceAllString(text, "${1}SERIAL")
		norm = regexp.MustCompile(`(?m)^; zone .*\n`).ReplaceAllString(norm, "")
		golden := filepath.Join("testdata", "zones", z+".zone")
		if *update {
			os.MkdirAll(filepath.Dir(golden), 0o755)
			os.WriteFile(golden, []byte(norm), 0o644)
		} else if want, err := os.ReadFile(golden); err != nil || string(want) != norm {
			t.Errorf("export of %s differs from %s (go test -run TestExportGoldenAndNamedCheckzone . -update rewrites it; then review):\n%s", z, golden, norm)
		}
		if checkzone == "" {
			continue
		}
		f := filepath.Join(dir, z+".zone")
		os.WriteFile(f, []byte(text), 0o644)
		if out, err := exec.Command(checkzone, "-i", "full", z, f).CombinedOutput(); err != nil {
			t.Errorf("named-checkzone %s: %v\n%s", z, err, out)
		}
	}
	if checkzone == "" {
		t.Skip("named-checkzone not installed (Debian package bind9-utils); exports compared with goldens only")
	}
}
