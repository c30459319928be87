package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// The soak (issue 20): the cns binary on a generated data center whose
// inventory file changes continuously (aliases renamed every 100 ms,
// whole services of 50 VMs stopped and started every 2 s), queried at a
// fixed rate over UDP, with a secondary transferring every change and the
// API polled; every interval the process's RSS, goroutines, open files,
// the db file's size, the journals' sizes and the interval's p99 answer
// latency are sampled into a TSV (bench/reliability.sh soak plots it).
// CI runs it for a few seconds; CNS_SOAK_DURATION, CNS_SOAK_INTERVAL,
// CNS_SOAK_VMS, CNS_SOAK_QPS and CNS_SOAK_OUT (the TSV's path) make it
// long. RSS is sampled split into anonymous memory (the Go heap and
// stacks) and file-backed pages (mostly the mmapped db), next to the
// heap's own figures, so that growth can be told apart; CNS_SOAK_CHURN
// (the rename interval, 100 ms) churns faster, and CNS_SOAK_PROFILES (a
// directory) keeps a heap profile per sample for `go tool pprof -base`.
func TestSoak(t *testing.T) {
	duration := envDuration(t, "CNS_SOAK_DURATION", 6*time.Second)
	interval := envDuration(t, "CNS_SOAK_INTERVAL", 500*time.Millisecond)
	vms := envInt(t, "CNS_SOAK_VMS", 2000)
	qps := envInt(t, "CNS_SOAK_QPS", 200)
	churn := envDuration(t, "CNS_SOAK_CHURN", 100*time.Millisecond)
	profiles := os.Getenv("CNS_SOAK_PROFILES")
	out := os.Getenv("CNS_SOAK_OUT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "soak.tsv")
	}
	kinds := interopKinds(t)
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: vms, Seed: 20})
	const svcSize = 50
	services := min(10, vms/svcSize/2)
	for i := range services * svcSize {
		inv.VMs[i].Tags["triton.cns.services"] = fmt.Sprintf("scale%d", i/svcSize)
	}
	r := newInteropRig(t, kinds[:1], inv, false, func(c map[string]any) {
		c["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
		c["journal_max_entries"] = 500
	})
	api := "http://" + r.cns.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
	r.converge("initial transfer")
	names := soakNames(t, r)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var lat latencies
	wg.Go(func() { soakChurn(ctx, r.invPath, inv, services, svcSize, churn) })
	wg.Go(func() { soakQueries(ctx, r.primary(), names, qps, &lat) })
	var apiErrs atomic.Int64
	wg.Go(func() { soakPollAPI(ctx, api, &apiErrs) })

	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "seconds\trss_kib\tgoroutines\topen_files\tdb_bytes\tjournal_entries\tjournal_bytes\tqueries\tlost\tp99_us"+
		"\trss_anon_kib\trss_file_kib\trss_db_kib\theap_inuse\theap_live\theap_released\theap_sys\tnext_gc")
	pid := r.cns.cmd.Process.Pid
	dbPath := filepath.Join(r.dir, "cns.db")
	start := time.Now()
	var samples []soakSample
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// At least 8 samples, so that the heap check below has 6 after
	// warm-up however slowly a loaded machine samples (a forced GC each).
	for time.Since(start) < duration || len(samples) < 8 {
		<-tick.C
		s := sampleSoak(t, pid, api, dbPath)
		s.seconds = time.Since(start).Seconds()
		s.queries, s.lost, s.p99 = lat.take()
		samples = append(samples, s)
		fmt.Fprintf(w, "%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.seconds, s.rssKiB, s.goroutines, s.files, s.dbBytes,
			s.journalEntries, s.journalBytes, s.queries, s.lost, s.p99.Microseconds(), s.rssAnonKiB, s.rssFileKiB, s.rssDBKiB,
			s.heap["HeapInuse"], s.heap["HeapAlloc"], s.heap["HeapReleased"], s.heap["HeapSys"], s.heap["NextGC"])
		if profiles != "" {
			saveHeapProfile(t, api, filepath.Join(profiles, fmt.Sprintf("heap-%05.0f.pb.gz", s.seconds)))
		}
		w.Flush()
	}
	cancel()
	wg.Wait()
	t.Logf("samples in %s", out)

	// Queries are answered throughout; nothing leaks: after the first
	// fifth (warm-up), goroutines and open files stay within a small band.
	var queries, lost int
	for _, s := range samples {
		queries += s.queries
		lost += s.lost
	}
	if queries == 0 || lost*100 > queries {
		t.Errorf("%d of %d queries unanswered", lost, queries)
	}
	if n := apiErrs.Load(); n > 0 {
		t.Errorf("%d API polls failed", n)
	}
	warm := samples[len(samples)/5:]
	first, last := warm[0], warm[len(warm)-1]
	if last.goroutines > first.goroutines+50 || last.files > first.files+20 {
		t.Errorf("goroutines %d -> %d, open files %d -> %d after warm-up", first.goroutines, last.goroutines, first.files, last.files)
	}
	if last.journalEntries == 0 || last.rssKiB == 0 || last.goroutines == 0 || last.files == 0 || last.dbBytes == 0 || last.heap["HeapAlloc"] == 0 {
		t.Errorf("a figure was not sampled: %+v", last)
	}
	t.Logf("live heap floor after warm-up: %d KiB, in the second half: %d KiB", liveHeapFloor(warm[:len(warm)/2])>>10, liveHeapFloor(warm[len(warm)/2:])>>10)
	if err := heapFloorGrowth(warm, 4<<20); err != nil {
		t.Error(err)
	}
	t.Logf("%d samples: RSS %d -> %d KiB, goroutines %d -> %d, open files %d -> %d, db %d -> %d bytes, %d queries, %d lost",
		len(samples), first.rssKiB, last.rssKiB, first.goroutines, last.goroutines, first.files, last.files, first.dbBytes, last.dbBytes, queries, lost)
	// The secondary is identical to cns once the churn stops and its last
	// inventory write is committed (serials still for a second).
	settle := time.Now().Add(30 * time.Second)
	for prev := r.serials(); ; {
		time.Sleep(time.Second) // polling cns's serials until they settle
		now := r.serials()
		if maps.Equal(now, prev) {
			break
		}
		if time.Now().After(settle) {
			t.Fatalf("cns's serials still move 30 s after the churn stopped: %v -> %v", prev, now)
		}
		prev = now
	}
	r.converge("end of the soak")
}

