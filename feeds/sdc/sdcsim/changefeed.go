package sdcsim

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The changefeed publisher mounted on VMAPI (sdc-apis §2): GET /changefeeds,
// GET /changefeeds/stats and the WebSocket upgrade, registration, bootstrap
// and the sweep that delivers change items.

// VMSubResources are the subResources VMAPI's changefeed matches on (its
// SAPI template), and the ones CNS registers for.
var VMSubResources = []string{
	"alias", "customer_metadata", "destroyed", "internal_metadata", "nics",
	"owner_uuid", "server_uuid", "state", "tags",
}

type resourceInfo struct {
	Resource       string   `json:"resource"`
	SubResources   []string `json:"subResources"`
	BootstrapRoute string   `json:"bootstrapRoute"`
}

var vmResource = resourceInfo{Resource: "vm", SubResources: VMSubResources, BootstrapRoute: "/vms"}

// FeedFaults are the changefeed's fault switches; SetFeedFaults replaces
// them all at once. The zero value is a healthy feed.
type FeedFaults struct {
	// RefuseUpgrade answers WebSocket upgrades with this HTTP status (and a
	// restify error body) instead of 101.
	RefuseUpgrade int
	// ChangeBeforeBootstrap sends a change item before the bootstrap frame
	// on every new connection ("Invalid socket state" in the listener).
	ChangeBeforeBootstrap bool
	// DoubleBootstrap sends the bootstrap frame twice.
	DoubleBootstrap bool
	// Paused holds items in the publisher queue, as between two 2 s sweeps;
	// clearing it delivers them to whoever is registered then.
	Paused bool
	// Reorder delivers each sweep's items in reverse order (the real
	// publisher reads them without a sort).
	Reorder bool
	// DuplicateItems sends every delivered item that many extra times.
	DuplicateItems int
	// DropItems drops the next that many items for every listener, as if
	// they had been published while nobody listened.
	DropItems int
}

// DropMode says how DropFeeds ends the changefeed connections.
type DropMode int

const (
	// DropClose sends a close frame (1001 going away) and closes the TCP
	// connection gracefully.
	DropClose DropMode = iota
	// DropReset closes the TCP connection with a reset, no close frame.
	DropReset
	// DropHalfOpen stops reading and writing but leaves the TCP connection
	// open, like a peer that vanished without a FIN: the client's writes
	// still succeed and nothing more arrives. Close ends it.
	DropHalfOpen
)

type pendingItem struct {
	id     string
	keys   []string
	object []byte
}

type changeKind struct {
	Resource     string   `json:"resource"`
	SubResources []string `json:"subResources"`
}

type changeItem struct {
	ChangeKind        changeKind      `json:"changeKind"`
	ChangedResourceID string          `json:"changedResourceId"`
	ResourceObject    json.RawMessage `json:"resourceObject,omitempty"`
	Published         string          `json:"published"`
}

type publisher struct {
	sim        *Sim
	interval   time.Duration
	fanout     bool
	withObject bool

	mu        sync.Mutex
	faults    FeedFaults
	pending   []pendingItem
	listeners map[string]*feedConn // registered, by instance
	conns     map[*feedConn]bool   // every open connection, registered or not
	stopTick  chan struct{}
}

func newPublisher(s *Sim, opts Options) *publisher {
	p := &publisher{
		sim:        s,
		interval:   opts.DeliveryInterval,
		fanout:     opts.DuplicateFanout,
		withObject: opts.ResourceObject,
		listeners:  make(map[string]*feedConn),
		conns:      make(map[*feedConn]bool),
		stopTick:   make(chan struct{}),
	}
	if p.interval > 0 {
		go p.tick()
	}
	return p
}

func (p *publisher) tick() {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.mu.Lock()
			p.deliverLocked()
			p.mu.Unlock()
		case <-p.stopTick:
			return
		}
	}
}

// publish queues an item, and with no delivery interval delivers it at
// once. The world calls it under its own lock, so items of one VM queue in
// mutation order.
func (p *publisher) publish(id string, keys []string, object []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if keys == nil {
		keys = []string{}
	}
	p.pending = append(p.pending, pendingItem{id: id, keys: keys, object: object})
	if p.interval == 0 {
		p.deliverLocked()
	}
}

