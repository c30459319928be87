package serve

import (
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// Notified is told of an incoming NOTIFY for zone from a client (key: the
// TSIG key it was signed with and verified, else ""). It reports whether
// the NOTIFY is welcome: cns follows that zone from that sender (an
// aggregator's source, RFD 172). It must not block.
type Notified func(zone string, from netip.Addr, key string) bool

// respondNotify answers a NOTIFY (RFC 1996 §4.7: the question echoed, AA,
// NOERROR) when the Notified hook welcomes it, else REFUSED: a cns that
// follows nothing takes NOTIFY from nobody.
func (s *Server) respondNotify(q *query, b []byte) []byte {
	hook := s.cfg.Notified
	var m dns.Msg
	if hook == nil || m.Unpack(q.msg) != nil || len(m.Question) != 1 {
		return s.errorReply(q, b, dns.RcodeRefused)
	}
	key := ""
	var mac []byte
	if m.IsTsig() != nil { // parse stops at the question for NOTIFY
		v := verifyTSIG(q.msg, s.access.Load().keys)
		if v.err != nil {
			s.log.Warn("bad TSIG on a NOTIFY", "client", q.src.String(), "key", v.key, "err", v.err)
			return s.tsigErrorReply(q, v, b)
		}
		key, mac = v.key, v.mac
	}
	if !hook(m.Question[0].Name, q.src.Addr(), key) {
		s.log.Debug("NOTIFY refused: not a followed zone and primary", "zone", m.Question[0].Name, "client", q.src.String())
		return s.errorReply(q, b, dns.RcodeRefused)
	}
	r := new(dns.Msg)
	r.SetReply(&m)
	r.Authoritative = true
	out, err := r.Pack()
	if err != nil {
		return s.errorReply(q, b, dns.RcodeServerFailure)
	}
	if key != "" {
		out, _ = s.access.Load().keys[key].sign(out, mac, false, time.Now())
	}
	return out
}
