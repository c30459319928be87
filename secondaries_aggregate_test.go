package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/admin/cnsadm"
	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/feeds/aggregate"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
	"github.com/tritondatacenter/cns/serve/secondarytest"
)

const (
	aggRegion = "us-west.cns.example.com"
	aggKey    = "xfr-key."
	aggSecret = "c2VjcmV0LWtleS1mb3ItYWdncmVnYXRpb24="
)

// aggDC is one data center's cns for the aggregation test.
type aggDC struct {
	zone string
	inv  *dc.Inventory
	path string // its inventory file
	p    *proc
}

// startAggDC runs a data center's cns on its own inventory and suffix,
// NOTIFYing the aggregator; with key, transfers from loopback must be
// signed.
func startAggDC(t testing.TB, n int, inv *dc.Inventory, aggPort int, key bool) *aggDC {
	dir := t.TempDir()
	dc := &aggDC{zone: fmt.Sprintf("us-west-%d.cns.example.com", n), inv: inv, path: filepath.Join(dir, "inv.json")}
	writeInventory(t, dc.path, inv)
	cfg := testConfig(t, dir, "", func(m map[string]any) {
		m["inventory_file"] = dc.path
		m["my_name"] = fmt.Sprintf("cns.us-west-%d.example.com", n)
		m["forward_zones"] = map[string]any{dc.zone: map[string]any{"networks": []string{"*"}}}
		m["also_notify"] = []string{fmt.Sprintf("127.0.0.1:%d", aggPort)}
		if key {
			m["tsig_keys"] = map[string]any{aggKey: map[string]any{"algorithm": "hmac-sha256", "secret": aggSecret}}
			m["peer_keys"] = map[string]any{"127.0.0.1": aggKey}
		}
	})
	dc.p = startCNS(t, cfg)
	dc.p.waitLog(5*time.Minute, func(l logLine) bool { return l.str("msg") == "committed" && l["pending"] == 0.0 && l["vms"] != 0.0 })
	return dc
}

// moveIPs gives a data center the same VMs on other addresses.
func moveIPs(inv *dc.Inventory, second byte) {
	for i := range inv.VMs {
		for j := range inv.VMs[i].NICs {
			nic := &inv.VMs[i].NICs[j]
			nic.IP = strings.Replace(nic.IP, "10.0.", fmt.Sprintf("10.%d.", second), 1)
			for k := range nic.IPs {
				nic.IPs[k] = strings.Replace(nic.IPs[k], "10.0.", fmt.Sprintf("10.%d.", second), 1)
			}
		}
	}
}

func aggAXFR(t testing.TB, addr, zone string) []dns.RR {
	t.Helper()
	rrs, err := aggTryAXFR(addr, zone)
	if err != nil {
		t.Fatalf("AXFR %s from %s: %v", zone, addr, err)
	}
	return rrs
}

// aggTryAXFR transfers zone, signed with the test key for DC 1's zone.
func aggTryAXFR(addr, zone string) ([]dns.RR, error) {
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	tr := &dns.Transfer{}
	if zone == "us-west-1.cns.example.com" {
		m.SetTsig(aggKey, dns.HmacSHA256, 300, time.Now().Unix())
		tr.TsigSecret = map[string]string{aggKey: aggSecret}
	}
	ch, err := tr.In(m, addr)
	if err != nil {
		return nil, err
	}
	return secondarytest.Records(ch)
}

// aggRegionHas reports whether every non-apex record of a DC's zone is in
// the region zone under the region suffix.
func aggRegionHas(dcRRs, region []dns.RR, dcZone string) (missing string) {
	have := map[string]bool{}
	for _, rr := range region {
		have[strings.ToLower(rr.String())] = true
	}
	for _, rr := range dcRRs {
		h := rr.Header()
		if h.Rrtype == dns.TypeSOA || (h.Rrtype == dns.TypeNS && strings.EqualFold(h.Name, dns.Fqdn(dcZone))) {
			continue
		}
		want := strings.ReplaceAll(strings.ToLower(rr.String()), dcZone+".", aggRegion+".")
		if !have[want] {
			return want
		}
	}
	return ""
}