type soakSample struct {
	seconds                       float64
	rssKiB, goroutines, files     int
	rssAnonKiB, rssFileKiB        int
	rssDBKiB                      int              // the file-backed part that is the mmapped db
	heap                          map[string]int64 // runtime.MemStats fields, from the heap profile
	dbBytes, journalBytes         int64
	journalEntries, queries, lost int
	p99                           time.Duration
}

func sampleSoak(t *testing.T, pid int, api, dbPath string) soakSample {
	var s soakSample
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "VmRSS:":
				s.rssKiB, _ = strconv.Atoi(f[1])
			case "RssAnon:":
				s.rssAnonKiB, _ = strconv.Atoi(f[1])
			case "RssFile:":
				s.rssFileKiB, _ = strconv.Atoi(f[1])
			}
		}
	}
	s.rssDBKiB = mappedRSSKiB(pid, dbPath)
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.files = len(fds)
	}
	if fi, err := os.Stat(dbPath); err == nil {
		s.dbBytes = fi.Size()
	}
	if b, err := httpGet(api + "/debug/pprof/goroutine?debug=1"); err == nil {
		fmt.Sscanf(string(b), "goroutine profile: total %d", &s.goroutines)
	}
	s.heap = map[string]int64{}
	// gc=1: a collection first, so that HeapAlloc is the live heap (what
	// a leak makes grow), not the garbage of the moment.
	if b, err := httpGet(api + "/debug/pprof/heap?gc=1&debug=1"); err == nil {
		// The text profile ends with runtime.MemStats as "# Name = value".
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[2] == "=" {
				s.heap[f[1]], _ = strconv.ParseInt(f[3], 10, 64)
			}
		}
	}
	var zones []admin.ZoneSummary
	b, err := httpGet(api + "/zones")
	if err == nil {
		err = json.Unmarshal(b, &zones)
	}
	if err != nil {
		t.Errorf("GET /zones: %v", err)
	}
	for _, zs := range zones {
		var z admin.Zone
		if b, err := httpGet(api + "/zones/" + zs.Name); err == nil && json.Unmarshal(b, &z) == nil {
			s.journalEntries += z.Journal.Entries
			s.journalBytes += z.Journal.Bytes
		} else {
			t.Errorf("GET /zones/%s: %v", zs.Name, err)
		}
	}
	return s
}

