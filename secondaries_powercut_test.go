//go:build linux

package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/db/durable"
	"github.com/tritondatacenter/cns/db/powercut"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// Power cuts under cns serve (RELIABILITY.md, "Power loss"): its db on
// db/powercut, a file system that keeps only what was fsynced and what a
// directory's fsync made durable, and BIND, Knot and NSD following its
// zones. Each round runs one of cns's lives on the disk and cuts the
// power at a random point of it:
//
//   - churn: commits while the inventory changes every 50 ms (a backup
//     through the API first, for a later restore);
//   - first load: the db directory removed, a first load in chunks, and
//     the live compaction that follows it;
//   - db compact: cns stopped, `cns db compact`;
//   - db restore: cns stopped, `cns db restore` of the last backup.
//
// After each cut the disk is unmounted and its db read as the machine
// finds it: `cns db check`'s checks pass, and no zone's serial is below
// one cns served before the cut (unless the file says it is unverified:
// created empty or restored, which the serial check at start handles).
// Then cns starts on it again: every zone equals what a fresh db makes of
// the inventory; every secondary converges on it, by IXFR where the
// journal held its serial and by AXFR otherwise, as cns logs the
// transfers; and an IXFR from every serial the test took an AXFR at
// during the run, applied to that AXFR, gives the current zone.
//
// CNS_POWER_CUTS sets the rounds (default 4, one of each; 60 with
// CNS_LONG=1).
func TestPowerCutServe(t *testing.T) {
	kinds := interopKinds(t)
	rounds := 4
	if longRun() {
		rounds = 60
	}
	if v := os.Getenv("CNS_POWER_CUTS"); v != "" {
		rounds, _ = strconv.Atoi(v)
	}
	r := newPowerRig(t, kinds)
	phases := []powerPhase{
		{"churn", (*powerRig).churn},
		{"first load", (*powerRig).firstLoad},
		{"db compact", (*powerRig).compactOffline},
		{"db restore", (*powerRig).restore},
	}
	start := time.Now()
	for i := range rounds {
		ph := phases[i%len(phases)]
		r.round = i
		op := ph.run(r)
		note := r.inspect(ph.name, op)
		r.restart()
		t.Logf("round %d, %s: cut %s; %s", i, ph.name, op, note)
	}
	r.cns.stop(syscall.SIGTERM)
	t.Logf("%d rounds in %v; cut before: %v; the db after the cut: %v; transfers after the restarts: %v",
		rounds, time.Since(start).Round(time.Second), r.stats.cutKinds, r.stats.after, r.stats.xfrs)
}

// powerPhase is one of cns's lives a round cuts the power under. run
// leaves cns killed and the power cut, and returns where it was cut.
type powerPhase struct {
	name string
	run  func(*powerRig) string
}

// powerRig is cns on a power-cut disk, with its secondaries.
type powerRig struct {
	t          *testing.T
	disk       *powercut.Disk
	dir        string
	cfgPath    string
	invPath    string
	inv        *dc.Inventory
	gen        int
	rng        *rand.Rand
	cnsPort    int
	api        string
	cns        *proc
	secs       []*secondarytest.Secondary
	secAddr    map[string]secondarytest.Kind // a secondary's address (it transfers from it)
	zones      []string
	backup     string // the last backup, on the disk
	round      int
	served     map[string]uint32                        // per zone, the highest serial cns served
	seen       map[uint32]zoneContent                   // the public zone, by AXFR, at serials cns served
	ixfrable   map[secondarytest.Kind]map[string]bool   // whose serial the journal started from, per zone, at the last restart
	before     map[secondarytest.Kind]map[string]uint32 // what the secondaries held then
	stats      struct{ cutKinds, after, xfrs map[string]int }
	dbPath     string
	bindMu     sync.Mutex // the cut's trigger runs on the file system's goroutine
	bindPaused bool
	cutFired   bool   // the power was cut: BIND stays paused until cns restarts
	inspected  string // what inspect found
	lastLog    string
	cnsEnv     []string
}

// The addresses the secondaries transfer from, so cns's log tells them
// apart (BIND listens only on 127.0.0.1 of a stock lo; Knot and NSD bind
// any 127/8 address).
var powerSecAddr = map[secondarytest.Kind]string{secondarytest.BIND: "127.0.0.1", secondarytest.Knot: "127.0.0.2", secondarytest.NSD: "127.0.0.3"}