// deliverLocked is one publisher sweep: every pending item goes to every
// registered listener whose subResources intersect its own, once (1.4.0)
// or once per matching entry (1.5.x fan-out). Items nobody matches are
// dropped, as VMAPI marks them published all the same.
func (p *publisher) deliverLocked() {
	if p.faults.Paused || len(p.pending) == 0 {
		return
	}
	items := p.pending
	p.pending = nil
	if p.faults.Reorder {
		slices.Reverse(items)
	}
	published := strconv.FormatInt(p.sim.now().UnixMilli(), 10)
	for _, it := range items {
		if p.faults.DropItems > 0 {
			p.faults.DropItems--
			continue
		}
		var frame []byte
		for _, l := range p.listeners {
			n := 0
			for _, k := range it.keys {
				if slices.Contains(l.subs, k) {
					n++
				}
			}
			if n == 0 {
				continue
			}
			if !p.fanout {
				n = 1
			}
			n += p.faults.DuplicateItems
			if frame == nil {
				frame = p.encode(it, published)
			}
			for range n {
				l.enqueue(frame)
			}
		}
	}
}

func (p *publisher) encode(it pendingItem, published string) []byte {
	ci := changeItem{
		ChangeKind:        changeKind{Resource: "vm", SubResources: it.keys},
		ChangedResourceID: it.id,
		Published:         published,
	}
	if p.withObject && it.object != nil {
		ci.ResourceObject = it.object
	}
	b, _ := json.Marshal(ci)
	return b
}

func (p *publisher) close() {
	close(p.stopTick)
	p.mu.Lock()
	conns := make([]*feedConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.end()
	}
}

// feedConn is one upgraded changefeed connection. Only its writer
// goroutine writes data frames; control frames may come from anywhere.
type feedConn struct {
	p        *publisher
	ws       *websocket.Conn
	remote   string
	instance string
	subs     []string

	mu     sync.Mutex
	queue  [][]byte
	halted bool
	wake   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func (c *feedConn) enqueue(frame []byte) {
	c.mu.Lock()
	c.queue = append(c.queue, frame)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *feedConn) writeLoop() {
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		for {
			c.mu.Lock()
			if c.halted || len(c.queue) == 0 {
				c.mu.Unlock()
				break
			}
			frame := c.queue[0]
			c.queue = c.queue[1:]
			c.mu.Unlock()
			if err := c.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
				c.end()
				return
			}
		}
	}
}

// readLoop discards what the client sends after registration (its
// "heartbeat" text frames), as the publisher does, until the connection
// fails. A halted connection stops reading.
func (c *feedConn) readLoop() {
	for {
		if _, _, err := c.ws.ReadMessage(); err != nil {
			c.end()
			return
		}
		c.mu.Lock()
		halted := c.halted
		c.mu.Unlock()
		if halted {
			<-c.done
			return
		}
	}
}

// end closes the connection and forgets it.
func (c *feedConn) end() {
	c.once.Do(func() {
		close(c.done)
		_ = c.ws.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		if c.p.listeners[c.instance] == c {
			delete(c.p.listeners, c.instance)
		}
		c.p.mu.Unlock()
	})
}

func (c *feedConn) unregister() {
	c.p.mu.Lock()
	if c.p.listeners[c.instance] == c {
		delete(c.p.listeners, c.instance)
	}
	c.p.mu.Unlock()
}

