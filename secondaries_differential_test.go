package main

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// Differential DNS tests (issue 12): every zone cns serves is exported
// with `cns db export`, loaded into NSD and Knot as primaries, and the same
// queries go to all three. Where cns answers differently from both, it is
// a bug, unless allowedDiffs below says why it is not.

// diffQuery is one request of the mix.
type diffQuery struct {
	desc string
	msg  *dns.Msg // nil: raw
	raw  []byte
	tcp  bool
}

// diffAnswer is an answer reduced to what is compared.
type diffAnswer struct {
	none     bool // no answer at all
	rcode    int  // extended rcode included
	aa, tc   bool
	opt      bool
	question string
	sections [3][]string // answer, authority, additional (OPT and TSIG excluded), sorted, lower case
}

func (a *diffAnswer) String() string {
	if a.none {
		return "(no answer)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s aa=%v tc=%v opt=%v q=%s", dns.RcodeToString[a.rcode], a.aa, a.tc, a.opt, a.question)
	for i, name := range []string{"an", "ns", "ar"} {
		for _, rr := range a.sections[i] {
			fmt.Fprintf(&b, "\n    %s: %s", name, rr)
		}
	}
	return b.String()
}

func equalAnswers(a, b *diffAnswer) bool {
	if a.none || b.none {
		return a.none == b.none
	}
	if a.rcode != b.rcode || a.aa != b.aa || a.tc != b.tc || a.opt != b.opt || a.question != b.question {
		return false
	}
	if a.tc {
		return true // a truncated answer's partial sections may differ
	}
	for i := range a.sections {
		if !slices.Equal(a.sections[i], b.sections[i]) {
			return false
		}
	}
	return true
}

func reduce(raw []byte) *diffAnswer {
	if raw == nil {
		return &diffAnswer{none: true}
	}
	var m dns.Msg
	if err := m.Unpack(raw); err != nil {
		// A header-only answer miekg cannot unpack fully still has an
		// rcode and flags worth comparing.
		if len(raw) < 12 {
			return &diffAnswer{none: true}
		}
		fl := binary.BigEndian.Uint16(raw[2:])
		return &diffAnswer{rcode: int(fl & 0xF), aa: fl&(1<<10) != 0, tc: fl&(1<<9) != 0, question: "(unparsable)"}
	}
	a := &diffAnswer{rcode: m.Rcode, aa: m.Authoritative, tc: m.Truncated}
	if len(m.Question) > 0 {
		q := m.Question[0]
		a.question = q.Name + " " + dns.ClassToString[q.Qclass] + " " + dns.TypeToString[q.Qtype]
	}
	for i, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			switch rr.Header().Rrtype {
			case dns.TypeOPT:
				a.opt = true
				continue
			case dns.TypeTSIG:
				continue
			}
			a.sections[i] = append(a.sections[i], strings.ToLower(strings.ReplaceAll(rr.String(), "\t", " ")))
		}
		// Duplicate records in a section are one record (RFC 2181 §5.5):
		// Knot repeats an SRV target's address once per SRV record.
		slices.Sort(a.sections[i])
		a.sections[i] = slices.Compact(a.sections[i])
	}
	return a
}