func newPowerRig(t *testing.T, kinds []secondarytest.Kind) *powerRig {
	r := &powerRig{t: t, disk: powercut.NewDisk(t), dir: t.TempDir(), rng: rand.New(rand.NewPCG(43, 2)),
		secAddr: map[string]secondarytest.Kind{}, before: map[secondarytest.Kind]map[string]uint32{}, served: map[string]uint32{}, seen: map[uint32]zoneContent{}}
	r.stats.cutKinds, r.stats.after, r.stats.xfrs = map[string]int{}, map[string]int{}, map[string]int{}
	r.dbPath = r.disk.Path("cns/cns.db") // cns makes the directory
	var err error
	if r.cnsPort, err = secondarytest.FreePort(); err != nil {
		t.Fatal(err)
	}
	ports := map[secondarytest.Kind]int{}
	var notify []string
	for _, k := range kinds {
		if ports[k], err = secondarytest.FreePortOn(powerSecAddr[k]); err != nil {
			t.Fatal(err)
		}
		notify = append(notify, fmt.Sprintf("%s:%d", powerSecAddr[k], ports[k]))
		r.secAddr[powerSecAddr[k]] = k
	}
	apiPort, err := secondarytest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r.api = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	r.inv = sdcsim.Generate(sdcsim.GenerateOptions{VMs: 600, Seed: 43})
	r.invPath = filepath.Join(r.dir, "inventory.json")
	writeInventory(t, r.invPath, r.inv)
	r.cfgPath = testConfig(t, r.dir, "", func(c map[string]any) {
		c["inventory_file"] = r.invPath
		c["db_path"] = r.dbPath
		c["dns_listen"] = []string{fmt.Sprintf("127.0.0.1:%d", r.cnsPort)}
		c["allow_transfer"] = []string{"127.0.0.0/8"}
		c["also_notify"] = notify
		c["min_notify_interval"] = 50
		c["api_server"] = map[string]any{"listen": fmt.Sprintf("127.0.0.1:%d", apiPort)}
		// The journal keeps every serial of the run: which serials a
		// secondary's IXFR can start from is then what the cut left.
		c["journal_max_entries"] = 100000
	})
	// A first load in chunks of 150 VMs leaves pages free, and a file
	// with 64 KiB of them is compacted live (the defaults need a data
	// center too big to load in CI time: 20,000 VMs, 16 MiB).
	r.cnsEnv = []string{"CNS_TEST_CHUNK_VMS=150", "CNS_TEST_SPARSE_MIN=65536"}

	// The first load, uncut: the secondaries start from it.
	r.cns = startCNS(t, r.cfgPath, r.cnsEnv...)
	r.cns.waitCommitted(0)
	r.cns.waitLog(20*time.Second, func(l logLine) bool { return l.str("msg") == "db compacted" })
	r.cns.stop(syscall.SIGTERM)
	r.zones = r.catalog()
	r.cns = startCNS(t, r.cfgPath, r.cnsEnv...)
	for _, k := range kinds {
		cfg := secondarytest.Config{Kind: k, Primary: r.primary(), Zones: r.zones, Dir: filepath.Join(r.dir, string(k)),
			Port: ports[k], Address: powerSecAddr[k]}
		r.secs = append(r.secs, secondarytest.Start(t, cfg))
	}
	r.waitSerials()
	r.compareSecondaries()
	r.ixfrable = nil // the first transfers are AXFRs of zones new to the secondaries
	return r
}

// stopCNS stops cns with sig, BIND first (see startCNS).
func (r *powerRig) stopCNS(sig syscall.Signal) {
	r.pauseBIND()
	if r.cns != nil {
		r.cns.stop(sig)
		r.cns = nil
	}
}

// startCNS starts cns on the disk, then lets BIND go on. BIND is
// stopped while cns is down: a BIND secondary that finds its primary unreachable
// skips it for ten minutes (its unreachable cache, UNREACH_HOLD_TIME,
// which a NOTIFY does not clear): after a real outage it converges that
// much later. Knot and NSD retry on their refresh timers and keep
// running throughout.
func (r *powerRig) startCNS() {
	r.cns = startCNS(r.t, r.cfgPath, r.cnsEnv...)
	r.resumeBIND()
}

