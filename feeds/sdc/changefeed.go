package sdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Changefeed timing defaults (sdc-apis §2.2): the listener's heartbeat
// period and the reconnect backoff of CNS's listener options.
const (
	DefaultHeartbeat      = 27817 * time.Millisecond
	DefaultReconnectMin   = 2 * time.Second
	DefaultReconnectMax   = 10 * time.Second
	changefeedDialTimeout = 10 * time.Second
)

// Change is one changefeed item about a VM.
type Change struct {
	UUID         string
	SubResources []string
	// Object is the item's resourceObject (VMAPI builds since 2020-11),
	// nil when absent or undecodable: the VM must then be fetched.
	Object *VM
	// Raw is the resourceObject as sent, to tell duplicates apart.
	Raw []byte
}

// ChangefeedEvent is what a Changefeed reports: exactly one field is set.
type ChangefeedEvent struct {
	// Bootstrap: registered, on a new connection or again on the same
	// one. Changes made while no connection was registered are lost, so
	// a full listing is due (sdc-apis §2.3).
	Bootstrap bool
	Change    *Change
	// Err: the connection failed or ended; a reconnect follows.
	Err error
}

// Changefeed is a listener of VMAPI's changefeed (sdc-apis §2): it probes
// GET /changefeeds, upgrades to a WebSocket, registers, and reports the
// bootstrap and every change item; it sends a heartbeat and reconnects,
// with backoff, whenever the connection fails.
type Changefeed struct {
	rest restClient
	opts ChangefeedOptions
	// Heartbeat is the period of the "heartbeat" frame, which is also how
	// often the listener checks, on GET /changefeeds/stats, that the
	// publisher still has it registered: a half-open connection (the
	// peer gone without a FIN) is otherwise silent for minutes.
	Heartbeat          time.Duration
	RetryMin, RetryMax time.Duration
	Logger             *slog.Logger
}

// NewChangefeed returns a listener on VMAPI at vmapi's address.
func NewChangefeed(vmapi VMAPIOptions, opts ChangefeedOptions, hc *http.Client, timeout time.Duration) (*Changefeed, error) {
	rc, err := newRESTClient("changefeed", vmapi.Address, hc, timeout)
	if err != nil {
		return nil, err
	}
	if opts.Resource == "" {
		opts.Resource = "vm"
	}
	if len(opts.SubResources) == 0 {
		opts.SubResources = DefaultSubResources
	}
	return &Changefeed{rest: rc, opts: opts, Heartbeat: DefaultHeartbeat,
		RetryMin: DefaultReconnectMin, RetryMax: DefaultReconnectMax}, nil
}

