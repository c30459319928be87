package sdcsim

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	ber "github.com/go-asn1-ber/asn1-ber"
)

// A minimal LDAPv3 server (RFC 4511) for UFDS: bind, search, unbind and
// abandon; writes are refused. It is written on go-asn1-ber rather than on
// github.com/jimlambrt/gldap because gldap's Server.Run owns its listener
// and does not report the port it bound (so an ephemeral port cannot be
// learned without a race), and its Stop is final; the simulator needs to
// know its ports, stop and resume accepting on the same ports, and reset
// live connections to inject faults.

// LDAP protocol operation tags (application class).
const (
	appBindRequest       = 0
	appBindResponse      = 1
	appUnbindRequest     = 2
	appSearchRequest     = 3
	appSearchResultEntry = 4
	appSearchResultDone  = 5
	appModifyRequest     = 6
	appAddRequest        = 8
	appDelRequest        = 10
	appModifyDNRequest   = 12
	appCompareRequest    = 14
	appAbandonRequest    = 16
	appExtendedRequest   = 23
	appExtendedResponse  = 24
)

// LDAP result codes used here.
const (
	resultSuccess                  = 0
	resultProtocolError            = 2
	resultAuthMethodNotSupported   = 7
	resultNoSuchObject             = 32
	resultInvalidCredentials       = 49
	resultInsufficientAccessRights = 50
	resultUnwillingToPerform       = 53
)

type ldapServer struct {
	s   *Sim
	tls *tls.Config

	mu        sync.Mutex
	plainAddr string // fixed at the first listen, reused after SetLDAPDown(false)
	tlsAddr   string
	listeners []net.Listener
	conns     map[net.Conn]bool
	down      bool
	wg        sync.WaitGroup
}

func newLDAPServer(s *Sim, tlsConfig *tls.Config) (*ldapServer, error) {
	l := &ldapServer{s: s, tls: tlsConfig, plainAddr: "127.0.0.1:0", tlsAddr: "127.0.0.1:0", conns: map[net.Conn]bool{}}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.listenLocked(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *ldapServer) listenLocked() error {
	plain, err := net.Listen("tcp", l.plainAddr)
	if err != nil {
		return fmt.Errorf("sdcsim: ldap: listen %s: %w", l.plainAddr, err)
	}
	secure, err := net.Listen("tcp", l.tlsAddr)
	if err != nil {
		_ = plain.Close()
		return fmt.Errorf("sdcsim: ldaps: listen %s: %w", l.tlsAddr, err)
	}
	l.plainAddr, l.tlsAddr = plain.Addr().String(), secure.Addr().String()
	l.listeners = []net.Listener{plain, tls.NewListener(secure, l.tls)}
	for _, ln := range l.listeners {
		l.wg.Add(1)
		go l.accept(ln)
	}
	return nil
}

func (l *ldapServer) accept(ln net.Listener) {
	defer l.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.down {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		l.conns[c] = true
		l.wg.Add(1)
		l.mu.Unlock()
		go func() {
			defer l.wg.Done()
			l.serve(c)
			l.mu.Lock()
			delete(l.conns, c)
			l.mu.Unlock()
			_ = c.Close()
		}()
	}
}

// setDown stops accepting (closing the listeners, so connections are
// refused) and resets every connection; up listens again on the same ports.
func (l *ldapServer) setDown(down bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if down == l.down {
		return nil
	}
	l.down = down
	if !down {
		return l.listenLocked()
	}
	for _, ln := range l.listeners {
		_ = ln.Close()
	}
	l.listeners = nil
	l.resetConnsLocked()
	return nil
}

func (l *ldapServer) resetConnsLocked() int {
	n := 0
	for c := range l.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		} else if tc, ok := c.(*tls.Conn); ok {
			if raw, ok := tc.NetConn().(*net.TCPConn); ok {
				_ = raw.SetLinger(0)
			}
		}
		_ = c.Close()
		delete(l.conns, c)
		n++
	}
	return n
}

