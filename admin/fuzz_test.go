package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// panicLog records the handler panics that wrap turns into 500s.
type panicLog struct {
	mu  sync.Mutex
	msg []string
}

func (p *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "api handler panic" {
		p.mu.Lock()
		p.msg = append(p.msg, r.Message)
		r.Attrs(func(a slog.Attr) bool { p.msg = append(p.msg, a.String()); return true })
		p.mu.Unlock()
	}
	return nil
}
func (p *panicLog) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicLog) WithGroup(string) slog.Handler      { return p }

// FuzzAPIBodies sends arbitrary bodies to POST /suffixes-for-vm and
// arbitrary queries to the read endpoints, in process: every answer is a
// JSON document with a 2xx or 4xx status (or the reference's 500 for an
// unknown owner), and no handler panics.
func FuzzAPIBodies(f *testing.F) {
	d := startStoredDemo(f)
	for _, s := range []string{
		`{"owner_uuid":"` + aliceUUID + `","networks":["c66bd90b-6e21-4a55-a4b5-18f6010c6b14","b3659b7a-cf1f-4d3f-a77f-899e12cb2706"]}`,
		`{"owner_uuid":`, `{"networks":[]}`, `{"owner_uuid":"x","nets":[]}`, `{"owner_uuid":"x","networks":["public"]}`,
		`{"owner_uuid":"00000000-0000-4000-8000-000000000000","networks":[]}`, `[]`, `null`, `{"owner_uuid":"` + aliceUUID + `"}{}`,
		`{"owner_uuid":"` + aliceUUID + `","networks":["*"]}`, "\xff\xfe",
	} {
		f.Add(s, "q=web&limit=3")
	}
	f.Add("", "name=cloudapi&limit=2&after=x")
	f.Add("", "since=4294967295")
	log := &panicLog{}
	h := d.server(slog.New(log)).Handler()
	paths := []string{"/vms", "/zones/" + publicZone + "/records", "/zones/" + publicZone + "/history", "/zones", "/feeds", "/status", "/services"}
	f.Fuzz(func(t *testing.T, body, query string) {
		do := func(method, target string, body string) {
			r := httptest.NewRequest(method, "http://cns"+"/", strings.NewReader(body))
			u, err := url.Parse(target)
			if err != nil {
				return
			}
			r.URL = u
			r.RequestURI = u.RequestURI()
			r.RemoteAddr = "127.0.0.1:4000"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			log.mu.Lock()
			panics := log.msg
			log.mu.Unlock()
			if len(panics) > 0 {
				t.Fatalf("%s %s %q: handler panicked: %v", method, target, body, panics)
			}
			res := w.Result()
			if res.StatusCode >= 500 && !strings.Contains(w.Body.String(), "Failed to retrieve owner from UFDS") {
				t.Fatalf("%s %s %q: status %d %s", method, target, body, res.StatusCode, w.Body)
			}
			if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") && !json.Valid(w.Body.Bytes()) {
				t.Fatalf("%s %s %q: invalid JSON %q", method, target, body, w.Body)
			}
		}
		do("POST", "/suffixes-for-vm", body)
		for _, p := range paths {
			do("GET", p+"?"+query, "")
		}
		if !bytes.ContainsAny([]byte(query), "?#") {
			do("GET", "/vm/"+url.PathEscape(query), "")
			do("GET", "/zones/"+url.PathEscape(query), "")
		}
	})
}