// pauseBIND reads what BIND holds and stops it. The cut's trigger calls
// it from the file system's goroutine, maybe while cns is being started.
func (r *powerRig) pauseBIND() {
	r.bindMu.Lock()
	defer r.bindMu.Unlock()
	if r.bindPaused {
		return
	}
	for _, s := range r.secs {
		if s.Kind() == secondarytest.BIND {
			r.record(s)
			if err := s.Pause(); err != nil {
				r.t.Fatal(err)
			}
		}
	}
	r.bindPaused = true
}

// resumeBIND lets BIND go on, unless the power was cut meanwhile.
func (r *powerRig) resumeBIND() {
	r.bindMu.Lock()
	defer r.bindMu.Unlock()
	if !r.bindPaused || r.cutFired {
		return
	}
	r.bindPaused = false
	for _, s := range r.secs {
		if s.Kind() == secondarytest.BIND {
			if err := s.Resume(); err != nil {
				r.t.Fatal(err)
			}
		}
	}
}

func (r *powerRig) primary() string { return fmt.Sprintf("127.0.0.1:%d", r.cnsPort) }

// catalog lists the zones in the db that hold records (cns stopped).
func (r *powerRig) catalog() []string {
	out, stderr, _ := runCNS(r.t, "db", "--db", r.dbPath, "zones")
	var zones []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] != "0" {
			zones = append(zones, f[0])
		}
	}
	if len(zones) == 0 {
		r.t.Fatalf("no zones from cns db zones: %s %s", out, stderr)
	}
	return zones
}

// armCut cuts the power at a random point from now on: before the n-th
// changing operation, n drawn from 1..span, or (a third of the time each)
// before the first fsync after it, or the first operation that is
// neither a write nor an fsync (a create, rename, unlink, truncation or
// directory sync), where there is one.
func (r *powerRig) armCut(span int) {
	base := r.disk.FS.Ops()
	n := base + 1 + r.rng.IntN(span)
	switch r.rng.IntN(3) {
	case 0:
		r.cutBefore(func(op powercut.Op) bool { return op.N >= n })
	case 1:
		r.cutBefore(func(op powercut.Op) bool { return op.N >= n && op.Kind == powercut.OpFsync })
	default:
		r.cutBefore(func(op powercut.Op) bool {
			return op.N >= n && op.Kind != powercut.OpWrite && op.Kind != powercut.OpFsync
		})
	}
}

// cutBefore arms a cut before the first operation when says yes. At the
// cut, with the file system stopped, BIND's serials are read and BIND is
// paused (see startCNS): cns dies with the power, and BIND must not find
// it unreachable.
func (r *powerRig) cutBefore(when func(powercut.Op) bool) {
	r.disk.FS.CutBefore(func(op powercut.Op) bool {
		if !when(op) {
			return false
		}
		r.atCut()
		return true
	})
}

// atCut reads what the secondaries hold (they can only catch up to what
// cns served, which it committed first) and pauses BIND.
func (r *powerRig) atCut() {
	r.bindMu.Lock()
	r.cutFired = true
	r.bindMu.Unlock()
	for _, s := range r.secs {
		if s.Kind() != secondarytest.BIND {
			r.record(s)
		}
	}
	r.pauseBIND()
}

// record reads the serials s holds.
func (r *powerRig) record(s *secondarytest.Secondary) {
	held := map[string]uint32{}
	for _, z := range r.zones {
		if serial, ok := s.Serial(z); ok {
			held[z] = serial
			r.noteServed(z, serial)
		}
	}
	r.before[s.Kind()] = held
}

// cutNow cuts the power if nothing has, kills cns, and says where the
// cut fell.
func (r *powerRig) cutNow(within time.Duration) string {
	select {
	case <-r.disk.FS.CutDone():
	case <-time.After(within):
		r.disk.FS.CutBefore(nil)
		if _, _, cut := r.disk.FS.CutAt(); !cut {
			r.atCut()
			r.disk.FS.Cut()
		}
	}
	if p := r.cns; p != nil {
		defer func() { r.lastLog = p.log() }()
	}
	r.stopCNS(syscall.SIGKILL)
	op, lost, _ := r.disk.FS.CutAt()
	kind := string(op.Kind)
	if op.Kind == "cut" {
		kind = "idle"
	}
	r.stats.cutKinds[kind]++
	return fmt.Sprintf("before %v (lost %d pages of %d files, %d names)", op, lost.Pages, lost.Files, lost.Entries)
}