// ask sends q to addr and returns the raw answer (nil when none came).
func ask(addr string, q diffQuery) []byte {
	pkt := q.raw
	if q.msg != nil {
		var err error
		if pkt, err = q.msg.Pack(); err != nil {
			panic(err)
		}
	}
	netw := "udp"
	if q.tcp {
		netw = "tcp"
	}
	// From 127.0.0.2: 127.0.0.1 and ::1 may always transfer from cns (as
	// from the reference), so a client that is not allowed must come from
	// another loopback address.
	d := net.Dialer{Timeout: time.Second}
	if q.tcp {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	} else {
		d.LocalAddr = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}
	}
	c, err := d.Dial(netw, addr)
	if err != nil {
		return nil
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(400 * time.Millisecond))
	buf := make([]byte, 65535)
	if q.tcp {
		c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(pkt))), pkt...))
		var l [2]byte
		if _, err := readFull(c, l[:]); err != nil {
			return nil
		}
		n := int(binary.BigEndian.Uint16(l[:]))
		if _, err := readFull(c, buf[:n]); err != nil {
			return nil
		}
		return buf[:n]
	}
	c.Write(pkt)
	n, err := c.Read(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// allowedDiff is a known, justified way cns may differ from both peers.
type allowedDiff struct {
	key   string // short name for the summary
	why   string
	match func(q diffQuery, cns, nsd, knot *diffAnswer) bool
}

// withoutAuthorityNS is a with the NS records of its authority section
// dropped.
func withoutAuthorityNS(a *diffAnswer) *diffAnswer {
	c := *a
	c.sections[1] = slices.DeleteFunc(slices.Clone(a.sections[1]), func(rr string) bool { return strings.Contains(rr, " in ns ") })
	return &c
}

// allowedDiffs: cns differs from NSD and Knot here on purpose. Each entry
// says why; everything else is a bug.
var allowedDiffs = []allowedDiff{
	{"nsd-authority-ns", "NSD adds the zone's NS RRset to the authority section (minimal-responses off) where Knot answers minimally; cns answers minimally; counted here where Knot differs too (it answers FORMERR to a request with trailing bytes)",
		func(q diffQuery, c, n, k *diffAnswer) bool {
			return len(c.sections[1]) == 0 && equalAnswers(c, withoutAuthorityNS(n))
		}},
	{"axfr-over-udp", "AXFR over UDP is undefined (RFC 5936 §4.2): cns answers REFUSED, as docs/replication.md documents; NSD and Knot NOTIMP. Either sends the client to TCP",
		func(q diffQuery, c, n, k *diffAnswer) bool {
			return q.msg != nil && !q.tcp && q.msg.Question[0].Qtype == dns.TypeAXFR && c.rcode == dns.RcodeRefused && n.rcode == dns.RcodeNotImplemented
		}},
	{"unknown-opcode", "an unknown opcode: NOTIMP as NSD answers, with the question echoed as Knot does (RFC 1035 §4.1.1 responses carry the question)",
		func(q diffQuery, c, n, k *diffAnswer) bool {
			return c.rcode == dns.RcodeNotImplemented && n.rcode == dns.RcodeNotImplemented && c.question == k.question && len(c.sections[0]) == 0
		}},
	{"tcp-header-only", "a header-only request over TCP: cns answers FORMERR (as one of NSD and Knot does over UDP) where both close the connection",
		func(q diffQuery, c, n, k *diffAnswer) bool {
			return q.raw != nil && q.tcp && len(q.raw) == 12 && c.rcode == dns.RcodeFormatError && n.none && k.none
		}},
}

// zoneNames reads an exported zone file: owner names and their types.
func zoneNames(t *testing.T, path, zone string) map[string][]uint16 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]uint16{}
	zp := dns.NewZoneParser(f, dns.Fqdn(zone), path)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		n := strings.ToLower(rr.Header().Name)
		if !slices.Contains(out[n], rr.Header().Rrtype) {
			out[n] = append(out[n], rr.Header().Rrtype)
		}
	}
	if err := zp.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// randomCase flips the case of letters at random (DNS 0x20).
