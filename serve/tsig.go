package serve

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/serve/policy"
)

// tsigFudge is the permitted clock skew, as every implementation uses.
const tsigFudge = 300

// tsigKey is a key ready for signing.
type tsigKey struct {
	name    []byte // wire, lower case
	nameStr string // fully qualified, lower case
	alg     []byte // algorithm name, wire
	algStr  string // fully qualified, as miekg/dns names it
	secret  []byte
	b64     string
	newHash func() hash.Hash
}

func newTSIGKey(k policy.Key) (*tsigKey, error) {
	alg := strings.ToLower(strings.TrimSuffix(k.Algorithm, "."))
	if alg == "" {
		alg = "hmac-sha256"
	}
	var h func() hash.Hash
	switch alg {
	case "hmac-sha1":
		h = sha1.New
	case "hmac-sha224":
		h = sha256.New224
	case "hmac-sha256":
		h = sha256.New
	case "hmac-sha384":
		h = sha512.New384
	case "hmac-sha512":
		h = sha512.New
	default:
		return nil, fmt.Errorf("tsig key %s: algorithm %q not supported (want hmac-sha256, hmac-sha1, hmac-sha224, hmac-sha384 or hmac-sha512)", k.Name, k.Algorithm)
	}
	secret, err := base64.StdEncoding.DecodeString(k.Secret)
	if err != nil || len(secret) == 0 {
		return nil, fmt.Errorf("tsig key %s: secret is not base64", k.Name)
	}
	name := strings.ToLower(dns.Fqdn(k.Name))
	nw := make([]byte, 256)
	n, err := dns.PackDomainName(name, nw, 0, nil, false)
	if err != nil {
		return nil, fmt.Errorf("tsig key %s: %v", k.Name, err)
	}
	aw := make([]byte, 256)
	an, _ := dns.PackDomainName(alg+".", aw, 0, nil, false)
	return &tsigKey{name: nw[:n], nameStr: name, alg: aw[:an], algStr: alg + ".", secret: secret, b64: k.Secret, newHash: h}, nil
}

// sign appends a TSIG record to msg (a complete message whose header does
// not count it) and returns the signed message and its MAC. prior is the
// request's MAC for a response's first message, or the previous message's
// MAC for later messages of a transfer, which are signed over the timers
// only (RFC 8945 §4.3.1, §5.3.1).
func (k *tsigKey) sign(msg, prior []byte, timersOnly bool, now time.Time) ([]byte, []byte) {
	h := hmac.New(k.newHash, k.secret)
	if len(prior) > 0 {
		h.Write(binary.BigEndian.AppendUint16(nil, uint16(len(prior))))
		h.Write(prior)
	}
	h.Write(msg)
	var tv []byte
	signed := uint64(now.Unix())
	timers := []byte{byte(signed >> 40), byte(signed >> 32), byte(signed >> 24), byte(signed >> 16), byte(signed >> 8), byte(signed), byte(tsigFudge >> 8), byte(tsigFudge & 0xff)}
	if timersOnly {
		tv = timers
	} else {
		tv = append(tv, k.name...)
		tv = append(tv, 0, byte(dns.ClassANY), 0, 0, 0, 0)
		tv = append(tv, k.alg...)
		tv = append(tv, timers...)
		tv = append(tv, 0, 0, 0, 0) // error, other len
	}
	h.Write(tv)
	mac := h.Sum(nil)

	out := append(msg, k.name...)
	out = append(out, byte(dns.TypeTSIG>>8), byte(dns.TypeTSIG), 0, byte(dns.ClassANY), 0, 0, 0, 0)
	rdlen := len(k.alg) + 6 + 2 + 2 + len(mac) + 2 + 2 + 2
	out = binary.BigEndian.AppendUint16(out, uint16(rdlen))
	out = append(out, k.alg...)
	out = append(out, timers...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(mac)))
	out = append(out, mac...)
	out = append(out, msg[0], msg[1]) // original ID
	out = append(out, 0, 0, 0, 0)     // error, other len
	binary.BigEndian.PutUint16(out[10:], binary.BigEndian.Uint16(out[10:])+1)
	return out, mac
}

// requestTSIG is what a signed request carried.
type requestTSIG struct {
	key   string // key name, fully qualified, lower case
	mac   []byte
	err   error // nil: verified
	rcode int   // TSIG error to report: dns.RcodeBadKey, RcodeBadSig, RcodeBadTime
}

var errUnknownKey = errors.New("unknown TSIG key")

// verifyTSIG checks the TSIG record of a raw request against keys.
func verifyTSIG(msg []byte, keys map[string]*tsigKey) requestTSIG {
	var m dns.Msg
	if err := m.Unpack(msg); err != nil {
		return requestTSIG{err: err, rcode: dns.RcodeFormatError}
	}
	ts := m.IsTsig()
	if ts == nil {
		return requestTSIG{err: errors.New("not signed")}
	}
	name := strings.ToLower(ts.Hdr.Name)
	r := requestTSIG{key: name}
	r.mac, _ = hex.DecodeString(ts.MAC)
	k := keys[name]
	if k == nil || !strings.EqualFold(ts.Algorithm, k.algStr) {
		r.err, r.rcode = errUnknownKey, dns.RcodeBadKey
		return r
	}
	// TsigVerify rewrites the message's header in place (it strips the
	// TSIG record), so it gets a copy.
	if err := dns.TsigVerify(bytes.Clone(msg), k.b64, "", false); err != nil {
		r.err = err
		r.rcode = dns.RcodeBadSig
		if errors.Is(err, dns.ErrTime) {
			r.rcode = dns.RcodeBadTime
		}
	}
	return r
}
