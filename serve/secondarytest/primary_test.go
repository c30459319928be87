package secondarytest

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// toyPrimary is a minimal primary: it serves SOA, AXFR and IXFR (answered
// AXFR-style, which RFC 1995 allows) for zones built in the test, can bump
// a zone and send NOTIFY, and can insist on a TSIG key.
type toyPrimary struct {
	t    testing.TB
	addr string
	key  *Key // required on every request when set

	mu      sync.Mutex
	zones   map[string]*toyZone // fqdn, lower case
	refused int                 // requests refused for want of a good TSIG
	xfrs    []string            // "AXFR example.test." / "IXFR ..." served, in order
	soaQs   int

	udp, tcp *dns.Server
}

type toyZone struct {
	name   string // fqdn
	serial uint32
	rrs    []dns.RR // everything but the SOA
	// added[s] is the record bump added to go from s-1 to s, so an IXFR
	// from a serial bump made can be answered incrementally.
	added map[uint32]dns.RR
}

func (z *toyZone) soaAt(serial uint32) *dns.SOA {
	soa := z.soa()
	soa.Serial = serial
	return soa
}

func (z *toyZone) soa() *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: z.name, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
		Ns:      "ns1." + z.name,
		Mbox:    "hostmaster." + z.name,
		Serial:  z.serial,
		Refresh: 3600, // long: a new serial reaching the secondary in seconds came by NOTIFY
		Retry:   1,
		Expire:  86400,
		Minttl:  30,
	}
}

func newToyPrimary(t testing.TB, key *Key) *toyPrimary {
	t.Helper()
	p := &toyPrimary{t: t, key: key, zones: map[string]*toyZone{}}
	var secret map[string]string
	if key != nil {
		secret = map[string]string{dns.Fqdn(key.Name): key.Secret}
	}
	var lastErr error
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp4", l.Addr().String())
		if err != nil {
			l.Close()
			lastErr = err
			continue
		}
		p.addr = l.Addr().String()
		started := make(chan struct{}, 2)
		p.tcp = &dns.Server{Listener: l, Handler: p, TsigSecret: secret, NotifyStartedFunc: func() { started <- struct{}{} }}
		p.udp = &dns.Server{PacketConn: pc, Handler: p, TsigSecret: secret, NotifyStartedFunc: func() { started <- struct{}{} }}
		go p.tcp.ActivateAndServe()
		go p.udp.ActivateAndServe()
		<-started
		<-started
		t.Cleanup(func() {
			p.tcp.Shutdown()
			p.udp.Shutdown()
		})
		return p
	}
	t.Fatalf("toy primary: %v", lastErr)
	return nil
}

// addZone creates zone at serial with n A records and a few others.
func (p *toyPrimary) addZone(zone string, serial uint32, n int) {
	z := &toyZone{name: dns.Fqdn(strings.ToLower(zone)), serial: serial}
	z.rrs = append(z.rrs,
		mustRR(p.t, fmt.Sprintf("%s 60 IN NS ns1.%s", z.name, z.name)),
		mustRR(p.t, fmt.Sprintf("ns1.%s 60 IN A 127.0.0.1", z.name)),
		mustRR(p.t, fmt.Sprintf("_http._tcp.svc.%s 60 IN SRV 0 10 80 host-0.%s", z.name, z.name)),
		mustRR(p.t, fmt.Sprintf(`host-0.%s 60 IN TXT "a b" "c"`, z.name)),
	)
	for i := 0; i < n; i++ {
		z.rrs = append(z.rrs, mustRR(p.t, fmt.Sprintf("host-%d.%s 60 IN A 10.0.%d.%d", i, z.name, i/250, i%250+1)))
	}
	p.mu.Lock()
	p.zones[z.name] = z
	p.mu.Unlock()
}

// setRecords replaces a zone's records (but the SOA).
func (p *toyPrimary) setRecords(zone string, rrs []dns.RR) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.zones[dns.Fqdn(zone)].rrs = rrs
}

// bump adds an A record to zone, raises its serial and returns it.
func (p *toyPrimary) bump(zone string) uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	z := p.zones[dns.Fqdn(zone)]
	z.serial++
	rr := mustRR(p.t, fmt.Sprintf("new-%d.%s 60 IN A 192.0.2.%d", z.serial, z.name, z.serial%250+1))
	z.rrs = append(z.rrs, rr)
	if z.added == nil {
		z.added = map[uint32]dns.RR{}
	}
	z.added[z.serial] = rr
	return z.serial
}

// records returns a zone as it would be transferred (SOA first).
func (p *toyPrimary) records(zone string) []dns.RR {
	p.mu.Lock()
	defer p.mu.Unlock()
	z := p.zones[dns.Fqdn(zone)]
	return append([]dns.RR{z.soa()}, z.rrs...)
}

func (p *toyPrimary) stats() (refused int, xfrs []string, soaQs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused, append([]string(nil), p.xfrs...), p.soaQs
}

// notify sends NOTIFY for zone to addr (signed when the primary has a key)
// and returns the response code.
func (p *toyPrimary) notify(zone, addr string) (int, error) {
	p.mu.Lock()
	soa := p.zones[dns.Fqdn(zone)].soa()
	p.mu.Unlock()
	m := new(dns.Msg)
	m.SetNotify(dns.Fqdn(zone))
	m.Answer = []dns.RR{soa}
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	if p.key != nil {
		c.TsigSecret = map[string]string{dns.Fqdn(p.key.Name): p.key.Secret}
		m.SetTsig(dns.Fqdn(p.key.Name), dns.HmacSHA256, 300, time.Now().Unix())
	}
	var r *dns.Msg
	var err error
	for i := 0; i < 3; i++ {
		if r, _, err = c.Exchange(m, addr); err == nil {
			return r.Rcode, nil
		}
	}
	return -1, err
}