func randomCase(rng *rand.Rand, s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' && rng.IntN(2) == 0 {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// queryMix builds the queries for the zones: every name (at most maxNames
// per zone, sampled) with every type, NODATA and NXDOMAIN, empty
// non-terminals, random case, ANY, EDNS sizes, versions and flags, TCP,
// and malformed packets.
func queryMix(t *testing.T, files map[string]string, maxNames int, rng *rand.Rand) []diffQuery {
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeSRV, dns.TypePTR, dns.TypeCNAME, dns.TypeNS, dns.TypeSOA,
		dns.TypeMX, dns.TypeANY, dns.TypeCAA, dns.TypeDS, dns.TypeNSEC, 65280}
	var out []diffQuery
	variant := 0
	add := func(name string, qtype uint16, desc string) {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.RecursionDesired = rng.IntN(2) == 0
		q := diffQuery{desc: desc, msg: m}
		switch variant % 8 {
		case 0: // no EDNS: 512 bytes
		case 1:
			m.SetEdns0(1232, false)
		case 2:
			m.SetEdns0(4096, true)
		case 3:
			m.SetEdns0(512, false)
		case 4:
			m.SetEdns0(1232, false)
			q.tcp = true
		case 5:
			m.Question[0].Name = randomCase(rng, name)
			m.SetEdns0(1232, false)
		case 6:
			q.tcp = true
		case 7:
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: 65000, Data: []byte("unknown option")})
		}
		q.desc += fmt.Sprintf(" [variant %d]", variant%8)
		variant++
		out = append(out, q)
	}
	for _, zone := range slices.Sorted(maps.Keys(files)) {
		names := zoneNames(t, files[zone], zone)
		apex := dns.Fqdn(zone)
		// Empty non-terminals: ancestors of names that own nothing.
		ents := map[string]bool{}
		for n := range names {
			labels := dns.SplitDomainName(n)
			for i := 1; i < len(labels); i++ {
				p := dns.Fqdn(strings.Join(labels[i:], "."))
				if len(p) <= len(apex) {
					break
				}
				if _, ok := names[p]; !ok {
					ents[p] = true
				}
			}
		}
		list := slices.Sorted(maps.Keys(names))
		if len(list) > maxNames {
			rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
			list = list[:maxNames]
			slices.Sort(list)
		}
		entList := slices.Sorted(maps.Keys(ents))
		if len(entList) > maxNames/4+1 {
			entList = entList[:maxNames/4+1]
		}
		for _, n := range list {
			for _, qt := range types {
				add(n, qt, "name")
			}
			add("nx-"+fmt.Sprint(rng.IntN(1000))+"."+n, dns.TypeA, "NXDOMAIN below a name")
		}
		for _, n := range entList {
			add(n, dns.TypeA, "empty non-terminal")
			add(n, dns.TypeANY, "empty non-terminal ANY")
			add("x."+n, dns.TypeTXT, "NXDOMAIN below an empty non-terminal")
		}
		add("no-such-name."+apex, dns.TypeA, "NXDOMAIN at the apex")
		add(apex, dns.TypeAXFR, "AXFR over UDP or TCP from a client not allowed")
		// EDNS version 1: BADVERS.
		m := new(dns.Msg)
		m.SetQuestion(apex, dns.TypeSOA)
		m.SetEdns0(1232, false)
		m.IsEdns0().SetVersion(1)
		out = append(out, diffQuery{desc: "EDNS version 1", msg: m})
	}
	// Outside every zone, and other classes.
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	out = append(out, diffQuery{desc: "outside every zone", msg: m})
	m = new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	m.SetEdns0(1232, false)
	out = append(out, diffQuery{desc: "outside every zone, EDNS", msg: m, tcp: true})
	// Malformed and odd packets, built from a good query of the first zone.
	first := dns.Fqdn(slices.Sorted(maps.Keys(files))[0])
	m = new(dns.Msg)
	m.SetQuestion(first, dns.TypeSOA)
	good, _ := m.Pack()
	set := func(b []byte, off int, v uint16) []byte {
		c := slices.Clone(b)
		binary.BigEndian.PutUint16(c[off:], v)
		return c
	}
	for _, r := range []struct {
		desc string
		pkt  []byte
	}{
		{"header only", good[:12]},
		{"truncated question", good[:len(good)-2]},
		{"QR set", set(good, 2, 0x8000)},
		{"no question", set(good[:12], 4, 0)},
		{"two questions, one present", set(good, 4, 2)},
		{"two questions", set(append(slices.Clone(good), good[12:]...), 4, 2)},
		{"opcode STATUS", set(good, 2, 2<<11)},
		{"opcode UPDATE", set(good, 2, 5<<11)},
		{"an count 1 with nothing", set(good, 6, 1)},
		{"ar count 1 with nothing", set(good, 10, 1)},
		{"trailing garbage", append(slices.Clone(good), 1, 2, 3)},
		{"compression pointer in the question", []byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 6, 0, 1}},
		{"label too long", append(append(slices.Clone(good[:12]), 70), make([]byte, 10)...)},
		{"class ANY", set(good, len(good)-2, dns.ClassANY)},
		{"class NONE", set(good, len(good)-2, dns.ClassNONE)},
	} {
		out = append(out, diffQuery{desc: "malformed: " + r.desc, raw: r.pkt})
		out = append(out, diffQuery{desc: "malformed over TCP: " + r.desc, raw: r.pkt, tcp: true})
	}
	return out
}

// exportZones stops nothing: the server must be stopped. It writes every
// zone of dbPath into dir with `cns db export` and returns zone → file.
func exportZones(t *testing.T, dbPath, dir string) map[string]string {
	t.Helper()
	out, stderr, code := runCNS(t, "db", "--db", dbPath, "zones")
	if code != 0 {
		t.Fatalf("cns db zones: %s", stderr)
	}
	files := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		text, stderr, code := runCNS(t, "db", "--db", dbPath, "export", f[0])
		if code != 0 {
			t.Fatalf("cns db export %s: %s", f[0], stderr)
		}
		path := filepath.Join(dir, f[0]+".zone")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		files[f[0]] = path
	}
	return files
}

