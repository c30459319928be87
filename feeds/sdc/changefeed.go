package sdc

import (
	"cmp"
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

	"github.com/tritondatacenter/cns/feeds/dc"
)

// Changefeed timing defaults. The reconnect backoff is the one of CNS's
// listener options (sdc-apis §2.2). Liveness is a WebSocket ping every
// PingInterval: the publisher's websocket library (watershed 0.4.0, which
// node-sdc-changefeed 1.5.x uses) answers every ping with a pong, and a
// connection on which nothing, pong or item, has arrived for PongTimeout is
// dead (a half-open connection is otherwise silent until the kernel's
// retransmission timeout, about 15 minutes).
//
// The listener never calls GET /changefeeds/stats: in changefeed >= 1.5.2
// the publisher answers it by serialising its registrations, which hold
// each listener's live websocket, and on VMAPI's Node 6 that throws
// "Converting circular structure to JSON" outside any handler, so the
// whole VMAPI process exits.
const (
	DefaultPingInterval   = 10 * time.Second
	DefaultPongTimeout    = 25 * time.Second
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
	Object *dc.VM
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
// bootstrap and every change item; it pings the publisher and reconnects,
// with backoff, whenever the connection fails or stops answering.
type Changefeed struct {
	rest restClient
	opts ChangefeedOptions
	// PingInterval is how often a WebSocket ping is sent; PongTimeout is
	// how long the connection may stay silent (no pong, no item) before it
	// is given up as dead. PongTimeout should span two or more pings.
	PingInterval, PongTimeout time.Duration
	RetryMin, RetryMax        time.Duration
	Logger                    *slog.Logger
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
	return &Changefeed{rest: rc, opts: opts,
		PingInterval: DefaultPingInterval, PongTimeout: DefaultPongTimeout,
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
	_ = ws.SetWriteDeadline(time.Now().Add(changefeedDialTimeout))
	if err := ws.WriteMessage(websocket.TextMessage, reg); err != nil {
		return false, fmt.Errorf("changefeed register: %w", err)
	}

	pongTimeout := cmp.Or(c.PongTimeout, DefaultPongTimeout)
	alive := func() { _ = ws.SetReadDeadline(time.Now().Add(pongTimeout)) }
	alive()
	// The pong handler runs inside ReadMessage, on this goroutine.
	ws.SetPongHandler(func(string) error { alive(); return nil })

	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var pingErr error // why the pinger ended the connection; read after wg.Wait
	wg.Go(func() {
		// Closing the socket when ctx ends or a ping fails ends the read.
		defer ws.Close()
		pingErr = c.ping(sctx, ws)
	})

	var booted bool
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			cancel()
			wg.Wait()
			var ce *websocket.CloseError
			var ne net.Error
			switch {
			case pingErr != nil:
				err = pingErr
			case errors.As(err, &ce):
				err = fmt.Errorf("changefeed closed by the publisher: %d %s", ce.Code, ce.Text)
			case errors.As(err, &ne) && ne.Timeout():
				err = fmt.Errorf("changefeed: no pong or item for %s: the connection is dead or half-open", pongTimeout)
			}
			return booted, err
		}
		alive()
		ev, ours, err := decodeFrame(msg, c.opts.Resource)
		if err != nil {
			return booted, err
		}
		if !ours {
			continue // another resource, or something unknown
		}
		booted = booted || ev.Bootstrap
		select {
		case out <- ev:
		case <-ctx.Done():
			return booted, ctx.Err()
		}
	}
}

// decodeFrame decodes one message of the publisher: a bootstrap, or a
// change item about resource; ours is false for anything else.
func decodeFrame(msg []byte, resource string) (ev ChangefeedEvent, ours bool, err error) {
	var f frame
	if err := json.Unmarshal(msg, &f); err != nil {
		return ev, false, fmt.Errorf("changefeed: malformed frame %.80q: %w", msg, err)
	}
	switch {
	case f.BootstrapRoute != nil || len(f.BootstrapRoutes) > 0:
		ev.Bootstrap = true
	case f.ChangedResourceID != "" && f.ChangeKind != nil && f.ChangeKind.Resource == resource:
		// A change before the bootstrap ("Invalid socket state" to the
		// Node listener) is harmless: it only asks for a fetch.
		ch := &Change{UUID: f.ChangedResourceID, SubResources: f.ChangeKind.SubResources}
		if len(f.ResourceObject) > 0 && string(f.ResourceObject) != "null" {
			if vm, err := dc.DecodeVM(f.ResourceObject); err == nil && strings.EqualFold(vm.UUID, ch.UUID) {
				ch.Object, ch.Raw = &vm, slices.Clone([]byte(f.ResourceObject))
			}
		}
		ev.Change = ch
	default:
		return ev, false, nil
	}
	return ev, true, nil
}

// ping sends a WebSocket ping every PingInterval until ctx ends; the pongs
// keep the read deadline moving. It returns why it stopped early.
func (c *Changefeed) ping(ctx context.Context, ws *websocket.Conn) error {
	t := time.NewTicker(cmp.Or(c.PingInterval, DefaultPingInterval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// WriteControl may run beside the reader and other writers.
		if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(changefeedDialTimeout)); err != nil {
			return fmt.Errorf("changefeed ping: %w", err)
		}
	}
}
