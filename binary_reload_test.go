package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/feeds/dc"
)

// Every key the key table says a reload applies (Restart false) is
// applied by a running cns at a SIGHUP: each case below changes one key
// in the config file, sends SIGHUP to the binary and waits for the
// effect. TestReloadableKeysReachASubscriber checks, without a process,
// that the cases cover the table and that each key reaches one of the
// sections a reload hands on (reload.go).

// reloadEnv is what the cases' edits name: the NOTIFY listeners'
// addresses.
type reloadEnv struct {
	notifyA, notifyB string // ip:port
}

// reloadCase is one reloadable key: its edit of the config file, and
// how the running cns shows it applied it (effect waits for it, and
// fails the test when it does not come).
type reloadCase struct {
	key    string
	edit   func(c map[string]any)
	effect func(t *testing.T, h *reloadHarness)
}

const (
	reloadZone   = "aa.example.com" // a forward zone the base config adds; forward_zones renames it
	reloadRename = "bb.example.com"
	reloadKey    = "reload-key"
	web0Login    = "web0.inst.alice." + cnsZone
	web0Alias    = "web0.inst." + aliceUUID + "." + cnsZone
	web0UUID     = dcWeb0 + ".inst." + aliceUUID + "." + cnsZone
	web0IP       = "198.51.100.30"
)

