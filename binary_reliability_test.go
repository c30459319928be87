package main

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// Reliability tests of the binary (RELIABILITY.md): a full
// filesystem under the db.

// mountTmpfs mounts a tmpfs of size bytes at a fresh directory, or skips
// the test when mounting is not permitted.
// grownInventory is inv with gen's VMs, users, servers and networks added
// (gen is a generated data center of new VMs).
func grownInventory(inv, gen dc.Inventory) dc.Inventory {
	grown := inv
	grown.VMs = append(append([]dc.VM(nil), inv.VMs...), gen.VMs...)
	grown.Users = append(append([]dc.User(nil), inv.Users...), gen.Users...)
	grown.Servers = append(append([]dc.Server(nil), inv.Servers...), gen.Servers...)
	grown.Networks = append(append([]dc.Network(nil), inv.Networks...), gen.Networks...)
	grown.NetworkPools = append(append([]dc.NetworkPool(nil), inv.NetworkPools...), gen.NetworkPools...)
	dedupNetworks(&grown)
	return grown
}

func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fillFS writes a file in dir until the filesystem is full.
func fillFS(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// Whatever is left below one buffer too.
	for _, n := range []int{4096, 512, 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// The db on a full filesystem: commits fail with a clear error, the API
// reports the store degraded, DNS keeps answering what was stored, and
// writes resume once there is room again.
func TestDiskFull(t *testing.T) {
	fsDir := mountTmpfs(t, "64m")
	dir := t.TempDir()
	// The demo data center plus generated VMs to add once the disk is full.
	inv := loadDefaultDC(t)
	invPath := filepath.Join(dir, "inventory.json")
	writeInventory(t, invPath, &inv)
	cfg := testConfig(t, dir, "", func(c map[string]any) {
		c["inventory_file"] = invPath
		c["db_path"] = filepath.Join(fsDir, "cns.db")
		c["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
	})
	p := startCNS(t, cfg)
	p.waitCommitted(0)
	api := "http://" + p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
	serial := soaSerial(t, p, demoZone)
	filler := fillFS(t, fsDir)

	// 2000 new VMs: far more than the free pages of the db file.
	gen := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 2000, Seed: 11})
	grown := grownInventory(inv, *gen)
	newVM := gen.VMs[0]
	newName := newVM.UUID + ".inst." + newVM.OwnerUUID + "." + demoZone
	mark := p.mark()
	writeInventory(t, invPath, &grown)
	fail := p.waitLogFrom(mark, 20*time.Second, func(l logLine) bool { return strings.HasPrefix(l.str("msg"), "commit failed") })
	if !strings.Contains(fail.str("err"), "no space left on device") {
		t.Errorf("commit failure does not say why: %q", fail.str("err"))
	}
	// bunyan levels are numbers: 50 is error.
	if fail["level"] != 50.0 {
		t.Errorf("commit failure logged at level %v, want 50 (error)", fail["level"])
	}
	// The failure is logged, then reported: poll the API for it.
	var reason string
	waitFor(t, "/feeds to report the db degraded", 5*time.Second, func() bool {
		var healthy bool
		healthy, reason = feedHealthy(t, api, "db")
		return !healthy
	})
	if !strings.Contains(reason, "no space left") {
		t.Errorf("/feeds: db degraded with reason %q, want the error", reason)
	}
	// DNS serves what was stored, for as long as the disk is full.
	answered := 0
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		if r := p.query("udp", "cloudapi."+demoZone, dns.TypeA); len(r.Answer) != 1 {
			t.Fatalf("stored name not answered while the disk is full: %v", r)
		}
		if got := soaSerial(t, p, demoZone); got != serial {
			t.Fatalf("serial moved from %d to %d while no commit could land", serial, got)
		}
		if r := p.query("udp", newName, dns.TypeA); r.Rcode != dns.RcodeNameError {
			t.Fatalf("a VM that could not be stored is answered: %v", r)
		}
		answered += 3
		time.Sleep(20 * time.Millisecond)
	}

	// Room again: the retry lands, the new VMs are served, the db is whole.
	mark = p.mark()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	p.waitCommitted(mark)
	resumed := time.Since(freed)
	if r := p.query("udp", newName, dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("new VM not served after the disk has room: %v", r)
	}
	if got := soaSerial(t, p, demoZone); !db.SerialLess(serial, got) {
		t.Errorf("serial %d after the retry, was %d", got, serial)
	}
	waitFor(t, "the db feed healthy again", 5*time.Second, func() bool { h, _ := feedHealthy(t, api, "db"); return h })
	p.stop(syscall.SIGTERM)
	if out, stderr, code := runCNS(t, "db", "--db", filepath.Join(fsDir, "cns.db"), "check"); code != 0 {
		t.Fatalf("cns db check after the disk was full:\n%s%s", out, stderr)
	}
	t.Logf("disk full: %d queries answered from memory, commit retried and landed %v after space returned", answered, resumed.Round(time.Millisecond))
}