func aggLookupA(addr, name string, qtype uint16) []string {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := (&dns.Client{Timeout: time.Second, Net: "tcp"}).Exchange(m, addr)
	if err != nil {
		return nil
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	slices.Sort(out)
	return out
}

func aggFreePort(t testing.TB) int {
	t.Helper()
	port, err := secondarytest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Three data centers' cns, one standalone aggregator and real BIND and
// Knot secondaries of the region zone (RFD 172).
func TestAggregateRegion(t *testing.T) {
	aggPort := aggFreePort(t)
	inv1 := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20, Seed: 1})
	inv2 := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20, Seed: 1})
	moveIPs(inv2, 2) // the same services, members in a second DC
	inv3 := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 20, Seed: 3})
	moveIPs(inv3, 3)
	dcs := []*aggDC{startAggDC(t, 1, inv1, aggPort, true), startAggDC(t, 2, inv2, aggPort, false), startAggDC(t, 3, inv3, aggPort, false)}

	// A source that answers well once, then sends garbage.
	bad := startFakeSource(t, "us-west-9.cns.example.com")

	var secPorts []int
	var kinds []secondarytest.Kind
	for _, k := range secondarytest.Installed(t, secondarytest.BIND, secondarytest.Knot) {
		kinds = append(kinds, k)
		secPorts = append(secPorts, aggFreePort(t))
	}
	dir := t.TempDir()
	cfg := testConfig(t, dir, "", func(m map[string]any) {
		for _, k := range []string{"inventory_file", "forward_zones", "vmapi_opts", "cnapi_opts", "napi_opts", "ufds_opts", "changefeed_opts"} {
			delete(m, k)
		}
		m["my_name"] = "cns.us-west.example.com"
		m["dns_listen"] = []string{fmt.Sprintf("127.0.0.1:%d", aggPort)}
		m["tsig_keys"] = map[string]any{aggKey: map[string]any{"algorithm": "hmac-sha256", "secret": aggSecret}}
		var notify []string
		for _, p := range secPorts {
			notify = append(notify, fmt.Sprintf("127.0.0.1:%d", p))
		}
		m["also_notify"] = notify
		var sources []any
		for i, dc := range dcs {
			s := map[string]any{"zone": dc.zone, "primaries": []string{dc.p.addr}}
			if i == 0 {
				s["key"] = aggKey
			}
			sources = append(sources, s)
		}
		sources = append(sources, map[string]any{"zone": bad.zone, "primaries": []string{bad.addr}})
		m["aggregate"] = map[string]any{aggRegion: map[string]any{"sources": sources}}
		m["api_server"] = map[string]any{"listen": []string{"127.0.0.1:0"}}
	})
	tune := serviceTuning{Aggregate: func(o *aggregate.Options) {
		o.MaxRefresh, o.MaxRetry, o.MaxExpire, o.Timeout = 200*time.Millisecond, 100*time.Millisecond, 3*time.Second, time.Second
	}}
	top := t
	agg := startService(t, cfg, tune)
	if !agg.cfg.Standalone() {
		t.Fatal("not a standalone aggregator")
	}
	var secs []*secondarytest.Secondary
	for i, k := range kinds {
		secs = append(secs, secondarytest.Start(t, secondarytest.Config{Kind: k, Primary: agg.addr, Zones: []string{aggRegion}, Dir: t.TempDir(), Port: secPorts[i]}))
	}

	t.Run("every name of every DC", func(t *testing.T) {
		waitFor(t, "the region to hold every DC's names", 20*time.Second, func() bool {
			region, err := aggTryAXFR(agg.addr, aggRegion)
			if err != nil {
				return false
			}
			for _, dc := range dcs {
				if aggRegionHas(aggAXFR(t, dc.p.addr, dc.zone), region, dc.zone) != "" {
					return false
				}
			}
			return true
		})
		// The apex is the aggregator's own.
		for _, rr := range aggAXFR(t, agg.addr, aggRegion) {
			if ns, ok := rr.(*dns.NS); ok && ns.Ns != "cns.us-west.example.com." {
				t.Errorf("region NS %s", ns)
			}
		}
	})

	t.Run("operators see every source", func(t *testing.T) {
		var st admin.Status
		getJSON(t, agg.api+"/status", &st)
		if len(st.Sources) != 4 {
			t.Fatalf("status sources: %+v", st.Sources)
		}
		for _, x := range st.Sources[:3] {
			if x.State != "ok" || x.Region != aggRegion || x.Names == 0 || x.LastKind != "AXFR" || x.LagSeconds < 0 {
				t.Errorf("source %+v", x)
			}
		}
		dc1 := st.Sources[0]
		if want := soaSerial(t, dcs[0].p, dcs[0].zone); dc1.Zone != dcs[0].zone || !secondarytest.SerialGE(dc1.Serial, want) {
			t.Errorf("DC 1 source %+v, DC 1 serves serial %d", dc1, want)
		}
		var out strings.Builder
		if err := cnsadm.WriteStatus(&out, &st, time.Now()); err != nil || !strings.Contains(out.String(), "SOURCE") || !strings.Contains(out.String(), dcs[2].zone) {
			t.Errorf("cnsadm status:\n%s", out.String())
		}
		var feeds admin.Feeds
		getJSON(t, agg.api+"/feeds", &feeds)
		if len(feeds.Sources) != 4 || !slices.ContainsFunc(feeds.Feeds, func(f admin.FeedStatus) bool { return f.Name == "aggregate "+dcs[1].zone && f.Healthy }) {
			t.Errorf("feeds: %+v", feeds)
		}
		metrics := aggGetText(t, agg.api+"/metrics")
		want := fmt.Sprintf(`cns_aggregate_source_state{region=%q,zone=%q,state="ok"} 1`, aggRegion, dcs[0].zone)
		if !strings.Contains(metrics, want) || !strings.Contains(metrics, "cns_aggregate_source_serial{") {
			t.Errorf("metrics lack %s:\n%s", want, metrics)
		}
	})

	t.Run("a service in two DCs answers both", func(t *testing.T) {
		var svc string
		for _, rr := range aggAXFR(t, dcs[0].p.addr, dcs[0].zone) {
			if a, ok := rr.(*dns.A); ok && strings.Contains(a.Hdr.Name, ".svc.") {
				svc = strings.Replace(a.Hdr.Name, dcs[0].zone, aggRegion, 1)
				break
			}
		}
		if svc == "" {
			t.Fatal("no service in DC 1")
		}
		got := aggLookupA(agg.addr, svc, dns.TypeA)
		has := func(prefix string) bool {
			return slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, prefix) })
		}
		if !has("10.0.") || !has("10.2.") {
			t.Fatalf("%s answers %v, want members of DC 1 (10.0.) and DC 2 (10.2.)", svc, got)
		}
	})

	addVM := func(dc *aggDC, n int, alias, ip string) string {
		dc.inv.VMs = append(dc.inv.VMs, interopVM(dc.inv, n, dc.inv.Users[0].UUID, alias, ip, ""))
		writeInventory(t, dc.path, dc.inv)
		return fmt.Sprintf("%s.inst.%s.%s", alias, dc.inv.Users[0].UUID, aggRegion)
	}

	t.Run("a change in one DC reaches the aggregator and the secondaries", func(t *testing.T) {
		name := addVM(dcs[0], 1, "aggnew", "10.0.200.1")
		took := waitFor(t, name, 10*time.Second, func() bool { return slices.Equal(aggLookupA(agg.addr, name, dns.TypeA), []string{"10.0.200.1"}) })
		t.Logf("DC change answered by the aggregator after %v", took)
		for _, s := range secs {
			waitFor(t, string(s.Kind())+" "+name, 10*time.Second, func() bool {
				return slices.Equal(aggLookupA(s.Addr(), name, dns.TypeA), []string{"10.0.200.1"})
			})
		}
	})

	t.Run("TSIG between aggregator and source", func(t *testing.T) {
		m := new(dns.Msg)
		m.SetAxfr(dns.Fqdn(dcs[0].zone))
		ch, err := (&dns.Transfer{}).In(m, dcs[0].p.addr)
		refused := err != nil
		for env := range ch {
			if env.Error != nil {
				refused = true
			}
		}
		if !refused {
			t.Fatal("DC 1 transferred without TSIG: the key is not what let the aggregator in")
		}
		if st := sourceStatus(agg, dcs[0].zone); st.State != "ok" {
			t.Fatalf("signed source: %+v", st)
		}
	})

	t.Run("a source sending garbage leaves the region unchanged", func(t *testing.T) {
		good := "x." + aggRegion
		waitFor(t, "the good copy", 10*time.Second, func() bool { return slices.Equal(aggLookupA(agg.addr, good, dns.TypeA), []string{"10.9.0.1"}) })
		before := aggAXFR(t, agg.addr, aggRegion)
		bad.garbage.Store(true)
		waitFor(t, "the garbage rejected", 10*time.Second, func() bool { return sourceStatus(agg, bad.zone).Error != "" })
		after := aggAXFR(t, agg.addr, aggRegion)
		if before[0].(*dns.SOA).Serial != after[0].(*dns.SOA).Serial || len(before) != len(after) {
			t.Fatalf("region changed: serial %d → %d, %d → %d records", before[0].(*dns.SOA).Serial, after[0].(*dns.SOA).Serial, len(before), len(after))
		}
		if got := aggLookupA(agg.addr, good, dns.TypeA); !slices.Equal(got, []string{"10.9.0.1"}) {
			t.Fatalf("good copy gone: %v", got)
		}
	})

	t.Run("a restarted aggregator resumes with IXFR", func(t *testing.T) {
		agg.stop()
		name := addVM(dcs[0], 2, "whiledown", "10.0.200.2")
		waitFor(t, "DC 1 to serve "+name, 10*time.Second, func() bool {
			return len(aggLookupA(dcs[0].p.addr, strings.Replace(name, aggRegion, dcs[0].zone, 1), dns.TypeA)) == 1
		})
		agg = startService(top, cfg, tune) // lives past this subtest
		waitFor(t, name, 10*time.Second, func() bool { return slices.Equal(aggLookupA(agg.addr, name, dns.TypeA), []string{"10.0.200.2"}) })
		for _, dc := range dcs {
			if st := sourceStatus(agg, dc.zone); st.LastKind == "AXFR" {
				t.Errorf("%s: transferred with AXFR after a restart: %+v", dc.zone, st)
			}
		}
		if st := sourceStatus(agg, dcs[0].zone); st.LastKind != "IXFR" {
			t.Errorf("DC 1 after restart: %+v, want an IXFR", st)
		}
	})

	t.Run("a stopped DC keeps its records until expire, then loses them", func(t *testing.T) {
		var name string
		for _, rr := range aggAXFR(t, dcs[2].p.addr, dcs[2].zone) {
			// A UUID name: DC 3's alone (aliases repeat across DCs).
			if a, ok := rr.(*dns.A); ok && strings.Index(a.Hdr.Name, ".inst.") == 36 {
				name = strings.Replace(a.Hdr.Name, dcs[2].zone, aggRegion, 1)
				break
			}
		}
		dcs[2].p.stop(syscall.SIGKILL)
		stopped := time.Now()
		if len(aggLookupA(agg.addr, name, dns.TypeA)) == 0 {
			t.Fatalf("%s gone at once", name)
		}
		took := waitFor(t, name+" to leave", 15*time.Second, func() bool { return len(aggLookupA(agg.addr, name, dns.TypeA)) == 0 })
		if took < 2*time.Second && time.Since(stopped) < 2*time.Second {
			t.Fatalf("left after %v, before the expire", took)
		}
		if st := sourceStatus(agg, dcs[2].zone); st.State != "expired" {
			t.Fatalf("status %+v", st)
		}
	})
}