func TestDifferentialDNS(t *testing.T) {
	for _, k := range []secondarytest.Kind{secondarytest.NSD, secondarytest.Knot} {
		if err := secondarytest.Available(k); err != nil {
			t.Skip(err)
		}
	}
	// The testdata DC: every name. The generated one: a sample per zone.
	vms := 1000
	names := 120
	if longRun() {
		vms, names = 10000, 2000
	}
	for _, tc := range []struct {
		name     string
		maxNames int // per zone
		inv      func(dir string) string
	}{
		{"testdata DC", 1 << 30, func(string) string { return "testdata/inventory.json" }},
		{fmt.Sprintf("generated %d VMs", vms), names, func(dir string) string {
			path := filepath.Join(dir, "gen.json")
			writeInventory(t, path, sdcsim.Generate(sdcsim.GenerateOptions{VMs: vms, Seed: 42}))
			return path
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// Nobody may transfer: NSD and Knot load the zones without
			// provide-xfr/acl either.
			cfg := testConfig(t, dir, tc.inv(dir), func(c map[string]any) { c["allow_transfer"] = []string{} })
			p := startCNS(t, cfg)
			p.waitCommitted(0)
			p.stop(syscall.SIGTERM)
			zdir := filepath.Join(dir, "zones")
			os.MkdirAll(zdir, 0o755)
			files := exportZones(t, filepath.Join(dir, "cns.db"), zdir)
			p = startCNS(t, cfg)
			nsd := secondarytest.Start(t, secondarytest.Config{Kind: secondarytest.NSD, ZoneFiles: files, Dir: filepath.Join(dir, "nsd")})
			knot := secondarytest.Start(t, secondarytest.Config{Kind: secondarytest.Knot, ZoneFiles: files, Dir: filepath.Join(dir, "knot")})
			// Every zone is served by all three at the same serial.
			for z := range files {
				s := soaSerial(t, p, z)
				for _, sec := range []*secondarytest.Secondary{nsd, knot} {
					if err := sec.WaitSerial(z, s, 10*time.Second); err != nil {
						t.Fatal(err)
					}
				}
			}
			rng := rand.New(rand.NewPCG(7, 7))
			mix := queryMix(t, files, tc.maxNames, rng)
			var bugs []string
			agreeNSD, agreeKnot, agreeBoth, allowed := 0, 0, 0, map[string]int{}
			for _, q := range mix {
				c, n, k := reduce(ask(p.addr, q)), reduce(ask(nsd.Addr(), q)), reduce(ask(knot.Addr(), q))
				// A lost datagram or a slow moment of a loaded machine is
				// not a difference: ask again whoever did not answer.
				for try := 0; try < 2 && !equalAnswers(c, n) && !equalAnswers(c, k) && (c.none || n.none || k.none); try++ {
					for _, x := range []struct {
						a    **diffAnswer
						addr string
					}{{&c, p.addr}, {&n, nsd.Addr()}, {&k, knot.Addr()}} {
						if (*x.a).none {
							*x.a = reduce(ask(x.addr, q))
						}
					}
				}
				en, ek := equalAnswers(c, n), equalAnswers(c, k)
				if en {
					agreeNSD++
				}
				if ek {
					agreeKnot++
				}
				if en && ek {
					agreeBoth++
				}
				if en || ek {
					continue
				}
				why := ""
				for _, a := range allowedDiffs {
					if a.match(q, c, n, k) {
						why = a.key
						break
					}
				}
				if why != "" {
					allowed[why]++
					continue
				}
				qs := q.desc
				if q.msg != nil {
					qs = fmt.Sprintf("%s %s (%s, tcp=%v)", q.msg.Question[0].Name, dns.TypeToString[q.msg.Question[0].Qtype], q.desc, q.tcp)
				}
				bugs = append(bugs, fmt.Sprintf("%s\n  cns:  %s\n  nsd:  %s\n  knot: %s", qs, c, n, k))
			}
			t.Logf("%d zones, %d queries: cns = NSD %d, cns = Knot %d, all three %d; justified differences %v; unexplained %d",
				len(files), len(mix), agreeNSD, agreeKnot, agreeBoth, allowed, len(bugs))
			for i, b := range bugs {
				if i == 15 {
					t.Errorf("... and %d more", len(bugs)-i)
					break
				}
				t.Errorf("cns differs from NSD and Knot: %s", b)
			}
		})
	}
}