func (l *ldapServer) close() {
	l.mu.Lock()
	l.down = true
	for _, ln := range l.listeners {
		_ = ln.Close()
	}
	l.listeners = nil
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// ldapConn is one client connection; requests are served in order.
type ldapConn struct {
	l     *ldapServer
	c     net.Conn
	w     *bufio.Writer
	bound bool // bound as the root DN
}

func (l *ldapServer) serve(c net.Conn) {
	lc := &ldapConn{l: l, c: c, w: bufio.NewWriter(c)}
	r := bufio.NewReader(c)
	for {
		p, err := ber.ReadPacket(r)
		if err != nil {
			return
		}
		if len(p.Children) < 2 {
			return
		}
		id, ok := p.Children[0].Value.(int64)
		op := p.Children[1]
		if !ok || op.ClassType != ber.ClassApplication {
			return
		}
		var done bool
		switch op.Tag {
		case appBindRequest:
			// UFDS (sdc-ufds lib/ufds.js): a simple bind as the root DN
			// from its config; anything else is invalidCredentials.
			err = lc.bind(id, op)
		case appUnbindRequest:
			return
		case appSearchRequest:
			// UFDS's searches (lib/db/search.js, lib/ufds.js): accounts
			// under "ou=users, o=smartdc" with ", " DNs, the changelog in
			// changenumber order with sizeLimit, cn=latestchangenumber
			// answered for any scope (ufds.go searchDirectory).
			err = lc.search(id, op)
		case appAbandonRequest:
			// Requests are answered in order; there is nothing to abandon.
		case appModifyRequest, appAddRequest, appDelRequest, appModifyDNRequest, appCompareRequest:
			err = lc.respond(id, op.Tag+1, resultUnwillingToPerform, "", "sdcsim: UFDS simulator is read-only over LDAP; use the Go API")
		case appExtendedRequest:
			err = lc.respond(id, appExtendedResponse, resultProtocolError, "", "sdcsim: extended operations are not supported")
		default:
			done = true
		}
		if err != nil || done {
			return
		}
		if err := lc.w.Flush(); err != nil {
			return
		}
	}
}

func envelope(id int64, op *ber.Packet) *ber.Packet {
	msg := ber.Encode(ber.ClassUniversal, ber.TypeConstructed, ber.TagSequence, nil, "LDAP Message")
	msg.AppendChild(ber.NewInteger(ber.ClassUniversal, ber.TypePrimitive, ber.TagInteger, id, "MessageID"))
	msg.AppendChild(op)
	return msg
}

// respond writes an LDAPResult-shaped response.
func (lc *ldapConn) respond(id int64, tag ber.Tag, code int, matched, diag string) error {
	op := ber.Encode(ber.ClassApplication, ber.TypeConstructed, tag, nil, "Response")
	op.AppendChild(ber.NewInteger(ber.ClassUniversal, ber.TypePrimitive, ber.TagEnumerated, int64(code), "resultCode"))
	op.AppendChild(ber.NewString(ber.ClassUniversal, ber.TypePrimitive, ber.TagOctetString, matched, "matchedDN"))
	op.AppendChild(ber.NewString(ber.ClassUniversal, ber.TypePrimitive, ber.TagOctetString, diag, "diagnosticMessage"))
	_, err := lc.w.Write(envelope(id, op).Bytes())
	return err
}

func (lc *ldapConn) bind(id int64, op *ber.Packet) error {
	lc.bound = false
	if len(op.Children) < 3 {
		return lc.respond(id, appBindResponse, resultProtocolError, "", "malformed bind request")
	}
	s := lc.l.s
	if f, hit := s.faults.take(RouteLDAPBind, false); hit {
		if !s.delay(context.Background(), f) {
			return errClosedConn
		}
		if f.LDAPResult != 0 {
			return lc.respond(id, appBindResponse, f.LDAPResult, "", "injected fault")
		}
	}
	name := op.Children[1].Data.String()
	auth := op.Children[2]
	if auth.ClassType != ber.ClassContext || auth.Tag != 0 {
		return lc.respond(id, appBindResponse, resultAuthMethodNotSupported, "", "only simple bind is supported")
	}
	password := auth.Data.String()
	switch {
	case name == "" && password == "":
		return lc.respond(id, appBindResponse, resultSuccess, "", "")
	case normDN(name) == normDN(s.opts.RootDN) && password == s.opts.RootPassword:
		lc.bound = true
		return lc.respond(id, appBindResponse, resultSuccess, "", "")
	default:
		return lc.respond(id, appBindResponse, resultInvalidCredentials, "", "Invalid Credentials")
	}
}

var errClosedConn = errors.New("sdcsim: ldap connection abandoned")

func (lc *ldapConn) search(id int64, op *ber.Packet) error {
	if len(op.Children) < 8 {
		return lc.respond(id, appSearchResultDone, resultProtocolError, "", "malformed search request")
	}
	s := lc.l.s
	if f, hit := s.faults.take(RouteLDAPSearch, false); hit {
		if !s.delay(context.Background(), f) {
			return errClosedConn
		}
		if f.LDAPResult != 0 {
			return lc.respond(id, appSearchResultDone, f.LDAPResult, "", "injected fault")
		}
	}
	if !lc.bound {
		return lc.respond(id, appSearchResultDone, resultInsufficientAccessRights, "", "bind as the root DN first")
	}
	base := op.Children[0].Data.String()
	scope, _ := op.Children[1].Value.(int64)
	sizeLimit, _ := op.Children[3].Value.(int64)
	typesOnly, _ := op.Children[5].Value.(bool)
	filter := op.Children[6]
	var want []string
	for _, a := range op.Children[7].Children {
		want = append(want, strings.ToLower(a.Data.String()))
	}

	entries, code, err := s.searchDirectory(base, scope, filter)
	if err != nil {
		return lc.respond(id, appSearchResultDone, code, "", err.Error())
	}
	if code != resultSuccess {
		return lc.respond(id, appSearchResultDone, code, "", "No such object: "+base)
	}
	// UFDS turns sizeLimit into moray's limit: it returns that many entries
	// and reports success, not sizeLimitExceeded.
	if sizeLimit > 0 && int64(len(entries)) > sizeLimit {
		entries = entries[:sizeLimit]
	}
	for i := range entries {
		if err := lc.writeEntry(id, &entries[i], want, typesOnly); err != nil {
			return err
		}
	}
	return lc.respond(id, appSearchResultDone, resultSuccess, "", "")
}

// writeEntry sends one SearchResultEntry with the requested attributes:
// all for an empty list or "*", none for "1.1".
func (lc *ldapConn) writeEntry(id int64, e *ldapEntry, want []string, typesOnly bool) error {
	all := len(want) == 0 || slices.Contains(want, "*")
	op := ber.Encode(ber.ClassApplication, ber.TypeConstructed, appSearchResultEntry, nil, "SearchResultEntry")
	op.AppendChild(ber.NewString(ber.ClassUniversal, ber.TypePrimitive, ber.TagOctetString, e.dn, "objectName"))
	attrs := ber.Encode(ber.ClassUniversal, ber.TypeConstructed, ber.TagSequence, nil, "attributes")
	for _, a := range e.attrs {
		if !all && !slices.Contains(want, strings.ToLower(a.name)) {
			continue
		}
		pa := ber.Encode(ber.ClassUniversal, ber.TypeConstructed, ber.TagSequence, nil, "PartialAttribute")
		pa.AppendChild(ber.NewString(ber.ClassUniversal, ber.TypePrimitive, ber.TagOctetString, a.name, "type"))
		vals := ber.Encode(ber.ClassUniversal, ber.TypeConstructed, ber.TagSet, nil, "vals")
		if !typesOnly {
			for _, v := range a.vals {
				vals.AppendChild(ber.NewString(ber.ClassUniversal, ber.TypePrimitive, ber.TagOctetString, v, "value"))
			}
		}
		pa.AppendChild(vals)
		attrs.AppendChild(pa)
	}
	op.AppendChild(attrs)
	_, err := lc.w.Write(envelope(id, op).Bytes())
	return err
}

// ---- fault API ----

// SetLDAPDown takes UFDS down (true: stop accepting, so connections are
// refused, and reset every open connection) or brings it back up on the
// same ports (false).
func (s *Sim) SetLDAPDown(down bool) error { return s.ldap.setDown(down) }

// ResetLDAPConns resets every open LDAP and LDAPS connection (TCP RST),
// leaving the listeners up, and returns how many it reset.
func (s *Sim) ResetLDAPConns() int {
	s.ldap.mu.Lock()
	defer s.ldap.mu.Unlock()
	return s.ldap.resetConnsLocked()
}
