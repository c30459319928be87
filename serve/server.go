// Package serve answers DNS for the zones in the store: queries over UDP
// and TCP from an in-memory snapshot of precomputed wire records, swapped
// atomically after each commit, and zone transfers to secondaries.
//
// The query path does not use miekg/dns: it parses the request in place,
// finds the zone and the name in hash tables and copies stored wire
// records behind the question, patching only owner-name pointers. miekg/dns
// builds and parses the rarer messages (transfers, NOTIFY, TSIG).
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/serve/policy"
)

// Config tunes a Server. The zero value serves nothing until Listen is
// set; every other field has a default.
type Config struct {
	// Listen holds host:port addresses; each gets a UDP and a TCP listener.
	Listen []string
	// UDPSize is the largest UDP answer to an EDNS query, and the payload
	// size cns advertises (default 1232, the DNS flag day 2020 value).
	UDPSize uint16
	// Version answers version.bind/version.server in class CHAOS; empty
	// hides it (REFUSED).
	Version string
	// Identity answers id.server/hostname.bind; empty hides it.
	Identity string
	// MetaVersion answers version._cns_meta TXT, the reference's meta
	// name ("0.1.0, node v6.17.1" there); empty hides it (REFUSED).
	MetaVersion string
	// TCPIdleTimeout closes a TCP connection that sent nothing for this
	// long (default 10 s, RFC 7766 §6.2.3).
	TCPIdleTimeout time.Duration
	// MaxTCPConns bounds concurrent TCP connections (default 1024), and
	// MaxTCPConnsPerIP those of one client address (default 64).
	MaxTCPConns      int
	MaxTCPConnsPerIP int
	// UDPSockets is the number of UDP sockets per address, each read by
	// its own goroutine (default: one per CPU cns may use, at most
	// GOMAXPROCS, where SO_REUSEPORT exists).
	UDPSockets int
	// Logger receives operational logs (default slog.Default()).
	Logger *slog.Logger
	// Access is the initial transfer and NOTIFY policy (see SetAccess).
	Access Access
	// RRL limits UDP answers per client network (off when its rate is 0).
	RRL policy.RRL
	// Forwarding, when set, resolves names outside cns's zones for chosen
	// clients through upstream resolvers, with a cache.
	Forwarding policy.Forwarding
	// Propagation tunes how serials are followed to the secondaries.
	Propagation policy.Propagation
	// Signers are peers known to serve cns's zones under serials of their
	// own (DNSSEC signers); others are detected (see signers.go).
	Signers []netip.Addr
	// Notified, when set, takes incoming NOTIFYs (see Notified).
	Notified Notified
	// ClientAnswers answers owner-less names in the asking instance's
	// scope (off by default).
	ClientAnswers policy.ClientAnswers
}

// Server serves the zones of one store.
type Server struct {
	cfg      Config
	store    *db.DB
	log      *slog.Logger
	udpSize  uint16
	version  string
	identity string
	// metaVersion answers version._cns_meta (answer.go).
	metaVersion string

	snap   atomic.Pointer[snapshot]
	mu     sync.Mutex    // serialises snapshot writers
	cold   coldTransfers // transfers sent from the store; the warm-up waits for them
	access atomic.Pointer[access]
	rrl    atomic.Pointer[rrlTable]
	// rrlLimitedBefore keeps the count of replaced RRL tables.
	rrlLimitedBefore atomic.Uint64
	peers            *peerTracker
	notify           *notifier
	fwd              *forwarder // nil: forwarding off
	prop             *propagation
	serials          *serialCheck
	// now is the clock of peer state and NOTIFY timing (tests move it).
	now func() time.Time

	lmu       sync.Mutex
	udp       []udpConn
	tcp       []net.Listener
	conns     map[net.Conn]struct{}
	perIP     map[netip.Addr]int
	wg        sync.WaitGroup
	closed    atomic.Bool
	tcpActive atomic.Int64

	// Counters: one set per UDP socket, one shared by TCP connections.
	udpCounters []*counters
	tcpCounters counters
	listening   atomic.Bool
	started     time.Time

	xfrAXFR, xfrIXFR, xfrUpToDate, xfrRefused atomic.Uint64
}

