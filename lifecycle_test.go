package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/sdc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdctest"
)

const demoZone = "us-west-1.cns.example.com"

func soaSerial(t *testing.T, p *proc, zone string) uint32 {
	t.Helper()
	r := p.query("udp", zone, dns.TypeSOA)
	if len(r.Answer) != 1 {
		t.Fatalf("%s SOA: %v", zone, r)
	}
	return r.Answer[0].(*dns.SOA).Serial
}

// A restart serves what the db holds before any feed has answered, with
// the same serial, and a feed that brings nothing new changes nothing.
func TestRestartServesStoredZones(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "testdata/inventory.json", nil)
	p := startCNS(t, cfg)
	p.waitCommitted(0)
	serial := soaSerial(t, p, demoZone)
	p.stop(syscall.SIGTERM)

	// Hide the inventory: the restarted server has no feed at all.
	inv := filepath.Join(dir, "inventory.json")
	if err := os.Rename(inv, inv+".away"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p = startCNS(t, cfg)
	if got := soaSerial(t, p, demoZone); got != serial {
		t.Errorf("serial after restart %d, want %d", got, serial)
	}
	first := time.Since(start)
	if r := p.query("udp", "cloudapi."+demoZone, dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("stored name not served before the feed: %v", r)
	}
	t.Logf("restart to first answer (process start included): %v", first)

	// The feed comes back with the same data: no new serial.
	mark := p.mark()
	if err := os.Rename(inv+".away", inv); err != nil {
		t.Fatal(err)
	}
	p.waitCommitted(mark)
	if got := soaSerial(t, p, demoZone); got != serial {
		t.Errorf("an unchanged inventory moved the serial from %d to %d", serial, got)
	}
}

// kill -9 at random moments of a burst of changes never leaves a db that
// fails `cns db check`; serials only grow; after the burst the zones say
// exactly what the last inventory says.
func TestKill9DuringChanges(t *testing.T) {
	kills := 8
	if v := os.Getenv("CNS_KILLS"); v != "" {
		kills, _ = strconv.Atoi(v)
	}
	dir := t.TempDir()
	// The generated external network is the one testdata/cns.json lists
	// for the public zone.
	const zone = demoZone
	inv := sdctest.Generate(sdctest.GenerateOptions{VMs: 3000, Seed: 7})
	invPath := filepath.Join(dir, "gen.json")
	writeInventory(t, invPath, inv)
	cfg := testConfig(t, dir, "", func(c map[string]any) { c["inventory_file"] = invPath })
	dbPath := filepath.Join(dir, "cns.db")
	churnRNG := rand.New(rand.NewPCG(1, 2)) // owned by the churn goroutine of the round
	killRNG := rand.New(rand.NewPCG(3, 4))

	var lastSerial uint32
	generation := 0
	for k := 0; k < kills; k++ {
		p := startCNS(t, cfg)
		// Churn: move a random tenth of the VMs to new addresses, again and
		// again, while the server commits.
		stop := make(chan struct{})
		churned := make(chan struct{})
		go func() {
			defer close(churned)
			for {
				select {
				case <-stop:
					return
				default:
				}
				generation++
				mutate(inv, churnRNG, generation)
				writeInventory(t, invPath, inv)
				time.Sleep(50 * time.Millisecond) // pace the edits, not a synchronisation
			}
		}()
		// Kill at a random moment once commits are flowing.
		p.waitLog(20*time.Second, func(l logLine) bool { return l.str("msg") == "committed" })
		time.Sleep(time.Duration(killRNG.IntN(400)) * time.Millisecond)
		p.stop(syscall.SIGKILL)
		close(stop)
		<-churned

		out, stderr, code := runCNS(t, "db", "--db", dbPath, "check")
		if code != 0 {
			t.Fatalf("kill %d: cns db check failed (exit %d):\n%s%s", k, code, out, stderr)
		}
		serial := zoneSerialOffline(t, dbPath, zone)
		if serial < lastSerial { // fits RFC 1982 here: serials are clock-based and close
			t.Fatalf("kill %d: serial went back from %d to %d", k, lastSerial, serial)
		}
		lastSerial = serial
	}

	// Converge on the final inventory.
	p := startCNS(t, cfg)
	mark := p.mark()
	writeInventory(t, invPath, inv) // a last write, so the feed sees a change after start
	p.waitCommitted(mark)
	for i := range inv.VMs {
		vm := &inv.VMs[i]
		name := vm.UUID + ".inst." + vm.OwnerUUID + "." + zone
		r := p.query("udp", name, dns.TypeA)
		want := vm.NICs[0].IP
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != want {
			t.Fatalf("after %d kills, %s = %s %v, want %s", kills, name, dns.RcodeToString[r.Rcode], r.Answer, want)
		}
	}
	p.stop(syscall.SIGTERM)
	if out, stderr, code := runCNS(t, "db", "--db", dbPath, "check"); code != 0 {
		t.Fatalf("final cns db check failed:\n%s%s", out, stderr)
	}
}

// mutate moves a tenth of the VMs to fresh addresses of generation gen.
func mutate(inv *sdc.Inventory, rng *rand.Rand, gen int) {
	for range len(inv.VMs) / 10 {
		i := rng.IntN(len(inv.VMs))
		ip := fmt.Sprintf("10.%d.%d.%d", 100+gen%100, i>>8&255, i&255)
		inv.VMs[i].NICs[0].IP = ip
		inv.VMs[i].NICs[0].IPs = []string{ip + "/8"}
	}
}

