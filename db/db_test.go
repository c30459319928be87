package db

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	bolt "go.etcd.io/bbolt"
)

const (
	vm1 = "11111111-1111-4111-8111-111111111111"
	vm2 = "22222222-2222-4222-8222-222222222222"
	vm3 = "33333333-3333-4333-8333-333333333333"
	vm4 = "44444444-4444-4444-8444-444444444444"
)

// fakeClock is a settable clock for serials.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func testApex(ns ...string) Apex {
	if len(ns) == 0 {
		ns = []string{"ns1.example.com."}
	}
	return Apex{MName: "ns1.example.com.", RName: "hostmaster.example.com.", Refresh: 30, Retry: 60,
		Expire: 2592000, Minimum: 30, SOATTL: 30, NS: ns, NSTTL: 3600}
}

func testConfig() *ZoneConfig {
	return &ZoneConfig{Forward: map[string]Apex{"dc.example.com": testApex()}, Reverse: testApex()}
}

// openTest opens a fresh store in a temporary directory with a fake clock.
func openTest(t *testing.T, opts Options) (*DB, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	if opts.Now == nil {
		opts.Now = clk.now
	}
	opts.NoSync = true
	d, err := Open(filepath.Join(t.TempDir(), "cns.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, clk
}

func rr(t *testing.T, s string) dns.RR {
	t.Helper()
	x, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return x
}

func rec(t *testing.T, zone, s string) Record {
	return Record{Zone: zone, RR: rr(t, s), Pref: 1}
}

func mustCommit(t *testing.T, d *DB, cs *ChangeSet) *Committed {
	t.Helper()
	c, err := d.Commit(cs)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// published renders what a zone serves at owner, one record per line.
func published(t *testing.T, d *DB, zone, owner string) []string {
	t.Helper()
	zw, _ := ZoneWire(zone)
	ow, _ := wireName(owner)
	rrs, _, err := d.Lookup(zone, zw, ow)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := rrs.ToRR(owner)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, strings.ReplaceAll(r.String(), "\t", " "))
	}
	return out
}

func zoneSerial(t *testing.T, d *DB, zone string) uint32 {
	t.Helper()
	zi, ok, err := d.Zone(zone)
	if err != nil || !ok {
		t.Fatalf("zone %s: ok=%v err=%v", zone, ok, err)
	}
	return zi.Serial
}

// Ensure a new file gets the schema and a reopened one is accepted.
func TestOpenCreatesAndReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cns.db")
	d, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	d.Close()
	d, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	zones, err := d.Zones()
	if err != nil || len(zones) != 1 || zones[0].Name != "dc.example.com" {
		t.Fatalf("zones after reopen: %v, %v", zones, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("db file mode %v, want 0600", fi.Mode().Perm())
	}
}

// Ensure files that are not a cns db of this schema are refused and left
// byte for byte as they were.
func TestOpenRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, bytes.Repeat([]byte("not a database "), 1000), 0o600)

	foreign := filepath.Join(dir, "foreign.db")
	b, _ := bolt.Open(foreign, 0o600, nil)
	b.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
	b.Close()

	future := filepath.Join(dir, "future.db")
	b, _ = bolt.Open(future, 0o600, nil)
	b.Update(func(tx *bolt.Tx) error {
		m, _ := tx.CreateBucket(bucketMeta)
		return m.Put(keySchema, u32bytes(SchemaVersion+1))
	})
	b.Close()

	for _, tc := range []struct {
		path, want string
	}{
		{garbage, "invalid"},
		{foreign, "not a cns db"},
		{future, fmt.Sprintf("schema version %d", SchemaVersion+1)},
	} {
		before, _ := os.ReadFile(tc.path)
		_, err := Open(tc.path, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: err %v, want one naming the file and %q", filepath.Base(tc.path), err, tc.want)
		}
		after, _ := os.ReadFile(tc.path)
		if !bytes.Equal(before, after) {
			t.Errorf("%s: file changed by a failed open", filepath.Base(tc.path))
		}
	}
}

