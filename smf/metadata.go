package smf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Metadata reads the SDC zone's metadata as the SMF service's user may.
// cns runs as user cns (cns.xml), and on SmartOS a non-root mdata-get
// cannot reach the metadata socket: it fails with "could not initialise
// protocol: Could not find metadata socket." (exit 2) unless it runs with
// file_dac_search, which the "Metadata Reader" rbac profile grants it
// (exec_attr: mdata-get, privs=file_dac_search). The boot scripts give
// user cns that profile; pfexec runs mdata-get under it, as the reference
// does through /usr/bin/pfsh (lib/api-server.js).
type Metadata struct {
	Pfexec   string // the profile exec; absent outside SmartOS
	MdataGet string // absent outside an SDC zone
}

// ZoneMetadata is where SmartOS keeps the two commands.
var ZoneMetadata = Metadata{Pfexec: "/usr/bin/pfexec", MdataGet: "/usr/sbin/mdata-get"}

// Get returns the value of key, or an error that says why not: not an SDC
// zone, or mdata-get's own message.
func (m Metadata) Get(key string) ([]byte, error) {
	if _, err := os.Stat(m.MdataGet); err != nil {
		return nil, fmt.Errorf("not an SDC zone: %w", err)
	}
	name, args := m.MdataGet, []string{key}
	if _, err := os.Stat(m.Pfexec); err == nil {
		name, args = m.Pfexec, []string{m.MdataGet, key}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// AdminAddrs are the private addresses of the zone's admin NICs, from its
// sdc:nics metadata (a JSON list of the zone's NICs): where the reference
// serves its API (lib/api-server.js, CNS-82), and CloudAPI calls it.
func (m Metadata) AdminAddrs() ([]netip.Addr, error) {
	raw, err := m.Get("sdc:nics")
	if err != nil {
		return nil, fmt.Errorf("admin addresses (mdata-get sdc:nics): %w", err)
	}
	return adminAddrs(raw)
}

// adminNICTag is triton-netconfig's isNicAdmin, which the reference uses:
// the admin NIC tag, or a rack-aware one ("admin_rack_r12", any case).
var adminNICTag = regexp.MustCompile(`(?i)^admin(_rack_[a-z0-9_-]+)?$`)

// adminAddrs picks, from the sdc:nics metadata, the private addresses of
// the admin NICs.
func adminAddrs(raw []byte) ([]netip.Addr, error) {
	var nics []struct {
		Tag string   `json:"nic_tag"`
		IP  string   `json:"ip"`
		IPs []string `json:"ips"` // "10.99.99.38/24"; newer platforms
	}
	if err := json.Unmarshal(raw, &nics); err != nil {
		return nil, fmt.Errorf("sdc:nics is not a list of NICs: %w", err)
	}
	var out []netip.Addr
	for _, n := range nics {
		if !adminNICTag.MatchString(n.Tag) {
			continue
		}
		for _, s := range append([]string{n.IP}, n.IPs...) {
			a, err := netip.ParseAddr(s)
			if err != nil {
				p, perr := netip.ParsePrefix(s)
				if perr != nil {
					continue // "dhcp", "" and the like
				}
				a = p.Addr()
			}
			if a.IsPrivate() && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out, nil
}