// dedupNetworks keeps one network, pool, server and user per UUID
// (generated data centers share their UUIDs with the demo one).
func dedupNetworks(inv *dc.Inventory) {
	seen := map[string]bool{}
	inv.Networks = firstByUUID(seen, inv.Networks, func(n dc.Network) string { return n.UUID })
	inv.NetworkPools = firstByUUID(seen, inv.NetworkPools, func(p dc.NetworkPool) string { return p.UUID })
	inv.Servers = firstByUUID(seen, inv.Servers, func(s dc.Server) string { return s.UUID })
	inv.Users = firstByUUID(seen, inv.Users, func(u dc.User) string { return u.UUID })
}

// firstByUUID keeps the first of items with each UUID not yet in seen.
func firstByUUID[T any](seen map[string]bool, items []T, uuid func(T) string) []T {
	var out []T
	for _, it := range items {
		if id := uuid(it); !seen[id] {
			seen[id] = true
			out = append(out, it)
		}
	}
	return out
}

// testTSIGSecret is the TSIG secret of the abuse and security tests.
var testTSIGSecret = base64.StdEncoding.EncodeToString([]byte("abuse-test-secret-0123456789abcdef"))

// probe measures a well-formed client's service while something else
// goes on: UDP queries back to back and a TCP query on a fresh connection
// every 50 ms, with their latencies.
type probe struct {
	addr           string
	udpSent, udpOK atomic.Int64
	tcpSent, tcpOK atomic.Int64
	mu             sync.Mutex
	lat            []time.Duration
	stop, done     chan struct{}
}

var probeNames = []string{"cloudapi." + demoZone, "web0.inst.alice." + demoZone, "web.svc.alice." + demoZone, "nope." + demoZone, demoZone}

func startProbe(addr string) *probe {
	p := &probe{addr: addr, stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	ask := func(c *dns.Client, i int, sent, ok *atomic.Int64) {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(probeNames[i%len(probeNames)]), dns.TypeA)
		m.SetEdns0(1232, false)
		sent.Add(1)
		r, rtt, err := c.Exchange(m, addr)
		if err == nil && r.Rcode != dns.RcodeServerFailure && r.Rcode != dns.RcodeRefused && !r.Truncated {
			ok.Add(1)
			p.mu.Lock()
			p.lat = append(p.lat, rtt)
			p.mu.Unlock()
		}
	}
	wg.Go(func() {
		c := &dns.Client{Timeout: 500 * time.Millisecond}
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			ask(c, i, &p.udpSent, &p.udpOK)
			time.Sleep(2 * time.Millisecond)
		}
	})
	wg.Go(func() {
		c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ask(c, i, &p.tcpSent, &p.tcpOK)
		}
	})
	go func() { wg.Wait(); close(p.done) }()
	return p
}

// halt stops the probe and returns a summary and the answered shares.
func (p *probe) halt() (string, float64, float64, time.Duration) {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	slices.Sort(p.lat)
	pct := func(q float64) time.Duration {
		if len(p.lat) == 0 {
			return 0
		}
		return p.lat[min(len(p.lat)-1, int(q*float64(len(p.lat))))]
	}
	udp := float64(p.udpOK.Load()) / float64(max(1, p.udpSent.Load()))
	tcp := float64(p.tcpOK.Load()) / float64(max(1, p.tcpSent.Load()))
	return fmt.Sprintf("UDP %d/%d answered (%.2f%%), TCP %d/%d (%.2f%%), latency p50 %v p99 %v max %v",
		p.udpOK.Load(), p.udpSent.Load(), 100*udp, p.tcpOK.Load(), p.tcpSent.Load(), 100*tcp,
		pct(0.5).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), pct(1).Round(10*time.Microsecond)), udp, tcp, pct(0.99)
}

