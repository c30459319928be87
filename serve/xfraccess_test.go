package serve

import (
	"encoding/base64"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve/policy"
)

// otherKey is a second configured key, bound to another peer: a peer
// bound to testKey that signs with it must still be refused.
var otherKey = policy.Key{Name: "other-key", Algorithm: "hmac-sha256", Secret: base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))}

// accessRig is a server with a journal entry to send: who may have it
// over TCP and UDP is what the tests below ask. 127.0.0.1 may transfer
// (allow_transfer) with no key; 127.0.0.3 is a peer bound to testKey and
// 127.0.0.4 one bound to otherKey; 127.0.0.2 is nobody.
type accessRig struct {
	addr     string
	old, cur uint32 // the serials before and after the journal's entry
}

func newAccessRig(t *testing.T) *accessRig {
	bound, other := netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")
	a := Access{
		AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Zones:         map[string]ZoneAccess{zoneName: {Peers: []netip.Addr{bound, other}}},
		Keys:          []policy.Key{testKey, otherKey},
		PeerKeys:      map[netip.Addr]string{bound: testKey.Name, other: otherKey.Name},
	}
	s, d, addr := xfrServer(t, 10, a)
	r := &accessRig{addr: addr, old: s.zoneByName(zoneName).serial}
	if _, err := d.Commit(&db.ChangeSet{VMs: []db.VMChange{{UUID: vmB, Records: []db.Record{
		{Zone: zoneName, RR: mustRR(t, "new.inst.o.dc.example.com. 30 IN A 10.9.9.9")},
	}}}}); err != nil {
		t.Fatal(err)
	}
	r.cur = s.zoneByName(zoneName).serial
	if !db.SerialLess(r.old, r.cur) {
		t.Fatalf("the commit did not move the serial: %d -> %d", r.old, r.cur)
	}
	return r
}

// udpIXFR asks for an IXFR from the old serial over UDP from local.
func (r *accessRig) udpIXFR(t *testing.T, local string) *dns.Msg {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(local)}, Timeout: 2 * time.Second}
	nc, err := d.Dial("udp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &dns.Conn{Conn: nc, UDPSize: 4096}
	m := ixfrMsg(r.old)
	m.SetEdns0(4096, false)
	nc.SetDeadline(time.Now().Add(2 * time.Second))
	if err := c.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	resp, err := c.ReadMsg()
	if err != nil {
		t.Fatalf("IXFR over UDP from %s: %v", local, err)
	}
	return resp
}

// Ensure an IXFR over UDP sends the journal's difference only to an
// address that may transfer and is not bound to a key: anyone else gets
// the zone's SOA, which is public, and nothing of the difference. The
// serial asked from is one the journal holds, so a leak would show.
func TestUDPIXFRAccess(t *testing.T) {
	r := newAccessRig(t)
	// The difference: SOA(cur), SOA(old), SOA(cur), the added A, SOA(cur).
	if resp := r.udpIXFR(t, "127.0.0.1"); len(resp.Answer) != 5 {
		t.Fatalf("allowed, unbound client: %d records, want the 5 of the difference:\n%v", len(resp.Answer), resp.Answer)
	}
	for _, c := range []struct{ local, who string }{
		{"127.0.0.2", "an address not allowed to transfer"},
		{"127.0.0.3", "a key-bound peer, unsigned"},
	} {
		resp := r.udpIXFR(t, c.local)
		if len(resp.Answer) != 1 || resp.Answer[0].Header().Rrtype != dns.TypeSOA || resp.Answer[0].(*dns.SOA).Serial != r.cur {
			t.Errorf("%s (%s) got %d records, want the current SOA alone:\n%v", c.local, c.who, len(resp.Answer), resp.Answer)
		}
	}
}

// Ensure a peer bound to a key (peer_keys) is refused when it signs with
// another configured key, over TCP, while the same key works for the
// peer it is bound to.
func TestTransferKeyBinding(t *testing.T) {
	r := newAccessRig(t)
	for _, c := range []struct {
		local string
		key   *policy.Key
		want  bool
		who   string
	}{
		{"127.0.0.3", &testKey, true, "bound to xfr-key, signed with it"},
		{"127.0.0.4", &otherKey, true, "bound to other-key, signed with it"},
		{"127.0.0.3", &otherKey, false, "bound to xfr-key, signed with other-key"},
		{"127.0.0.4", &testKey, false, "bound to other-key, signed with xfr-key"},
		{"127.0.0.3", nil, false, "bound to xfr-key, unsigned"},
		{"127.0.0.1", &otherKey, true, "allow_transfer, unbound, signed with any configured key"},
	} {
		for _, m := range []*dns.Msg{axfrMsg(), ixfrMsg(r.old)} {
			kind := dns.TypeToString[m.Question[0].Qtype]
			rrs, err := transfer(t, r.addr, c.local, m, c.key)
			switch got := err == nil && len(rrs) > 0; {
			case c.want && !got:
				t.Errorf("%s from %s (%s): %d records, %v; want the transfer", kind, c.local, c.who, len(rrs), err)
			case !c.want && (got || len(rrs) > 0):
				t.Errorf("%s from %s (%s): %d records; want a refusal and none", kind, c.local, c.who, len(rrs))
			}
		}
	}
}
