package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/admin/config"
)

// apiAddresses is where the REST API listens: api_server.listen when the
// config has it, else the reference's listeners (lib/api-server.js,
// CNS-82): port 80 on 127.0.0.1, ::1 and every private address of the
// zone's admin NICs, which is where CloudAPI calls GET /vm/:uuid and POST
// /suffixes-for-vm. nics returns what `mdata-get sdc:nics` prints; an
// error there (not an SDC zone) leaves loopback only, and is returned to
// be logged.
func apiAddresses(cfg *config.Config, nics func() ([]byte, error)) ([]string, error) {
	if cfg.APIListen != nil {
		return cfg.APIListen, nil
	}
	port := strconv.Itoa(config.DefaultAPIPort)
	addrs := []string{net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("::1", port)}
	raw, err := nics()
	if err != nil {
		return addrs, fmt.Errorf("admin addresses for the API (mdata-get sdc:nics): %w", err)
	}
	admin, err := adminAddrs(raw)
	for _, a := range admin {
		addrs = append(addrs, netip.AddrPortFrom(a, config.DefaultAPIPort).String())
	}
	return addrs, err
}

// adminNICTag is triton-netconfig's isNicAdmin, which the reference uses:
// the admin NIC tag, or a rack-aware one ("admin_rack_r12", any case).
var adminNICTag = regexp.MustCompile(`(?i)^admin(_rack_[a-z0-9_-]+)?$`)

// adminAddrs picks, from the sdc:nics metadata (a JSON list of the zone's
// NICs), the private addresses of the admin NICs.
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

// zoneMetadata reads the SDC zone's metadata as the SMF service's user
// may. cns runs as user cns (smf/cns.xml), and on SmartOS a non-root
// mdata-get cannot reach the metadata socket: it fails with "could not
// initialise protocol: Could not find metadata socket." (exit 2) unless it
// runs with file_dac_search, which the "Metadata Reader" rbac profile
// grants it (exec_attr: mdata-get, privs=file_dac_search). The boot
// scripts give user cns that profile; pfexec runs mdata-get under it, as
// the reference does through /usr/bin/pfsh (lib/api-server.js).
type zoneMetadata struct {
	pfexec   string // the profile exec; absent outside SmartOS
	mdataGet string // absent outside an SDC zone
}

// sdcZone is where SmartOS keeps the two commands.
var sdcZone = zoneMetadata{pfexec: "/usr/bin/pfexec", mdataGet: "/usr/sbin/mdata-get"}

// get returns the value of key, or an error that says why not: not an SDC
// zone, or mdata-get's own message.
func (z zoneMetadata) get(key string) ([]byte, error) {
	if _, err := os.Stat(z.mdataGet); err != nil {
		return nil, fmt.Errorf("not an SDC zone: %w", err)
	}
	name, args := z.mdataGet, []string{key}
	if _, err := os.Stat(z.pfexec); err == nil {
		name, args = z.pfexec, []string{z.mdataGet, key}
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

// mdataNICs is the zone's sdc:nics.
func mdataNICs() ([]byte, error) { return sdcZone.get("sdc:nics") }
