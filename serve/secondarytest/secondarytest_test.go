package secondarytest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

const testZone = "example.test"

var testKey = &Key{Name: "cns-xfr", Algorithm: "hmac-sha256", Secret: "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ensure that each secondary transfers a zone at start, follows a NOTIFY
// to the next serial by IXFR request, and hands the zone back by AXFR
// exactly as the primary serves it.
func TestSlave(t *testing.T) {
	for _, k := range Kinds {
		t.Run(string(k), func(t *testing.T) {
			p := newToyPrimary(t, nil)
			p.addZone(testZone, 100, 20)
			s := Start(t, Config{Kind: k, Primary: p.addr, Zones: []string{testZone}, Dir: t.TempDir()})
			if err := s.WaitSerial(testZone, 100, 15*time.Second); err != nil {
				t.Fatal(err)
			}
			got, err := s.Transfer(testZone)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffZones(p.records(testZone), got); err != nil {
				t.Fatalf("zone from %s differs from the primary's:\n%v", k, err)
			}

			serial := p.bump(testZone)
			rcode, err := p.notify(testZone, s.Addr())
			if err != nil || rcode != dns.RcodeSuccess {
				t.Fatalf("notify: rcode %d, %v", rcode, err)
			}
			// Refresh is an hour: only the NOTIFY can bring the new serial.
			if err := s.WaitSerial(testZone, serial, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			got, err = s.Transfer(testZone)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffZones(p.records(testZone), got); err != nil {
				t.Fatalf("zone from %s after NOTIFY differs:\n%v", k, err)
			}
			if _, served, _ := p.stats(); len(served) < 2 || served[len(served)-1] != "IXFR "+testZone+"." {
				t.Errorf("transfers the primary served: %v; want the last one an IXFR", served)
			}

			// The secondary's own account: an AXFR to 100, then an IXFR
			// (NSD does not say which).
			xfrs := s.Transfers()
			if len(xfrs) != 2 || xfrs[0].Serial != 100 || xfrs[1].Serial != serial || xfrs[0].Bytes == 0 || xfrs[1].Bytes >= xfrs[0].Bytes {
				t.Fatalf("Transfers() = %+v", xfrs)
			}
			if xfrs[1].Took < 0 || xfrs[1].Took > 10*time.Second { // Knot rounds to 10 ms: 0 is fine
				t.Errorf("transfer took %v by %s's account", xfrs[1].Took, k)
			}
			if k != NSD && (xfrs[0].Type != "AXFR" || xfrs[1].Type != "IXFR") {
				t.Errorf("transfer types %q, %q; want AXFR, IXFR", xfrs[0].Type, xfrs[1].Type)
			}

			r, err := s.Query(fmt.Sprintf("new-%d.%s", serial, testZone), dns.TypeA)
			if err != nil {
				t.Fatal(err)
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !r.Authoritative {
				t.Fatalf("query for the new name: %v", r)
			}
			if _, ok := s.Serial("other.test"); ok {
				t.Error("Serial of a zone not slaved reports true")
			}
		})
	}
}

// Ensure that a paused secondary hears nothing, and once resumed acts on
// the NOTIFY that waited in its socket.
func TestPause(t *testing.T) {
	for _, k := range Kinds {
		t.Run(string(k), func(t *testing.T) {
			p := newToyPrimary(t, nil)
			p.addZone(testZone, 1, 3)
			s := Start(t, Config{Kind: k, Primary: p.addr, Zones: []string{testZone}, Dir: t.TempDir()})
			if err := s.WaitSerial(testZone, 1, 15*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := s.Pause(); err != nil {
				t.Fatal(err)
			}
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(testZone), dns.TypeSOA)
			if r, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(m, s.Addr()); err == nil {
				t.Fatalf("a paused secondary answered: %v", r)
			}
			p.bump(testZone)
			serial := p.bump(testZone)
			p.notifyNoWait(testZone, s.Addr())
			if err := s.Resume(); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitSerial(testZone, serial, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Ensure that a secondary given a key signs its transfers with it and
// accepts the signed NOTIFY, and that a primary insisting on the key
// refuses a secondary that has none or the wrong secret.
func TestTSIG(t *testing.T) {
	for _, k := range Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Run("signed", func(t *testing.T) {
				p := newToyPrimary(t, testKey)
				p.addZone(testZone, 7, 5)
				s := Start(t, Config{Kind: k, Primary: p.addr, Zones: []string{testZone}, Key: testKey, Dir: t.TempDir()})
				if err := s.WaitSerial(testZone, 7, 15*time.Second); err != nil {
					t.Fatal(err)
				}
				serial := p.bump(testZone)
				// Knot and NSD do not accept an unsigned NOTIFY once they
				// hold the key. BIND accepts any NOTIFY from a primary's
				// address (it then asks for the SOA with the key anyway).
				unsigned := &toyPrimary{t: t, zones: map[string]*toyZone{dns.Fqdn(testZone): {name: dns.Fqdn(testZone), serial: serial}}}
				rcode, err := unsigned.notify(testZone, s.Addr())
				if accepted := err == nil && rcode == dns.RcodeSuccess; accepted != (k == BIND) {
					t.Errorf("%s: unsigned NOTIFY accepted %v (rcode %d, %v)", k, accepted, rcode, err)
				}
				if rcode, err := p.notify(testZone, s.Addr()); err != nil || rcode != dns.RcodeSuccess {
					t.Fatalf("signed notify: rcode %s, %v", dns.RcodeToString[rcode], err)
				}
				if err := s.WaitSerial(testZone, serial, 10*time.Second); err != nil {
					t.Fatal(err)
				}
				got, err := s.Transfer(testZone)
				if err != nil {
					t.Fatal(err)
				}
				if err := diffZones(p.records(testZone), got); err != nil {
					t.Fatal(err)
				}
				if refused, _, _ := p.stats(); refused != 0 {
					t.Errorf("primary refused %d requests of a secondary with the right key", refused)
				}
			})
			for _, c := range []struct {
				name string
				key  *Key
			}{
				{"unsigned", nil},
				{"wrong secret", &Key{Name: testKey.Name, Algorithm: testKey.Algorithm, Secret: "d3Jvbmctd3Jvbmctd3Jvbmctd3Jvbmctd3Jvbmc="}},
				{"wrong name", &Key{Name: "other-key", Algorithm: testKey.Algorithm, Secret: testKey.Secret}},
			} {
				t.Run(c.name, func(t *testing.T) {
					p := newToyPrimary(t, testKey)
					p.addZone(testZone, 7, 5)
					s := Start(t, Config{Kind: k, Primary: p.addr, Zones: []string{testZone}, Key: c.key, Dir: t.TempDir()})
					// The secondary asks at once (it has no copy); a refused
					// SOA query or transfer ends that attempt.
					waitFor(t, 15*time.Second, "a refused request", func() bool {
						refused, _, _ := p.stats()
						return refused >= 1
					})
					if serial, ok := s.Serial(testZone); ok {
						t.Fatalf("secondary serves serial %d although the primary refused it", serial)
					}
					if _, xfrs, _ := p.stats(); len(xfrs) != 0 {
						t.Fatalf("primary served %v to a refused secondary", xfrs)
					}
				})
			}
		})
	}
}

// Ensure that BIND and Knot consume a catalog zone: the member zone it
// lists gets slaved and follows a NOTIFY.
func TestCatalog(t *testing.T) {
	for _, k := range Kinds {
		t.Run(string(k), func(t *testing.T) {
			if err := Available(k); err != nil {
				t.Skip(err)
			}
			if err := CatalogSupported(k); err != nil {
				t.Skip(err)
			}
			const cat, member = "catalog.test", "member.test"
			p := newToyPrimary(t, testKey)
			p.addZone(member, 10, 3)
			p.addZone(cat, 1, 0)
			p.setRecords(cat, []dns.RR{
				mustRR(t, "catalog.test. 0 IN NS invalid."),
				mustRR(t, `version.catalog.test. 0 IN TXT "2"`),
				mustRR(t, "m1.zones.catalog.test. 0 IN PTR member.test."),
			})
			s := Start(t, Config{Kind: k, Primary: p.addr, Catalog: cat, Key: testKey, Dir: t.TempDir()})
			if err := s.WaitSerial(cat, 1, 15*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitSerial(member, 10, 15*time.Second); err != nil {
				t.Fatal(err)
			}
			serial := p.bump(member)
			if rcode, err := p.notify(member, s.Addr()); err != nil || rcode != dns.RcodeSuccess {
				t.Fatalf("notify member: rcode %d, %v", rcode, err)
			}
			if err := s.WaitSerial(member, serial, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			got, err := s.Transfer(member)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffZones(p.records(member), got); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Ensure that a missing binary makes Available name the Debian package
// and Start skip the test.
func TestMissingBinary(t *testing.T) {
	old := binaryPath
	binaryPath = func(k Kind) string { return "/nonexistent/" + string(k) }
	t.Cleanup(func() { binaryPath = old })
	for k, pkg := range map[Kind]string{BIND: "bind9", Knot: "knot", NSD: "nsd"} {
		err := Available(k)
		if err == nil || !strings.Contains(err.Error(), "apt-get install "+pkg) {
			t.Errorf("Available(%s) = %v; want it to name package %s", k, err, pkg)
		}
	}
	ran := false
	t.Run("skips", func(t *testing.T) {
		defer func() { ran = true }()
		Start(t, Config{Kind: Knot, Primary: "127.0.0.1:53", Zones: []string{testZone}})
		t.Error("Start returned without skipping")
	})
	if !ran {
		t.Error("subtest did not run")
	}
	if err := Available("powerdns"); err == nil {
		t.Error("Available of an unknown kind is nil")
	}
	// Each missing kind is a skipped subtest (TestMissingBinary/knot),
	// not a line of log.
	if got := Installed(t, Knot, NSD); len(got) != 0 {
		t.Errorf("Installed = %v with every binary missing", got)
	}
}

// NSD consumes catalog zones from 4.9 on, judged by its version line; the
// consumer's configuration is written for those versions only.
func TestNSDCatalog(t *testing.T) {
	for v, want := range map[string]bool{
		"NSD version 4.6.1": false, "NSD version 4.8.0": false, "NSD version 4.9.0": true,
		"NSD version 4.10.1": true, "NSD version 5.0.0": true, "nsd: unknown option -v": false, "": false,
	} {
		if got := nsdConsumesCatalogs(v); got != want {
			t.Errorf("nsdConsumesCatalogs(%q) = %v, want %v", v, got, want)
		}
	}
	conf, err := nsdConf(&Config{Kind: NSD, Primary: "127.0.0.1:5300", Catalog: "catalog.test", Address: "127.0.0.1", Dir: t.TempDir()}, 5301, "nsd")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`name: "catalog.test."`, "catalog: consumer", `catalog-member-pattern: "catalog-member"`,
		`name: "catalog-member"`, `zonefile: "%s.zone"`, "request-xfr: 127.0.0.1@5300 NOKEY"} {
		if !strings.Contains(conf, "    "+line+"\n") {
			t.Errorf("nsd.conf for a catalog lacks %q:\n%s", line, conf)
		}
	}
}

// Ensure that Start moves to another port when the one it picked is taken
// (by something that does not answer, so only the server's log or exit
// tells).
func TestPortTaken(t *testing.T) {
	for _, k := range Kinds {
		t.Run(string(k), func(t *testing.T) {
			if err := Available(k); err != nil {
				t.Skip(err)
			}
			l, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			taken := l.Addr().(*net.TCPAddr).Port
			u, err := net.ListenPacket("udp4", l.Addr().String())
			if err != nil {
				t.Skip("cannot hold the UDP port too:", err)
			}
			defer u.Close()
			calls := 0
			old := pickPort
			pickPort = func(string) (int, error) {
				calls++
				if calls == 1 {
					return taken, nil
				}
				return freePort()
			}
			t.Cleanup(func() { pickPort = old })

			p := newToyPrimary(t, nil)
			p.addZone(testZone, 1, 1)
			s := Start(t, Config{Kind: k, Primary: p.addr, Zones: []string{testZone}, Dir: t.TempDir(), StartTimeout: 10 * time.Second})
			if calls < 2 || s.Addr() == l.Addr().String() {
				t.Fatalf("Start used %s after %d port picks", s.Addr(), calls)
			}
			if err := s.WaitSerial(testZone, 1, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSerialGE(t *testing.T) {
	for _, c := range []struct {
		a, b uint32
		want bool
	}{
		{1, 1, true}, {2, 1, true}, {1, 2, false},
		{0, 0xffffffff, true}, {0xffffffff, 0, false},
		{0x80000000, 1, true}, {1, 0x80000001, false}, {5, 0x80000005 + 1, true},
	} {
		if got := SerialGE(c.a, c.b); got != c.want {
			t.Errorf("SerialGE(%d, %d) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// A port picked ahead comes from below the kernel's ephemeral range, where
// no process's next outgoing connection can be given it meanwhile.
func TestFreePortBelowEphemeral(t *testing.T) {
	low := ephemeralLow()
	if low <= belowEphemeral {
		t.Skipf("no ephemeral range to stay below (low %d)", low)
	}
	for range 20 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < belowEphemeral || port >= low {
			t.Fatalf("FreePort gave %d, outside [%d, %d)", port, belowEphemeral, low)
		}
		if !portFree("127.0.0.1", port) {
			t.Fatalf("FreePort gave %d, which is not free", port)
		}
	}
}
