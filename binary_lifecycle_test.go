package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
	"github.com/tritondatacenter/cns/smf"
)

const demoZone = "us-west-1.cns.example.com"

func soaSerial(t testing.TB, p *proc, zone string) uint32 {
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
// fails `cns db check`; serials strictly increase from one kill to the
// next; an IXFR from every serial the journals retain rebuilds exactly the
// zone's AXFR; and after the burst the zones say exactly what the last
// inventory says. CNS_KILLS sets the number of kills (default 8, 50 with
// CNS_LONG=1).
//
// The IXFR check is not circular: while the server runs, AXFRs taken at
// random moments record what the zone held at their serial. At the end,
// the IXFR from each such serial, applied to that recorded content (every
// deleted record present, every added one absent), must give the current
// AXFR exactly. Serials never caught by an AXFR are checked by undoing
// their IXFR from the current zone, which must also work record by record.
func TestKill9DuringChanges(t *testing.T) {
	kills := 8
	if longRun() {
		kills = 50
	}
	if v := os.Getenv("CNS_KILLS"); v != "" {
		kills, _ = strconv.Atoi(v)
	}
	dir := t.TempDir()
	// The generated external network is the one testdata/cns.json lists
	// for the public zone.
	const zone = demoZone
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 3000, Seed: 7})
	invPath := filepath.Join(dir, "gen.json")
	writeInventory(t, invPath, inv)
	cfg := testConfig(t, dir, "", func(c map[string]any) { c["inventory_file"] = invPath })
	dbPath := filepath.Join(dir, "cns.db")
	churnRNG := rand.New(rand.NewPCG(1, 2)) // owned by the churn goroutine of the round
	killRNG := rand.New(rand.NewPCG(3, 4))

	seen := map[uint32]zoneContent{} // AXFRs of the public zone taken during the run
	var lastSerial uint32
	generation := 0
	start := time.Now()
	for k := 0; k < kills; k++ {
		p := startCNS(t, cfg)
		// What the db held is served at once, at its serial or later.
		if k > 0 {
			if got := soaSerial(t, p, zone); db.SerialLess(got, lastSerial) {
				t.Fatalf("kill %d: restarted server serves serial %d, the db held %d", k, got, lastSerial)
			}
		}
		// Churn: move 10 VMs to new addresses every 50 ms, while the
		// server commits (small enough steps that recent serials get real
		// IXFRs, not the whole zone).
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
				mutate(inv, churnRNG, generation, len(inv.VMs)/300)
				writeInventory(t, invPath, inv)
				time.Sleep(50 * time.Millisecond) // pace the edits, not a synchronisation
			}
		}()
		// Kill at a random moment once commits are flowing; on the way,
		// record the zone as an AXFR shows it.
		mark := p.mark()
		// A bound, not a pace: a 3000-VM inventory is re-read on every edit,
		// which takes seconds under -race on a loaded machine.
		p.waitLogFrom(mark, 60*time.Second, func(l logLine) bool { return l.str("msg") == "committed" })
		for range 2 {
			if serial, content, err := axfrContent(p.addr, zone); err != nil {
				t.Fatalf("kill %d: AXFR: %v", k, err)
			} else {
				seen[serial] = content
			}
			time.Sleep(time.Duration(killRNG.IntN(200)) * time.Millisecond)
		}
		p.stop(syscall.SIGKILL)
		close(stop)
		<-churned

		out, stderr, code := runCNS(t, "db", "--db", dbPath, "check")
		if code != 0 {
			t.Fatalf("kill %d: cns db check failed (exit %d):\n%s%s", k, code, out, stderr)
		}
		serial := zoneSerialOffline(t, dbPath, zone)
		if !db.SerialLess(lastSerial, serial) && k > 0 {
			t.Fatalf("kill %d: serial did not increase: %d after %d (a commit was logged in between)", k, serial, lastSerial)
		}
		lastSerial = serial
	}
	killed := time.Since(start)

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

	// Every zone equals what the inventory implies, record for record.
	want := freshUpdaterZones(t, cfg, inv)
	retained := journalSerials(t, dbPath)
	p = startCNS(t, cfg)
	checked, full, fromAXFR := 0, 0, 0
	for _, z := range slices.Sorted(maps.Keys(retained)) {
		serial, cur, err := axfrContent(p.addr, z)
		if err != nil {
			t.Fatalf("AXFR %s: %v", z, err)
		}
		if got := withoutApex(cur, z); !slices.Equal(got, want[z]) {
			t.Errorf("zone %s after %d kills differs from the inventory:%s", z, kills, diffContent(toContent(got), toContent(want[z])))
		}
		soa := p.query("tcp", z, dns.TypeSOA).Answer[0].(*dns.SOA)
		if soa.Serial != serial {
			t.Fatalf("%s: SOA %d, AXFR %d", z, soa.Serial, serial)
		}
		// IXFR from every retained serial, but at most 40 per reverse zone.
		serials := retained[z]
		if z != demoZone && z != "us-west-1.int.example.com" && len(serials) > 40 {
			serials = sample(serials, 40)
		}
		for _, from := range serials {
			res, rrs, err := ixfrFrom(p.addr, z, from, soa)
			if err != nil {
				t.Fatalf("%s: %v", z, err)
			}
			checked++
			switch {
			case res.upToDate:
				t.Fatalf("%s: IXFR from retained serial %d (current %d) says up to date", z, from, serial)
			case res.full:
				// The difference is bigger than the zone: the whole zone,
				// which must be the current one.
				full++
				got := zoneContent{}
				for _, rr := range rrs[1 : len(rrs)-1] {
					got[rrText(rr)] = true
				}
				if !maps.Equal(got, cur) {
					t.Fatalf("%s: IXFR from %d answered with a zone that is not the AXFR:%s", z, from, diffContent(got, cur))
				}
				continue
			}
			if res.to != serial {
				t.Fatalf("%s: IXFR from %d leads to %d, AXFR is at %d", z, from, res.to, serial)
			}
			if before, ok := seen[from]; ok && z == zone {
				fromAXFR++
				got, err := res.apply(before)
				if err != nil {
					t.Fatalf("%s: IXFR from %d on the AXFR taken at %d: %v", z, from, from, err)
				}
				if !maps.Equal(got, cur) {
					t.Fatalf("%s: IXFR from %d applied to the AXFR taken at %d differs from the current AXFR:%s", z, from, from, diffContent(got, cur))
				}
				continue
			}
			if _, err := res.undo(cur); err != nil {
				t.Fatalf("%s: IXFR from %d does not undo from the current zone: %v", z, from, err)
			}
		}
	}
	// The journal between two AXFRs of the run turns the first into the
	// second, and the last into the current zone.
	chained := checkJournalChain(t, dbPath, zone, seen, p)
	if fromAXFR == 0 {
		t.Error("no AXFR taken during the run had a serial the journal retains")
	}
	t.Logf("%d kills in %v, serial %d; %d IXFRs from retained serials checked in %d zones (%d applied to an AXFR taken at their serial, %d answered with the whole zone); the journal turns %d AXFRs taken during the run into the next; every zone equal to what a fresh updater makes of the inventory",
		kills, killed.Round(time.Second), lastSerial, checked, len(retained), fromAXFR, full, chained)
}