// Ensure a read-only open of a file a writer holds fails fast with ErrLocked.
func TestOpenReadOnlyLocked(t *testing.T) {
	d, _ := openTest(t, Options{})
	_, err := Open(d.Path(), Options{ReadOnly: true, LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("err %v, want ErrLocked", err)
	}
}

// Ensure records from several VMs are merged, deduplicated and journaled.
func TestCommitMergesContributions(t *testing.T) {
	d, clk := openTest(t, Options{})
	const z = "dc.example.com"
	c := mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{
		{UUID: vm1, Records: []Record{
			rec(t, z, "web.svc.owner.dc.example.com. 30 IN A 10.0.0.1"),
			rec(t, z, "web.svc.owner.dc.example.com. 30 IN TXT \""+vm1+"\""),
			rec(t, z, "same.inst.owner.dc.example.com. 30 IN A 10.0.0.1"),
		}},
		{UUID: vm2, Records: []Record{
			rec(t, z, "web.svc.owner.dc.example.com. 30 IN A 10.0.0.2"),
			rec(t, z, "web.svc.owner.dc.example.com. 30 IN TXT \""+vm2+"\""),
			rec(t, z, "same.inst.owner.dc.example.com. 30 IN A 10.0.0.2"),
			// The same record twice from two VMs is served once.
			rec(t, z, "web.svc.owner.dc.example.com. 30 IN A 10.0.0.1"),
		}},
	}})
	if len(c.Zones) != 1 || c.Zones[0].Serial != 1_800_000_000 || c.Zones[0].Entry != nil {
		t.Fatalf("first commit: %+v", c.Zones)
	}
	want := []string{
		"web.svc.owner.dc.example.com. 30 IN A 10.0.0.1",
		"web.svc.owner.dc.example.com. 30 IN A 10.0.0.2",
		"web.svc.owner.dc.example.com. 30 IN TXT \"" + vm1 + "\"",
		"web.svc.owner.dc.example.com. 30 IN TXT \"" + vm2 + "\"",
	}
	if got := published(t, d, z, "web.svc.owner.dc.example.com."); !slices.Equal(got, want) {
		t.Errorf("service name:\n got %q\nwant %q", got, want)
	}
	// Two VMs sharing an alias name: both served, no last-writer-wins.
	if got := published(t, d, z, "same.inst.owner.dc.example.com."); len(got) != 2 {
		t.Errorf("shared alias: %q", got)
	}

	// vm1 leaves: only what nobody else contributes goes.
	clk.t = clk.t.Add(time.Second)
	c = mustCommit(t, d, &ChangeSet{Cause: "vm1 destroyed", VMs: []VMChange{{UUID: vm1, Delete: true}}})
	e := c.Zones[0].Entry
	if e == nil || e.From != 1_800_000_000 || e.To != 1_800_000_001 || e.Cause != "vm1 destroyed" {
		t.Fatalf("journal entry: %+v", e)
	}
	var dels []string
	for _, r := range e.Deleted {
		x, _ := DecodeRR(r.Owner, r.RR)
		dels = append(dels, strings.ReplaceAll(x.String(), "\t", " "))
	}
	// Store order: the "svc" branch of owner sorts before "inst" (shorter
	// label first).
	wantDel := []string{
		"web.svc.owner.dc.example.com. 30 IN TXT \"" + vm1 + "\"",
		"same.inst.owner.dc.example.com. 30 IN A 10.0.0.1",
	}
	if !slices.Equal(dels, wantDel) || len(e.Added) != 0 {
		t.Errorf("deleted %q added %d, want %q and none", dels, len(e.Added), wantDel)
	}
	if _, ok, _ := d.VM(vm1); ok {
		t.Error("deleted VM still stored")
	}
	zi, _, _ := d.Zone(z)
	if zi.Names != 2 || zi.Records != 4 {
		t.Errorf("zone counters: %d names %d records, want 2 and 4", zi.Names, zi.Records)
	}
}

