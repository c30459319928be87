package serve

import (
	"container/list"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/serve/policy"
)

// forwarder holds the policy, the cache and the workers.
type forwarder struct {
	cfg   policy.Forwarding
	cache *answerCache
	jobs  chan forwardJob
	log   func(msg string, args ...any)

	hits, misses, failures atomic.Uint64
	inflight               sync.Map // singleflight: cache key → *flight
}

// forwardJob is a UDP query waiting for an upstream answer.
type forwardJob struct {
	req  *dns.Msg
	conn udpConn
	to   net.Addr
	size int // the client's UDP limit
}

// flight is one upstream question that several clients wait for.
type flight struct {
	done chan struct{}
	resp *dns.Msg
	err  error
}

const forwardWorkers = 64

func newForwarder(cfg policy.Forwarding, log func(string, ...any)) *forwarder {
	if len(cfg.Clients) == 0 || len(cfg.Upstreams) == 0 {
		return nil
	}
	if cfg.CacheEntries <= 0 {
		cfg.CacheEntries = 10000
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = time.Hour
	}
	f := &forwarder{cfg: cfg, cache: newAnswerCache(cfg.CacheEntries), jobs: make(chan forwardJob, 1024), log: log}
	return f
}

// run runs the UDP workers until ctx ends and waits for them.
func (f *forwarder) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range forwardWorkers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-f.jobs:
					resp := f.resolve(j.req)
					if b, err := packFor(resp, j.req, j.size); err == nil {
						j.conn.WriteTo(b, j.to)
					}
				}
			}
		})
	}
	wg.Wait()
}

// eligible reports whether a query from src may be forwarded.
func (f *forwarder) eligible(q *query) bool {
	if f == nil || q.flags&flagRD == 0 || q.qclass != dns.ClassINET {
		return false
	}
	src := q.src.Addr().Unmap()
	for _, p := range f.cfg.Clients {
		if p.Contains(src) {
			return true
		}
	}
	return false
}

// cacheKey names a question in the cache.
func cacheKey(q dns.Question) string {
	return strings.ToLower(q.Name) + "/" + dns.TypeToString[q.Qtype] + "/" + dns.ClassToString[q.Qclass]
}

// resolve answers req from the cache or the upstreams; it never returns
// nil (a failure is SERVFAIL).
func (f *forwarder) resolve(req *dns.Msg) *dns.Msg {
	key := cacheKey(req.Question[0])
	if m, ok := f.cache.get(key, time.Now()); ok {
		f.hits.Add(1)
		return reply(req, m)
	}
	f.misses.Add(1)
	// One upstream question per key at a time; the others wait for it.
	fl := &flight{done: make(chan struct{})}
	if v, loaded := f.inflight.LoadOrStore(key, fl); loaded {
		other := v.(*flight)
		<-other.done
		if other.err != nil {
			return servfail(req)
		}
		return reply(req, other.resp)
	}
	defer func() { f.inflight.Delete(key); close(fl.done) }()
	resp, err := f.ask(req)
	if err != nil {
		f.failures.Add(1)
		fl.err = err
		f.log("forwarding failed", "name", req.Question[0].Name, "err", err)
		return servfail(req)
	}
	fl.resp = resp
	if ttl, ok := cacheTTL(resp, f.cfg.MaxTTL); ok {
		f.cache.put(key, resp, time.Now().Add(ttl))
	}
	return reply(req, resp)
}

// ask tries each upstream in turn: UDP, then TCP when the answer is
// truncated. SERVFAIL and REFUSED count as failures.
func (f *forwarder) ask(req *dns.Msg) (*dns.Msg, error) {
	up := new(dns.Msg)
	up.SetQuestion(req.Question[0].Name, req.Question[0].Qtype)
	up.Question[0].Qclass = req.Question[0].Qclass
	up.RecursionDesired = true
	up.SetEdns0(1232, false)
	var lastErr error
	for _, u := range f.cfg.Upstreams {
		for _, network := range []string{"udp", "tcp"} {
			c := &dns.Client{Net: network, Timeout: f.cfg.Timeout, UDPSize: 1232}
			r, _, err := c.Exchange(up, u.String())
			if err != nil {
				lastErr = err
				break // next upstream
			}
			if r.Truncated && network == "udp" {
				continue // the same upstream over TCP
			}
			if r.Rcode == dns.RcodeServerFailure || r.Rcode == dns.RcodeRefused {
				lastErr = errors.New(u.String() + " answered " + dns.RcodeToString[r.Rcode])
				break
			}
			return r, nil
		}
	}
	return nil, lastErr
}