// checkJournalChain plays the stored journal of zone from each AXFR taken
// during the run to the next one (and the last to the current zone),
// comparing record sets. It returns how many AXFRs it checked.
func checkJournalChain(t *testing.T, dbPath, zone string, seen map[uint32]zoneContent, p *proc) int {
	t.Helper()
	_, cur, err := axfrContent(p.addr, zone)
	if err != nil {
		t.Fatal(err)
	}
	p.stop(syscall.SIGTERM)
	store, err := db.Open(dbPath, db.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	entries, err := store.History(zone, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	index := map[uint32]int{} // From serial -> entry
	for i, e := range entries {
		index[e.From] = i
	}
	text := func(r db.JournalRR) string {
		rr, err := db.DecodeRR(r.Owner, r.RR)
		if err != nil {
			t.Fatal(err)
		}
		return rrText(rr)
	}
	serials := slices.SortedFunc(maps.Keys(seen), func(a, b uint32) int {
		if db.SerialLess(a, b) {
			return -1
		}
		return 1
	})
	checked := 0
	for n, from := range serials {
		i, ok := index[from]
		if !ok {
			continue // trimmed from the journal, or the serial the run ended on
		}
		c := maps.Clone(seen[from])
		var to uint32
		want := cur
		if n+1 < len(serials) {
			want = seen[serials[n+1]]
		}
		for ; i < len(entries); i++ {
			e := entries[i]
			for _, r := range e.Deleted {
				if !c[text(r)] {
					t.Fatalf("journal %d→%d deletes %s, absent from the AXFR-based zone", e.From, e.To, text(r))
				}
				delete(c, text(r))
			}
			for _, r := range e.Added {
				if c[text(r)] {
					t.Fatalf("journal %d→%d adds %s, present in the AXFR-based zone", e.From, e.To, text(r))
				}
				c[text(r)] = true
			}
			to = e.To
			if n+1 < len(serials) && to == serials[n+1] {
				break
			}
		}
		if !maps.Equal(c, want) {
			t.Fatalf("the journal from the AXFR at %d to %d does not give the AXFR taken there:%s", from, to, diffContent(c, want))
		}
		checked++
	}
	return checked
}

// journalSerials lists, per zone, the serials its journal can start an
// IXFR from, reading the db file (no server may hold it).
func journalSerials(t *testing.T, dbPath string) map[string][]uint32 {
	t.Helper()
	store, err := db.Open(dbPath, db.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	zones, err := store.Zones()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]uint32{}
	for _, z := range zones {
		entries, err := store.History(z.Name, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[z.Name] = nil
		for _, e := range entries {
			out[z.Name] = append(out[z.Name], e.From)
		}
	}
	return out
}

// sample keeps n of list, evenly spread, first and last included.
func sample(list []uint32, n int) []uint32 {
	out := make([]uint32, 0, n)
	for i := range n {
		out = append(out, list[i*(len(list)-1)/(n-1)])
	}
	return out
}

// freshUpdaterZones computes, with a fresh store and the same updater and
// records code, what cns must publish for inv under the config at cfgPath:
// every zone's records, apex excluded. It is not independent of the code
// under test: it catches what a crash, a restart, churn or faults did to
// the running cns (a lost commit, a torn journal, a missed change), not a
// wrong naming rule; dc.golden and TestDefaultDataCenterLiterals hold the
// rules to hand-written answers.
func freshUpdaterZones(t testing.TB, cfgPath string, inv *dc.Inventory) map[string][]string {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	store, err := db.Open(filepath.Join(t.TempDir(), "truth.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	u, err := feeds.NewUpdater(store, feeds.Options{Records: cfg.RecordsConfig(), Zones: cfg.ZoneConfig(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	u.SetInventory(inv, "truth")
	for u.Pending() > 0 {
		if err := u.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return dumpZones(t, store)
}

// withoutApex lists c without the apex NS records, sorted.
func withoutApex(c zoneContent, zone string) []string {
	var out []string
	for k := range c {
		if strings.HasPrefix(k, zone+". ") && strings.Contains(k, " IN NS ") {
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func toContent(list []string) zoneContent {
	c := zoneContent{}
	for _, l := range list {
		c[l] = true
	}
	return c
}

// mutate moves n random VMs to fresh addresses of generation gen.
func mutate(inv *dc.Inventory, rng *rand.Rand, gen, n int) {
	for range n {
		i := rng.IntN(len(inv.VMs))
		ip := fmt.Sprintf("10.%d.%d.%d", 100+gen%100, i>>8&255, i&255)
		inv.VMs[i].NICs[0].IP = ip
		inv.VMs[i].NICs[0].IPs = []string{ip + "/8"}
	}
}

// writeInventory replaces the file atomically, as an operator's tooling
// would, so the feed never reads half a file.
func writeInventory(t testing.TB, path string, inv *dc.Inventory) {
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
			if code != smf.ExitConfig {
				t.Errorf("exit %d, want %d; stderr: %s", code, smf.ExitConfig, stderr)
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