var reloadSecret = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// reloadBase is the config the cases start from: the test config, an
// API, the zone forward_zones renames, a NOTIFY listener and a NOTIFY
// interval of ten minutes (min_notify_interval's case shortens it).
func reloadBase(env reloadEnv) func(c map[string]any) {
	return func(c map[string]any) {
		c["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
		c["forward_zones"].(map[string]any)[reloadZone] = map[string]any{"networks": []any{"*"}}
		c["also_notify"] = []any{env.notifyA}
		c["min_notify_interval"] = 600000
	}
}

// reloadCases are the cases in the order they run, each on the config
// the ones before it left.
func reloadCases(env reloadEnv) []reloadCase {
	set := func(key string, v any) func(map[string]any) { return func(c map[string]any) { c[key] = v } }
	return []reloadCase{
		{"min_notify_interval", set("min_notify_interval", 100), func(t *testing.T, h *reloadHarness) {
			// Ten minutes would hold the next serial back: the listener
			// had one NOTIFY per zone at the first commit.
			h.touchInventory(t)
			h.waitNotified(t, h.notifyA, cnsZone)
		}},
		{"also_notify", set("also_notify", []any{env.notifyA, env.notifyB}), func(t *testing.T, h *reloadHarness) {
			h.touchInventory(t)
			h.waitNotified(t, h.notifyB, cnsZone)
		}},
		{"allow_transfer", set("allow_transfer", []any{"127.0.0.1", "10.20.30.0/24"}), func(t *testing.T, h *reloadHarness) {
			h.waitAllowed(t, "10.20.30.0", 24, nil)
		}},
		{"reverse_zones", set("reverse_zones", map[string]any{"peers": []any{"127.0.0.3"}}), func(t *testing.T, h *reloadHarness) {
			h.waitAllowed(t, "127.0.0.3", 32, []string{"*.arpa"})
		}},
		{"tsig_keys", set("tsig_keys", map[string]any{reloadKey: map[string]any{"algorithm": "hmac-sha256", "secret": reloadSecret}}),
			func(t *testing.T, h *reloadHarness) {
				waitFor(t, "an AXFR signed with the new key", 10*time.Second, func() bool { return h.axfr(reloadKey) == nil })
			}},
		{"peer_keys", set("peer_keys", map[string]any{"127.0.0.1": reloadKey}), func(t *testing.T, h *reloadHarness) {
			waitFor(t, "an unsigned AXFR from 127.0.0.1 refused", 10*time.Second, func() bool { return h.axfr("") != nil })
			if err := h.axfr(reloadKey); err != nil {
				t.Errorf("AXFR signed with the peer's key: %v", err)
			}
		}},
		{"my_name", set("my_name", "ns-reload.example.com"), func(t *testing.T, h *reloadHarness) {
			waitFor(t, "the SOA's MNAME", 10*time.Second, func() bool { return h.soa(t, reloadZone).Ns == "ns-reload.example.com." })
		}},
		{"hostmaster", set("hostmaster", "dns@example.com"), func(t *testing.T, h *reloadHarness) {
			waitFor(t, "the SOA's RNAME", 10*time.Second, func() bool { return h.soa(t, reloadZone).Mbox == "dns.example.com." })
		}},
		{"use_login", set("use_login", false), func(t *testing.T, h *reloadHarness) {
			waitFor(t, "the login's name gone", 10*time.Second, func() bool { return h.rcode(t, web0Login, dns.TypeA) == dns.RcodeNameError })
			if !h.hasA(t, web0Alias) {
				t.Errorf("%s lost with use_login", web0Alias)
			}
		}},
		{"use_alias", set("use_alias", false), func(t *testing.T, h *reloadHarness) {
			waitFor(t, "the alias's name gone", 10*time.Second, func() bool { return h.rcode(t, web0Alias, dns.TypeA) == dns.RcodeNameError })
			if !h.hasA(t, web0UUID) {
				t.Errorf("%s lost with use_alias", web0UUID)
			}
		}},
		{"reverse_v4_prefix", set("reverse_v4_prefix", 16), func(t *testing.T, h *reloadHarness) {
			h.waitZones(t, "168.192.in-addr.arpa", "128.168.192.in-addr.arpa")
		}},
		{"reverse_v6_prefix", set("reverse_v6_prefix", 48), func(t *testing.T, h *reloadHarness) {
			h.waitZones(t, "0.0.1.0.8.b.d.0.1.0.0.2.ip6.arpa", "0.0.0.0.0.0.1.0.8.b.d.0.1.0.0.2.ip6.arpa")
		}},
		{"catalog_zone", set("catalog_zone", "catalog.example.com"), func(t *testing.T, h *reloadHarness) {
			h.waitZones(t, "catalog.example.com", "")
		}},
		{"forward_zones", func(c map[string]any) {
			zones := c["forward_zones"].(map[string]any)
			zones[reloadRename] = zones[reloadZone]
			delete(zones, reloadZone)
		}, func(t *testing.T, h *reloadHarness) {
			// A zone that leaves the configuration leaves the DNS server
			// and the API too.
			h.waitZones(t, reloadRename, reloadZone)
			if rc := h.rcode(t, reloadZone, dns.TypeSOA); rc != dns.RcodeRefused {
				t.Errorf("%s after it left the configuration: %s, want REFUSED", reloadZone, dns.RcodeToString[rc])
			}
		}},
		{"log_level", set("log_level", "debug"), func(t *testing.T, h *reloadHarness) {
			mark := h.p.mark()
			h.touchInventory(t)
			h.p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return l["level"] == 20.0 })
		}},
		{"rrl", set("rrl", map[string]any{"responses_per_second": 1, "slip": 0}), func(t *testing.T, h *reloadHarness) {
			// Last: UDP answers are limited from here on (the other cases
			// ask over TCP, which RRL never limits).
			waitFor(t, "answers limited", 10*time.Second, func() bool {
				for range 20 {
					m := new(dns.Msg)
					m.SetQuestion(dns.Fqdn(cnsZone), dns.TypeSOA)
					(&dns.Client{Timeout: 100 * time.Millisecond}).Exchange(m, h.p.addr)
				}
				return h.metric(t, "cns_rrl_limited_total") > 0
			})
		}},
	}
}

// reloadHarness is the running binary, its config file and inventory,
// and the NOTIFY listeners.
type reloadHarness struct {
	p                *proc
	api              string
	cfgPath, invPath string
	cfg              map[string]any
	inv              *dc.Inventory
	moved            bool // web2's address toggled
	notifyA, notifyB *notifyListener
}

