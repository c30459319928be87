package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// Tag and metadata keys cns reads (reference §1.3, §1.4).
const (
	tagServices   = "triton.cns.services"
	tagDisable    = "triton.cns.disable"
	tagReversePTR = "triton.cns.reverse_ptr"
	tagSmartDC    = "smartdc_role"
	tagManta      = "manta_role"
	dockerLabel   = "docker:label:" // prefix of docker labels in VMAPI tags

	metaStatus     = "triton.cns.status"
	metaACME       = "triton.cns.acme-challenge"
	metaGRPCConfig = "triton.cns.grpc_config"
)

// Default SRV fields when the tag gives none (mname's defaults).
const (
	defaultPriority = 0
	defaultWeight   = 10
)

// Role services: admin VMs join the service named by their smartdc_role
// unless it is listed here (there are many NAT zones and they have no
// business in DNS, CNS-188); poseidon VMs join only these manta_roles
// (TRITON-1789).
var (
	smartDCRoleBlocked = map[string]bool{"nat": true}
	mantaRoleAllowed   = map[string]bool{"loadbalancer": true}
)

// lookup returns m[key] unless it is missing or JSON null. VMAPI never
// stores null tags; a hand-written inventory might, and "no value" is the
// only sane reading of it.
func lookup(m map[string]any, key string) (any, bool) {
	v, ok := m[key]
	return v, ok && v != nil
}

// vmServices collects the services a VM asks for: the triton.cns.services
// tag (or its docker label when the tag is absent) and, for the admin and
// poseidon accounts, the role tag. invalid reports that a tag was rejected;
// its services are then left out and p says why.
func vmServices(vm *dc.VM, owner *dc.User, p *problems) (svcs []Service, invalid bool) {
	key := tagServices
	v, ok := lookup(vm.Tags, key)
	if !ok {
		key = dockerLabel + tagServices
		v, ok = lookup(vm.Tags, key)
	}
	if ok {
		s, isString := v.(string)
		var err error
		if isString {
			svcs, err = parseServiceTag(s, p)
		} else {
			err = fmt.Errorf("want a string, got %s", jsonType(v))
		}
		if err != nil {
			p.addf("tag %s %s: %v", key, quote(v), err)
			svcs, invalid = nil, true
		}
	}

	role, roleKey := "", ""
	switch owner.Login {
	case "admin":
		roleKey = tagSmartDC
	case "poseidon":
		roleKey = tagManta
	}
	if roleKey != "" {
		if v, ok := lookup(vm.Tags, roleKey); ok {
			if s, isString := v.(string); isString {
				role = strings.ToLower(s)
			} else {
				p.addf("tag %s %s: want a string, got %s", roleKey, quote(v), jsonType(v))
				invalid = true
			}
		}
	}
	switch {
	case role == "":
	case roleKey == tagSmartDC && smartDCRoleBlocked[role]:
	case roleKey == tagManta && !mantaRoleAllowed[role]:
	default:
		if err := checkServiceName(role); err != nil {
			p.addf("tag %s %q: %v", roleKey, role, err)
			invalid = true
			break
		}
		svcs = mergeService(svcs, Service{Name: role}, p)
	}
	return svcs, invalid
}

// parseServiceTag parses the triton.cns.services grammar of triton-tags
// 1.4.0 and validates what it parsed:
//
//	tag     = service *("," service)
//	service = name [":" port] *(":" key "=" value)
//	name    = host name, or "_" label "._tcp" / "._udp"
//	key     = [a-z] *[a-z0-9-]
//	value   = 1*(any character but "," and ":")
//
// Names are lower-cased; labels must be 1-63 octets of [a-z0-9-] not
// starting or ending with "-", the name at most 253 octets. Ports are
// 1-65535 and may also be given as "port="; "priority=" and "weight=" are
// 0-65535; "grpclb=" names a service the entry's port balances for (see
// Balance) and needs a port; other properties are accepted and ignored,
// as the grammar promises forward compatibility. A service named twice is
// one service with the ports and balanced services of both.
func parseServiceTag(tag string, p *problems) ([]Service, error) {
	if tag == "" {
		return nil, errors.New("empty")
	}
	var svcs []Service
	for i, item := range strings.Split(tag, ",") {
		svc, err := parseService(item)
		if err != nil {
			return nil, fmt.Errorf("service %d %q: %w", i+1, item, err)
		}
		svcs = mergeService(svcs, svc, p)
	}
	return svcs, nil
}

