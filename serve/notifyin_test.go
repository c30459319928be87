package serve

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/serve/policy"
)

// An incoming NOTIFY goes to the Notified hook: welcome ones get NOERROR
// with AA and the question echoed (signed back when signed), the rest
// REFUSED, a bad signature a TSIG error.
func TestIncomingNotify(t *testing.T) {
	type call struct {
		zone, key string
		from      netip.Addr
	}
	calls := make(chan call, 4)
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Access: Access{Keys: []policy.Key{{Name: "xfr-key", Secret: "c2VjcmV0"}}},
		Notified: func(zone string, from netip.Addr, key string) bool {
			calls <- call{zone, key, from}
			return zone == "followed.example."
		}}, testStore(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	udp, _ := s.Addrs()
	notify := func(zone string, sign string) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetNotify(zone)
		c := &dns.Client{Timeout: 2 * time.Second}
		if sign != "" {
			m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
			c.TsigSecret = map[string]string{"xfr-key.": sign}
		}
		r, _, err := c.Exchange(m, udp[0])
		return r, err
	}
	r, err := notify("followed.example.", "")
	if err != nil || r.Rcode != dns.RcodeSuccess || !r.Authoritative || r.Opcode != dns.OpcodeNotify || r.Question[0].Name != "followed.example." {
		t.Fatalf("welcome NOTIFY: %v %v", r, err)
	}
	if c := <-calls; c.zone != "followed.example." || c.key != "" || c.from != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("hook got %+v", c)
	}
	if r, err := notify("other.example.", ""); err != nil || r.Rcode != dns.RcodeRefused {
		t.Fatalf("unwelcome NOTIFY: %v %v", r, err)
	}
	<-calls
	r, err = notify("followed.example.", "c2VjcmV0") // the client verifies the signed answer
	if err != nil || r.Rcode != dns.RcodeSuccess || r.IsTsig() == nil {
		t.Fatalf("signed NOTIFY: %v %v", r, err)
	}
	if c := <-calls; c.key != "xfr-key." {
		t.Errorf("hook got key %q", c.key)
	}
	if r, _ := notify("followed.example.", "d3Jvbmc="); r != nil && r.Rcode == dns.RcodeSuccess {
		t.Fatalf("NOTIFY with a wrong key accepted: %v", r)
	}
	select {
	case c := <-calls:
		t.Errorf("hook called for a badly signed NOTIFY: %+v", c)
	default:
	}
}
