package main

import (
	"net"
	"net/netip"
	"strconv"

	"github.com/tritondatacenter/cns/admin/config"
)

// apiAddresses is where the REST API listens: api_server.listen when the
// config has it, else the reference's listeners (lib/api-server.js,
// CNS-82): port 80 on 127.0.0.1, ::1 and the zone's admin addresses, which
// is where CloudAPI calls GET /vm/:uuid and POST /suffixes-for-vm.
// adminAddrs is smf.ZoneMetadata.AdminAddrs in cns serve; an error there
// (not an SDC zone) leaves loopback only, and is returned to be logged.
func apiAddresses(cfg *config.Config, adminAddrs func() ([]netip.Addr, error)) ([]string, error) {
	if cfg.APIListen != nil {
		return cfg.APIListen, nil
	}
	port := strconv.Itoa(config.DefaultAPIPort)
	addrs := []string{net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("::1", port)}
	admin, err := adminAddrs()
	for _, a := range admin {
		addrs = append(addrs, netip.AddrPortFrom(a, config.DefaultAPIPort).String())
	}
	return addrs, err
}