// Ensure a commit that changes nothing leaves serials alone, and one that
// does gets max(last+1, now) whatever the clock does.
func TestSerials(t *testing.T) {
	d, clk := openTest(t, Options{})
	const z = "dc.example.com"
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	s0 := zoneSerial(t, d, z)
	vmWith := func(ip string) VMChange {
		return VMChange{UUID: vm1, Records: []Record{rec(t, z, "a.dc.example.com. 30 IN A "+ip)}}
	}
	steps := []struct {
		name    string
		advance time.Duration
		vm      VMChange
		want    uint32
	}{
		{"same second", 0, vmWith("10.0.0.1"), s0 + 1},
		{"no change", 0, vmWith("10.0.0.1"), s0 + 1},
		{"still same second", 0, vmWith("10.0.0.2"), s0 + 2},
		{"clock went back", -time.Hour, vmWith("10.0.0.3"), s0 + 3},
		{"clock ahead", 2 * time.Hour, vmWith("10.0.0.4"), s0 + 3600},
	}
	for _, st := range steps {
		clk.t = clk.t.Add(st.advance)
		mustCommit(t, d, &ChangeSet{VMs: []VMChange{st.vm}})
		if got := zoneSerial(t, d, z); got != st.want {
			t.Errorf("%s: serial %d, want %d", st.name, got, st.want)
		}
	}
}

// Ensure singletons (PTR) pick one winner deterministically and RRsets over
// the cap are cut the same way whatever the arrival order.
func TestPublishPolicy(t *testing.T) {
	const rz = "1.0.10.in-addr.arpa"
	ptr := func(vm, target string, pref uint8) VMChange {
		r := rec(t, rz, "5.1.0.10.in-addr.arpa. 30 IN PTR "+target)
		r.Pref = pref
		return VMChange{UUID: vm, Records: []Record{r}}
	}
	cases := []struct {
		name string
		vms  []VMChange
		want string
	}{
		{"shortest target", []VMChange{ptr(vm1, "longer-name.dc.example.com.", 1), ptr(vm2, "short.dc.example.com.", 1)}, "short.dc.example.com."},
		{"lexical tie-break", []VMChange{ptr(vm2, "bbbb.dc.example.com.", 1), ptr(vm1, "aaaa.dc.example.com.", 1)}, "aaaa.dc.example.com."},
		{"reverse_ptr preferred", []VMChange{ptr(vm1, "a.dc.example.com.", 1), ptr(vm2, "my-own-choice.example.org.", 0)}, "my-own-choice.example.org."},
	}
	for _, tc := range cases {
		for _, order := range [][]VMChange{tc.vms, {tc.vms[1], tc.vms[0]}} {
			d, _ := openTest(t, Options{})
			mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: order})
			got := published(t, d, rz, "5.1.0.10.in-addr.arpa.")
			if len(got) != 1 || !strings.HasSuffix(got[0], "PTR "+tc.want) {
				t.Errorf("%s: %q, want one PTR %s", tc.name, got, tc.want)
			}
		}
	}

	d, _ := openTest(t, Options{MaxRRset: 3})
	var recs []Record
	for _, ip := range []string{"10.0.0.9", "10.0.0.1", "10.0.0.5", "10.0.0.3"} {
		recs = append(recs, rec(t, "dc.example.com", "big.dc.example.com. 30 IN A "+ip))
	}
	c := mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{{UUID: vm1, Records: recs}}})
	got := published(t, d, "dc.example.com", "big.dc.example.com.")
	if len(got) != 3 || !strings.HasSuffix(got[2], "10.0.0.5") {
		t.Errorf("capped RRset: %q, want the 3 lowest", got)
	}
	if len(c.Problems) != 1 || !strings.Contains(c.Problems[0], "4 records, served 3") {
		t.Errorf("cap not reported: %q", c.Problems)
	}
}