// writeInventory replaces the file atomically, as an operator's tooling
// would, so the feed never reads half a file.
func writeInventory(t *testing.T, path string, inv *sdc.Inventory) {
	data, err := json.Marshal(inv)
	if err != nil {
		panic(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		panic(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		panic(err)
	}
}

func zoneSerialOffline(t *testing.T, dbPath, zone string) uint32 {
	t.Helper()
	out, stderr, code := runCNS(t, "db", "--db", dbPath, "zones")
	if code != 0 {
		t.Fatalf("cns db zones: %s", stderr)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == zone {
			s, _ := strconv.ParseUint(f[1], 10, 32)
			return uint32(s)
		}
	}
	t.Fatalf("zone %s not in:\n%s", zone, out)
	return 0
}

// A bad config stops cns before it opens the db, with exit status 96 and
// one line naming the file, the key and the problem.
func TestConfigErrorsExit(t *testing.T) {
	cases := []struct {
		name string
		edit func(map[string]any)
		raw  string
		want []string
	}{
		{name: "bad JSON", raw: `{"my_name": "x",`, want: []string{"invalid JSON"}},
		{name: "wrong type", edit: func(c map[string]any) { c["use_login"] = "yes please" }, want: []string{"use_login", "want bool"}},
		{name: "hostmaster without @", edit: func(c map[string]any) { c["hostmaster"] = "hostmaster.example.com" }, want: []string{"hostmaster", "one @"}},
		{name: "bad zone name", edit: func(c map[string]any) {
			c["forward_zones"] = map[string]any{"bad zone!": map[string]any{"networks": []string{"*"}}}
		}, want: []string{`forward_zones["bad zone!"]`, "not a valid zone name"}},
		{name: "bad network", edit: func(c map[string]any) {
			c["forward_zones"] = map[string]any{"a.example": map[string]any{"networks": []string{"public"}}}
		}, want: []string{`forward_zones["a.example"].networks[0]`, `neither "*" nor a UUID`}},
		{name: "bad listen", edit: func(c map[string]any) { c["dns_listen"] = []string{"localhost:53"} }, want: []string{"dns_listen[0]", "not an IP:port"}},
		{name: "bad allow_transfer", edit: func(c map[string]any) { c["allow_transfer"] = []string{"10.0.0.0/33"} }, want: []string{"allow_transfer[0]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(t, dir, "", tc.edit)
			if tc.raw != "" {
				os.WriteFile(cfg, []byte(tc.raw), 0o644)
			}
			_, stderr, code := runCNS(t, "serve", "-c", cfg)
			if code != exitConfigError {
				t.Errorf("exit %d, want %d; stderr: %s", code, exitConfigError, stderr)
			}
			for _, w := range append(tc.want, cfg) {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not name %q", stderr, w)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "cns.db")); err == nil {
				t.Error("the db was created although the config is invalid")
			}
		})
	}
}

// A broken inventory edit is reported with what is wrong, and the zones
// keep serving the last good inventory until a good edit arrives.
func TestBadInventoryKeepsServing(t *testing.T) {
	dir := t.TempDir()
	p := startCNS(t, testConfig(t, dir, "testdata/inventory.json", nil))
	p.waitCommitted(0)
	serial := soaSerial(t, p, demoZone)
	inv := filepath.Join(dir, "inventory.json")
	good, _ := os.ReadFile(inv)

	for _, tc := range []struct {
		name, content, want string
	}{
		{"syntax", `{"vms": [`, "line 1"},
		{"type", `{"vms": [{"uuid": "b752d788-c0e4-4307-8c56-353a4ea66c02", "nics": "none"}]}`, "vms[0] (b752d788-c0e4-4307-8c56-353a4ea66c02): nics"},
		{"bad uuid", `{"users": [{"uuid": "nope", "login": "x"}]}`, `users[0]: uuid "nope" is not a UUID`},
		{"dangling network", regexp.MustCompile(`"network_uuid": "[0-9a-f-]+"`).ReplaceAllLiteralString(string(good), `"network_uuid": "00000000-0000-4000-8000-000000000000"`), "is not in networks"},
	} {
		mark := p.mark()
		os.WriteFile(inv, []byte(tc.content), 0o644)
		l := p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return l.str("msg") == "inventory rejected" })
		if !strings.Contains(l.str("err"), tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.name, l.str("err"), tc.want)
		}
		if r := p.query("udp", "cloudapi."+demoZone, dns.TypeA); len(r.Answer) != 1 {
			t.Errorf("%s: zone stopped serving after a bad inventory", tc.name)
		}
	}
	if got := soaSerial(t, p, demoZone); got != serial {
		t.Errorf("bad inventories changed the serial %d → %d", serial, got)
	}
	// A good edit is applied again: drop one VM.
	var doc map[string]any
	json.Unmarshal(good, &doc)
	vms := doc["vms"].([]any)
	gone := vms[0].(map[string]any)["alias"].(string) // cloudapi0
	doc["vms"] = vms[1:]
	data, _ := json.Marshal(doc)
	mark := p.mark()
	os.WriteFile(inv, data, 0o644)
	p.waitCommitted(mark)
	if r := p.query("udp", gone+".inst.admin."+demoZone, dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("removed VM %s still answered: %v", gone, r.Answer)
	}
}
