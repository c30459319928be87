package smf

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// isNicAdmin: admin and admin_rack_*, in any case; nothing else; private
// addresses only, from ip and ips.
func TestAdminAddrs(t *testing.T) {
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
	got, err := adminAddrs([]byte(nics))
	want := []netip.Addr{netip.MustParseAddr("10.99.99.38"), netip.MustParseAddr("10.99.100.7"),
		netip.MustParseAddr("10.99.101.4"), netip.MustParseAddr("10.99.102.5")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("adminAddrs = %v, %v; want %v", got, err, want)
	}
	if _, err := adminAddrs([]byte(`{"nic_tag":`)); err == nil {
		t.Error("garbled metadata gave no error")
	}
}

// cns runs as user cns, so it reads sdc:nics through the "Metadata
// Reader" profile. The stand-ins behave as SmartOS does: mdata-get run by
// a user without file_dac_search cannot look up the metadata socket and
// fails (mdata-client: "could not initialise protocol: Could not find
// metadata socket.", exit 2); pfexec runs it with the privileges of the
// caller's profiles, which the stand-in marks in the environment.
func TestZoneMetadataThroughProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the mdata-get and pfexec stand-ins")
	}
	const nics = `[{"nic_tag": "admin_rack_r1", "ip": "10.99.99.40"}]`
	standIn := func(t *testing.T, withPfexec bool) Metadata {
		dir := t.TempDir()
		m := Metadata{Pfexec: filepath.Join(dir, "pfexec"), MdataGet: filepath.Join(dir, "mdata-get")}
		write := func(path, body string) {
			if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		write(m.MdataGet, `if [ "$STANDIN_PRIVS" != file_dac_search ]; then
	echo "ERROR: could not initialise protocol: Could not find metadata socket." >&2
	exit 2
fi
[ "$1" = sdc:nics ] || exit 1
echo '`+nics+`'
`)
		if withPfexec {
			write(m.Pfexec, `STANDIN_PRIVS=file_dac_search exec "$@"`)
		}
		return m
	}

	m := standIn(t, true)
	addrs, err := m.AdminAddrs()
	if err != nil || !slices.Equal(addrs, []netip.Addr{netip.MustParseAddr("10.99.99.40")}) {
		t.Errorf("through pfexec: %v, %v; want the admin address", addrs, err)
	}

	// Without the profile (no pfexec: mdata-get run as the user itself)
	// the refusal is what cns logs.
	m = standIn(t, false)
	if _, err := m.AdminAddrs(); err == nil || !strings.Contains(err.Error(), "Could not find metadata socket") {
		t.Errorf("without pfexec: %v, want mdata-get's refusal", err)
	}
	m.MdataGet = filepath.Join(t.TempDir(), "mdata-get")
	if _, err := m.Get("sdc:nics"); err == nil || !strings.Contains(err.Error(), "not an SDC zone") {
		t.Errorf("no mdata-get: %v, want \"not an SDC zone\"", err)
	}
}