// churn: a backup through the API, then commits while the inventory
// changes every 50 ms; the power goes before a random operation.
func (r *powerRig) churn() string {
	r.backup = r.disk.Path(fmt.Sprintf("backup-%d.db", r.round))
	if _, stderr, code := runCNS(r.t, "adm", "--api", r.api, "backup", r.backup); code != 0 {
		r.t.Fatalf("cnsadm backup: %s", stderr)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	rng := rand.New(rand.NewPCG(uint64(r.round), 7)) // the churn's own
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			r.gen++
			powerChurn(r.inv, rng, r.gen, 4)
			writeInventory(r.t, r.invPath, r.inv)
		}
	}()
	// An AXFR or two on the way, recording what the public zone held.
	time.Sleep(time.Duration(100+r.rng.IntN(300)) * time.Millisecond)
	r.takeAXFR()
	r.armCut(400)
	note := r.cutNow(5 * time.Second)
	close(stop)
	<-done
	return note
}

// powerChurn renames n VMs and stops or starts n others: changes to the
// forward and reverse zones that make no new zone.
func powerChurn(inv *dc.Inventory, rng *rand.Rand, gen, n int) {
	for i := range n {
		vm := &inv.VMs[rng.IntN(len(inv.VMs))]
		alias := fmt.Sprintf("churn%d-%d", gen, i)
		vm.Alias = &alias
		vm = &inv.VMs[rng.IntN(len(inv.VMs))]
		if vm.State == "running" {
			vm.State = "stopped"
		} else {
			vm.State = "running"
		}
	}
}

// takeAXFR records the public zone at the serial cns serves.
func (r *powerRig) takeAXFR() {
	serial, content, err := axfrContent(r.primary(), demoZone)
	if err != nil {
		r.t.Fatalf("AXFR: %v", err)
	}
	r.seen[serial] = content
	r.noteServed(demoZone, serial)
}

func (r *powerRig) noteServed(zone string, serial uint32) {
	if s, ok := r.served[zone]; !ok || db.SerialLess(s, serial) {
		r.served[zone] = serial
	}
}

// firstLoad: the db directory removed (a new disk), then a first load in
// chunks and its live compaction, the power cut during either.
func (r *powerRig) firstLoad() string {
	r.stopCNS(syscall.SIGTERM)
	if err := os.RemoveAll(filepath.Dir(r.dbPath)); err != nil {
		r.t.Fatal(err)
	}
	if err := durable.SyncDir(r.disk.Mnt); err != nil {
		r.t.Fatal(err)
	}
	// A new db numbers its serials anew: what the test saw of the old
	// one says nothing about them (the secondaries' serials are the
	// serial check's business).
	r.seen, r.served = map[uint32]zoneContent{}, map[string]uint32{}
	if r.rng.IntN(2) == 0 {
		r.armCut(600) // during the load
	} else {
		// During the live compaction: before one of its first operations
		// after its copy is created.
		k := 1 + r.rng.IntN(40)
		var at int
		r.cutBefore(func(op powercut.Op) bool {
			if at == 0 && op.Kind == powercut.OpCreate && strings.Contains(op.Path, ".compact.") {
				at = op.N
			}
			return at > 0 && op.N >= at+k
		})
	}
	r.startCNS()
	return r.cutNow(20 * time.Second)
}

// compactOffline: cns stopped, `cns db compact` cut at a random point, or
// right after it returned.
func (r *powerRig) compactOffline() string {
	r.stopCNS(syscall.SIGTERM)
	r.armCut(120)
	out, stderr, code := runCNS(r.t, "db", "--db", r.dbPath, "compact")
	if _, _, cut := r.disk.FS.CutAt(); !cut && code != 0 {
		r.t.Fatalf("cns db compact: %s%s", out, stderr)
	}
	return r.cutNow(0)
}

// restore: cns stopped, `cns db restore` of the last backup cut at a
// random point, or right after it returned.
func (r *powerRig) restore() string {
	r.stopCNS(syscall.SIGTERM)
	if r.backup == "" {
		r.t.Fatal("no backup to restore")
	}
	r.armCut(150)
	out, stderr, code := runCNS(r.t, "db", "--db", r.dbPath, "restore", r.backup)
	if _, _, cut := r.disk.FS.CutAt(); !cut && code != 0 {
		r.t.Fatalf("cns db restore: %s%s", out, stderr)
	}
	return r.cutNow(0)
}