// heapFloorGrowth fails when the live heap's floor rose by more than
// margin bytes from the first half of samples (taken after warm-up) to
// the second: what a leak does. RSS cannot tell: it also counts the
// mmapped db paging back in after cns released it, which grows toward
// the file's size (RELIABILITY.md). The floor (the least live heap of a
// half) ignores an inventory decoded at the moment of a sample. It needs
// three samples a half; CI's 6 s at two samples a second give five a
// half, enough for a leak of 2 MiB a second; an hour's run at a sample a
// minute sees one of 0.2 MiB a minute.
func heapFloorGrowth(samples []soakSample, margin int64) error {
	if len(samples) < 6 {
		return fmt.Errorf("%d samples after warm-up; the heap check needs 6 (a longer CNS_SOAK_DURATION or a shorter CNS_SOAK_INTERVAL)", len(samples))
	}
	before, after := liveHeapFloor(samples[:len(samples)/2]), liveHeapFloor(samples[len(samples)/2:])
	if before < 0 || after < 0 {
		return fmt.Errorf("the live heap was not sampled")
	}
	if after > before+margin {
		return fmt.Errorf("the live heap's floor grew from %d to %d KiB after warm-up (margin %d KiB)", before>>10, after>>10, margin>>10)
	}
	return nil
}

// The soak's leak check on samples made up for it: a flat heap with an
// inventory decoded at some samples passes; a floor that rises fails.
func TestHeapFloorGrowth(t *testing.T) {
	const mib = 1 << 20
	heap := func(v ...int64) []soakSample {
		var out []soakSample
		for _, x := range v {
			out = append(out, soakSample{heap: map[string]int64{"HeapAlloc": x}})
		}
		return out
	}
	for _, c := range []struct {
		name    string
		samples []soakSample
		leak    bool
	}{
		{"flat", heap(6*mib, 6*mib, 6*mib, 6*mib, 6*mib, 6*mib), false},
		{"flat with inventories decoded", heap(6*mib, 15*mib, 6*mib, 6*mib, 16*mib, 6*mib), false},
		{"a step inside the margin", heap(6*mib, 6*mib, 6*mib, 9*mib, 9*mib, 9*mib), false},
		{"rising 2 MiB a sample", heap(6*mib, 8*mib, 10*mib, 12*mib, 14*mib, 16*mib), true},
		{"rising under the spikes", heap(6*mib, 20*mib, 8*mib, 11*mib, 25*mib, 12*mib), true},
	} {
		if err := heapFloorGrowth(c.samples, 4*mib); (err != nil) != c.leak {
			t.Errorf("%s: %v, want a leak: %v", c.name, err, c.leak)
		}
	}
	if err := heapFloorGrowth(heap(6*mib, 6*mib, 6*mib), 4*mib); err == nil {
		t.Error("three samples judged; the check needs six")
	}
}