func aggGetText(t testing.TB, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
	}
	return string(b)
}

func sourceStatus(r *running, zone string) admin.AggregateSource {
	for _, s := range r.agg.Status() {
		if s.Zone == zone {
			return s
		}
	}
	return admin.AggregateSource{}
}

// fakeSource is a primary that serves one good zone, then (garbage set)
// a newer serial whose transfer holds a record outside the zone.
type fakeSource struct {
	zone, addr string
	garbage    atomic.Bool
}

func startFakeSource(t testing.TB, zone string) *fakeSource {
	f := &fakeSource{zone: zone}
	soa := func(serial uint32) dns.RR {
		rr, _ := dns.NewRR(fmt.Sprintf("%s. 30 IN SOA ns.%s. h.%s. %d 30 60 3600 30", zone, zone, zone, serial))
		return rr
	}
	a, _ := dns.NewRR("x." + zone + ". 30 IN A 10.9.0.1")
	evil, _ := dns.NewRR("evil.example.org. 30 IN A 10.9.9.9")
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		serial := uint32(1)
		if f.garbage.Load() {
			serial = 2
		}
		switch r.Question[0].Qtype {
		case dns.TypeSOA:
			m.Answer = []dns.RR{soa(serial)}
		case dns.TypeAXFR, dns.TypeIXFR:
			m.Answer = []dns.RR{soa(serial), a, soa(serial)}
			if f.garbage.Load() {
				m.Answer = []dns.RR{soa(serial), a, evil, soa(serial)}
			}
		}
		w.WriteMsg(m)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	for _, s := range []*dns.Server{{Listener: ln, Handler: h}, {PacketConn: pc, Handler: h}} {
		go s.ActivateAndServe()
		t.Cleanup(func() { s.Shutdown() })
	}
	return f
}

