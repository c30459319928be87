package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// fakeDirectory is a Directory holding some accounts and network pools
// (plain networks are the UUIDs in nets), or failing.
type fakeDirectory struct {
	mu       sync.Mutex
	accounts []dc.User
	nets     []string
	pools    []dc.NetworkPool
	down     bool
	asked    []string
}

func (d *fakeDirectory) Account(_ context.Context, id string) (dc.User, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, "account "+id)
	if d.down {
		return dc.User{}, false, errors.New("ufds: connection refused")
	}
	for _, u := range d.accounts {
		if u.UUID == id || u.Login == id {
			return u, true, nil
		}
	}
	return dc.User{}, false, nil
}

func (d *fakeDirectory) Network(_ context.Context, id string) (*dc.NetworkPool, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, "network "+id)
	if d.down {
		return nil, false, errors.New("napi: 503")
	}
	if slices.Contains(d.nets, id) {
		return nil, true, nil
	}
	for _, p := range d.pools {
		if p.UUID == id {
			return &p, true, nil
		}
	}
	return nil, false, nil
}

// POST /suffixes-for-vm for owners and networks the model does not hold:
// looked up, and answered as the reference answers (500 with its message
// only when the owner or a network cannot be had).
func TestSuffixesOnDemand(t *testing.T) {
	d := startStoredDemo(t)
	const (
		newbie     = "5e1f0c2a-7b3d-4c8e-9a61-0d2b4f6e8a10"
		external   = "5840750e-9b5f-413b-9413-4c392c07ca35" // in the pool the public zone lists
		newPool    = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f" // NAPI has it, the model not yet
		newNetwork = "0b7a3c1e-2d4f-4a6b-8c9d-1e2f3a4b5c6d" // NAPI has it, no VM uses it
		nowhere    = "1d2e3f4a-5b6c-4d7e-8f9a-0b1c2d3e4f5a" // NAPI has no such thing
	)
	dir := &fakeDirectory{
		accounts: []dc.User{{UUID: newbie, Login: "new.bie", TritonCNSEnabled: "true"}},
		nets:     []string{newNetwork},
		pools:    []dc.NetworkPool{{UUID: newPool, Networks: []string{external}}},
	}
	pub := func(owner string) []string {
		return []string{"svc." + owner + "." + publicZone, "inst." + owner + "." + publicZone}
	}
	internal := func(owner string) []string {
		return []string{"svc." + owner + ".us-west-1.int.example.com", "inst." + owner + ".us-west-1.int.example.com"}
	}
	cases := []struct {
		name     string
		dir      *fakeDirectory // nil: no Directory
		down     bool
		owner    string
		networks []string
		status   int
		want     []string // suffixes, or the error message
		asked    []string
	}{
		{"owner the model holds", dir, false, aliceUUID, []string{"c66bd90b-6e21-4a55-a4b5-18f6010c6b14"}, 200, pub("alice"), nil},
		{"held owner while UFDS is down", dir, true, aliceUUID, []string{"c66bd90b-6e21-4a55-a4b5-18f6010c6b14"}, 200, pub("alice"), nil},
		{"account with no VMs", dir, false, newbie, []string{newNetwork}, 200, internal("new-bie"),
			[]string{"account " + newbie, "network " + newNetwork}},
		{"account by login", dir, false, "new.bie", nil, 200, []string{}, []string{"account new.bie"}},
		{"no networks", dir, false, newbie, []string{}, 200, []string{}, []string{"account " + newbie}},
		{"a pool NAPI has, the model not yet", dir, false, newbie, []string{newPool}, 200, pub("new-bie"),
			[]string{"account " + newbie, "network " + newPool}},
		{"UFDS has no such account", dir, false, "00000000-0000-4000-8000-000000000000", nil, 500, []string{msgNoOwner},
			[]string{"account 00000000-0000-4000-8000-000000000000"}},
		{"UFDS down", dir, true, newbie, nil, 500, []string{msgNoOwner}, []string{"account " + newbie}},
		{"NAPI has no such network", dir, false, aliceUUID, []string{nowhere}, 500, []string{msgNoNetworks}, []string{"network " + nowhere}},
		{"NAPI down", dir, true, aliceUUID, []string{nowhere}, 500, []string{msgNoNetworks}, []string{"network " + nowhere}},
		{"no directory: unknown owner", nil, false, newbie, nil, 500, []string{msgNoOwner}, nil},
		{"no directory: unknown network is a plain one", nil, false, aliceUUID, []string{nowhere}, 200, internal("alice"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := d.server(slog.New(slog.NewTextHandler(io.Discard, nil)))
			if tc.dir != nil {
				tc.dir.down, tc.dir.asked = tc.down, nil
				s.Directory = tc.dir
			}
			body, _ := json.Marshal(SuffixesRequest{OwnerUUID: tc.owner, Networks: tc.networks})
			req := httptest.NewRequest("POST", "/suffixes-for-vm", bytes.NewReader(body))
			req.RemoteAddr = "127.0.0.1:4000"
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			var got []string
			if rec.Code == http.StatusOK {
				var v Suffixes
				json.Unmarshal(rec.Body.Bytes(), &v)
				got = v.Suffixes
			} else {
				var e Error
				json.Unmarshal(rec.Body.Bytes(), &e)
				got = []string{e.Message}
			}
			if !slices.Equal(got, tc.want) || got == nil {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if tc.dir != nil && !slices.Equal(tc.dir.asked, tc.asked) {
				t.Errorf("asked the directory %q, want %q", tc.dir.asked, tc.asked)
			}
		})
	}
}