// udpFrom returns a UDP socket bound to ip (a loopback address).
func udpFrom(t *testing.T, ip string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Skipf("cannot bind %s: %v", ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// abusePackets are malformed or hostile requests: garbage, truncations,
// many questions, huge EDNS options, bad TSIG, transfers over UDP.
func abusePackets(t *testing.T, rng *rand.Rand) [][]byte {
	var out [][]byte
	m := new(dns.Msg)
	m.SetQuestion("cloudapi."+demoZone+".", dns.TypeA)
	good, _ := m.Pack()
	out = append(out, []byte{}, []byte{0}, good[:5], good[:12], good[:len(good)-1])
	many := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(many[4:], 65535) // 65535 questions, one present
	out = append(out, many)
	multi := append([]byte(nil), good[:12]...)
	binary.BigEndian.PutUint16(multi[4:], 200)
	for range 200 {
		multi = append(multi, good[12:]...)
	}
	out = append(out, multi)
	big := new(dns.Msg)
	big.SetQuestion("cloudapi."+demoZone+".", dns.TypeA)
	big.SetEdns0(65535, true)
	for i := range 30 {
		big.IsEdns0().Option = append(big.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: uint16(65001 + i), Data: make([]byte, 120)})
	}
	if b, err := big.Pack(); err == nil {
		out = append(out, b)
	}
	bad := new(dns.Msg)
	bad.SetQuestion(demoZone+".", dns.TypeSOA)
	bad.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
	wrong := base64.StdEncoding.EncodeToString([]byte("not the secret, not the secret!!"))
	if b, _, err := dns.TsigGenerate(bad, wrong, "", false); err == nil {
		out = append(out, b)
	}
	for _, qt := range []uint16{dns.TypeAXFR, dns.TypeIXFR, dns.TypeANY} {
		x := new(dns.Msg)
		x.SetQuestion(demoZone+".", qt)
		b, _ := x.Pack()
		out = append(out, b)
	}
	for range 50 {
		b := make([]byte, 12+rng.IntN(500))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		b[2] &^= 0x80 // a request
		out = append(out, b)
	}
	return out
}

// The server stays responsive to a well-formed client while it is abused:
// malformed and truncated packets, many questions, huge EDNS options, bad
// TSIG, AXFR/IXFR from disallowed addresses, stalled and bulk TCP
// connections, and a UDP flood from one source. CNS_LONG=1 runs it for a
// minute instead of 5 s.
func TestDNSAbuse(t *testing.T) {
	dur := 5 * time.Second
	if longRun() {
		dur = time.Minute
	}
	dir := t.TempDir()
	cfg := testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) {
		c["tsig_keys"] = map[string]any{"xfr-key": map[string]any{"algorithm": "hmac-sha256", "secret": testTSIGSecret}}
	})
	p := startCNS(t, cfg)
	p.waitCommitted(0)
	dst, _ := net.ResolveUDPAddr("udp", p.addr)

	// The baseline: the same client with nothing else going on.
	base := startProbe(p.addr)
	time.Sleep(min(dur/2, 3*time.Second))
	baseSummary, _, _, _ := base.halt()

	rng := rand.New(rand.NewPCG(12, 12))
	pkts := abusePackets(t, rng)
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	var malformed, flood, tcpOpened, axfrTried atomic.Int64
	// Malformed and hostile packets from 127.0.0.5, as fast as they go.
	mal := udpFrom(t, "127.0.0.5")
	wg.Go(func() {
		for i := 0; time.Now().Before(deadline); i++ {
			mal.WriteToUDP(pkts[i%len(pkts)], dst)
			malformed.Add(1)
			if i%12 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})
	// A UDP flood of good queries from one source, never reading answers:
	// tens of thousands a second, below what the server can answer on one
	// core (an unpaced flood fills the socket's kernel queue, where the
	// client's queries are dropped along with it before cns sees them).
	fl := udpFrom(t, "127.0.0.6")
	m := new(dns.Msg)
	m.SetQuestion("web.svc.alice."+demoZone+".", dns.TypeSRV)
	floodPkt, _ := m.Pack()
	wg.Go(func() {
		for time.Now().Before(deadline) {
			for range 48 {
				fl.WriteToUDP(floodPkt, dst)
			}
			flood.Add(48)
			time.Sleep(time.Millisecond)
		}
	})
	// TCP: stalled connections in bulk from several addresses (more than
	// the per-address limit from one), a slow writer, and AXFR/IXFR from
	// addresses not allowed to transfer.
	var held []net.Conn
	var hmu sync.Mutex
	for a := 7; a <= 10; a++ {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(a))}, Timeout: time.Second}
			for i := 0; i < 100 && time.Now().Before(deadline); i++ {
				c, err := d.Dial("tcp", p.addr)
				if err != nil {
					continue
				}
				tcpOpened.Add(1)
				if i%3 == 0 {
					c.Write([]byte{0, 40, 1, 2}) // a length, then a stall mid-message
				}
				hmu.Lock()
				held = append(held, c)
				hmu.Unlock()
			}
		})
	}
	wg.Go(func() {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 11)}, Timeout: time.Second}
		c, err := d.Dial("tcp", p.addr)
		if err != nil {
			return
		}
		defer c.Close()
		msg := binary.BigEndian.AppendUint16(nil, uint16(len(floodPkt)))
		msg = append(msg, floodPkt...)
		for i := 0; i < len(msg) && time.Now().Before(deadline); i++ {
			c.Write(msg[i : i+1])
			time.Sleep(300 * time.Millisecond)
		}
	})
	wg.Go(func() {
		tr := &dns.Transfer{DialTimeout: time.Second, ReadTimeout: time.Second}
		for i := 0; time.Now().Before(deadline); i++ {
			x := new(dns.Msg)
			if i%2 == 0 {
				x.SetAxfr(demoZone + ".")
			} else {
				x.SetIxfr(demoZone+".", 1, "ns.", "h.")
			}
			conn, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 12)}, Timeout: time.Second}).Dial("tcp", p.addr)
			if err != nil {
				continue
			}
			tr.Conn = &dns.Conn{Conn: conn}
			tr.WriteMsg(x)
			if r, err := tr.ReadMsg(); err == nil && len(r.Answer) > 0 {
				t.Errorf("a disallowed address got a transfer: %v", r.Answer[0])
			}
			conn.Close()
			axfrTried.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
	})

	pr := startProbe(p.addr)
	time.Sleep(time.Until(deadline))
	summary, udpShare, tcpShare, p99 := pr.halt()
	wg.Wait()
	hmu.Lock()
	for _, c := range held {
		c.Close()
	}
	hmu.Unlock()

	t.Logf("baseline: %s", baseSummary)
	t.Logf("under abuse for %v (%d malformed packets, %d flood queries from one address, %d TCP connections held or stalled, %d disallowed transfers): %s",
		dur, malformed.Load(), flood.Load(), tcpOpened.Load(), axfrTried.Load(), summary)
	if udpShare < 0.95 || tcpShare < 0.95 {
		t.Errorf("the well-formed client was not served under abuse: %s", summary)
	}
	if p99 > 500*time.Millisecond {
		t.Errorf("p99 latency %v under abuse", p99)
	}
	// Still alive and whole afterwards.
	if r := p.query("udp", "cloudapi."+demoZone, dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("after the abuse: %v", r)
	}
	if r := p.query("tcp", "cloudapi."+demoZone, dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("after the abuse over TCP: %v", r)
	}
	if strings.Contains(p.log(), "panic") {
		t.Errorf("the log mentions a panic:\n%s", p.log())
	}
	refused := strings.Count(p.log(), `"msg":"transfer refused"`)
	if refused == 0 {
		t.Error("disallowed transfers were not logged")
	}
	if longRun() {
		tcpSlotsExhausted(t, p)
	}
}