func TestReloadAppliesEveryKey(t *testing.T) {
	dir := t.TempDir()
	h := &reloadHarness{notifyA: listenNotify(t), notifyB: listenNotify(t)}
	env := reloadEnv{notifyA: h.notifyA.addr, notifyB: h.notifyB.addr}
	h.cfgPath = testConfig(t, dir, "testdata/inventory.json", reloadBase(env))
	data, err := os.ReadFile(h.cfgPath)
	if err == nil {
		err = json.Unmarshal(data, &h.cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	h.invPath = h.cfg["inventory_file"].(string)
	if h.inv, err = dc.LoadInventory(h.invPath); err != nil {
		t.Fatal(err)
	}
	h.p = startCNS(t, h.cfgPath)
	h.api = "http://" + h.p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
	h.p.waitLoaded()
	h.waitNotified(t, h.notifyA, cnsZone)

	for _, c := range reloadCases(env) {
		if t.Failed() {
			break // the cases build on each other
		}
		c.edit(h.cfg)
		data, _ := json.Marshal(h.cfg)
		if err := os.WriteFile(h.cfgPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mark := h.p.mark()
		h.p.cmd.Process.Signal(syscall.SIGHUP)
		l := h.p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool {
			return l.str("msg") == "configuration reloaded" || strings.HasPrefix(l.str("msg"), "configuration reloaded;") ||
				strings.HasPrefix(l.str("msg"), "configuration not reloaded")
		})
		if l.str("msg") != "configuration reloaded" {
			t.Fatalf("%s: the reload logged %q (%v), want a reload without a restart", c.key, l.str("msg"), l)
		}
		t.Run(c.key, func(t *testing.T) { c.effect(t, h) })
	}
}

// The cases cover every key a reload applies, each changes only its key,
// and each reaches a section a subscriber is handed (reload.go): a key
// the table says a reload applies but no subscriber reads would change
// nothing.
func TestReloadableKeysReachASubscriber(t *testing.T) {
	env := reloadEnv{notifyA: "127.0.0.1:5301", notifyB: "127.0.0.1:5302"}
	cfgPath := testConfig(t, t.TempDir(), "testdata/inventory.json", reloadBase(env))
	var m map[string]any
	data, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	prev, err := config.Parse(data, cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	subs := (&service{}).subscribers()
	covered := map[string]bool{}
	for _, c := range reloadCases(env) {
		covered[c.key] = true
		c.edit(m)
		data, _ := json.Marshal(m)
		next, err := config.Parse(data, cfgPath)
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		changed, restart := config.Diff(prev, next)
		if !slices.Equal(changed, []string{c.key}) || len(restart) > 0 {
			t.Errorf("%s: the edit changed %q (restart %q), want only %s", c.key, changed, restart, c.key)
		}
		var by []string
		for _, s := range subs {
			if s.changed(prev, next) {
				by = append(by, s.name)
			}
		}
		if len(by) == 0 {
			t.Errorf("%s: a reload applies it, but no subscriber's section changes with it", c.key)
		}
		prev = next
	}
	for _, k := range config.Keys {
		if k.Section != config.SectionIgnored && !k.Restart && !covered[k.Name] {
			t.Errorf("%s: a reload applies it (the key table), but TestReloadAppliesEveryKey has no case for it", k.Name)
		}
	}
}

// touchInventory moves web2 to another address and back, turn by turn:
// a change the feed commits.
func (h *reloadHarness) touchInventory(t *testing.T) {
	t.Helper()
	ip := "198.51.100.32"
	if h.moved = !h.moved; h.moved {
		ip = "198.51.100.132"
	}
	for i := range h.inv.VMs {
		if h.inv.VMs[i].UUID == "f47889c3-2578-42e6-a1e6-7d0ef46e7fd6" { // web2
			h.inv.VMs[i].NICs[0].IP = ip
			h.inv.VMs[i].NICs[0].IPs = []string{ip + "/25"}
		}
	}
	mark := h.p.mark()
	writeInventory(t, h.invPath, h.inv)
	h.p.waitCommitted(mark)
}

func (h *reloadHarness) soa(t *testing.T, zone string) *dns.SOA {
	t.Helper()
	r := h.p.query("tcp", zone, dns.TypeSOA)
	if len(r.Answer) != 1 {
		t.Fatalf("SOA of %s: %v", zone, r)
	}
	return r.Answer[0].(*dns.SOA)
}

func (h *reloadHarness) rcode(t *testing.T, name string, qtype uint16) int {
	t.Helper()
	return h.p.query("tcp", name, qtype).Rcode
}

func (h *reloadHarness) hasA(t *testing.T, name string) bool {
	t.Helper()
	for _, rr := range h.p.query("tcp", name, dns.TypeA).Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == web0IP {
			return true
		}
	}
	return false
}

// axfr transfers the demo zone from 127.0.0.1, signed with key unless it
// is "".
func (h *reloadHarness) axfr(key string) error {
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(cnsZone))
	tr := &dns.Transfer{DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second}
	if key != "" {
		m.SetTsig(dns.Fqdn(key), dns.HmacSHA256, 300, time.Now().Unix())
		tr.TsigSecret = map[string]string{dns.Fqdn(key): reloadSecret}
	}
	ch, err := tr.In(m, h.p.addr)
	if err != nil {
		return err
	}
	n := 0
	for env := range ch {
		if env.Error != nil {
			return env.Error
		}
		n += len(env.RR)
	}
	if n == 0 {
		return fmt.Errorf("AXFR of %s: no records", cnsZone)
	}
	return nil
}

// waitAllowed waits until GET /allowed-peers lists addr/mask for zones
// (nil: every zone).
func (h *reloadHarness) waitAllowed(t *testing.T, addr string, mask int, zones []string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s/%d in /allowed-peers", addr, mask), 10*time.Second, func() bool {
		var peers []admin.AllowedPeer
		apiGet(t, h.api, "/allowed-peers", &peers)
		return slices.ContainsFunc(peers, func(p admin.AllowedPeer) bool {
			return p.Address == addr && p.Mask == mask && slices.Equal(p.Zones, zones)
		})
	})
}