// New returns a Server for the zones in store. It serves them at once,
// looking names up in the store until Warm has built the in-memory
// tables, and follows every later commit.
func New(cfg Config, store *db.DB) (*Server, error) {
	s := &Server{cfg: cfg, store: store, log: cfg.Logger, udpSize: cfg.UDPSize, version: cfg.Version, identity: cfg.Identity, metaVersion: cfg.MetaVersion, conns: map[net.Conn]struct{}{}, perIP: map[netip.Addr]int{},
		now: time.Now}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.udpSize == 0 {
		s.udpSize = 1232
	}
	if s.udpSize < minUDPSize {
		s.udpSize = minUDPSize
	}
	if s.cfg.TCPIdleTimeout == 0 {
		s.cfg.TCPIdleTimeout = 10 * time.Second
	}
	if s.cfg.MaxTCPConns == 0 {
		s.cfg.MaxTCPConns = 1024
	}
	if s.cfg.MaxTCPConnsPerIP == 0 {
		s.cfg.MaxTCPConnsPerIP = 64
	}
	if err := s.SetAccess(cfg.Access); err != nil {
		return nil, err
	}
	s.SetRRL(cfg.RRL)
	s.fwd = newForwarder(cfg.Forwarding, func(msg string, args ...any) { s.log.Warn(msg, args...) })
	s.peers = newPeerTracker(s, store)
	n, err := newNotifier(s)
	if err != nil {
		return nil, fmt.Errorf("NOTIFY socket: %w", err)
	}
	s.notify = n
	s.prop = newPropagation(s, cfg.Propagation)
	zones, err := store.Zones()
	if err != nil {
		return nil, err
	}
	served := map[string]*zone{}
	for _, zi := range zones {
		wire, err := db.ZoneWire(zi.Name)
		if err != nil {
			return nil, err
		}
		z, err := newZone(zi.Name, wire, zi.Serial, zi.Apex, store)
		if err != nil {
			return nil, err
		}
		served[string(wire)] = z // cold until Warm
	}
	var clients *clientIndex
	if cfg.ClientAnswers.Enabled() {
		if clients, err = newClientIndex(store); err != nil {
			return nil, fmt.Errorf("client answers: %w", err)
		}
	}
	s.snap.Store(newSnapshot(served, clients))
	s.serials = newSerialCheck(s, zones)
	store.OnCommit(s.apply)
	return s, nil
}

// apply installs the snapshot that follows a commit.
func (s *Server) apply(c *db.Committed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := s.snap.Load().applyCommit(c, s.store)
	if err != nil {
		// The store holds the commit; serving the previous snapshot is the
		// safe choice until a restart rebuilds from the store.
		s.log.Error("cannot serve commit", "err", err)
		return
	}
	s.snap.Store(next)
	s.serials.commit(c)
	s.notify.commit(c)
	s.prop.commit(c, time.Now())
}

// SetAccess replaces the transfer and NOTIFY policy; it takes effect for
// the next request.
func (s *Server) SetAccess(a Access) error {
	c, err := compileAccess(&a)
	if err != nil {
		return err
	}
	s.access.Store(c)
	return nil
}

// Run runs the background work (NOTIFY, peer probes and bookkeeping) until
// ctx ends.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.notify.run(ctx) })
	wg.Go(func() { s.peers.run(ctx) })
	wg.Go(func() { s.prop.run(ctx) })
	wg.Go(func() { s.serials.run(ctx) })
	wg.Go(func() { s.rewarmAfterBacklog(ctx) })
	if s.fwd != nil {
		wg.Go(func() { s.fwd.run(ctx) })
	}
	wg.Wait()
}

// zoneByName returns the served zone called name, or nil.
func (s *Server) zoneByName(name string) *zone {
	w, err := db.ZoneWire(name)
	if err != nil {
		return nil
	}
	return s.snap.Load().zones[string(w)]
}

// warmGCPercent is the collector's GOGC while a table is built. At 100k
// VMs (bench/restart-axfr.sh, capped at 40 %), 10 gave a peak of 134 MiB
// and 50 one of 154 MiB for a steady 111 MiB, but 10 cost a third more
// CPU: each cycle marked the rest of the heap (the updater's maps, full of
// pointers). cns serve now reads the updater's state after the warm-up,
// so the collector's share of a warm-up fell from ~30 % to ~1 % (1M VMs);
// the peak at 100k is 121 MiB for a steady 107 with 25.
const warmGCPercent = 25

// Warm builds the in-memory table of every zone still served from the
// store. Commits wait while a zone is being built.
func (s *Server) Warm() error {
	// The tables are built in the order the store holds the names,
	// straight from the scan (tablebuild.go): the only garbage is the
	// builder's log blocks, so the collector may run often while the heap
	// grows to the tables' size (cheap: a table is a few pointers per
	// shard) and the peak stays near the tables instead of twice them.
	defer debug.SetGCPercent(debug.SetGCPercent(warmGCPercent))
	return s.warmCold()
}