// inspect reads the db the cut left, on the disk unmounted: it must pass
// the check, and hold every serial cns served unless it says its serials
// are unverified. It remembers what each journal holds for restart.
func (r *powerRig) inspect(phase, op string) string {
	t := r.t
	r.disk.Unmount()
	defer r.disk.Mount()
	path := filepath.Join(r.disk.Dir, "cns", "cns.db")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if phase != "first load" {
			t.Fatalf("round %d (%s), cut %s: the db file is gone", r.round, phase, op)
		}
		r.stats.after["gone (first load not yet named)"]++
		r.ixfrable, r.seen, r.served = map[secondarytest.Kind]map[string]bool{}, map[uint32]zoneContent{}, map[string]uint32{}
		return "no db file (the load had not synced its name)"
	}
	if out, stderr, code := runCNS(t, "db", "--db", path, "check"); code != 0 {
		t.Fatalf("round %d (%s), cut %s: cns db check:\n%s%s", r.round, phase, op, out, stderr)
	}
	store, err := db.Open(path, db.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	why, err := store.SerialsUnverified()
	if err != nil {
		t.Fatal(err)
	}
	zones, err := store.Zones()
	if err != nil {
		t.Fatal(err)
	}
	// Which secondary the journal will send a difference: its serial is
	// one the journal starts from (or the zone's, if it changes next),
	// and the file vouches for its serials (else the serial check has
	// the secondary take the whole zone).
	r.ixfrable = map[secondarytest.Kind]map[string]bool{}
	for kind, held := range r.before {
		r.ixfrable[kind] = map[string]bool{}
		for _, z := range zones {
			s, ok := held[z.Name]
			if !ok || why != "" {
				continue
			}
			_, inJournal, err := store.Journal(z.Name, s)
			if err != nil {
				t.Fatal(err)
			}
			r.ixfrable[kind][z.Name] = inJournal || s == z.Serial
		}
	}
	for _, z := range zones {
		if s, ok := r.served[z.Name]; ok && why == "" && db.SerialLess(z.Serial, s) {
			t.Fatalf("round %d (%s), cut %s: %s is at serial %d after the cut; cns had served %d (secondaries: %v)", r.round, phase, op, z.Name, z.Serial, s, r.before)
		}
	}
	state := "verified serials"
	if why != "" {
		// Its serials may be behind what was served: the serial check
		// moves past the secondaries; the test's own AXFRs of the old
		// life say nothing about the new one's serials.
		state = "unverified: " + strings.SplitN(why, " at ", 2)[0]
		r.seen = map[uint32]zoneContent{}
		r.served = map[string]uint32{}
	}
	key := state
	if strings.HasPrefix(key, "unverified: restored") {
		key = "unverified: restored"
	}
	r.stats.after[key]++
	r.inspected = fmt.Sprintf("db check passed, %d zones, %s", len(zones), state)
	for _, z := range zones {
		r.inspected += fmt.Sprintf(", %s at %d", z.Name, z.Serial)
	}
	return fmt.Sprintf("db check passed, %d zones, %s", len(zones), state)
}

// restart starts cns on the disk and checks what it serves: every zone
// as a fresh db makes it from the inventory, every secondary converged
// on it (by IXFR where the journal held its serial), and the IXFRs from
// every serial the test took an AXFR at.
func (r *powerRig) restart() {
	t := r.t
	r.disk.FS.CutBefore(nil)
	r.bindMu.Lock()
	r.cutFired = false
	r.bindMu.Unlock()
	r.startCNS()
	mark := r.cns.mark()
	writeInventory(t, r.invPath, r.inv) // a change the feed sees after the start
	r.cns.waitCommitted(mark)
	r.waitSerials()
	r.checkTransfers() // before the test's own transfers, from 127.0.0.1 as BIND's
	r.compareSecondaries()
	want := freshUpdaterZones(t, r.cfgPath, r.inv)
	for _, z := range r.zones {
		serial, cur, err := axfrContent(r.primary(), z)
		if err != nil {
			t.Fatal(err)
		}
		r.noteServed(z, serial)
		if got := withoutApex(cur, z); !slices.Equal(got, want[z]) {
			t.Fatalf("round %d: zone %s after the restart differs from what a fresh db makes of the inventory:%s",
				r.round, z, diffContent(toContent(got), toContent(want[z])))
		}
		if z == demoZone {
			r.checkIXFRs(serial, cur)
		}
	}
}