func (c *feedConn) drop(how DropMode) {
	switch how {
	case DropClose:
		c.unregister()
		msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "server going away")
		_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
		// Half-close so the close frame is read before any reset; the read
		// loop ends the connection when the client answers or goes away.
		if tc, ok := c.ws.NetConn().(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		go func() {
			t := time.NewTimer(2 * time.Second)
			defer t.Stop()
			select {
			case <-t.C:
				c.end()
			case <-c.done:
			}
		}()
	case DropReset:
		if tc, ok := c.ws.NetConn().(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.end()
	case DropHalfOpen:
		c.unregister()
		c.mu.Lock()
		c.halted = true
		c.queue = nil
		c.mu.Unlock()
	}
}

// ---- HTTP side ----

func (s *Sim) changefeeds(w http.ResponseWriter, r *http.Request) {
	if websocket.IsWebSocketUpgrade(r) {
		s.feedUpgrade(w, r)
		return
	}
	writeJSON(w, http.StatusOK, map[string]resourceInfo{"vm": vmResource})
}

// changefeedStats is the publisher's GET /changefeeds/stats as
// node-sdc-changefeed 1.5.2 and later answer it (publisher.js _getStats):
// the body is this.registrations, which since 1.5.2 keeps each listener's
// live websocket object. With no listener registered that serialises
// ({"listeners": <resources>, "registrations": {"vm": {}}}); with one, on
// VMAPI's Node 6, JSON.stringify throws "Converting circular structure to
// JSON" in the route handler, and VMAPI, built with
// handleUncaughtExceptions: false, exits. The simulator records that crash
// (Crashes, and Close's error), ends every changefeed connection with a
// reset as the dying process would, and answers nothing.
func (s *Sim) changefeedStats(w http.ResponseWriter, r *http.Request) {
	p := s.feed
	p.mu.Lock()
	registered := len(p.listeners)
	p.mu.Unlock()
	if registered == 0 {
		writeJSON(w, http.StatusOK, map[string]any{"listeners": 1, "registrations": map[string]any{"vm": map[string]any{}}})
		return
	}
	s.crash("GET /changefeeds/stats with a registered listener: TypeError: Converting circular structure to JSON; VMAPI exits")
	s.DropFeeds(DropReset)
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

var upgrader = websocket.Upgrader{
	HandshakeTimeout: 10 * time.Second,
	CheckOrigin:      func(*http.Request) bool { return true },
}

func (s *Sim) feedUpgrade(w http.ResponseWriter, r *http.Request) {
	p := s.feed
	p.mu.Lock()
	refuse := p.faults.RefuseUpgrade
	p.mu.Unlock()
	if refuse != 0 {
		writeError(w, refuse, faultError(Fault{Status: refuse}))
		return
	}
	// changefeed 1.4.0 (CNS's pin) sends no Sec-WebSocket-Version, and
	// gorilla's Upgrader insists on 13; supply it so both clients work.
	if r.Header.Get("Sec-WebSocket-Version") == "" {
		r.Header.Set("Sec-WebSocket-Version", "13")
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the Upgrader has answered with an HTTP error
	}
	c := &feedConn{
		p:      p,
		ws:     ws,
		remote: r.RemoteAddr,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	// watershed (the publisher's websocket library) answers every PING
	// with a PONG carrying the same payload, whatever the state of the
	// registration; a half-open connection answers nothing.
	ws.SetPingHandler(func(data string) error {
		c.mu.Lock()
		halted := c.halted
		c.mu.Unlock()
		if halted {
			return nil
		}
		err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
		if err != nil && !errors.Is(err, websocket.ErrCloseSent) {
			var ne net.Error
			if !errors.As(err, &ne) {
				return err
			}
		}
		return nil
	})
	p.mu.Lock()
	if s.isClosed() {
		p.mu.Unlock()
		_ = ws.Close()
		return
	}
	p.conns[c] = true
	p.mu.Unlock()

	_, data, err := ws.ReadMessage()
	if err != nil {
		c.end()
		return
	}
	v2 := strings.HasPrefix(strings.TrimLeft(r.Header.Get("Accept-Version"), "~^="), "2")
	instance, subs, reason := parseRegistration(data, v2)
	if reason != "" {
		// watershed's end(reason): a close frame carrying the reason.
		if len(reason) > 120 {
			reason = reason[:120]
		}
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, reason)
		_ = ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
		c.end()
		return
	}
	c.instance, c.subs = instance, subs

	bootstrap, _ := json.Marshal(vmResource)
	if v2 {
		bootstrap, _ = json.Marshal(map[string]any{"bootstrapRoutes": []resourceInfo{vmResource}})
	}
	// The world lock is taken before the publisher's, never inside it.
	early := s.anyVMItem()
	p.mu.Lock()
	if p.faults.ChangeBeforeBootstrap {
		c.queue = append(c.queue, p.encode(early, strconv.FormatInt(s.now().UnixMilli(), 10)))
	}
	c.queue = append(c.queue, bootstrap)
	if p.faults.DoubleBootstrap {
		c.queue = append(c.queue, bootstrap)
	}
	// A second registration of an instance replaces the first, which stays
	// connected but receives nothing more.
	p.listeners[instance] = c
	p.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	go c.writeLoop()
	s.log.Debug("sdcsim: changefeed listener registered", "instance", instance, "remote", c.remote)
	c.readLoop()
}

// anyVMItem is the change item sent before a bootstrap by the
// ChangeBeforeBootstrap fault: about the first VM, or a made-up uuid.
func (s *Sim) anyVMItem() pendingItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := newUUID()
	if order := s.sortedVMs(true); len(order) > 0 {
		id = order[0]
	}
	return pendingItem{id: id, keys: []string{"state"}}
}

// parseRegistration validates a v1 ({instance, changeKind{resource,
// subResources}}) or v2 ({instance, resources[]}) registration. A non-empty
// reason means the connection must be closed with it.
func parseRegistration(data []byte, v2 bool) (instance string, subs []string, reason string) {
	type kind struct {
		Resource     string          `json:"resource"`
		SubResources json.RawMessage `json:"subResources"`
	}
	var reg struct {
		Instance   any    `json:"instance"`
		ChangeKind *kind  `json:"changeKind"`
		Resources  []kind `json:"resources"`
	}
	if err := json.Unmarshal(data, &reg); err != nil {
		return "", nil, "Invalid registration: " + err.Error()
	}
	inst, ok := reg.Instance.(string)
	if !ok || inst == "" {
		return "", nil, "Invalid registration: missing instance"
	}
	kinds := reg.Resources
	if !v2 {
		if reg.ChangeKind == nil {
			return "", nil, "Invalid registration: missing changeKind"
		}
		kinds = []kind{*reg.ChangeKind}
	} else if len(kinds) == 0 {
		return "", nil, "Invalid registration: missing resources"
	}
	for _, k := range kinds {
		if k.Resource == "" {
			return "", nil, "Invalid registration: missing changeKind.resource"
		}
		if k.Resource != "vm" {
			return "", nil, "Unknown resource: " + k.Resource
		}
		var ss []string
		if err := json.Unmarshal(k.SubResources, &ss); err != nil || ss == nil {
			return "", nil, "Invalid registration: changeKind.subResources must be an array of strings"
		}
		subs = append(subs, ss...)
	}
	return inst, subs, ""
}

// ---- fault and inspection API ----

// SetFeedFaults replaces the changefeed's fault switches. Unpausing
// delivers what accumulated (at once, or at the next tick).
func (s *Sim) SetFeedFaults(f FeedFaults) {
	p := s.feed
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
	if !f.Paused && p.interval == 0 {
		p.deliverLocked()
	}
}

// FlushFeed runs a publisher sweep now, whatever the delivery interval
// (unless paused).
func (s *Sim) FlushFeed() {
	p := s.feed
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deliverLocked()
}

// PendingFeedItems is the number of items waiting for the next sweep.
func (s *Sim) PendingFeedItems() int {
	p := s.feed
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

// FeedListeners returns the instances currently registered.
func (s *Sim) FeedListeners() []string {
	p := s.feed
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.listeners))
	for inst := range p.listeners {
		out = append(out, inst)
	}
	slices.Sort(out)
	return out
}

// DropFeeds ends every changefeed connection the given way and returns how
// many it ended.
func (s *Sim) DropFeeds(how DropMode) int {
	p := s.feed
	p.mu.Lock()
	var conns []*feedConn
	for c := range p.conns {
		c.mu.Lock()
		halted := c.halted
		c.mu.Unlock()
		if !halted {
			conns = append(conns, c)
		}
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.drop(how)
	}
	return len(conns)
}

// SendFeedFrame sends a raw text frame (malformed JSON, say) to every
// registered listener, after what is already queued for it.
func (s *Sim) SendFeedFrame(text string) int {
	p := s.feed
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.listeners {
		l.enqueue([]byte(text))
	}
	return len(p.listeners)
}