// notifyNoWait sends one NOTIFY for zone to addr and does not wait for
// the answer (the target may be paused).
func (p *toyPrimary) notifyNoWait(zone, addr string) {
	p.mu.Lock()
	soa := p.zones[dns.Fqdn(zone)].soa()
	p.mu.Unlock()
	m := new(dns.Msg)
	m.SetNotify(dns.Fqdn(zone))
	m.Answer = []dns.RR{soa}
	b, err := m.Pack()
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		p.t.Fatal(err)
	}
}

func (p *toyPrimary) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	if len(r.Question) != 1 || r.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	tsig := r.IsTsig()
	if p.key != nil {
		if tsig == nil || w.TsigStatus() != nil || !strings.EqualFold(tsig.Hdr.Name, dns.Fqdn(p.key.Name)) {
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			m.Rcode = dns.RcodeRefused
			if tsig != nil {
				m.Rcode = dns.RcodeNotAuth
			}
			w.WriteMsg(m)
			return
		}
	}
	sign := func(m *dns.Msg) {
		if tsig != nil {
			m.SetTsig(tsig.Hdr.Name, tsig.Algorithm, 300, time.Now().Unix())
		}
	}
	p.mu.Lock()
	z := p.zones[strings.ToLower(q.Name)]
	var soa *dns.SOA
	var rrs, ixfr []dns.RR
	if z != nil {
		soa = z.soa()
		rrs = append(rrs, z.rrs...)
		ixfr = z.incremental(r)
	}
	if z != nil && q.Qtype == dns.TypeSOA {
		p.soaQs++
	}
	_, isTCP := w.RemoteAddr().(*net.TCPAddr)
	if z != nil && isTCP && (q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR) {
		p.xfrs = append(p.xfrs, dns.TypeToString[q.Qtype]+" "+z.name)
	}
	p.mu.Unlock()
	if z == nil {
		m.Rcode = dns.RcodeRefused
		sign(m)
		w.WriteMsg(m)
		return
	}
	m.Authoritative = true
	switch q.Qtype {
	case dns.TypeAXFR, dns.TypeIXFR:
		if !isTCP {
			// IXFR over UDP: the single SOA says "use TCP" (RFC 1995 §2).
			m.Answer = []dns.RR{soa}
			sign(m)
			w.WriteMsg(m)
			return
		}
		ch := make(chan *dns.Envelope)
		tr := new(dns.Transfer)
		errc := make(chan error, 1)
		go func() { errc <- tr.Out(w, r, ch) }()
		all := append(append([]dns.RR{soa}, rrs...), soa)
		if q.Qtype == dns.TypeIXFR && ixfr != nil {
			all = ixfr
		}
		for len(all) > 0 {
			n := min(len(all), 100)
			ch <- &dns.Envelope{RR: all[:n]}
			all = all[n:]
		}
		close(ch)
		if err := <-errc; err != nil {
			p.t.Logf("toy primary: transfer out: %v", err)
		}
		w.Close()
		return
	case dns.TypeSOA:
		m.Answer = []dns.RR{soa}
	default:
		m.Ns = []dns.RR{soa}
	}
	sign(m)
	w.WriteMsg(m)
}

// incremental returns the IXFR answer to r when r asks from a serial the
// zone's bump history covers: one difference sequence per bump (RFC 1995
// §4), or the single SOA when the client is current. Otherwise nil.
func (z *toyZone) incremental(r *dns.Msg) []dns.RR {
	if r.Question[0].Qtype != dns.TypeIXFR || len(r.Ns) != 1 {
		return nil
	}
	have, ok := r.Ns[0].(*dns.SOA)
	if !ok {
		return nil
	}
	if have.Serial == z.serial {
		return []dns.RR{z.soa()}
	}
	out := []dns.RR{z.soa()}
	for s := have.Serial + 1; SerialGE(z.serial, s); s++ {
		rr, ok := z.added[s]
		if !ok {
			return nil
		}
		out = append(out, z.soaAt(s-1), z.soaAt(s), rr)
	}
	return append(out, z.soa())
}

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return rr
}

// canonical renders records one per line, sorted, with names lower-cased,
// for comparing zones.
func canonical(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		rr = dns.Copy(rr)
		rr.Header().Name = strings.ToLower(rr.Header().Name)
		out = append(out, rr.String())
	}
	sort.Strings(out)
	return out
}

func diffZones(want, got []dns.RR) error {
	w, g := canonical(want), canonical(got)
	inW := map[string]bool{}
	for _, s := range w {
		inW[s] = true
	}
	inG := map[string]bool{}
	for _, s := range g {
		inG[s] = true
	}
	var msgs []string
	for _, s := range w {
		if !inG[s] {
			msgs = append(msgs, "missing: "+s)
		}
	}
	for _, s := range g {
		if !inW[s] {
			msgs = append(msgs, "extra:   "+s)
		}
	}
	if len(w) != len(g) && len(msgs) == 0 {
		msgs = append(msgs, fmt.Sprintf("%d records want, %d got (duplicates)", len(w), len(g)))
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "\n"))
	}
	return nil
}
