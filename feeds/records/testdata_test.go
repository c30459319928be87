package records

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
)

var update = flag.Bool("update", false, "rewrite testdata/dc.golden from the embedded default data center")

// TestDefaultDataCenter computes every VM of the embedded default data
// center (testdata/inventory.json with testdata/cns.json) and compares the
// outcome with testdata/dc.golden, the reviewed spec of the demo DC.
func TestDefaultDataCenter(t *testing.T) {
	inv := loadInventory(t, "../../testdata/inventory.json")
	cfg := loadConfig(t, "../../testdata/cns.json")

	networks := map[string]*dc.Network{}
	for i := range inv.Networks {
		networks[inv.Networks[i].UUID] = &inv.Networks[i]
	}
	w := (&World{Networks: networks}).WithPools(inv.NetworkPools)
	users := map[string]*dc.User{}
	for i := range inv.Users {
		users[inv.Users[i].UUID] = &inv.Users[i]
	}
	servers := map[string]*dc.Server{}
	for i := range inv.Servers {
		servers[inv.Servers[i].UUID] = &inv.Servers[i]
	}

	var out bytes.Buffer
	fmt.Fprintf(&out, "; The embedded default data center, VM by VM and compute node by compute\n")
	fmt.Fprintf(&out, "; node: what records.Compute and records.ComputeNode make\n")
	fmt.Fprintf(&out, "; of testdata/inventory.json with testdata/cns.json. Regenerate with\n")
	fmt.Fprintf(&out, ";   go test ./feeds/records/ -run TestDefaultDataCenter -update\n")
	fmt.Fprintf(&out, "; and review the difference by hand: this file is the spec of the demo DC.\n")
	now := time.Now()
	for i := range inv.VMs {
		vm := &inv.VMs[i]
		owner := users[vm.OwnerUUID]
		if owner == nil {
			t.Fatalf("vm %s: owner %s is not in users", vm.UUID, vm.OwnerUUID)
		}
		res := Compute(cfg, w, Input{VM: vm, Owner: owner, CNDown: cnDown(servers[vm.ServerUUID], now)})
		writeVM(&out, vm, owner, res)
	}
	for i := range inv.Servers {
		s := &inv.Servers[i]
		writeServer(&out, s, ComputeNode(cfg, s))
	}

	const golden = "testdata/dc.golden"
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("the default DC's records differ from %s; run with -update and review the diff\n%s",
			golden, firstDifference(out.String(), string(want)))
	}
}

// cnDown is the reference's CN-down rule (reference §4.4) without the
// just-booted clause: not running and silent for more than an hour.
func cnDown(s *dc.Server, now time.Time) bool {
	if s == nil || s.Status == "running" {
		return false
	}
	if s.LastHeartbeat == nil {
		return true
	}
	hb, err := time.Parse(time.RFC3339Nano, *s.LastHeartbeat)
	return err != nil || now.Sub(hb) > time.Hour
}

func writeVM(out *bytes.Buffer, vm *dc.VM, owner *dc.User, res Result) {
	fmt.Fprintf(out, "\n; ---- vm %s %q (owner %s, state %s)\n", vm.UUID, vm.AliasString(), owner.Login, vm.State)
	listed := []string{}
	if res.ListInstance {
		listed = append(listed, "instance")
	}
	if res.ListServices {
		listed = append(listed, "services")
	}
	fmt.Fprintf(out, "; listed: %s\n", orNone(listed))
	fmt.Fprintf(out, "; reasons: %s\n", orNone(res.Reasons))
	var svcs []string
	for _, s := range res.Services {
		desc := s.Name
		for _, p := range s.Ports {
			desc += fmt.Sprintf(":%d(prio %d weight %d)", p.Port, p.Priority, p.Weight)
		}
		for _, b := range s.Balances {
			desc += fmt.Sprintf(":grpclb=%s(port %d)", b.Service, b.Port)
		}
		svcs = append(svcs, desc)
	}
	fmt.Fprintf(out, "; services: %s\n", orNone(svcs))
	for _, p := range res.Problems {
		fmt.Fprintf(out, "; problem: %s\n", p)
	}
	for _, n := range res.Names {
		fmt.Fprintf(out, "; name: %s\n", n)
	}
	writeRecords(out, res.Records)
}

func writeRecords(out *bytes.Buffer, recs []Record) {
	zone := ""
	for _, r := range recs {
		if r.Zone != zone {
			zone = r.Zone
			fmt.Fprintf(out, "; zone %s\n", zone)
		}
		line := r.RR.String()
		if r.RR.Header().Rrtype == dns.TypePTR {
			line += fmt.Sprintf(" ; pref %d", r.Pref)
		}
		if r.Stamp != 0 {
			line += fmt.Sprintf(" ; stamp %d", r.Stamp)
		}
		fmt.Fprintln(out, line)
	}
}

func writeServer(out *bytes.Buffer, s *dc.Server, res Result) {
	fmt.Fprintf(out, "\n; ---- compute node %s %q (setup %v, status %s)\n", s.UUID, s.Hostname, s.Setup, s.Status)
	fmt.Fprintf(out, "; reasons: %s\n", orNone(res.Reasons))
	for _, p := range res.Problems {
		fmt.Fprintf(out, "; problem: %s\n", p)
	}
	writeRecords(out, res.Records)
}

func orNone[T ~string](xs []T) string {
	if len(xs) == 0 {
		return "-"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, " ")
}

func loadInventory(t *testing.T, path string) *dc.Inventory {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var inv dc.Inventory
	if err := json.Unmarshal(b, &inv); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := inv.Validate(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &inv
}

// loadConfig reads the part of cns.json that shapes names. Zone order does
// not change any record, so zones are taken in name order.
func loadConfig(t *testing.T, path string) *Config {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		ForwardZones map[string]struct {
			Networks []string `json:"networks"`
		} `json:"forward_zones"`
		UseAlias bool `json:"use_alias"`
		UseLogin bool `json:"use_login"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	cfg := &Config{UseAlias: file.UseAlias, UseLogin: file.UseLogin}
	for name, z := range file.ForwardZones {
		cfg.Zones = append(cfg.Zones, Zone{Name: strings.ToLower(name), Networks: z.Networks})
	}
	sort.Slice(cfg.Zones, func(i, j int) bool { return cfg.Zones[i].Name < cfg.Zones[j].Name })
	if len(cfg.Zones) == 0 {
		t.Fatalf("%s: no forward_zones", path)
	}
	return cfg
}

func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s", i+1, gl, wl)
		}
	}
	return ""
}