// waitZones waits until GET /zones lists want and not gone ("" for
// none), and the DNS server answers want's SOA.
func (h *reloadHarness) waitZones(t *testing.T, want, gone string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("GET /zones with %s and without %q", want, gone), 10*time.Second, func() bool {
		var zones []admin.ZoneSummary
		apiGet(t, h.api, "/zones", &zones)
		has := func(name string) bool {
			return slices.ContainsFunc(zones, func(z admin.ZoneSummary) bool { return z.Name == name })
		}
		return has(want) && (gone == "" || !has(gone))
	})
	if rc := h.rcode(t, want, dns.TypeSOA); rc != dns.RcodeSuccess {
		t.Errorf("SOA of %s: %s", want, dns.RcodeToString[rc])
	}
}

// metric reads a counter of GET /metrics (without labels).
func (h *reloadHarness) metric(t *testing.T, name string) float64 {
	t.Helper()
	res, err := http.Get(h.api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(body), "\n") {
		var v float64
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			fmt.Sscan(f[1], &v)
			return v
		}
	}
	return 0
}

// waitNotified waits until l has had a NOTIFY for zone's current serial.
func (h *reloadHarness) waitNotified(t *testing.T, l *notifyListener, zone string) {
	t.Helper()
	serial := h.soa(t, zone).Serial
	waitFor(t, fmt.Sprintf("a NOTIFY of %s %d to %s", zone, serial, l.addr), 10*time.Second, func() bool { return l.got(zone, serial) })
}

// notifyListener is a secondary's NOTIFY port: it answers every NOTIFY
// and remembers the zones and serials announced.
type notifyListener struct {
	addr string
	mu   sync.Mutex
	seen map[string][]uint32
}

func listenNotify(t *testing.T) *notifyListener {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &notifyListener{addr: pc.LocalAddr().String(), seen: map[string][]uint32{}}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Opcode == dns.OpcodeNotify && len(r.Question) == 1 {
			zone := strings.TrimSuffix(strings.ToLower(r.Question[0].Name), ".")
			l.mu.Lock()
			for _, rr := range r.Answer {
				if soa, ok := rr.(*dns.SOA); ok {
					l.seen[zone] = append(l.seen[zone], soa.Serial)
				}
			}
			l.mu.Unlock()
		}
		m := new(dns.Msg)
		m.SetReply(r)
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return l
}

func (l *notifyListener) got(zone string, serial uint32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.seen[zone], serial)
}
