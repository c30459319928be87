package main

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin/config"
)

func TestAPIAddresses(t *testing.T) {
	// sdc:nics as a SmartOS zone's metadata has it (an admin NIC, an
	// external one), plus the forms the rule must also cope with.
	const nics = `[
	  {"interface": "net0", "mac": "90:b8:d0:2f:b8:39", "nic_tag": "admin", "ip": "10.99.99.38", "netmask": "255.255.255.0", "primary": false},
	  {"interface": "net1", "mac": "90:b8:d0:c4:0f:8a", "nic_tag": "external", "ip": "10.88.88.5", "primary": true},
	  {"interface": "net2", "nic_tag": "admin", "ips": ["10.99.100.7/24", "dhcp"]},
	  {"interface": "net3", "nic_tag": "admin", "ip": "203.0.113.9"},
	  {"interface": "net4", "nic_tag": "admin_rack_R12-b", "ip": "10.99.101.4"},
	  {"interface": "net5", "nic_tag": "ADMIN", "ip": "10.99.102.5"},
	  {"interface": "net6", "nic_tag": "admin_racks", "ip": "10.99.103.6"},
	  {"interface": "net7", "nic_tag": "sdc_admin", "ip": "10.99.104.7"}
	]`
	loopback := []string{"127.0.0.1:80", "[::1]:80"}
	for _, tc := range []struct {
		name    string
		listen  []string
		nics    string
		nicsErr error
		want    []string
		wantErr bool
	}{
		{name: "configured", listen: []string{"192.0.2.1:8080"}, nics: nics, want: []string{"192.0.2.1:8080"}},
		{name: "configured off", listen: []string{}, nics: nics, want: []string{}},
		// isNicAdmin: admin and admin_rack_*, in any case; nothing else.
		{name: "reference default: loopback and private admin addresses", nics: nics,
			want: append(slices.Clone(loopback), "10.99.99.38:80", "10.99.100.7:80", "10.99.101.4:80", "10.99.102.5:80")},
		{name: "not an SDC zone", nicsErr: errors.New("exec: mdata-get: not found"), want: loopback, wantErr: true},
		{name: "garbled metadata", nics: `{"nic_tag":`, want: loopback, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{APIListen: tc.listen}
			got, err := apiAddresses(cfg, func() ([]byte, error) { return []byte(tc.nics), tc.nicsErr })
			if !slices.Equal(got, tc.want) || (err != nil) != tc.wantErr {
				t.Errorf("got %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// cns runs as user cns, so it reads sdc:nics through the "Metadata
// Reader" profile. The stand-ins behave as SmartOS does: mdata-get run by
// a user without file_dac_search cannot look up the metadata socket and
// fails (mdata-client: "could not initialise protocol: Could not find
// metadata socket.", exit 2); pfexec runs it with the privileges of the
// caller's profiles, which the stand-in marks in the environment.
func TestZoneMetadataThroughProfile(t *testing.T) {
	const nics = `[{"nic_tag": "admin_rack_r1", "ip": "10.99.99.40"}]`
	standIn := func(t *testing.T, withPfexec bool) zoneMetadata {
		dir := t.TempDir()
		z := zoneMetadata{pfexec: filepath.Join(dir, "pfexec"), mdataGet: filepath.Join(dir, "mdata-get")}
		write := func(path, body string) {
			if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		write(z.mdataGet, `if [ "$STANDIN_PRIVS" != file_dac_search ]; then
	echo "ERROR: could not initialise protocol: Could not find metadata socket." >&2
	exit 2
fi
[ "$1" = sdc:nics ] || exit 1
echo '`+nics+`'
`)
		if withPfexec {
			write(z.pfexec, `STANDIN_PRIVS=file_dac_search exec "$@"`)
		}
		return z
	}

	z := standIn(t, true)
	addrs, err := apiAddresses(&config.Config{}, func() ([]byte, error) { return z.get("sdc:nics") })
	if err != nil || !slices.Contains(addrs, "10.99.99.40:80") {
		t.Errorf("through pfexec: %q, %v; want the admin address", addrs, err)
	}

	// Without the profile (no pfexec: mdata-get run as the user itself)
	// the refusal is what cns logs.
	z = standIn(t, false)
	if _, err := z.get("sdc:nics"); err == nil || !strings.Contains(err.Error(), "Could not find metadata socket") {
		t.Errorf("without pfexec: %v, want mdata-get's refusal", err)
	}
	z.mdataGet = filepath.Join(t.TempDir(), "mdata-get")
	if _, err := z.get("sdc:nics"); err == nil || !strings.Contains(err.Error(), "not an SDC zone") {
		t.Errorf("no mdata-get: %v, want \"not an SDC zone\"", err)
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