// tcpSlotsExhausted holds every TCP slot (1024) from 16 addresses (64
// each, the per-address limit) without sending anything: TCP clients are
// turned away until the idle timeout (10 s) frees the slots, UDP is not
// affected. The known limit of any connection-bounded server, measured.
func tcpSlotsExhausted(t *testing.T, p *proc) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	start := time.Now()
	for a := 1; a <= 16; a++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(a))}, Timeout: time.Second}
		for range 64 {
			c, err := d.Dial("tcp", p.addr)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			held = append(held, c)
		}
	}
	time.Sleep(200 * time.Millisecond)
	tcpOK := func() bool {
		c := &dns.Client{Net: "tcp", Timeout: 500 * time.Millisecond}
		m := new(dns.Msg)
		m.SetQuestion("cloudapi."+demoZone+".", dns.TypeA)
		r, _, err := c.Exchange(m, p.addr)
		return err == nil && len(r.Answer) == 1
	}
	if tcpOK() {
		t.Error("a new TCP client was answered while 1024 idle connections held every slot")
	}
	if r := p.query("udp", "cloudapi."+demoZone, dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("UDP not answered while TCP slots are held: %v", r)
	}
	waitFor(t, "TCP service after the idle timeout", 20*time.Second, tcpOK)
	// The slots are freed by the 10 s idle timeout, not before.
	if back := time.Since(start); back < 9*time.Second {
		t.Errorf("TCP service back %v after the slots were taken, before the 10 s idle timeout", back.Round(100*time.Millisecond))
	} else {
		t.Logf("1024 idle TCP connections from 16 addresses: new TCP clients turned away, UDP answered, TCP back %v after the flood began", back.Round(100*time.Millisecond))
	}
}