// warmCold builds the table of every zone served from the store.
func (s *Server) warmCold() error {
	for _, z := range s.snap.Load().zones {
		if err := s.warmZone(z.wire); err != nil {
			return err
		}
	}
	// The tables hold what is served now: the garbage of building them and
	// the file pages read for them need not stay resident.
	debug.FreeOSMemory()
	if err := s.store.ReleaseMemory(); err != nil {
		s.log.Debug("release db pages", "err", err)
	}
	return nil
}

// rewarmAfterBacklog builds the tables of the zones a backlog's chunks
// left cold (applyCommit), once the backlog is in (db.Backlog). The
// collector keeps its pace: unlike at start, the updater's maps are live
// and every cycle would mark them.
func (s *Server) rewarmAfterBacklog(ctx context.Context) {
	end := s.store.Backlog().NextEnd()
	for {
		select {
		case <-ctx.Done():
			return
		case <-end:
		}
		end = s.store.Backlog().NextEnd() // one that ends while this one is warmed comes next
		start := time.Now()
		if err := s.warmCold(); err != nil {
			s.log.Error("zones stay served from the db after a backlog", "err", err)
			continue
		}
		s.log.Info("zones loaded into memory after a backlog", "took", time.Since(start).String())
	}
}

func (s *Server) warmZone(wire []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.snap.Load()
	z := cur.zones[string(wire)]
	if z == nil || z.names != nil {
		return nil
	}
	size := 0
	if zi, ok, err := s.store.Zone(z.name); err == nil && ok {
		size = zi.Names
	}
	t, err := s.scanTable(z, size, s.cold.wait)
	if err != nil {
		return fmt.Errorf("warm zone %s: %w", z.name, err)
	}
	nz := *z
	nz.setNames(t)
	zones := maps.Clone(cur.zones)
	zones[string(wire)] = &nz
	s.snap.Store(newSnapshot(zones, cur.clients))
	return nil
}

// warmChunk is about how many bytes of names and records the warm-up reads
// in one read transaction (a variable for the tests): a transfer that
// arrives waits at most one chunk (~10 ms of CPU) for the warm-up to make
// way.
var warmChunk = 1 << 20

// scanTable builds z's table from the store (size names expected), a
// chunk per read transaction, calling between before each chunk (the
// warm-up: s.cold.wait, so that the transfers sent from the store go
// first). The chunks must all be of one serial: when a commit lands
// between two, the zone is read again in one transaction.
func (s *Server) scanTable(z *zone, size int, between func()) (*table, error) {
	b := newTableBuilder(z.wire, size)
	add := func(owner []byte, rrs db.RRs) error { return b.add(owner, rrs) }
	var after []byte
	var first uint32
	for i := 0; ; i++ {
		between()
		next, serial, err := s.store.ScanZoneChunk(z.name, after, warmChunk, add)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			first = serial
		}
		if serial != first {
			break
		}
		if next == nil {
			return b.finish(), nil
		}
		after = next
	}
	b = newTableBuilder(z.wire, size)
	if err := s.store.ScanZone(z.name, add); err != nil {
		return nil, err
	}
	return b.finish(), nil
}

// ZoneSerial returns the serial served for zone, and whether it is served.
func (s *Server) ZoneSerial(zone string) (uint32, bool) {
	w, err := db.ZoneWire(zone)
	if err != nil {
		return 0, false
	}
	z := s.snap.Load().zones[string(w)]
	if z == nil {
		return 0, false
	}
	return z.serial, true
}

// Warmed reports whether every zone is served from memory.
func (s *Server) Warmed() bool {
	for _, z := range s.snap.Load().zones {
		if z.names == nil {
			return false
		}
	}
	return true
}

// handle answers one request. It returns nil when the request gets no
// answer at all. b is a buffer the answer may be built in.
func (s *Server) handle(q *query, msg, b []byte, limit int) []byte {
	return s.respond(q, q.parse(msg), b, limit)
}

// respond answers a parsed request.
func (s *Server) respond(q *query, res parseResult, b []byte, limit int) []byte {
	switch res {
	case parseDrop:
		return nil
	case parseFormErr:
		return s.errorReply(q, b, dns.RcodeFormatError)
	case parseNotImp:
		if q.opcode == dns.OpcodeNotify && !q.clientOnly() {
			return s.respondNotify(q, b)
		}
		if q.opcode == dns.OpcodeNotify {
			return s.errorReply(q, b, dns.RcodeRefused) // client_answers' listeners take no NOTIFY
		}
		return s.errorReply(q, b, dns.RcodeNotImplemented)
	case parseBadVers:
		return s.errorReply(q, b, rcodeBadVer)
	}
	if q.signed {
		return s.respondSigned(q, b, limit)
	}
	return s.respondQuery(q, b, limit)
}

