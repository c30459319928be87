package admin

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// POST /feeds/accept: nothing held applies nothing; a cause it does not
// know, or a body it cannot read, is refused by name; without a feed it
// is unavailable. GET /status and GET /feeds carry the guard.
func TestAcceptRemovalsAPI(t *testing.T) {
	d := startStoredDemo(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := d.server(log).Handler()
	post := func(h http.Handler, body string) (int, string) {
		req := httptest.NewRequest("POST", "/feeds/accept", strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:5000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	for _, tc := range []struct {
		body string
		code int
		has  string
	}{
		{"", 200, `"applied":0`},
		{`{"cause":"cn_down"}`, 200, `"applied":0`},
		{`{"cause":"cosmic_rays"}`, 400, "cosmic_rays"},
		{`{"cuase":"cn_down"}`, 400, "cuase"},
	} {
		if code, body := post(h, tc.body); code != tc.code || !strings.Contains(body, tc.has) {
			t.Errorf("POST /feeds/accept %s: %d %s, want %d with %q", tc.body, code, body, tc.code, tc.has)
		}
	}
	noFeed := (&Server{Store: d.store, DNS: storeDNS{d.store}, Log: log}).Handler()
	if code, _ := post(noFeed, ""); code != http.StatusServiceUnavailable {
		t.Errorf("without a feed: %d", code)
	}
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.RemoteAddr = "127.0.0.1:5000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	for _, c := range []string{"cn_down", "owner_off", "unlisted"} {
		if want := `cns_removals_held{cause="` + c + `"} 0`; !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET /metrics lacks %s", want)
		}
	}
	for _, path := range []string{"/status", "/feeds"} {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = "127.0.0.1:5000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var v struct {
			RemovalGuard *RemovalGuard `json:"removal_guard"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || v.RemovalGuard == nil || v.RemovalGuard.MinVMs != 20 || v.RemovalGuard.Holds == nil {
			t.Errorf("GET %s: removal_guard %+v, %v", path, v.RemovalGuard, err)
		}
	}
}