// A source's NOTIFY may reach an aggregator in its first packet: while it
// restarts, the data centers keep NOTIFYing. Every one answered must be
// welcome (NOERROR), from the first on; the aggregator once listened
// before it existed, and such a NOTIFY was a data race and a nil
// dereference that took the process down.
func TestNotifyWhileStarting(t *testing.T) {
	port := aggFreePort(t)
	const zone = "us-west-1.cns.example.com"
	cfg := testConfig(t, t.TempDir(), "", func(m map[string]any) {
		for _, k := range []string{"inventory_file", "forward_zones", "vmapi_opts", "cnapi_opts", "napi_opts", "ufds_opts", "changefeed_opts"} {
			delete(m, k)
		}
		m["dns_listen"] = []string{fmt.Sprintf("127.0.0.1:%d", port)}
		// The primary answers nothing: only its address matters here.
		m["aggregate"] = map[string]any{aggRegion: map[string]any{"sources": []any{
			map[string]any{"zone": zone, "primaries": []string{"127.0.0.1:9"}}}}}
	})
	storeSourceCopy(t, cfg, aggRegion+"/"+zone, 100_000)
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	notify := new(dns.Msg)
	notify.SetNotify(zone + ".")
	wire, _ := notify.Pack()

	// NOTIFYs go out every 100 µs from before cns starts until it has
	// answered one after start returned.
	started := make(chan struct{})
	var rcodes []int
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 512)
		after := false
		for {
			if _, err := conn.WriteToUDP(wire, to); err != nil {
				done <- err
				return
			}
			conn.SetReadDeadline(time.Now().Add(100 * time.Microsecond))
			for {
				n, _, err := conn.ReadFromUDP(buf)
				if err != nil {
					break
				}
				r := new(dns.Msg)
				if err := r.Unpack(buf[:n]); err != nil {
					done <- err
					return
				}
				rcodes = append(rcodes, r.Rcode)
				if after {
					done <- nil
					return
				}
			}
			select {
			case <-started:
				after = true
			default:
			}
		}
	}()
	agg := startService(t, cfg, serviceTuning{})
	close(started)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to a NOTIFY after start")
	}
	for i, rc := range rcodes {
		if rc != dns.RcodeSuccess {
			t.Fatalf("NOTIFY %d of %d answered %s, want NOERROR", i+1, len(rcodes), dns.RcodeToString[rc])
		}
	}
	if st := sourceStatus(agg, zone); st.Zone != zone {
		t.Fatalf("source not followed: %+v", st)
	}
	t.Logf("%d NOTIFYs answered while cns started", len(rcodes)-1)
}

// storeSourceCopy stores an aggregated source's copy of n names, checked
// just now, in the config's db: reading it back at start takes a while
// (100k names: tens of ms), during which cns already answers.
func storeSourceCopy(t testing.TB, cfgPath, key string, n int) {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	store, err := db.Open(cfg.DBPath, db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	u, err := feeds.NewUpdater(store, feeds.Options{Zones: cfg.ZoneConfig()})
	if err != nil {
		t.Fatal(err)
	}
	names := make(map[string][]byte, n)
	for i := range n {
		names[fmt.Sprintf("n%d.%s.", i, key[strings.IndexByte(key, '/')+1:])] = []byte{}
	}
	state := fmt.Sprintf(`{"serial":1,"expire":86400,"last_check":%q}`, time.Now().Format(time.RFC3339Nano))
	u.SetSource(feeds.SourceBatch{Source: db.SourceUpdate{Source: key, State: []byte(state), Names: names}})
	if err := u.Flush(); err != nil {
		t.Fatal(err)
	}
}