// parseService parses one comma-separated entry of the services tag.
func parseService(item string) (Service, error) {
	fields := strings.Split(item, ":")
	name := strings.ToLower(fields[0])
	if err := checkServiceName(name); err != nil {
		return Service{}, err
	}
	props := fields[1:]
	port, hasPort := 0, false
	if len(props) > 0 && isDigits(props[0]) {
		n, err := parseUint16(props[0], 1)
		if err != nil {
			return Service{}, fmt.Errorf("port %w", err)
		}
		port, hasPort = n, true
		props = props[1:]
	}
	prio, weight := defaultPriority, defaultWeight
	var fronts []string
	for _, prop := range props {
		key, value, ok := strings.Cut(prop, "=")
		if !ok || !isPropertyKey(key) || value == "" {
			return Service{}, fmt.Errorf("%q is neither a port nor key=value", prop)
		}
		var err error
		switch key {
		case "port":
			port, err = parseUint16(value, 1)
			hasPort = true
		case "priority":
			prio, err = parseUint16(value, 0)
		case "weight":
			weight, err = parseUint16(value, 0)
		case "grpclb":
			target := strings.ToLower(value)
			if err := checkServiceName(target); err != nil {
				return Service{}, fmt.Errorf("grpclb=%s: %w", value, err)
			}
			if target == name {
				return Service{}, fmt.Errorf("grpclb=%s: a balancer cannot balance for itself", value)
			}
			if !slices.Contains(fronts, target) {
				fronts = append(fronts, target)
			}
		}
		if err != nil {
			return Service{}, fmt.Errorf("%s %w", key, err)
		}
	}
	if len(fronts) > 0 && !hasPort {
		return Service{}, fmt.Errorf("grpclb=%s needs the balancer's port", fronts[0])
	}
	svc := Service{Name: name}
	if hasPort {
		svc.Ports = []Port{{Port: uint16(port), Priority: uint16(prio), Weight: uint16(weight)}}
		for _, f := range fronts {
			svc.Balances = append(svc.Balances, Balance{Service: f, Port: uint16(port)})
		}
	}
	return svc, nil
}

// mergeService adds svc to svcs, joining it with a service of the same
// name: the tag "foo:1234,foo:1235" is one service on two ports. A port
// given twice keeps its first priority and weight.
func mergeService(svcs []Service, svc Service, p *problems) []Service {
	for i := range svcs {
		if svcs[i].Name != svc.Name {
			continue
		}
		for _, lb := range svc.Balances {
			if !slices.Contains(svcs[i].Balances, lb) {
				svcs[i].Balances = append(svcs[i].Balances, lb)
			}
		}
	next:
		for _, port := range svc.Ports {
			for _, have := range svcs[i].Ports {
				if have.Port == port.Port {
					if have != port {
						p.addf("service %s: port %d given twice with different priority or weight, keeping the first", svc.Name, port.Port)
					}
					continue next
				}
			}
			svcs[i].Ports = append(svcs[i].Ports, port)
		}
		return svcs
	}
	return append(svcs, svc)
}

// checkServiceName validates a lower-cased service name: a host name
// (dots make several labels, CNS-152), or an SRV-style "_name._tcp" or
// "_name._udp" (triton-cns#25).
func checkServiceName(name string) error {
	if !strings.HasPrefix(name, "_") {
		if err := checkHostName(name); err != nil {
			return fmt.Errorf("service name %q: %w", name, err)
		}
		return nil
	}
	svc, proto, _ := strings.Cut(name, ".")
	if proto != "_tcp" && proto != "_udp" {
		return fmt.Errorf("service name %q: want _name._tcp or _name._udp", name)
	}
	if err := checkLabel(svc[1:]); err != nil || len(svc) > maxLabel {
		return fmt.Errorf("service name %q: %q is not \"_\" and a label", name, svc)
	}
	return nil
}

func isPropertyKey(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z') && !('0' <= c && c <= '9') && c != '-' {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseUint16 parses a decimal number in [min, 65535].
func parseUint16(s string, min int) (int, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || int(n) < min {
		return 0, fmt.Errorf("%q is not a number in %d-65535", s, min)
	}
	return int(n), nil
}

// jsonType names the JSON type of a decoded value, for problems.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, int, int64, uint16, json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// quote renders a tag value for a problem: strings quoted, others as Go
// prints them.
func quote(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}