// cacheTTL is how long an answer may be cached: the smallest TTL of its
// records, or for a negative answer the SOA's negative TTL (RFC 2308 §5),
// capped at max. Failures are not cached.
func cacheTTL(m *dns.Msg, max time.Duration) (time.Duration, bool) {
	if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError {
		return 0, false
	}
	ttl := uint32(max / time.Second)
	found := false
	for _, rr := range m.Answer {
		ttl = min(ttl, rr.Header().Ttl)
		found = true
	}
	if !found {
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				ttl = min(ttl, soa.Hdr.Ttl, soa.Minttl)
				found = true
			}
		}
	}
	if !found || ttl == 0 {
		return 0, false
	}
	return time.Duration(ttl) * time.Second, true
}

// reply turns a cached or fresh upstream answer into the answer to req:
// req's ID and question case, TTLs aged, RA set, never AA.
func reply(req, resp *dns.Msg) *dns.Msg {
	r := resp.Copy()
	r.Id = req.Id
	r.Question = req.Question
	r.Response = true
	r.Authoritative = false
	r.RecursionAvailable = true
	r.RecursionDesired = req.RecursionDesired
	r.CheckingDisabled = req.CheckingDisabled
	r.Extra = nil
	return r
}

func servfail(req *dns.Msg) *dns.Msg {
	r := new(dns.Msg)
	r.SetRcode(req, dns.RcodeServerFailure)
	r.RecursionAvailable = true
	return r
}

// packFor packs r for a client whose UDP limit is size (0: TCP),
// truncating when it does not fit, with an OPT when the request had one.
func packFor(r, req *dns.Msg, size int) ([]byte, error) {
	if opt := req.IsEdns0(); opt != nil {
		r.SetEdns0(1232, opt.Do())
	}
	if size > 0 {
		r.Truncate(size)
	}
	return r.Pack()
}

// answerCache is an LRU of upstream answers with expiry times.
type answerCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[string]*list.Element
}

type cacheEntry struct {
	key     string
	msg     *dns.Msg
	stored  time.Time
	expires time.Time
}

func newAnswerCache(max int) *answerCache {
	return &answerCache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

// get returns a copy of a fresh entry with its TTLs aged by its time in
// the cache.
func (c *answerCache) get(key string, now time.Time) (*dns.Msg, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.ll.Remove(el)
		delete(c.items, key)
		return nil, false
	}
	c.ll.MoveToFront(el)
	m := e.msg.Copy()
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
		for _, rr := range sec {
			if h := rr.Header(); h.Ttl > age {
				h.Ttl -= age
			} else {
				h.Ttl = 0
			}
		}
	}
	return m, true
}

func (c *answerCache) put(key string, m *dns.Msg, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.ll.Remove(el)
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, msg: m, stored: time.Now(), expires: expires})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*cacheEntry).key)
	}
}

func (c *answerCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// ForwardStats counts what forwarding did.
type ForwardStats struct {
	Hits, Misses, Failures uint64
	Cached                 int
}

// ForwardStats returns the forwarding counters (zero when it is off).
func (s *Server) ForwardStats() ForwardStats {
	f := s.fwd
	if f == nil {
		return ForwardStats{}
	}
	return ForwardStats{Hits: f.hits.Load(), Misses: f.misses.Load(), Failures: f.failures.Load(), Cached: f.cache.len()}
}

// forwardUDP answers a forwardable UDP query from the cache at once, or
// hands it to a worker that writes the upstream's answer to the client
// later, so a slow upstream never holds up the socket. It returns nil in
// that case.
func (s *Server) forwardUDP(q *query, conn udpConn, to net.Addr, b []byte) []byte {
	req := new(dns.Msg)
	if err := req.Unpack(q.msg); err != nil || len(req.Question) != 1 {
		return s.errorReply(q, b, dns.RcodeFormatError)
	}
	size := udpLimit(q, s.udpSize)
	if m, ok := s.fwd.cache.get(cacheKey(req.Question[0]), time.Now()); ok {
		s.fwd.hits.Add(1)
		out, err := packFor(reply(req, m), req, size)
		if err != nil {
			return nil
		}
		return append(b, out...)
	}
	select {
	case s.fwd.jobs <- forwardJob{req: req, conn: conn, to: to, size: size}:
	default:
		s.fwd.failures.Add(1) // the queue is full: the client retries
	}
	return nil
}

// forwardTCP answers a forwardable TCP query (the connection's goroutine
// may wait).
func (s *Server) forwardTCP(q *query) []byte {
	req := new(dns.Msg)
	if err := req.Unpack(q.msg); err != nil || len(req.Question) != 1 {
		return nil
	}
	out, err := packFor(s.fwd.resolve(req), req, 0)
	if err != nil {
		return nil
	}
	return out
}