// liveHeapFloor is the least live heap (after a forced GC) of samples.
func liveHeapFloor(samples []soakSample) int64 {
	floor := int64(-1)
	for _, s := range samples {
		if v := s.heap["HeapAlloc"]; v > 0 && (floor < 0 || v < floor) {
			floor = v
		}
	}
	return floor
}

// mappedRSSKiB is how much of the file at path the process has resident
// through its mappings (bbolt's mmap of the db), from /proc/PID/smaps.
func mappedRSSKiB(pid int, path string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0
	}
	kib, inFile := 0, false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			inFile = len(f) >= 6 && f[5] == path // a mapping's header line
		case inFile && len(f) >= 2 && f[0] == "Rss:":
			n, _ := strconv.Atoi(f[1])
			kib += n
		}
	}
	return kib
}

// saveHeapProfile keeps the process's heap profile at path (inuse_space
// and inuse_objects are as of the collection sampleSoak forced).
func saveHeapProfile(t *testing.T, api, path string) {
	b, err := httpGet(api + "/debug/pprof/heap")
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Errorf("heap profile: %v", err)
	}
}

func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// soakNames are the A names of the public zone, to query.
func soakNames(t *testing.T, r *interopRig) []string {
	rrs, err := r.axfr(publicZone, &interopKey)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeA {
			names = append(names, rr.Header().Name)
		}
	}
	if len(names) == 0 {
		t.Fatal("no A records to query")
	}
	return names
}

// soakChurn renames aliases every interval (100 ms) and stops or starts a
// whole service every 20 intervals (2 s), writing the inventory file each
// time.
func soakChurn(ctx context.Context, path string, inv *dc.Inventory, services, svcSize int, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range 5 {
			vm := &inv.VMs[services*svcSize+rng.IntN(len(inv.VMs)-services*svcSize)]
			alias := fmt.Sprintf("churn%d", rng.IntN(1000))
			vm.Alias = &alias
		}
		if n%20 == 0 && services > 0 {
			svc := n / 20 % services
			for i := svc * svcSize; i < (svc+1)*svcSize; i++ {
				if inv.VMs[i].State == "running" {
					inv.VMs[i].State = "stopped"
				} else {
					inv.VMs[i].State = "running"
				}
			}
		}
		data, err := json.Marshal(inv)
		if err != nil {
			panic(err)
		}
		if os.WriteFile(path+".tmp", data, 0o644) == nil {
			os.Rename(path+".tmp", path)
		}
	}
}

// latencies collects answer times; take returns an interval's count,
// losses and p99.
type latencies struct {
	mu   sync.Mutex
	d    []time.Duration
	lost int
}

func (l *latencies) add(d time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		l.lost++
		return
	}
	l.d = append(l.d, d)
}

func (l *latencies) take() (n, lost int, p99 time.Duration) {
	l.mu.Lock()
	d, lost := l.d, l.lost
	l.d, l.lost = nil, 0
	l.mu.Unlock()
	if len(d) == 0 {
		return 0, lost, 0
	}
	slices.Sort(d)
	return len(d) + lost, lost, d[len(d)*99/100]
}

// soakQueries asks for a random name qps times a second.
func soakQueries(ctx context.Context, addr string, names []string, qps int, lat *latencies) {
	c := &dns.Client{Timeout: time.Second}
	tick := time.NewTicker(time.Second / time.Duration(qps))
	defer tick.Stop()
	rng := rand.New(rand.NewPCG(3, 4))
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		m := new(dns.Msg)
		m.SetQuestion(names[rng.IntN(len(names))], dns.TypeA)
		start := time.Now()
		r, _, err := c.Exchange(m, addr)
		lat.add(time.Since(start), err == nil && r != nil)
	}
}

// soakPollAPI reads the API as an operator's dashboard would.
func soakPollAPI(ctx context.Context, api string, errs *atomic.Int64) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, p := range []string{"/status", "/peers", "/feeds", "/metrics"} {
			if _, err := httpGet(api + p); err != nil {
				errs.Add(1)
			}
		}
	}
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}
