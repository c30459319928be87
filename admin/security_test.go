package admin

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Every route of the real handler, called in memory from a remote address
// (no traffic leaves the host): without a token the mutating ones answer
// 403 and, with read_token set, the others 401 (/ping excepted); with the
// token they get past authentication; from loopback the mutating ones need
// no token.
func TestRoutesRefuseRemoteCallers(t *testing.T) {
	s := startStoredDemo(t).server(slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Token, s.ReadToken, s.Reload = "write-secret", "read-secret", func() error { return nil }
	h := s.Handler()
	// A concrete request for every route of the table, so that a new route
	// is checked without anyone listing it here.
	samples := map[string]string{"{uuid}": cloudapiVM, "{addr}": "10.0.0.1", "{zone}": publicZone, "{owner}": "alice", "{name}": "web"}
	query := map[string]string{"GET /vms": "?q=web", "GET /wait": "?zone=" + publicZone + "&serial=1&timeout=0", "/": "nothing/here"}
	type call struct{ method, path string }
	var writes, reads []call
	for _, r := range s.routes() {
		method, path, ok := strings.Cut(r.pattern, " ")
		if !ok {
			method, path = "GET", r.pattern
		}
		for k, v := range samples {
			path = strings.ReplaceAll(path, k, v)
		}
		c := call{method, path + query[r.pattern]}
		switch r.access {
		case mutating:
			writes = append(writes, c)
		case reading:
			reads = append(reads, c)
		default:
			if r.pattern != "GET /ping" {
				t.Errorf("route %q is open to anyone: only GET /ping may be", r.pattern)
			}
		}
	}
	if len(writes) < 8 || len(reads) < 17 {
		t.Fatalf("the route table lists %d mutating and %d read routes", len(writes), len(reads))
	}
	do := func(method, path, remote, token string) int {
		// The profiles stop when the request's context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req := httptest.NewRequest(method, path, strings.NewReader("{}")).WithContext(ctx)
		req.RemoteAddr = remote
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if strings.Contains(rec.Body.String(), "write-secret") || strings.Contains(rec.Body.String(), "read-secret") {
			t.Errorf("%s %s: the answer shows a token", method, path)
		}
		return rec.Code
	}
	for _, r := range writes {
		for _, tok := range []string{"", "read-secret", "wrong"} {
			if code := do(r.method, r.path, "192.0.2.7:5000", tok); code != 403 {
				t.Errorf("%s %s from a remote caller with token %q: %d, want 403", r.method, r.path, tok, code)
			}
		}
		if code := do(r.method, r.path, "192.0.2.7:5000", "write-secret"); code == 401 || code == 403 {
			t.Errorf("%s %s with the token: %d", r.method, r.path, code)
		}
		if code := do(r.method, r.path, "127.0.0.1:5000", ""); code == 401 || code == 403 {
			t.Errorf("%s %s from loopback: %d", r.method, r.path, code)
		}
	}
	for _, r := range reads {
		if code := do(r.method, r.path, "192.0.2.7:5000", ""); code != 401 {
			t.Errorf("%s %s from a remote caller without a token: %d, want 401", r.method, r.path, code)
		}
		if code := do(r.method, r.path, "192.0.2.7:5000", "read-secret"); code == 401 || code == 403 {
			t.Errorf("%s %s with the read token: %d", r.method, r.path, code)
		}
	}
	if code := do("GET", "/ping", "192.0.2.7:5000", ""); code != 200 {
		t.Errorf("/ping from a remote caller: %d", code)
	}
}
