package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/admin/metrics"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
)

// Server is the REST API of a running cns.
type Server struct {
	Store   *db.DB
	DNS     DNS
	Updater *feeds.Updater // nil: no feed (read-only endpoints still work)
	// Directory looks up owners and networks the Updater does not hold
	// (nil: only those it holds are known).
	Directory Directory
	Version   string
	// Token, when set, lets remote callers use the mutating endpoints
	// (DELETE /peer, POST /config/reload, GET /db/backup) with
	// "Authorization: Bearer <token>"; without it only loopback may.
	Token string
	// ReadToken, when set, is required (or Token) for every other endpoint
	// but /ping.
	ReadToken string
	// Reload re-reads the configuration (POST /config/reload).
	Reload func() error
	// Sources, when set, reports the zones an aggregator follows.
	Sources func() []AggregateSource
	// Changefeed, when set, reports the SDC feed's changefeed delays.
	Changefeed func() metrics.Histogram
	Log        *slog.Logger
}

// IdleTimeout is how long the API keeps an idle connection: longer than
// the 30 s between the health checks CloudAPI's cueball agent makes on
// each idle socket (GET /ping), so its pooled sockets are not closed
// under it.
const IdleTimeout = 2 * time.Minute

// maxBody bounds request bodies: the API takes small JSON objects only.
const maxBody = 64 << 10

// access says who may call a route.
type access int

const (
	public   access = iota // anyone: /ping only
	reading                // loopback, or the read token when one is set
	mutating               // loopback, or the API token
)

// route is one entry of the API's route table.
type route struct {
	pattern string
	access  access
	handler http.Handler
}

// routes is the API's route table: Handler serves exactly these, and the
// security test walks them, so a route cannot escape its check.
func (s *Server) routes() []route {
	var rt []route
	add := func(a access, pattern string, h func(http.ResponseWriter, *http.Request) error) {
		rt = append(rt, route{pattern, a, s.wrap(h, a == mutating)})
	}
	rt = append(rt, route{"GET /ping", public, http.HandlerFunc(s.ping)})
	add(reading, "GET /vm/{uuid}", s.getVM)
	add(reading, "GET /vms", s.getVMs)
	add(reading, "GET /peers", s.getPeers)
	add(reading, "GET /peer/{addr}", s.getPeer)
	add(mutating, "DELETE /peer/{addr}", s.deletePeer)
	add(reading, "GET /zones", s.getZones)
	add(reading, "GET /zones/{zone}", s.getZone)
	add(reading, "GET /zones/{zone}/records", s.getRecords)
	add(reading, "GET /zones/{zone}/history", s.getHistory)
	add(reading, "GET /allowed-peers", s.getAllowedPeers)
	add(reading, "POST /suffixes-for-vm", s.postSuffixes)
	add(reading, "GET /feeds", s.getFeeds)
	add(mutating, "POST /feeds/accept", s.postAcceptRemovals)
	add(reading, "GET /services", s.getServices)
	add(reading, "GET /services/{owner}/{name}", s.getService)
	add(reading, "GET /wait", s.getWait)
	add(reading, "GET /status", s.getStatus)
	add(reading, "GET /metrics", s.getMetrics)
	add(mutating, "GET /db/backup", s.getBackup)
	add(mutating, "POST /config/reload", s.postReload)
	// Profiles for diagnosing a live server (loopback or token only).
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile", "/debug/pprof/symbol", "/debug/pprof/trace"} {
		h := pprofHandler(path)
		add(mutating, "GET "+path, func(w http.ResponseWriter, r *http.Request) error { h.ServeHTTP(w, r); return nil })
	}
	add(reading, "/", func(w http.ResponseWriter, r *http.Request) error {
		return &Error{Status: http.StatusNotFound, Code: "ResourceNotFound", Message: r.URL.Path + " does not exist"}
	})
	return rt
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.routes() {
		mux.Handle(r.pattern, r.handler)
	}
	return mux
}

// Serve runs the API on ln until ctx ends, and returns once the shutdown
// (at most 2 s for requests in flight) is over: nothing it started
// outlives it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: IdleTimeout}
	served := make(chan struct{})   // hs.Serve returned
	shutdown := make(chan struct{}) // the shutdown goroutine is done
	go func() {
		defer close(shutdown)
		select {
		case <-ctx.Done():
		case <-served:
			return // the listener failed: nothing to shut down
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	err := hs.Serve(ln)
	close(served)
	<-shutdown
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// wrap applies authentication and turns returned errors into JSON error
// bodies. A panic in a handler becomes a 500, never a dead process.
func (s *Server) wrap(h func(http.ResponseWriter, *http.Request) error, mutating bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				s.Log.Error("api handler panic", "path", r.URL.Path, "panic", fmt.Sprint(p))
				writeError(w, &Error{Status: 500, Code: "InternalError", Message: "internal error"})
			}
		}()
		if err := s.authorize(r, mutating); err != nil {
			writeError(w, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		if err := h(w, r); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				s.Log.Error("api", "path", r.URL.Path, "err", err)
				e = &Error{Status: 500, Code: "InternalError", Message: err.Error()}
			}
			writeError(w, e)
		}
	})
}

// authorize lets loopback do anything; elsewhere mutations need Token and,
// when ReadToken is set, reads need ReadToken or Token.
func (s *Server) authorize(r *http.Request, mutating bool) error {
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	has := func(tok string) bool {
		return tok != "" && subtle.ConstantTimeCompare([]byte(bearer), []byte(tok)) == 1
	}
	if mutating {
		if fromLoopback(r) || has(s.Token) {
			return nil
		}
		return &Error{Status: http.StatusForbidden, Code: "Forbidden", Message: "this endpoint is for loopback callers or holders of the API token"}
	}
	if s.ReadToken == "" || has(s.ReadToken) || has(s.Token) || fromLoopback(r) {
		return nil
	}
	return &Error{Status: http.StatusUnauthorized, Code: "Unauthorized", Message: "a bearer token is required"}
}

func fromLoopback(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().IsLoopback()
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

func writeError(w http.ResponseWriter, e error) {
	var ae *Error
	if !errors.As(e, &ae) {
		ae = &Error{Status: 500, Code: "InternalError", Message: e.Error()}
	}
	if ae.Status == 0 {
		ae.Status = 500
	}
	writeJSON(w, ae.Status, ae)
}

func notFound(msg string) error {
	return &Error{Status: http.StatusNotFound, Code: "ResourceNotFound", Message: msg}
}
func badRequest(format string, args ...any) error {
	return &Error{Status: http.StatusBadRequest, Code: "InvalidArgument", Message: fmt.Sprintf(format, args...)}
}

// ping answers 200 when the DNS listeners are up, 503 otherwise. Feed
// trouble does not fail it: restarting cns would not heal a feed.
func (s *Server) ping(w http.ResponseWriter, r *http.Request) {
	if s.DNS == nil || !s.DNS.Listening() {
		writeError(w, &Error{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailable", Message: "DNS listeners are not up"})
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) getVM(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("uuid")
	vm, ok, err := s.Store.VM(id)
	if err != nil && !ok {
		return badRequest("%q is not a VM UUID", id)
	}
	if err != nil {
		return err
	}
	if !ok {
		return notFound("VM not found")
	}
	var forward []string
	if s.Updater != nil {
		forward = s.Updater.ForwardZones()
	}
	out := VMJSON(vm, forward)
	if s.Updater != nil {
		// The store has the last-seen time coarsely; the updater exactly.
		if t, ok := s.Updater.LastSeen(vm.UUID); ok {
			out.LastVisit = max(out.LastVisit, t.UnixMilli())
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) getPeers(w http.ResponseWriter, r *http.Request) error {
	out := []PeerSummary{}
	for _, p := range s.DNS.PeerStatus() {
		ps := PeerSummary{Address: p.Address, Serials: map[string]uint32{}, Version: p.Version}
		for z, pz := range p.Zones {
			ps.Serials[z] = pz.Serial
		}
		out = append(out, ps)
	}
	return writeJSON(w, http.StatusOK, out)
}

// peerAddr parses and normalizes a peer address (IPv6 forms collapse).
func peerAddr(r *http.Request) (netip.Addr, error) {
	a, err := netip.ParseAddr(r.PathValue("addr"))
	if err != nil {
		return netip.Addr{}, badRequest("%q is not an IP address", r.PathValue("addr"))
	}
	return a.Unmap(), nil
}

func (s *Server) getPeer(w http.ResponseWriter, r *http.Request) error {
	addr, err := peerAddr(r)
	if err != nil {
		return err
	}
	for _, p := range s.DNS.PeerStatus() {
		if p.Address == addr.String() {
			return writeJSON(w, http.StatusOK, s.peerJSON(p))
		}
	}
	return notFound("Peer not found")
}

// peerJSON renders a peer with its drift per zone.
func (s *Server) peerJSON(p Peer) Peer {
	return peerView(s.Store, p, s.zoneSerial, time.Now())
}

// zoneSerial is the serial zone is served with (0: not served).
func (s *Server) zoneSerial(zone string) uint32 {
	cur, _ := s.DNS.ZoneSerial(zone)
	return cur
}

func (s *Server) deletePeer(w http.ResponseWriter, r *http.Request) error {
	addr, err := peerAddr(r)
	if err != nil {
		return err
	}
	// Deleting a peer cns does not know is done already: 200, as the
	// reference answers (it deleted whatever keys there were).
	if s.DNS.DeletePeer(addr) {
		s.Log.Info("peer deleted through the API", "peer", addr.String(), "caller", r.RemoteAddr)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getAllowedPeers(w http.ResponseWriter, r *http.Request) error {
	out := append([]AllowedPeer{}, s.DNS.AllowedPeers()...)
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) getFeeds(w http.ResponseWriter, r *http.Request) error {
	out := Feeds{Feeds: []FeedStatus{}}
	if s.Updater != nil {
		out = feedsView(s.Updater)
	}
	if s.Sources != nil {
		out.Sources = s.Sources()
	}
	return writeJSON(w, http.StatusOK, out)
}

// getWait long-polls until the serial (the zone's newest by default) is
// ACTIVE on the zone's secondaries, or the timeout (default 30 s, at most
// 120 s) passes: 200 with its propagation, or 408 with the same body.
func (s *Server) getWait(w http.ResponseWriter, r *http.Request) error {
	zone := strings.ToLower(strings.TrimSuffix(r.URL.Query().Get("zone"), "."))
	if zone == "" {
		return badRequest("zone is required")
	}
	cur, ok := s.DNS.ZoneSerial(zone)
	if !ok {
		return notFound("zone " + zone + " not found")
	}
	serial, given, err := serialParam(r, "serial")
	if err != nil {
		return err
	}
	if !given {
		serial = cur
	}
	timeout := 30 * time.Second
	if v := r.URL.Query().Get("timeout"); v != "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs < 0 {
			return badRequest("timeout=%q is not a number of seconds", v)
		}
		timeout = min(time.Duration(secs*float64(time.Second)), 120*time.Second)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		changed := s.DNS.PropagationChanged()
		p, ok := s.DNS.Propagation(zone, serial)
		if !ok {
			// Not tracked: a serial from before this server started, or one
			// that scrolled out. Fall back to what the peers say they have.
			p = s.untracked(zone, serial)
		}
		res := Wait{Propagation: p, Done: p.State == StateActive}
		if res.Done {
			return writeJSON(w, http.StatusOK, res)
		}
		select {
		case <-changed:
		case <-s.DNS.PeersChanged():
		case <-deadline.C:
			return writeJSON(w, http.StatusRequestTimeout, res)
		case <-r.Context().Done():
			return nil
		}
	}
}

// untracked builds a propagation view of a serial from peer state alone.
func (s *Server) untracked(zone string, serial uint32) Propagation {
	p := Propagation{Zone: zone, Serial: serial, State: StateActive, Peers: []PeerPropagation{}}
	for _, zp := range s.zonePeers(zone, serial) {
		state := StatePending
		if zp.Serial == serial || db.SerialLess(serial, zp.Serial) {
			state = StateActive
		} else {
			p.State = StatePending
		}
		p.Peers = append(p.Peers, PeerPropagation{Address: zp.Address, Serial: zp.Serial, State: state, Seconds: -1})
	}
	return p
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) error {
	out := Status{Version: s.Version, Uptime: s.DNS.Uptime().Seconds(), Zones: []ZoneSummary{}, Changed: map[string]time.Time{}, Peers: []Peer{}}
	zones, err := s.Store.Zones()
	if err != nil {
		return err
	}
	for _, z := range zones {
		out.Changed[z.Name] = z.LastChange
	}
	out.Zones = append(out.Zones, s.DNS.Zones()...)
	s.inConfigOrder(out.Zones)
	for _, p := range s.DNS.PeerStatus() {
		out.Peers = append(out.Peers, s.peerJSON(p))
	}
	out.Propagation = map[string]Propagation{}
	for _, z := range out.Zones {
		if p, ok := s.DNS.Propagation(z.Name, 0); ok {
			out.Propagation[z.Name] = p
		}
	}
	if s.Sources != nil {
		out.Sources = s.Sources()
	}
	if s.Updater != nil {
		g := s.Updater.RemovalGuard()
		out.RemovalGuard = &g
	}
	return writeJSON(w, http.StatusOK, out)
}

// postAcceptRemovals applies the removals the guard holds (for one cause,
// or all): an operator's word that the upstream is right.
func (s *Server) postAcceptRemovals(w http.ResponseWriter, r *http.Request) error {
	var req AcceptRemovals
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && err != io.EOF {
		return badRequest("body: %v", err)
	}
	if s.Updater == nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailable", Message: "no feed: nothing is held"}
	}
	n, err := s.Updater.AcceptRemovals(req.Cause)
	if err != nil {
		return badRequest("cause: %v", err)
	}
	s.Log.Warn("held removals accepted by an operator", "cause", req.Cause, "vms", n, "caller", r.RemoteAddr)
	return writeJSON(w, http.StatusOK, RemovalsAccepted{Applied: n})
}

func (s *Server) getBackup(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="cns.db"`)
	n, err := s.Store.Backup(w)
	if err != nil {
		s.Log.Error("backup failed", "err", err, "bytes", n)
		return nil // the body has started; the client sees a short file
	}
	s.Log.Info("backup sent", "bytes", n, "caller", r.RemoteAddr)
	return nil
}

func (s *Server) postReload(w http.ResponseWriter, r *http.Request) error {
	io.Copy(io.Discard, r.Body)
	if s.Reload == nil {
		return &Error{Status: http.StatusNotImplemented, Code: "NotImplemented", Message: "reload is not available"}
	}
	if err := s.Reload(); err != nil {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "InvalidConfig", Message: err.Error()}
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "reloaded"})
}

// getServices lists every service's self-removal hysteresis state;
// ?pending=true keeps only services with members waiting to leave.
func (s *Server) getServices(w http.ResponseWriter, r *http.Request) error {
	out := []Service{}
	if s.Updater != nil {
		pendingOnly := r.URL.Query().Get("pending") == "true"
		for _, v := range s.Updater.Services() {
			if !pendingOnly || v.HasPending() {
				out = append(out, v)
			}
		}
	}
	if err := nameServices(s.Store, out); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) getService(w http.ResponseWriter, r *http.Request) error {
	if s.Updater == nil {
		return notFound("service not found")
	}
	v, err := s.Updater.Service(r.PathValue("owner"), r.PathValue("name"))
	if errors.Is(err, feeds.ErrUnknownService) {
		return notFound(err.Error())
	}
	if err != nil {
		return err
	}
	out := []Service{v}
	if err := nameServices(s.Store, out); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out[0])
}

// pprofHandler maps a /debug/pprof path to net/http/pprof's handler.
func pprofHandler(path string) http.Handler {
	switch path {
	case "/debug/pprof/cmdline":
		return http.HandlerFunc(pprof.Cmdline)
	case "/debug/pprof/profile":
		return http.HandlerFunc(pprof.Profile)
	case "/debug/pprof/symbol":
		return http.HandlerFunc(pprof.Symbol)
	case "/debug/pprof/trace":
		return http.HandlerFunc(pprof.Trace)
	}
	return http.HandlerFunc(pprof.Index) // also serves /debug/pprof/heap etc.
}