// Ensure records that cannot be stored are skipped and reported while the
// rest of the change set lands.
func TestCommitSkipsBadRecords(t *testing.T) {
	d, _ := openTest(t, Options{})
	c := mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{{UUID: vm1, Records: []Record{
		rec(t, "nowhere.example", "a.nowhere.example. 30 IN A 10.0.0.1"),
		rec(t, "dc.example.com", "a.other.example. 30 IN A 10.0.0.1"),
		rec(t, "dc.example.com", "ok.dc.example.com. 30 IN A 10.0.0.1"),
	}}}})
	if len(c.Problems) != 2 {
		t.Errorf("problems %q, want 2", c.Problems)
	}
	if got := published(t, d, "dc.example.com", "ok.dc.example.com."); len(got) != 1 {
		t.Errorf("good record lost: %q", got)
	}
	if _, err := d.Commit(&ChangeSet{VMs: []VMChange{{UUID: "not-a-uuid"}}}); err == nil {
		t.Error("bad VM uuid accepted")
	}
}

// Ensure empty non-terminals are visible to Lookup.
func TestLookupEmptyNonTerminal(t *testing.T) {
	d, _ := openTest(t, Options{})
	const z = "dc.example.com"
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{{UUID: vm1, Records: []Record{
		rec(t, z, "vm.inst.owner.dc.example.com. 30 IN A 10.0.0.1"),
	}}}})
	zw, _ := ZoneWire(z)
	for _, tc := range []struct {
		name         string
		records, ent bool
	}{
		{"vm.inst.owner.dc.example.com.", true, false},
		{"inst.owner.dc.example.com.", false, true},
		{"owner.dc.example.com.", false, true},
		{"nx.owner.dc.example.com.", false, false},
		{"vm.inst.owner.dc.example.com.x.", false, false},
	} {
		w, _ := wireName(tc.name)
		rrs, below, err := d.Lookup(z, zw, w)
		if strings.HasSuffix(tc.name, ".x.") {
			if err == nil {
				t.Errorf("%s: out-of-zone lookup accepted", tc.name)
			}
			continue
		}
		if err != nil || (len(rrs) > 0) != tc.records || below != tc.ent {
			t.Errorf("%s: records=%v below=%v err=%v", tc.name, len(rrs) > 0, below, err)
		}
	}
}

// Ensure apex changes are journaled, zones leaving the config go, and a
// zone that comes back never reuses a serial.
func TestZoneConfigChanges(t *testing.T) {
	d, clk := openTest(t, Options{})
	const z = "dc.example.com"
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{{UUID: vm1, Records: []Record{
		rec(t, z, "a.dc.example.com. 30 IN A 10.0.0.1"),
	}}}})
	s0 := zoneSerial(t, d, z)

	cfg := testConfig()
	cfg.Forward[z] = testApex("ns1.example.com.", "ns2.example.com.")
	c := mustCommit(t, d, &ChangeSet{Zones: cfg})
	e := c.Zones[0].Entry
	if e == nil || len(e.Added) != 1 || len(e.Deleted) != 0 || zoneSerial(t, d, z) != s0+1 {
		t.Fatalf("NS change: %+v", c.Zones)
	}
	if x, _ := DecodeRR(e.Added[0].Owner, e.Added[0].RR); x.(*dns.NS).Ns != "ns2.example.com." {
		t.Errorf("journaled NS addition %v", x)
	}
	// Same config again: nothing.
	if c := mustCommit(t, d, &ChangeSet{Zones: cfg}); len(c.Zones) != 0 {
		t.Errorf("unchanged config produced %+v", c.Zones)
	}

	// Remove the zone, then bring it back with the clock behind. The
	// removal names the zone by its wire form too, the DNS server's key.
	c = mustCommit(t, d, &ChangeSet{Zones: &ZoneConfig{Forward: map[string]Apex{}, Reverse: testApex()}})
	if _, ok, _ := d.Zone(z); ok {
		t.Fatal("removed zone still stored")
	}
	if wire, _ := ZoneWire(z); len(c.Zones) != 1 || !c.Zones[0].Removed || !bytes.Equal(c.Zones[0].Wire, wire) {
		t.Errorf("the removal's update: %+v, want zone %s removed, with its wire form", c.Zones, z)
	}
	clk.t = clk.t.Add(-time.Hour)
	mustCommit(t, d, &ChangeSet{Zones: cfg})
	if got := zoneSerial(t, d, z); got != s0+2 {
		t.Errorf("re-created zone serial %d, want %d", got, s0+2)
	}
}

