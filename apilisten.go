package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
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

// adminAddrs picks, from the sdc:nics metadata (a JSON list of the zone's
// NICs), the private addresses of the NICs tagged admin.
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
		if n.Tag != "admin" {
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

// mdataNICs runs `mdata-get sdc:nics`.
func mdataNICs() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "mdata-get", "sdc:nics").Output()
}