// With rrl on, a flood from one address is cut to the configured rate
// (every second refused answer slips as TC) while other networks keep
// full service: measured in bytes, cns amplifies the flood by less than
// one.
func TestRRLAmplification(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) {
		c["rrl"] = map[string]any{"responses_per_second": 50, "slip": 2}
	})
	p := startCNS(t, cfg)
	p.waitCommitted(0)
	dst, _ := net.ResolveUDPAddr("udp", p.addr)
	m := new(dns.Msg)
	m.SetQuestion("web.svc.alice."+demoZone+".", dns.TypeSRV) // a big answer: what an attacker picks
	m.SetEdns0(4096, false)
	pkt, _ := m.Pack()

	dur := 3 * time.Second
	if longRun() {
		dur = 30 * time.Second
	}
	fl := udpFrom(t, "127.1.0.1")
	var sent, full, slipped, bytesOut atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		for {
			fl.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			n, _, err := fl.ReadFromUDP(buf)
			if err != nil {
				return
			}
			bytesOut.Add(int64(n))
			var r dns.Msg
			if r.Unpack(buf[:n]) == nil && r.Truncated {
				slipped.Add(1)
			} else {
				full.Add(1)
			}
		}
	}()
	others := []*net.UDPConn{udpFrom(t, "127.2.0.1"), udpFrom(t, "127.3.0.1")}
	var otherSent, otherOK int
	deadline := time.Now().Add(dur)
	for i := 0; time.Now().Before(deadline); i++ {
		for range 20 {
			fl.WriteToUDP(pkt, dst)
		}
		sent.Add(20)
		if i%10 == 0 { // each other network asks ~20 times a second, under the limit
			for _, o := range others {
				otherSent++
				o.WriteToUDP(pkt, dst)
				o.SetReadDeadline(time.Now().Add(time.Second))
				buf := make([]byte, 65535)
				n, _, err := o.ReadFromUDP(buf)
				var r dns.Msg
				if err == nil && r.Unpack(buf[:n]) == nil && !r.Truncated && len(r.Answer) > 0 {
					otherOK++
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	<-done
	secs := dur.Seconds()
	amp := float64(bytesOut.Load()) / float64(sent.Load()*int64(len(pkt)))
	t.Logf("rrl 50/s slip 2, %v: flood source sent %d queries (%.0f/s), got %d full answers (%.0f/s) and %d TC slips; bytes out/in %.2f; other networks %d/%d answered in full",
		dur, sent.Load(), float64(sent.Load())/secs, full.Load(), float64(full.Load())/secs, slipped.Load(), amp, otherOK, otherSent)
	if rate := float64(full.Load()) / secs; rate > 50*1.5+10 {
		t.Errorf("flood got %.0f full answers a second, limit 50", rate)
	}
	if slipped.Load() == 0 {
		t.Error("no TC slip")
	}
	if amp >= 1 {
		t.Errorf("amplification %.2f", amp)
	}
	if otherOK != otherSent {
		t.Errorf("other networks: %d of %d answered", otherOK, otherSent)
	}
}

// Security basics at the binary: the db and its backups are 0600, and no
// secret of the config (the UFDS password, a TSIG secret, the API tokens)
// shows in the log, at trace level, or in any API answer — through a
// start against the SDC simulator, a wrong UFDS password, a bad TSIG, a
// reload and every read endpoint.
func TestSecrets(t *testing.T) {
	const (
		ufdsPassword = "ufds-Pw-7c1f0f5c-never-logged"
		apiToken     = "api-Token-9d2e-never-shown"
		readToken    = "read-Token-44ab-never-shown"
	)
	tsigSecret := base64.StdEncoding.EncodeToString([]byte("tsig-secret-b5e1-never-logged!!!"))
	secrets := []string{ufdsPassword, apiToken, readToken, tsigSecret, "tsig-secret-b5e1"}

	for _, run := range []struct {
		name, simPassword string
	}{{"good password", ufdsPassword}, {"wrong UFDS password", "another-password"}} {
		t.Run(run.name, func(t *testing.T) {
			sim := startSim(t, sdcsim.Options{RootPassword: run.simPassword})
			dir := t.TempDir()
			cfg := testConfig(t, dir, "", func(c map[string]any) {
				delete(c, "inventory_file")
				for k, v := range sim.Config() {
					c[k] = v
				}
				ufds := c["ufds_opts"].(map[string]any)
				ufds["bindPassword"] = ufdsPassword
				c["log_level"] = "trace"
				c["api_server"] = map[string]any{"listen": "127.0.0.1:0", "token": apiToken, "read_token": readToken}
				c["tsig_keys"] = map[string]any{"xfr-key": map[string]any{"algorithm": "hmac-sha256", "secret": tsigSecret}}
				c["peer_keys"] = map[string]any{"127.0.0.9": "xfr-key"}
			})
			p := startCNS(t, cfg)
			api := "http://" + p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
			if run.simPassword == ufdsPassword {
				p.waitLoaded()
			} else {
				p.waitLog(20*time.Second, func(l logLine) bool { return strings.Contains(l.str("msg"), "degraded") })
			}
			dbPath := filepath.Join(dir, "cns.db")
			if fi, err := os.Stat(dbPath); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("db file mode %v (%v), want 0600", fi.Mode().Perm(), err)
			}

			// A bad TSIG, and a reload.
			m := new(dns.Msg)
			m.SetQuestion(demoZone+".", dns.TypeSOA)
			m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
			c := &dns.Client{TsigSecret: map[string]string{"xfr-key.": base64.StdEncoding.EncodeToString([]byte("wrong"))}}
			c.Exchange(m, p.addr)
			mark := p.mark()
			p.cmd.Process.Signal(syscall.SIGHUP)
			p.waitLogFrom(mark, 10*time.Second, func(l logLine) bool { return strings.Contains(strings.ToLower(l.str("msg")), "reload") })

			// Every read endpoint, with the read token; the backup with the
			// write token.
			var bodies []string
			listed := run.simPassword == ufdsPassword
			get := func(path, token string) []byte {
				req, _ := http.NewRequest("GET", api+path, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				// An answer that is an error proves nothing about secrets.
				// With the wrong UFDS password no owner is known, so the
				// public zone is empty: its reads and a VM's rightly
				// answer 404 (never 401); every other endpoint answers.
				missing := !listed && (strings.HasPrefix(path, "/zones/"+demoZone) || strings.HasPrefix(path, "/vm/"))
				if res.StatusCode != http.StatusOK && (!missing || res.StatusCode != http.StatusNotFound) {
					t.Errorf("GET %s: HTTP %d %.200s", path, res.StatusCode, b)
				}
				bodies = append(bodies, path+": "+string(b))
				return b
			}
			for _, path := range []string{"/ping", "/status", "/zones", "/zones/" + demoZone, "/zones/" + demoZone + "/history",
				"/zones/" + demoZone + "/records?limit=5", "/feeds", "/peers", "/allowed-peers", "/metrics", "/services",
				"/vms?q=a", "/vm/b752d788-c0e4-4307-8c56-353a4ea66c02"} {
				get(path, readToken)
			}
			backup := get("/db/backup", apiToken)
			bodies = bodies[:len(bodies)-1] // the db copy is checked below
			out := filepath.Join(dir, "backup.db")
			if _, stderr, code := runCNS(t, "adm", "--api", api, "--token", apiToken, "backup", out); code != 0 {
				t.Errorf("cnsadm backup exited %d: %s", code, stderr)
			} else if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("cnsadm backup file mode %v (%v), want 0600", fi.Mode().Perm(), err)
			}
			if len(backup) < 4096 {
				t.Errorf("/db/backup sent %d bytes, not a db", len(backup))
			}
			for _, sec := range secrets {
				if strings.Contains(string(backup), sec) {
					t.Errorf("the db holds the secret %q", sec)
				}
			}
			p.stop(syscall.SIGTERM)
			log := p.log()
			for _, sec := range secrets {
				if strings.Contains(log, sec) {
					t.Errorf("the log shows the secret %q", sec)
				}
				for _, b := range bodies {
					if strings.Contains(b, sec) {
						t.Errorf("API answer shows the secret %q: %.200s", sec, b)
					}
				}
			}
			// log_level trace took effect: lines below info were written
			// (the VMs being updated, at debug), so the log searched above
			// is the most verbose one cns writes.
			below := 0
			p.mu.Lock()
			lines := len(p.lines)
			for _, l := range p.lines {
				if lvl, ok := l["level"].(float64); ok && lvl < 30 {
					below++
				}
			}
			p.mu.Unlock()
			if listed && below == 0 {
				t.Errorf("log_level trace, yet no line below info in %d lines", lines)
			}
			t.Logf("%d log lines (%d below info) and %d API answers free of %d secrets", lines, below, len(bodies), len(secrets))
			if os.Getenv("CNS_SHOW_LOG") != "" {
				t.Log(log)
			}
		})
	}
}

// A db on a filesystem that is read-only when cns starts (a failing disk,
// a pool frozen read-only): cns opens it read-only and serves what it
// holds, says so in the log and in /feeds, and stores nothing; a changed
// inventory is not lost from the file, it is applied after a restart on a
// writable filesystem. A filesystem that turns read-only under a running
// cns fails its writes as TestDiskFull's does.
func TestDiskReadOnlyAtStart(t *testing.T) {
	fsDir := mountTmpfs(t, "16m")
	dir := t.TempDir()
	dbPath := filepath.Join(fsDir, "cns.db")
	invPath := filepath.Join(dir, "inventory.json")
	inv := loadDefaultDC(t)
	writeInventory(t, invPath, &inv)
	cfg := testConfig(t, dir, invPath, func(c map[string]any) {
		c["db_path"] = dbPath
		c["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
	})
	p := startCNS(t, cfg)
	p.waitCommitted(0)
	serial := p.query("udp", demoZone, dns.TypeSOA).Answer[0].(*dns.SOA).Serial
	p.stop(syscall.SIGTERM)
	if out, err := exec.Command("mount", "-o", "remount,ro", fsDir).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v %s", err, out)
	}

	// A VM that appears while the db cannot take it.
	gen := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 1, Seed: 12})
	grown := grownInventory(inv, *gen)
	writeInventory(t, invPath, &grown)
	newName := gen.VMs[0].UUID + ".inst." + gen.VMs[0].OwnerUUID + "." + demoZone

	p = startCNS(t, cfg)
	api := "http://" + p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
	ro := p.waitLog(10*time.Second, func(l logLine) bool { return strings.Contains(l.str("msg"), "read-only file system") })
	if !strings.Contains(ro.str("msg"), dbPath) {
		t.Errorf("the read-only db is not named: %q", ro.str("msg"))
	}
	if r := p.query("udp", "cloudapi."+demoZone, dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("stored name not answered from a read-only db: %v", r)
	}
	if got := p.query("udp", demoZone, dns.TypeSOA).Answer[0].(*dns.SOA).Serial; got != serial {
		t.Errorf("serial %d from a read-only db, want the stored %d", got, serial)
	}
	p.waitLog(20*time.Second, func(l logLine) bool { return strings.HasPrefix(l.str("msg"), "commit failed") })
	if healthy, reason := feedHealthy(t, api, "db"); healthy || !strings.Contains(reason, "read-only") {
		t.Errorf("/feeds: db healthy=%v reason %q, want degraded and read-only", healthy, reason)
	}
	if r := p.query("udp", newName, dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("a VM that could not be stored is answered: %v", r)
	}
	p.stop(syscall.SIGTERM)
	// The offline tools still read it.
	if out, stderr, code := runCNS(t, "db", "--db", dbPath, "check"); code != 0 {
		t.Errorf("cns db check on the read-only db: %s%s", out, stderr)
	}

	// Writable again: a restart stores and serves the new VM.
	if out, err := exec.Command("mount", "-o", "remount,rw", fsDir).CombinedOutput(); err != nil {
		t.Fatalf("remount read-write: %v %s", err, out)
	}
	p = startCNS(t, cfg)
	p.waitCommitted(0)
	if r := p.query("udp", newName, dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("the new VM is not served after the restart on a writable db: %v", r)
	}
	p.stop(syscall.SIGTERM)
}