// Ensure a reverse zone is created by its first record and removed with
// its last one.
func TestReverseZoneLifecycle(t *testing.T) {
	d, _ := openTest(t, Options{})
	const rz = "0.0.10.in-addr.arpa"
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	if _, ok, _ := d.Zone(rz); ok {
		t.Fatal("reverse zone exists before any record")
	}
	mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vm1, Records: []Record{
		rec(t, rz, "1.0.0.10.in-addr.arpa. 30 IN PTR a.dc.example.com."),
	}}}})
	if _, ok, _ := d.Zone(rz); !ok {
		t.Fatal("reverse zone not created")
	}
	c := mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vm1}}})
	if _, ok, _ := d.Zone(rz); ok || len(c.Zones) != 1 || !c.Zones[0].Removed {
		t.Fatalf("empty reverse zone kept: %+v", c.Zones)
	}
}

// Ensure the journal chains from any retained serial, and is trimmed by
// count, bytes and age.
func TestJournal(t *testing.T) {
	const z = "dc.example.com"
	run := func(lim JournalLimits, steps int, step time.Duration) (*DB, []uint32) {
		d, clk := openTest(t, Options{Journal: &lim})
		mustCommit(t, d, &ChangeSet{Zones: testConfig()})
		serials := []uint32{zoneSerial(t, d, z)}
		for i := range steps {
			clk.t = clk.t.Add(step)
			mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vm1, Records: []Record{
				rec(t, z, "a.dc.example.com. 30 IN A 10.0.1."+string(rune('0'+i))),
			}}}})
			serials = append(serials, zoneSerial(t, d, z))
		}
		return d, serials
	}

	d, serials := run(JournalLimits{}, 5, time.Second)
	entries, ok, err := d.Journal(z, serials[2])
	if err != nil || !ok || len(entries) != 3 || entries[0].From != serials[2] || entries[2].To != serials[5] {
		t.Fatalf("journal from %d: ok=%v err=%v %d entries", serials[2], ok, err, len(entries))
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].From != entries[i-1].To {
			t.Errorf("journal chain broken between %d and %d", entries[i-1].To, entries[i].From)
		}
	}
	if _, ok, _ := d.Journal(z, 12345); ok {
		t.Error("unknown serial found in journal")
	}
	hist, _ := d.History(z, serials[3], 0)
	if len(hist) != 2 || hist[1].To != serials[5] {
		t.Errorf("history since %d: %d entries", serials[3], len(hist))
	}

	for _, tc := range []struct {
		name string
		lim  JournalLimits
		step time.Duration
		want int
	}{
		{"count", JournalLimits{MaxEntries: 2}, time.Second, 2},
		{"bytes", JournalLimits{MaxBytes: 500}, time.Second, 2}, // entries here are ~215 bytes
		{"age", JournalLimits{MaxAge: 90 * time.Second}, time.Minute, 2},
	} {
		d, serials := run(tc.lim, 6, tc.step)
		zi, _, _ := d.Zone(z)
		if zi.JournalEntries != tc.want || zi.JournalFrom != serials[len(serials)-1-tc.want] {
			t.Errorf("%s: %d entries from %d, want %d from %d", tc.name, zi.JournalEntries, zi.JournalFrom, tc.want, serials[len(serials)-1-tc.want])
		}
		if _, ok, _ := d.Journal(z, serials[1]); ok {
			t.Errorf("%s: trimmed serial still served from the journal", tc.name)
		}
	}
}