// Run connects and reports events on out until ctx ends. It never gives
// up: each failure is reported as an Err event and retried after a
// backoff, which starts again from RetryMin after a bootstrap.
func (c *Changefeed) Run(ctx context.Context, out chan<- ChangefeedEvent) error {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := backoff{min: c.RetryMin, max: c.RetryMax}
	for {
		bootstrapped, err := c.session(ctx, out)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if bootstrapped {
			b.reset()
		}
		delay := b.next()
		log.Warn("changefeed disconnected; reconnecting", "err", err, "in", delay.String())
		select {
		case out <- ChangefeedEvent{Err: err}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !sleep(ctx, delay) {
			return ctx.Err()
		}
	}
}

// frame is any message the publisher sends: a bootstrap (v1 or v2) or a
// change item.
type frame struct {
	BootstrapRoute  *string         `json:"bootstrapRoute"`
	BootstrapRoutes json.RawMessage `json:"bootstrapRoutes"`
	ChangeKind      *struct {
		Resource     string   `json:"resource"`
		SubResources []string `json:"subResources"`
	} `json:"changeKind"`
	ChangedResourceID string          `json:"changedResourceId"`
	ResourceObject    json.RawMessage `json:"resourceObject"`
}

// session is one connection, from the probe to its end. It reports
// whether the publisher bootstrapped it.
func (c *Changefeed) session(ctx context.Context, out chan<- ChangefeedEvent) (bootstrapped bool, err error) {
	// The listener's liveness and compatibility probe: any 2xx will do.
	if _, err := c.rest.get(ctx, "/changefeeds", nil, nil); err != nil {
		return false, err
	}
	u := *c.rest.base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path += "/changefeeds"
	nd := &net.Dialer{Timeout: changefeedDialTimeout, KeepAlive: 30 * time.Second}
	d := websocket.Dialer{NetDialContext: nd.DialContext, HandshakeTimeout: changefeedDialTimeout}
	h := http.Header{}
	h.Set("Accept-Version", "~1")
	h.Set("x-request-id", newRequestID())
	ws, resp, err := d.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil {
			return false, fmt.Errorf("changefeed upgrade: HTTP %d: %w", resp.StatusCode, err)
		}
		return false, fmt.Errorf("changefeed upgrade: %w", err)
	}
	defer ws.Close()

	reg, _ := json.Marshal(map[string]any{
		"instance": c.opts.Instance,
		"service":  "cns",
		"changeKind": map[string]any{
			"resource":     c.opts.Resource,
			"subResources": c.opts.SubResources,
		},
	})
	var wmu sync.Mutex // gorilla allows one concurrent writer
	write := func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = ws.SetWriteDeadline(time.Now().Add(changefeedDialTimeout))
		return ws.WriteMessage(websocket.TextMessage, b)
	}
	if err := write(reg); err != nil {
		return false, fmt.Errorf("changefeed register: %w", err)
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var lost error // why the keeper ended the connection
	var booted bool
	go func() {
		// Close the socket when ctx ends or the keeper gives up, which
		// ends the read below.
		<-sctx.Done()
		_ = ws.Close()
	}()
	go func() {
		err := c.keep(sctx, write, func() bool { mu.Lock(); defer mu.Unlock(); return booted })
		if err != nil {
			mu.Lock()
			lost = err
			mu.Unlock()
			cancel()
		}
	}()

	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			if lost != nil {
				err = lost
			} else if ce := (*websocket.CloseError)(nil); errors.As(err, &ce) {
				err = fmt.Errorf("changefeed closed by the publisher: %d %s", ce.Code, ce.Text)
			}
			return booted, err
		}
		var f frame
		if err := json.Unmarshal(msg, &f); err != nil {
			mu.Lock()
			b := booted
			mu.Unlock()
			return b, fmt.Errorf("changefeed: malformed frame %.80q: %w", msg, err)
		}
		var ev ChangefeedEvent
		switch {
		case f.BootstrapRoute != nil || len(f.BootstrapRoutes) > 0:
			mu.Lock()
			booted = true
			mu.Unlock()
			ev.Bootstrap = true
		case f.ChangedResourceID != "" && f.ChangeKind != nil && f.ChangeKind.Resource == c.opts.Resource:
			// A change before the bootstrap ("Invalid socket state" to the
			// Node listener) is harmless: it only asks for a fetch.
			ch := &Change{UUID: f.ChangedResourceID, SubResources: f.ChangeKind.SubResources}
			if len(f.ResourceObject) > 0 && string(f.ResourceObject) != "null" {
				if vm, err := DecodeVM(f.ResourceObject); err == nil && strings.EqualFold(vm.UUID, ch.UUID) {
					ch.Object, ch.Raw = &vm, slices.Clone([]byte(f.ResourceObject))
				}
			}
			ev.Change = ch
		default:
			continue // another resource, or something unknown: not ours
		}
		select {
		case out <- ev:
		case <-ctx.Done():
			return booted, ctx.Err()
		}
	}
}

// keep sends the heartbeat and, once bootstrapped, checks that the
// publisher still lists this instance among its registrations: twice
// missing in a row means the connection is dead (half-open) or was
// replaced, and ends it.
func (c *Changefeed) keep(ctx context.Context, write func([]byte) error, bootstrapped func() bool) error {
	period := c.Heartbeat
	if period <= 0 {
		period = DefaultHeartbeat
	}
	t := time.NewTicker(period)
	defer t.Stop()
	missing := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := write([]byte("heartbeat")); err != nil {
			return fmt.Errorf("changefeed heartbeat: %w", err)
		}
		if !bootstrapped() {
			continue
		}
		registered, err := c.registered(ctx)
		switch {
		case err != nil:
			missing = 0 // stats unavailable: no opinion
		case registered:
			missing = 0
		default:
			missing++
		}
		if missing >= 2 {
			return fmt.Errorf("changefeed: the publisher no longer lists instance %s (half-open or replaced connection)", c.opts.Instance)
		}
	}
}

// registered asks GET /changefeeds/stats whether this instance is
// registered for its resource.
func (c *Changefeed) registered(ctx context.Context) (bool, error) {
	var stats struct {
		Registrations map[string]map[string]json.RawMessage `json:"registrations"`
	}
	if _, err := c.rest.get(ctx, "/changefeeds/stats", nil, &stats); err != nil {
		return false, err
	}
	_, ok := stats.Registrations[c.opts.Resource][c.opts.Instance]
	return ok, nil
}