// respondSigned answers a TSIG-signed query (a secondary's SOA check, an
// IXFR over UDP) and signs the answer with the same key.
func (s *Server) respondSigned(q *query, b []byte, limit int) []byte {
	v := verifyTSIG(q.msg, s.access.Load().keys)
	if v.err != nil {
		s.log.Warn("bad TSIG on a query", "client", q.src.String(), "key", v.key, "err", v.err)
		return s.tsigErrorReply(q, v, b)
	}
	resp := s.respondQuery(q, b, limit-tsigRoom)
	signed, _ := s.access.Load().keys[v.key].sign(resp, v.mac, false, time.Now())
	return signed
}

// respondQuery answers a QUERY.
func (s *Server) respondQuery(q *query, b []byte, limit int) []byte {
	switch q.qtype {
	case dns.TypeAXFR, dns.TypeIXFR:
		if q.clientOnly() {
			return s.errorReply(q, b, dns.RcodeRefused) // client-scoped names are never transferred
		}
		if !q.tcp {
			return s.udpTransfer(q, b, limit)
		}
		return s.errorReply(q, b, dns.RcodeRefused) // TCP transfers are served by serveTransfer
	}
	if !q.tcp {
		limit = udpLimit(q, s.udpSize)
	}
	return s.answer(s.snap.Load(), q, b, limit)
}

// Listen binds every configured address, UDP and TCP, and starts serving.
// It fails, naming the address, when one cannot be bound.
func (s *Server) Listen() error {
	for _, addr := range s.cfg.Listen {
		if err := s.listen(addr, "dns_listen", false); err != nil {
			return err
		}
	}
	if s.cfg.ClientAnswers.Enabled() {
		for _, addr := range s.cfg.ClientAnswers.Listen {
			if err := s.listen(addr.String(), "client_answers.listen", true); err != nil {
				return err
			}
		}
	}
	s.started = time.Now()
	s.listening.Store(true)
	return nil
}

// endpoint is what a listener tells its queries: the address cns was
// reached at, and whether it offers only client-scoped service.
type endpoint struct {
	local      netip.Addr
	clientOnly bool
}

func (s *Server) listen(addr, key string, clientOnly bool) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %w", key, addr, err)
	}
	conns, ln, err := listenPair(ap, s.cfg.UDPSockets)
	if err != nil {
		s.Close()
		return fmt.Errorf("%s %s: %w", key, addr, err)
	}
	ep := endpoint{local: ap.Addr().Unmap(), clientOnly: clientOnly}
	s.lmu.Lock()
	s.udp = append(s.udp, conns...)
	s.tcp = append(s.tcp, ln)
	s.lmu.Unlock()
	for _, c := range conns {
		cnt := &counters{}
		s.lmu.Lock()
		s.udpCounters = append(s.udpCounters, cnt)
		s.lmu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveUDP(c, cnt, ep)
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.serveTCP(ln, ep)
	}()
	s.log.Info("listening", "udp", conns[0].LocalAddr().String(), "tcp", ln.Addr().String(), "udp_sockets", len(conns), "client_only", clientOnly)
	return nil
}

// Listening reports whether every listener is up (false once closed).
func (s *Server) Listening() bool { return s.listening.Load() && !s.closed.Load() }

// listenPair binds UDP and TCP on the same port. With port 0 the kernel
// picks the UDP port, which may be taken for TCP: then it tries again.
func listenPair(ap netip.AddrPort, sockets int) ([]udpConn, net.Listener, error) {
	for attempt := 0; ; attempt++ {
		conns, err := listenUDP(ap, sockets)
		if err != nil {
			return nil, nil, fmt.Errorf("udp: %w", err)
		}
		ln, err := net.Listen("tcp"+ipVersion(ap), conns[0].LocalAddr().String())
		if err == nil {
			return conns, ln, nil
		}
		for _, c := range conns {
			c.Close()
		}
		if ap.Port() != 0 || attempt == 20 {
			return nil, nil, fmt.Errorf("tcp: %w", err)
		}
	}
}

// Addrs returns the bound UDP and TCP addresses (useful with port 0).
func (s *Server) Addrs() (udp, tcp []string) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	seen := map[string]bool{}
	for _, c := range s.udp {
		if a := c.LocalAddr().String(); !seen[a] {
			seen[a] = true
			udp = append(udp, a)
		}
	}
	for _, l := range s.tcp {
		tcp = append(tcp, l.Addr().String())
	}
	return udp, tcp
}

// Close stops the listeners, closes open TCP connections and waits for the
// serving goroutines.
func (s *Server) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.listening.Store(false)
	s.lmu.Lock()
	for _, c := range s.udp {
		c.Close()
	}
	for _, l := range s.tcp {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.lmu.Unlock()
	s.wg.Wait()
	return nil
}

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }
