package sdcsim

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Route names one simulated endpoint, for fault injection and request
// counts.
type Route string

// The routes. AnyRoute holds the global fault, which applies to every HTTP
// route without a fault of its own except RoutePing: VMAPI keeps answering
// /ping while the rest is down (503 MorayBucketsNotSetup).
const (
	AnyRoute              Route = "*"
	RoutePing             Route = "vmapi Ping"            // GET /ping
	RouteListVMs          Route = "vmapi ListVms"         // GET /vms, HEAD /vms
	RouteGetVM            Route = "vmapi GetVm"           // GET /vms/:uuid
	RouteChangefeeds      Route = "vmapi Changefeeds"     // GET /changefeeds, /changefeeds/stats and the WebSocket upgrade
	RouteListServers      Route = "cnapi ListServers"     // GET /servers
	RouteGetNetwork       Route = "napi GetNetwork"       // GET /networks/:uuid
	RouteListNetworks     Route = "napi ListNetworks"     // GET /networks
	RouteListNetworkPools Route = "napi ListNetworkPools" // GET /network_pools
	RouteGetNetworkPool   Route = "napi GetNetworkPool"   // GET /network_pools/:uuid
	RouteGetNIC           Route = "napi GetNic"           // GET /nics/:mac
	RouteLDAPBind         Route = "ufds bind"
	RouteLDAPSearch       Route = "ufds search"
)

// Fault describes a failure to inject on a route. Which requests it hits:
// with Times > 0 the next Times requests (then it is gone); with Fraction in
// (0, 1] that share of requests, chosen at random (and, with Times too,
// until Times have been hit); with neither, every request until cleared.
//
// What it does, in this order: wait Latency; Hang until ReleaseHangs, the
// client giving up, or Close; then answer Status (HTTP) or LDAPResult
// (LDAP) instead of the real handler, or, with Malformed, answer the real
// handler's status with its JSON body cut short. A fault with only Latency
// or Hang lets the real answer through afterwards.
type Fault struct {
	Times    int
	Fraction float64

	Latency time.Duration
	Hang    bool

	// HTTP. Code and Message fill the restify error body; empty, they
	// default by status: 500 InternalError, 503 MorayBucketsNotSetup, 409
	// ValidationFailed, 404 ResourceNotFound, 422 InvalidParameters.
	Status    int
	Code      string
	Message   string
	Malformed bool

	// LDAP: the result code to answer (e.g. 49 invalidCredentials, 51 busy,
	// 52 unavailable); 0 lets the operation through.
	LDAPResult int

	// release is the ReleaseHangs channel current when the fault hit, so
	// that a release racing with the hit still frees the request.
	release <-chan struct{}
}

type faultTable struct {
	mu       sync.Mutex
	faults   map[Route]*Fault
	requests map[Route]int
	rng      *rand.Rand
	hang     chan struct{} // closed by ReleaseHangs, then replaced
}

func newFaultTable(seed uint64) *faultTable {
	return &faultTable{
		faults:   make(map[Route]*Fault),
		requests: make(map[Route]int),
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		hang:     make(chan struct{}),
	}
}

// take counts a request on route and returns the fault that hits it, if
// any, consuming one of its Times.
func (t *faultTable) take(route Route, global bool) (Fault, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests[route]++
	key := route
	f, ok := t.faults[key]
	if !ok && global {
		key = AnyRoute
		f, ok = t.faults[key]
	}
	if !ok {
		return Fault{}, false
	}
	if f.Fraction > 0 && t.rng.Float64() >= f.Fraction {
		return Fault{}, false
	}
	hit := *f
	hit.release = t.hang
	if f.Times > 0 {
		f.Times--
		if f.Times == 0 {
			delete(t.faults, key)
		}
	}
	return hit, true
}

// SetFault installs a fault on a route (AnyRoute for the global one),
// replacing the route's previous fault.
func (s *Sim) SetFault(route Route, f Fault) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.faults[route] = &f
}

// ClearFault removes a route's fault.
func (s *Sim) ClearFault(route Route) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	delete(s.faults.faults, route)
}

// ClearFaults removes every route fault (changefeed and LDAP switches are
// separate: SetFeedFaults, SetLDAPDown).
func (s *Sim) ClearFaults() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	clear(s.faults.faults)
}

// ReleaseHangs lets every request held by a Hang fault go on.
func (s *Sim) ReleaseHangs() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	close(s.faults.hang)
	s.faults.hang = make(chan struct{})
}

// Requests reports how many requests a route has received, faulted ones
// included.
func (s *Sim) Requests(route Route) int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.requests[route]
}

// delay applies a fault's Latency and Hang. It reports false when the
// request should be abandoned (the client went away or the simulator
// closed).
func (s *Sim) delay(ctx context.Context, f Fault) bool {
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		case <-s.closed:
			return false
		}
	}
	if f.Hang {
		select {
		case <-f.release:
		case <-ctx.Done():
			return false
		case <-s.closed:
			return false
		}
	}
	return true
}
