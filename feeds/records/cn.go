package records

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// ReasonComputeNode marks the result of a compute node: not a VM, it has
// only its CMON names.
const ReasonComputeNode Reason = "compute_node"

// ComputeNode gives a compute node its CMON names: <server_uuid>.cmon.<zone>
// CNAME cmon.<zone> in every forward zone, which is how CMON finds a CN's
// metrics (reference §4.4, TRITON-359). A set-up CN has them whatever its
// running state, from CNAPI's word alone: unlike the reference's fake
// admin VM per CN, they need neither an "admin" account nor an admin
// network. A server not set up has none.
func ComputeNode(cfg *Config, s *dc.Server) Result {
	var p problems
	res := Result{Reasons: []Reason{ReasonComputeNode}}
	uuid := strings.ToLower(s.UUID)
	switch {
	case !s.Setup:
		p.addf("compute node not set up: no names")
	case checkLabel(uuid) != nil:
		p.addf("server uuid %q: %v: no names", s.UUID, checkLabel(uuid))
	default:
		for i := range cfg.Zones {
			zone := zoneName(&cfg.Zones[i])
			name := uuid + ".cmon." + zone
			if len(name) > maxName {
				p.addf("name %s is longer than %d octets: skipped", name, maxName)
				continue
			}
			res.Records = append(res.Records, Record{Zone: zone, RR: cmonCNAME(name+".", zone)})
		}
	}
	res.Problems = p.list
	return res
}

// cmonCNAME is a CMON name's record: name (fully qualified) CNAME
// cmon.<zone>, which the admin "cmon" service answers.
func cmonCNAME(name, zone string) dns.RR {
	return &dns.CNAME{Hdr: header(name, dns.TypeCNAME), Target: "cmon." + zone + "."}
}
