package sdcsim

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tritondatacenter/cns/feeds/dc"
)

type feedItem struct {
	ChangeKind struct {
		Resource     string   `json:"resource"`
		SubResources []string `json:"subResources"`
	} `json:"changeKind"`
	ChangedResourceID string          `json:"changedResourceId"`
	ResourceObject    json.RawMessage `json:"resourceObject"`
	Published         string          `json:"published"`
	BootstrapRoute    string          `json:"bootstrapRoute"`
}

func registration(instance string, subs []string) []byte {
	b, _ := json.Marshal(map[string]any{
		"instance":   instance,
		"service":    "cns",
		"changeKind": map[string]any{"resource": "vm", "subResources": subs},
	})
	return b
}

// dialFeed connects, registers and returns the connection once the
// registration is in the publisher's table. It does not read the bootstrap.
func dialFeed(t *testing.T, s *Sim, instance string, subs []string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(s.ChangefeedURL(), nil)
	if err != nil {
		t.Fatalf("dial changefeed: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	if err := ws.WriteMessage(websocket.TextMessage, registration(instance, subs)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "registration of "+instance, func() bool { return slices.Contains(s.FeedListeners(), instance) })
	return ws
}

func readItem(t *testing.T, ws *websocket.Conn) feedItem {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, data, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	var it feedItem
	if err := json.Unmarshal(data, &it); err != nil {
		t.Fatalf("frame %q: %v", data, err)
	}
	return it
}

func readBootstrap(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	if it := readItem(t, ws); it.BootstrapRoute != "/vms" {
		t.Fatalf("first frame %+v, want the bootstrap", it)
	}
}

// GET /changefeeds/stats is answered as changefeed 1.5.2+ does: safely
// while nobody is registered, and by the VMAPI process exiting once a
// listener is (its registrations hold the live websocket). The crash
// resets every changefeed connection and fails Close.
func TestChangefeedProbeAndStats(t *testing.T) {
	s, err := New(testInventory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var res map[string]resourceInfo
	if code, _ := get(t, s.VMAPIURL(), "/changefeeds", &res); code != 200 || res["vm"].BootstrapRoute != "/vms" ||
		!slices.Equal(res["vm"].SubResources, VMSubResources) {
		t.Fatalf("GET /changefeeds: %d %+v", code, res)
	}
	var stats struct {
		Listeners     int                                   `json:"listeners"`
		Registrations map[string]map[string]json.RawMessage `json:"registrations"`
	}
	if code, _ := get(t, s.VMAPIURL(), "/changefeeds/stats", &stats); code != 200 || stats.Listeners != 1 ||
		stats.Registrations["vm"] == nil || len(stats.Registrations["vm"]) != 0 || len(s.Crashes()) != 0 {
		t.Fatalf("stats with nobody registered: %d %+v, crashes %q", code, stats, s.Crashes())
	}

	ws := dialFeed(t, s, "inst-1", VMSubResources)
	readBootstrap(t, ws)
	// A fresh connection: net/http retries an idempotent GET whose reused
	// connection died, and the retry would reach the "restarted" VMAPI.
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := fresh.Get(s.VMAPIURL() + "/changefeeds/stats"); err == nil {
		resp.Body.Close()
		t.Fatalf("stats with a registered listener answered %d (crashes %q); the real VMAPI exits", resp.StatusCode, s.Crashes())
	}
	if c := s.Crashes(); len(c) != 1 || !strings.Contains(c[0], "circular structure") {
		t.Fatalf("crashes %q", c)
	}
	var ce *websocket.CloseError
	if _, _, err := ws.ReadMessage(); err == nil || errors.As(err, &ce) {
		t.Fatalf("listener after the crash: %v, want a transport error", err)
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "would have made a real service exit") {
		t.Fatalf("Close after a crash: %v", err)
	}
}

// The publisher's websocket library answers pings with the same payload;
// a half-open connection answers nothing.
func TestChangefeedAnswersPings(t *testing.T) {
	s := startSim(t, Options{})
	ws := dialFeed(t, s, "pinger", VMSubResources)
	readBootstrap(t, ws)
	pong := make(chan string, 4)
	ws.SetPongHandler(func(data string) error { pong <- data; return nil })
	// Pong handlers run inside reads; keep one going.
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				close(pong)
				return
			}
		}
	}()
	if err := ws.WriteControl(websocket.PingMessage, []byte("n1"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := <-pong; got != "n1" {
		t.Fatalf("pong %q, want n1", got)
	}
	s.DropFeeds(DropHalfOpen)
	if err := ws.WriteControl(websocket.PingMessage, []byte("n2"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// Absence can only be checked over a bounded wait.
	select {
	case got, ok := <-pong:
		if ok {
			t.Fatalf("half-open connection answered a ping: %q", got)
		}
	case <-time.After(300 * time.Millisecond):
	}
}

func TestChangefeedEvents(t *testing.T) {
	s := startSim(t, Options{ResourceObject: true})
	all := dialFeed(t, s, "all", VMSubResources)
	readBootstrap(t, all)
	stateOnly := dialFeed(t, s, "state-only", []string{"state"})
	readBootstrap(t, stateOnly)

	// A tag change reaches "all" only; its subResources carry last_modified
	// too, which nobody registered for.
	if err := s.SetTag(vmID(1), "triton.cns.services", "api"); err != nil {
		t.Fatal(err)
	}
	it := readItem(t, all)
	if it.ChangedResourceID != vmID(1) || !slices.Equal(it.ChangeKind.SubResources, []string{"last_modified", "tags"}) ||
		it.ChangeKind.Resource != "vm" || it.Published == "" {
		t.Fatalf("tag item %+v", it)
	}
	var obj dc.VM
	if err := json.Unmarshal(it.ResourceObject, &obj); err != nil || obj.Tags["triton.cns.services"] != "api" {
		t.Fatalf("resourceObject %s: %v", it.ResourceObject, err)
	}

	if err := s.StopVM(vmID(2)); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []*websocket.Conn{all, stateOnly} {
		// For stateOnly this is the first item: the tag change never came.
		it := readItem(t, ws)
		if it.ChangedResourceID != vmID(2) || !slices.Contains(it.ChangeKind.SubResources, "state") ||
			!slices.Contains(it.ChangeKind.SubResources, "zone_state") {
			t.Fatalf("stop item %+v", it)
		}
	}

	// Client heartbeats are ignored.
	if err := all.WriteMessage(websocket.TextMessage, []byte("heartbeat")); err != nil {
		t.Fatal(err)
	}
	if err := s.DestroyVM(vmID(3)); err != nil {
		t.Fatal(err)
	}
	it = readItem(t, all)
	if it.ChangedResourceID != vmID(3) || !slices.Contains(it.ChangeKind.SubResources, "destroyed") {
		t.Fatalf("destroy item %+v", it)
	}
	var vm map[string]any
	if code, _ := get(t, s.VMAPIURL(), "/vms/"+vmID(3), &vm); code != 200 || vm["state"] != "destroyed" {
		t.Fatalf("GET destroyed VM: %d %v", code, vm["state"])
	}
}

func TestChangefeedCreateListsEveryKey(t *testing.T) {
	s := startSim(t, Options{})
	ws := dialFeed(t, s, "i", VMSubResources)
	readBootstrap(t, ws)
	if err := s.CreateVM(testVM(20, "provisioning")); err != nil {
		t.Fatal(err)
	}
	it := readItem(t, ws)
	for _, k := range []string{"uuid", "state", "nics", "tags", "owner_uuid", "alias", "billing_id"} {
		if !slices.Contains(it.ChangeKind.SubResources, k) {
			t.Errorf("create item lacks %q: %v", k, it.ChangeKind.SubResources)
		}
	}
}

// changefeed 1.5.x sends an item once per matching subResource entry.
func TestChangefeedDuplicateFanout(t *testing.T) {
	s := startSim(t, Options{DuplicateFanout: true})
	ws := dialFeed(t, s, "i", VMSubResources)
	readBootstrap(t, ws)
	err := s.ModifyVM(vmID(1), func(vm *dc.VM) {
		vm.State = "stopped"
		vm.NICs[0].IP = "198.51.100.201"
		vm.NICs[0].IPs = []string{"198.51.100.201/24"}
	})
	if err != nil {
		t.Fatal(err)
	}
	// state + nics (ip) + nics (ips[0]) match: three copies.
	for i := range 3 {
		it := readItem(t, ws)
		if it.ChangedResourceID != vmID(1) {
			t.Fatalf("copy %d: %+v", i, it)
		}
		if n := strings.Count(strings.Join(it.ChangeKind.SubResources, ","), "nics"); n != 2 {
			t.Fatalf("subResources %v: want nics twice", it.ChangeKind.SubResources)
		}
	}
	if err := s.SetAlias(vmID(2), "sentinel"); err != nil {
		t.Fatal(err)
	}
	if it := readItem(t, ws); it.ChangedResourceID != vmID(2) {
		t.Fatalf("after three copies got %+v, want the sentinel", it)
	}
}

func TestChangefeedRegistrationRejected(t *testing.T) {
	s := startSim(t, Options{})
	for _, tc := range []struct{ reg, reason string }{
		{`not json`, "Invalid registration"},
		{`{"changeKind":{"resource":"vm","subResources":["state"]}}`, "missing instance"},
		{`{"instance":"x"}`, "missing changeKind"},
		{`{"instance":"x","changeKind":{"resource":"server","subResources":["state"]}}`, "Unknown resource: server"},
	} {
		ws, _, err := websocket.DefaultDialer.Dial(s.ChangefeedURL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ws.WriteMessage(websocket.TextMessage, []byte(tc.reg)); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, err = ws.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || !strings.Contains(ce.Text, tc.reason) {
			t.Errorf("%s: %v, want a close with %q", tc.reg, err, tc.reason)
		}
		ws.Close()
	}
	if n := len(s.FeedListeners()); n != 0 {
		t.Errorf("%d listeners registered", n)
	}
}

// Changefeed 1.4.0 upgrades without Sec-WebSocket-Version.
func TestChangefeedUpgradeWithoutVersionHeader(t *testing.T) {
	s := startSim(t, Options{})
	u, _ := url.Parse(s.VMAPIURL())
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var key [16]byte
	_, _ = rand.Read(key[:])
	req := "GET /changefeeds HTTP/1.1\r\nHost: " + u.Host + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key[:]) + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade without version: %s", resp.Status)
	}
	writeMaskedText(t, conn, registration("old-node", VMSubResources))
	if got := readRawText(t, br); !strings.Contains(got, `"bootstrapRoute":"/vms"`) {
		t.Fatalf("bootstrap %q", got)
	}
}

func writeMaskedText(t *testing.T, w io.Writer, payload []byte) {
	t.Helper()
	frame := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		frame = append(frame, 0x80|byte(n))
	default:
		frame = append(frame, 0x80|126, byte(n>>8), byte(n))
	}
	mask := [4]byte{1, 2, 3, 4}
	frame = append(frame, mask[:]...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	if _, err := w.Write(frame); err != nil {
		t.Fatal(err)
	}
}

func readRawText(t *testing.T, r io.Reader) string {
	t.Helper()
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatal(err)
	}
	n := int(hdr[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			t.Fatal(err)
		}
		n = int(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			t.Fatal(err)
		}
		n = int(binary.BigEndian.Uint64(ext[:]))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestChangefeedNoListenerDropsItems(t *testing.T) {
	s := startSim(t, Options{})
	if err := s.SetAlias(vmID(1), "lost"); err != nil { // nobody listens
		t.Fatal(err)
	}
	ws := dialFeed(t, s, "late", VMSubResources)
	readBootstrap(t, ws)
	if err := s.SetAlias(vmID(2), "seen"); err != nil {
		t.Fatal(err)
	}
	if it := readItem(t, ws); it.ChangedResourceID != vmID(2) {
		t.Fatalf("first item %+v, want the change made after registration", it)
	}
}

func TestChangefeedDrops(t *testing.T) {
	s := startSim(t, Options{})

	ws := dialFeed(t, s, "close", VMSubResources)
	readBootstrap(t, ws)
	if n := s.DropFeeds(DropClose); n != 1 {
		t.Fatalf("DropFeeds = %d", n)
	}
	_, _, err := ws.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("after DropClose: %v, want close 1001", err)
	}
	waitFor(t, "no listeners", func() bool { return len(s.FeedListeners()) == 0 })

	ws = dialFeed(t, s, "reset", VMSubResources)
	readBootstrap(t, ws)
	s.DropFeeds(DropReset)
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	if err == nil || errors.As(err, &ce) {
		t.Fatalf("after DropReset: %v, want a transport error", err)
	}

	ws = dialFeed(t, s, "half", VMSubResources)
	readBootstrap(t, ws)
	s.DropFeeds(DropHalfOpen)
	if len(s.FeedListeners()) != 0 {
		t.Fatal("half-open connection still registered")
	}
	if err := s.SetAlias(vmID(1), "unseen"); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte("heartbeat")); err != nil {
		t.Fatalf("heartbeat on a half-open feed: %v, want success", err)
	}
	// Absence can only be checked over a bounded wait.
	_ = ws.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, _, err = ws.ReadMessage()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("half-open read: %v, want a timeout", err)
	}
}

func TestChangefeedFaults(t *testing.T) {
	s := startSim(t, Options{})

	s.SetFeedFaults(FeedFaults{RefuseUpgrade: http.StatusServiceUnavailable})
	_, resp, err := websocket.DefaultDialer.Dial(s.ChangefeedURL(), nil)
	if !errors.Is(err, websocket.ErrBadHandshake) || resp.StatusCode != 503 {
		t.Fatalf("refused upgrade: %v", err)
	}

	s.SetFeedFaults(FeedFaults{ChangeBeforeBootstrap: true, DoubleBootstrap: true})
	ws := dialFeed(t, s, "odd", VMSubResources)
	if it := readItem(t, ws); it.ChangedResourceID == "" || it.BootstrapRoute != "" {
		t.Fatalf("first frame %+v, want a change", it)
	}
	readBootstrap(t, ws)
	readBootstrap(t, ws)

	s.SetFeedFaults(FeedFaults{DropItems: 1, DuplicateItems: 1})
	if err := s.SetAlias(vmID(1), "dropped"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAlias(vmID(2), "doubled"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if it := readItem(t, ws); it.ChangedResourceID != vmID(2) {
			t.Fatalf("got %+v, want vm 2 twice", it)
		}
	}

	s.SetFeedFaults(FeedFaults{Paused: true})
	if err := s.SetAlias(vmID(3), "held"); err != nil {
		t.Fatal(err)
	}
	if n := s.PendingFeedItems(); n != 1 {
		t.Fatalf("pending = %d while paused", n)
	}
	s.SetFeedFaults(FeedFaults{})
	if it := readItem(t, ws); it.ChangedResourceID != vmID(3) {
		t.Fatalf("after unpause %+v", it)
	}

	s.SendFeedFrame("{not json")
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, data, err := ws.ReadMessage(); err != nil || string(data) != "{not json" {
		t.Fatalf("malformed frame: %q %v", data, err)
	}

	// An event for a VM that then 404s.
	if err := s.PurgeVM(vmID(4)); err != nil {
		t.Fatal(err)
	}
	s.PublishChange(vmID(4), "state")
	if it := readItem(t, ws); it.ChangedResourceID != vmID(4) {
		t.Fatalf("raw item %+v", it)
	}
	if code, _ := get(t, s.VMAPIURL(), "/vms/"+vmID(4), nil); code != 404 {
		t.Fatalf("purged VM: %d", code)
	}
}

func TestChangefeedDeliveryInterval(t *testing.T) {
	s := startSim(t, Options{DeliveryInterval: 20 * time.Millisecond})
	ws := dialFeed(t, s, "i", VMSubResources)
	readBootstrap(t, ws)
	if err := s.SetAlias(vmID(1), "ticked"); err != nil {
		t.Fatal(err)
	}
	if it := readItem(t, ws); it.ChangedResourceID != vmID(1) {
		t.Fatalf("item %+v", it)
	}
}

func TestChangefeedV2AndBurst(t *testing.T) {
	s := startSim(t, Options{})
	hdr := http.Header{"Accept-Version": {"~2"}}
	ws, _, err := websocket.DefaultDialer.Dial(s.ChangefeedURL(), hdr)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	reg := `{"instance":"v2","service":"cns","resources":[{"resource":"vm","subResources":["state"]}]}`
	if err := ws.WriteMessage(websocket.TextMessage, []byte(reg)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, data, err := ws.ReadMessage()
	if err != nil || !strings.Contains(string(data), `"bootstrapRoutes":[{"resource":"vm"`) {
		t.Fatalf("v2 bootstrap %q: %v", data, err)
	}

	// A CN reboot: every live VM on it stops, one item each.
	n, err := s.ModifyVMsOnServer(serverA, func(vm *dc.VM) { vm.State, vm.ZoneState = "stopped", "installed" })
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 { // VMs 1..5 and 8 (6 was already stopped, 7 is destroyed)
		t.Fatalf("burst changed %d VMs", n)
	}
	seen := map[string]bool{}
	for range n {
		seen[readItem(t, ws).ChangedResourceID] = true
	}
	if len(seen) != n {
		t.Fatalf("burst items for %d VMs, want %d", len(seen), n)
	}
}
