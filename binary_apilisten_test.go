package main

import (
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin/config"
)

// The API's listeners: api_server.listen when set ([] for none), else the
// reference's: loopback and the zone's admin addresses, loopback alone
// when those cannot be read.
func TestAPIAddresses(t *testing.T) {
	loopback := []string{"127.0.0.1:80", "[::1]:80"}
	admin := []netip.Addr{netip.MustParseAddr("10.99.99.38"), netip.MustParseAddr("10.99.100.7")}
	for _, tc := range []struct {
		name    string
		listen  []string
		addrErr error
		want    []string
		wantErr bool
	}{
		{name: "configured", listen: []string{"192.0.2.1:8080"}, want: []string{"192.0.2.1:8080"}},
		{name: "configured off", listen: []string{}, want: []string{}},
		{name: "reference default: loopback and the admin addresses", want: append(slices.Clone(loopback), "10.99.99.38:80", "10.99.100.7:80")},
		{name: "not an SDC zone", addrErr: errors.New("not an SDC zone"), want: loopback, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Server: config.Server{APIListen: tc.listen}}
			got, err := apiAddresses(cfg, func() ([]netip.Addr, error) {
				if tc.addrErr != nil {
					return nil, tc.addrErr
				}
				return admin, nil
			})
			if !slices.Equal(got, tc.want) || (err != nil) != tc.wantErr {
				t.Errorf("got %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// With no api_server.listen, cns serves the API where the reference did
// and CloudAPI calls it: port 80 on loopback (the CI machine has no admin
// NICs), without a token for reads.
func TestAPIDefaultListeners(t *testing.T) {
	dir := t.TempDir()
	p := startCNS(t, testConfig(t, dir, "testdata/inventory.json", func(c map[string]any) {
		delete(c, "api_server")
	}))
	l := p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" })
	if l.str("addr") != "127.0.0.1:80" {
		t.Fatalf("API listening on %q first, want 127.0.0.1:80", l.str("addr"))
	}
	p.waitCommitted(0)
	res, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://127.0.0.1:80/vm/b752d788-c0e4-4307-8c56-353a4ea66c02")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET /vm/:uuid on port 80: HTTP %d", res.StatusCode)
	}
}

// LOGLEVEL (set by the reference's SMF manifest) is honoured when the
// config has no log_level; the config's log_level wins when both are set.
func TestLOGLEVEL(t *testing.T) {
	debugLine := func(l logLine) bool { return l["level"] == 20.0 && l.str("msg") == "updating vm" }
	p := startCNS(t, testConfig(t, t.TempDir(), "testdata/inventory.json", nil), "LOGLEVEL=debug")
	p.waitLog(10*time.Second, debugLine)

	p = startCNS(t, testConfig(t, t.TempDir(), "testdata/inventory.json", func(c map[string]any) {
		c["log_level"] = "info"
	}), "LOGLEVEL=debug")
	p.waitCommitted(0)
	p.stop(syscall.SIGTERM)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if debugLine(l) {
			t.Fatalf("debug line logged with log_level info and LOGLEVEL=debug: %v", l)
		}
	}
}
