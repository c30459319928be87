package sdc

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/feeds/dc"
)

func vmAt(uuid, alias, modified string) dc.VM {
	return dc.VM{UUID: uuid, Alias: &alias, LastModified: modified, State: "running"}
}

// A resourceObject is applied when newer than what was applied, ignored
// when the same, fetched when older (the CN clocks of a migration) or
// when it cannot be ordered.
func TestJudgeResourceObject(t *testing.T) {
	f := &Feed{applied: map[string]appliedVM{}}
	const id = "00000000-0000-4000-8000-000000000001"
	change := func(modified string) *Change {
		vm := vmAt(id, "x", modified)
		raw, _ := json.Marshal(vm)
		return &Change{UUID: id, Object: &vm, Raw: raw}
	}
	t0 := change("2026-01-01T00:00:05.000Z")
	if got := f.judge(id, t0); got != objApply {
		t.Fatalf("first object: %v", got)
	}
	f.applied[id] = appliedVM{modified: must(time.Parse(time.RFC3339Nano, "2026-01-01T00:00:05.000Z")), hash: hashRaw(t0.Raw)}
	for _, tc := range []struct {
		c    *Change
		want judgement
	}{
		{t0, objStale}, // a duplicate
		{change("2026-01-01T00:00:04.000Z"), objFetch},
		{change("2026-01-01T00:00:06.000Z"), objApply},
		{change(""), objFetch},
	} {
		if got := f.judge(id, tc.c); got != tc.want {
			t.Errorf("last_modified %q: %v, want %v", tc.c.Object.LastModified, got, tc.want)
		}
	}
	// Same time, other content: cannot tell which is last.
	other := change("2026-01-01T00:00:05.000Z")
	other.Object.State = "stopped"
	other.Raw, _ = json.Marshal(other.Object)
	if got := f.judge(id, other); got != objFetch {
		t.Errorf("same time, other object: %v", got)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Changes to one VM coalesce into one pending item that keeps the
// newest object while each is newer than the last, and turns into a
// fetch once one looks older (a migration to a CN whose clock is behind,
// or a reordered item: VMAPI decides which is current).
func TestEnqueueCoalesces(t *testing.T) {
	f := &Feed{queue: newVMQueue(time.Second, time.Second)}
	q := f.queue
	const id = "00000000-0000-4000-8000-000000000001"
	olderVM, newerVM := vmAt(id, "old", "2026-01-01T00:00:05.000Z"), vmAt(id, "new", "2026-01-01T00:00:06.000Z")
	f.enqueue(&Change{UUID: id, Object: &olderVM, Raw: []byte("o")})
	f.enqueue(&Change{UUID: id, Object: &newerVM, Raw: []byte("n")})
	f.enqueue(&Change{UUID: id})
	if len(q.ready) != 1 || len(q.pending) != 1 || q.pending[id].change.Object.AliasString() != "new" || q.pending[id].fetch {
		t.Fatalf("ready %v, pending %+v", q.ready, q.pending[id])
	}
	// An object older than the one kept: fetch, whatever comes after.
	f.enqueue(&Change{UUID: id, Object: &olderVM, Raw: []byte("o")})
	latest := vmAt(id, "latest", "2026-01-01T00:00:07.000Z")
	f.enqueue(&Change{UUID: id, Object: &latest, Raw: []byte("l"), SubResources: []string{"state"}})
	if p := q.pending[id]; !p.fetch || p.change != nil || !p.stateChanged {
		t.Fatalf("after an older object: %+v, want a fetch with the state flag", p)
	}
	got, p, ok := q.take()
	if !ok || got != id || !p.fetch {
		t.Fatal("take")
	}
	// A change while in flight waits for the fetch to finish.
	f.enqueue(&Change{UUID: id})
	if len(q.ready) != 0 {
		t.Fatal("queued while in flight")
	}
	q.finish(id, p, nil)
	if len(q.ready) != 1 {
		t.Fatal("not queued after the fetch")
	}
}

func TestBackoff(t *testing.T) {
	b := backoff{min: time.Second, max: 8 * time.Second}
	var last time.Duration
	for i := range 10 {
		d := b.next()
		ceiling := min(time.Second<<i, 8*time.Second)
		if d < ceiling/2 || d > ceiling {
			t.Fatalf("delay %d: %v outside [%v, %v]", i, d, ceiling/2, ceiling)
		}
		last = d
	}
	b.reset()
	if d := b.next(); d > time.Second || last < 4*time.Second {
		t.Fatalf("after reset %v (last %v)", d, last)
	}
}

func TestAddresses(t *testing.T) {
	for in, want := range map[string]string{
		"vmapi.coal.joyent.us":      "http://vmapi.coal.joyent.us",
		"10.0.0.5:8080":             "http://10.0.0.5:8080",
		"http://127.0.0.1:4000/":    "http://127.0.0.1:4000",
		"https://vmapi.example.com": "https://vmapi.example.com",
	} {
		if u, err := HTTPURL(in); err != nil || u.String() != want {
			t.Errorf("HTTPURL(%q) = %v, %v; want %s", in, u, err, want)
		}
	}
	for in, want := range map[string]string{
		"ufds.coal.joyent.us":   "ldaps://ufds.coal.joyent.us:636",
		"ldap://127.0.0.1":      "ldap://127.0.0.1:389",
		"ldaps://127.0.0.1:999": "ldaps://127.0.0.1:999",
	} {
		if u, err := LDAPURL(in); err != nil || u != want {
			t.Errorf("LDAPURL(%q) = %v, %v; want %s", in, u, err, want)
		}
	}
	for _, bad := range []string{"", "ftp://x", "http://"} {
		if _, err := HTTPURL(bad); err == nil {
			t.Errorf("HTTPURL(%q) accepted", bad)
		}
	}
	if _, err := LDAPURL("http://x"); err == nil {
		t.Error("LDAPURL accepted http")
	}
}

func TestParseEndpoints(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	ep, err := ParseEndpoints(raw(`{"address":"vmapi.x","limit":5000}`), raw(`{"address":"cnapi.x"}`),
		raw(`{"address":"napi.x"}`), raw(`{"address":"ufds.x","bindDN":"cn=root","bindPassword":"secret"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ep.VMAPI.Limit != MaxVMAPILimit || ep.Changefeed.Resource != "vm" || !slices.Equal(ep.Changefeed.SubResources, DefaultSubResources) || ep.Changefeed.Instance == "" {
		t.Fatalf("%+v", ep)
	}
	for _, tc := range []struct {
		key  string
		opts [5]string
	}{
		{"cnapi_opts", [5]string{`{"address":"v"}`, ``, `{"address":"n"}`, `{"address":"u"}`, ``}},
		{"napi_opts.address", [5]string{`{"address":"v"}`, `{"address":"c"}`, `{"address":"ftp://n"}`, `{"address":"u"}`, ``}},
		{"ufds_opts.ca_file", [5]string{`{"address":"v"}`, `{"address":"c"}`, `{"address":"n"}`, `{"address":"u","ca_file":"/nonexistent"}`, ``}},
		{"changefeed_opts.resource", [5]string{`{"address":"v"}`, `{"address":"c"}`, `{"address":"n"}`, `{"address":"u"}`, `{"resource":"server"}`}},
		{"vmapi_opts", [5]string{`{"address":5}`, `{"address":"c"}`, `{"address":"n"}`, `{"address":"u"}`, ``}},
	} {
		var r [5]json.RawMessage
		for i, o := range tc.opts {
			if o != "" {
				r[i] = raw(o)
			}
		}
		_, err := ParseEndpoints(r[0], r[1], r[2], r[3], r[4])
		oe, ok := err.(*OptionError)
		if !ok || oe.Key != tc.key {
			t.Errorf("want an error on %s, got %v", tc.key, err)
		}
	}
}

func TestChangedAttrs(t *testing.T) {
	for in, want := range map[string][]string{
		`[{"operation":"replace","modification":{"type":"triton_cns_enabled","vals":["true"]}},{"operation":"delete","modification":{"type":"Login","vals":[]}}]`: {"triton_cns_enabled", "login"},
		`{"uuid":["x"],"login":["y"],"approved_for_provisioning":["true"]}`:                                                                                       {"approved_for_provisioning", "login", "uuid"},
		`not json`: nil,
	} {
		if got := changedAttrs(in); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
}

// A failed fetch waits out a backoff and is then queued again; stop ends
// every such wait at once (the VM is queued for the next start) and
// leaves no timer of the queue behind the feed's Run.
func TestQueueRetryAndStop(t *testing.T) {
	const id = "00000000-0000-4000-8000-000000000001"
	// fail fails a fetch; with a long backoff, the VM must not be queued
	// again at once (with a 1 ms one the retry may already have come).
	fail := func(q *vmQueue, longBackoff bool) {
		t.Helper()
		q.add(id, &Change{UUID: id})
		got, p, ok := q.take()
		if !ok || got != id {
			t.Fatal("take")
		}
		select {
		case <-q.wake: // the add's signal, taken
		default:
		}
		q.finish(id, p, errors.New("VMAPI down"))
		if !longBackoff {
			return
		}
		if _, _, ok := q.take(); ok {
			t.Fatal("a failed VM was queued again before its backoff")
		}
	}

	q := newVMQueue(time.Millisecond, time.Millisecond)
	fail(q, false)
	select {
	case <-q.wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the retry never came")
	}
	if got, p, ok := q.take(); !ok || got != id || p.attempts != 1 {
		t.Fatalf("after the backoff: %q %+v %v", got, p, ok)
	}

	q = newVMQueue(time.Hour, time.Hour)
	fail(q, true)
	if len(q.retries) != 1 {
		t.Fatalf("%d retry timers", len(q.retries))
	}
	q.stop()
	if len(q.retries) != 0 {
		t.Fatalf("%d retry timers after stop", len(q.retries))
	}
	if got, p, ok := q.take(); !ok || got != id || p.retrying {
		t.Fatalf("after stop: %q %+v %v", got, p, ok)
	}
}

// A change's wait for the changefeed delay starts with the first item not
// yet applied: a failed attempt keeps it for the retry, and an item that
// came while the VM was in flight starts its own after a success.
func TestQueueKeepsFirstArrival(t *testing.T) {
	const id = "00000000-0000-4000-8000-000000000001"
	q := newVMQueue(time.Hour, time.Hour)
	q.add(id, &Change{UUID: id})
	_, p, _ := q.take()
	first := p.arrived
	q.add(id, &Change{UUID: id}) // while p is in flight
	q.finish(id, p, errors.New("VMAPI down"))
	q.stop() // ends the backoff: queued again at once
	_, p, ok := q.take()
	if !ok || !p.arrived.Equal(first) {
		t.Fatalf("after a failure: arrived %v, want the first item's %v (%v)", p.arrived, first, ok)
	}
	for !time.Now().After(first) { // a clock that has moved on since
	}
	q.add(id, &Change{UUID: id}) // while the retry is in flight
	later := time.Now()
	q.finish(id, p, nil)
	if _, p, ok = q.take(); !ok || !p.arrived.Before(later) || p.arrived.Before(first) || p.arrived.Equal(first) {
		t.Fatalf("after a success: arrived %v, want the later item's (between %v and %v) (%v)", p.arrived, first, later, ok)
	}
}