// Ensure the OnCommit hook sees every changed name with its new records.
func TestOnCommitHook(t *testing.T) {
	d, _ := openTest(t, Options{})
	var got []*Committed
	d.OnCommit(func(c *Committed) { got = append(got, c) })
	const z = "dc.example.com"
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{{UUID: vm1, Records: []Record{
		rec(t, z, "a.dc.example.com. 30 IN A 10.0.0.1"),
	}}}})
	mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vm1}}})
	if len(got) != 2 {
		t.Fatalf("%d hook calls, want 2", len(got))
	}
	n := got[1].Zones[0].Names
	if len(n) != 1 || WireToString(n[0].Owner) != "a.dc.example.com." || len(n[0].RRs) != 0 {
		t.Errorf("removal update: %+v", n)
	}
}

// Ensure VM returns the VM's own records and meta only.
func TestVM(t *testing.T) {
	d, _ := openTest(t, Options{})
	const z = "dc.example.com"
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{
		{UUID: vm1, Meta: []byte(`{"why":[]}`), Records: []Record{rec(t, z, "s.dc.example.com. 30 IN A 10.0.0.1")}},
		{UUID: vm2, Records: []Record{rec(t, z, "s.dc.example.com. 30 IN A 10.0.0.2")}},
	}})
	vm, ok, err := d.VM(strings.ToUpper(vm1))
	if err != nil || !ok || string(vm.Meta) != `{"why":[]}` || len(vm.Records) != 1 || len(vm.Records[0].RRs) != 1 {
		t.Fatalf("VM: %+v ok=%v err=%v", vm, ok, err)
	}
	var n int
	d.EachVM(func(string, []byte) error { n++; return nil })
	if n != 2 {
		t.Errorf("EachVM saw %d VMs", n)
	}
	if _, ok, _ := d.VM(vm3); ok {
		t.Error("unknown VM found")
	}
}

// Ensure VMsAt names the VMs with records at each name asked for, once
// each, whatever their records there, and none at a name the store does
// not hold, in a zone it does not hold, or outside the zone.
func TestVMsAt(t *testing.T) {
	d, _ := openTest(t, Options{})
	const z, rz = "dc.example.com", "0.0.10.in-addr.arpa"
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{
		{UUID: vm1, Records: []Record{rec(t, z, "web.dc.example.com. 30 IN A 10.0.0.1"), rec(t, z, "web.dc.example.com. 30 IN TXT vm1"),
			rec(t, rz, "1.0.0.10.in-addr.arpa. 30 IN PTR web.dc.example.com.")}},
		{UUID: vm2, Records: []Record{rec(t, z, "web.dc.example.com. 30 IN A 10.0.0.2"), rec(t, z, "two.dc.example.com. 30 IN A 10.0.0.2")}},
		{UUID: vm3, Records: []Record{rec(t, rz, "1.0.0.10.in-addr.arpa. 30 IN PTR three.dc.example.com.")}},
	}})
	// A VM's records are named as computed, and once prepared (compact)
	// as the store encodes them (EachRecord).
	type named struct {
		zone, owner string
		rrtype      uint16
	}
	each := func(vc *VMChange) (out []named) {
		vc.EachRecord(func(zone, owner string, rrtype uint16) { out = append(out, named{zone, owner, rrtype}) })
		return out
	}
	computed := func() VMChange {
		return VMChange{UUID: vm3, Records: []Record{rec(t, z, "Two.DC.example.com. 30 IN A 10.0.0.3"),
			rec(t, rz, "3.0.0.10.in-addr.arpa. 30 IN PTR two.dc.example.com.")}}
	}
	vc := computed()
	if got, want := each(&vc), []named{{z, "Two.DC.example.com.", dns.TypeA}, {rz, "3.0.0.10.in-addr.arpa.", dns.TypePTR}}; !reflect.DeepEqual(got, want) {
		t.Errorf("computed records: %v, want %v", got, want)
	}
	PrepareRecords(&vc, nil)
	if vc.prepared == nil {
		t.Fatal("the records were not prepared compact")
	}
	prepared := each(&vc)
	if want := []named{{z, "two.dc.example.com.", dns.TypeA}, {rz, "3.0.0.10.in-addr.arpa.", dns.TypePTR}}; !reflect.DeepEqual(prepared, want) {
		t.Fatalf("prepared records: %v, want %v", prepared, want)
	}
	names := []Name{{z, "WEB.dc.example.com."}, {rz, "1.0.0.10.in-addr.arpa."}, {z, prepared[0].owner},
		{z, "none.dc.example.com."}, {"other.example.com", "web.other.example.com."}, {z, "web.elsewhere.example."}}
	got := map[int][]string{}
	if err := d.VMsAt(names, func(i int, vm string) { got[i] = append(got[i], vm) }); err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{0: {vm1, vm2}, 1: {vm1, vm3}, 2: {vm2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("VMsAt: %v, want %v", got, want)
	}
}

// Ensure VMMetas gives the metas of the VMs asked for that are stored,
// by their UUID in lower case, skipping unknown and malformed ones,
// whether it looks each up (a few of many) or scans them all (a good
// part of them).
func TestVMMetas(t *testing.T) {
	d, _ := openTest(t, Options{})
	var stored []VMChange
	for i := range 40 {
		stored = append(stored, VMChange{UUID: fmt.Sprintf("%08x-abcd-4abc-8abc-abcdefabcdef", i), Meta: []byte(fmt.Sprintf("meta %d", i))})
	}
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: stored})
	unknown := "ffffffff-0000-4000-8000-000000000000"
	for _, tc := range []struct {
		name string
		ask  []string
		want map[string]string
	}{
		{"looked up", []string{strings.ToUpper(stored[3].UUID), unknown},
			map[string]string{stored[3].UUID: "meta 3"}},
		{"scanned", []string{stored[1].UUID, "not-a-uuid", strings.ToUpper(stored[7].UUID), unknown, stored[11].UUID},
			map[string]string{stored[1].UUID: "meta 1", stored[7].UUID: "meta 7", stored[11].UUID: "meta 11"}},
	} {
		got := map[string]string{}
		if err := d.VMMetas(tc.ask, func(uuid string, meta []byte) error {
			got[uuid] = string(meta)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: VMMetas = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Ensure Check passes on a store after a mix of commits and catches a
// journal that does not match the records.
func TestCheck(t *testing.T) {
	d, clk := openTest(t, Options{Journal: &JournalLimits{MaxEntries: 3}})
	const z = "dc.example.com"
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	for i := range 6 {
		clk.t = clk.t.Add(time.Second)
		mustCommit(t, d, &ChangeSet{VMs: []VMChange{
			{UUID: vm1, Records: []Record{rec(t, z, fmt.Sprintf("a%d.dc.example.com. 30 IN A 10.0.0.%d", i%2, i))}},
			{UUID: vm2, Records: []Record{rec(t, z, "s.dc.example.com. 30 IN A 10.0.1.1"), rec(t, "0.0.10.in-addr.arpa", fmt.Sprintf("%d.0.0.10.in-addr.arpa. 30 IN PTR a.dc.example.com.", i))}},
		}})
	}
	cfg := testConfig()
	cfg.Forward[z] = testApex("ns9.example.com.")
	mustCommit(t, d, &ChangeSet{Zones: cfg, VMs: []VMChange{{UUID: vm1, Delete: true}}})
	if probs, err := d.Check(); err != nil || len(probs) != 0 {
		t.Fatalf("sound store: %v %q", err, probs)
	}

	// Damage: drop a name behind the journal's back.
	err := d.file.Load().Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketZones).Bucket([]byte(z)).Bucket(bucketNames).Delete(mustKey(t, "s.dc.example.com.", z))
	})
	if err != nil {
		t.Fatal(err)
	}
	probs, err := d.Check()
	if err != nil || len(probs) == 0 {
		t.Fatalf("damaged store passed: %v", err)
	}
	joined := strings.Join(probs, "\n")
	for _, want := range []string{"meta says", "has no records there"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems %q lack %q", probs, want)
		}
	}
}

func mustKey(t *testing.T, owner, zone string) []byte {
	t.Helper()
	ow, _ := wireName(owner)
	zw, _ := ZoneWire(zone)
	k, ok := relativeKey(ow, zw)
	if !ok {
		t.Fatalf("%s not in %s", owner, zone)
	}
	return k
}

// Ensure the catalog zone lists every other zone, follows reverse zones
// as they come and go, and journals its changes like any zone.
func TestCatalogZone(t *testing.T) {
	d, clk := openTest(t, Options{})
	cfg := testConfig()
	cfg.Catalog = &CatalogConfig{Name: "catalog.cns", Apex: testApex("invalid.")}
	mustCommit(t, d, &ChangeSet{Zones: cfg})
	members := func() []string {
		var out []string
		err := d.ScanZone("catalog.cns", func(owner []byte, rrs RRs) error {
			recs, _ := rrs.ToRR(WireToString(owner))
			for _, r := range recs {
				if p, ok := r.(*dns.PTR); ok {
					if !strings.HasPrefix(WireToString(owner), catalogMemberID(strings.TrimSuffix(p.Ptr, "."))+".zones.") {
						t.Errorf("member %s has label %s", p.Ptr, WireToString(owner))
					}
					out = append(out, p.Ptr)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	if got := members(); !slices.Equal(got, []string{"dc.example.com."}) {
		t.Fatalf("members %q", got)
	}
	clk.t = clk.t.Add(time.Second)
	mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vm1, Records: []Record{rec(t, "0.0.10.in-addr.arpa", "1.0.0.10.in-addr.arpa. 30 IN PTR a.dc.example.com.")}}}})
	if got := members(); !slices.Equal(got, []string{"0.0.10.in-addr.arpa.", "dc.example.com."}) {
		t.Fatalf("members after a reverse zone appeared: %q", got)
	}
	clk.t = clk.t.Add(time.Second)
	c := mustCommit(t, d, &ChangeSet{VMs: []VMChange{{UUID: vm1, Delete: true}}})
	if got := members(); !slices.Equal(got, []string{"dc.example.com."}) {
		t.Fatalf("members after the reverse zone went: %q", got)
	}
	var catUpdate *ZoneUpdate
	for i := range c.Zones {
		if c.Zones[i].Zone == "catalog.cns" {
			catUpdate = &c.Zones[i]
		}
	}
	if catUpdate == nil || catUpdate.Entry == nil || len(catUpdate.Entry.Deleted) != 1 {
		t.Errorf("catalog change not journaled: %+v", catUpdate)
	}
	if probs, err := d.Check(); err != nil || len(probs) > 0 {
		t.Errorf("check: %v %q", err, probs)
	}
}

// A change set that names a VM twice applies both in order, as two
// commits would: the VM's entry and digest are held until its VMs are
// all applied (keyedWrites), and the second change reads the first's.
func TestCommitSameVMTwice(t *testing.T) {
	d, _ := openTest(t, Options{})
	const z = "dc.example.com"
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{
		{UUID: vm1, Hash: 1, Records: []Record{rec(t, z, "a.inst.owner.dc.example.com. 30 IN A 10.0.0.1")}},
		{UUID: vm1, Hash: 2, Records: []Record{rec(t, z, "b.inst.owner.dc.example.com. 30 IN A 10.0.0.2")}},
		{UUID: vm2, Hash: 3, Records: []Record{rec(t, z, "c.inst.owner.dc.example.com. 30 IN A 10.0.0.3")}},
		{UUID: vm2, Delete: true},
	}})
	for owner, want := range map[string]int{"a": 0, "b": 1, "c": 0} {
		if got := published(t, d, z, owner+".inst.owner.dc.example.com."); len(got) != want {
			t.Errorf("%s: %q, want %d records", owner, got, want)
		}
	}
	if _, ok, _ := d.VM(vm2); ok {
		t.Error("a VM deleted in the change set that added it is stored")
	}
	hashes, err := d.VMHashes()
	if err != nil {
		t.Fatal(err)
	}
	if len(hashes) != 1 || hashes[vm1] != 2 {
		t.Errorf("digests %v, want only %s's second", hashes, vm1)
	}
	if probs, err := d.Check(); err != nil || len(probs) > 0 {
		t.Errorf("check: %v %q", err, probs)
	}
}
