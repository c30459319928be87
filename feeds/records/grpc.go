package records

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// gRPC service discovery, as gRPC's own resolvers read it from DNS:
//   - "Load Balancing and DNS" (proposal A5): the balancer of server.example
//     is "_grpclb._tcp.server.example SRV 0 0 <port> <balancer name>";
//   - "Service Config via DNS" (proposal A2): the service config of
//     server.example is "_grpc_config.server.example TXT grpc_config=<json>",
//     the JSON a list of service config choices, cut into strings of at
//     most 255 octets that clients concatenate.

const (
	// maxGRPCConfig bounds triton.cns.grpc_config once compacted. The TXT
	// answer then stays far below what every resolver accepts over TCP
	// (A2 worries about 64 KiB) and a change still makes a small IXFR.
	maxGRPCConfig = 4096
	// grpcConfigAttr is the RFC 1464 attribute name gRPC looks for.
	grpcConfigAttr = "grpc_config="
	maxTXTString   = 255
)

// NeedsLastModified reports whether Compute reads vm.LastModified: only
// a VM with a gRPC service config does (it orders members that
// disagree). Callers that trim VMs to what records read keep it then.
func NeedsLastModified(vm *dc.VM) bool {
	_, ok := lookup(vm.CustomerMetadata, metaGRPCConfig)
	return ok
}

// grpcConfig reads customer_metadata triton.cns.grpc_config: the TXT
// strings of the VM's _grpc_config records and their stamp (see
// Record.Stamp), or nil when the VM has none or it is invalid (p says
// why: gRPC clients discard an invalid config whole, so cns publishes
// none rather than one every client rejects).
func grpcConfig(vm *dc.VM, p *problems) ([]string, uint64) {
	v, ok := lookup(vm.CustomerMetadata, metaGRPCConfig)
	if !ok {
		return nil, 0
	}
	s, isString := v.(string)
	if !isString {
		p.addf("metadata %s %s: want a string, got %s: no _grpc_config record", metaGRPCConfig, quote(v), jsonType(v))
		return nil, 0
	}
	compact, err := checkGRPCConfig(s)
	if err != nil {
		p.addf("metadata %s: %v: no _grpc_config record", metaGRPCConfig, err)
		return nil, 0
	}
	for _, h := range grpcGoHints(compact) {
		p.addf("metadata %s: %s", metaGRPCConfig, h)
	}
	return txtStrings(grpcConfigAttr + compact), lastModified(vm, p)
}

// lastModified is the VM's last_modified in Unix milliseconds, or 1 when
// VMAPI did not say (a hand-written inventory): such a member's config
// counts as the oldest.
func lastModified(vm *dc.VM, p *problems) uint64 {
	if vm.LastModified == "" {
		return 1
	}
	t, err := time.Parse(time.RFC3339Nano, vm.LastModified)
	if err != nil || t.UnixMilli() <= 1 {
		p.addf("last_modified %q is not a time: its %s counts as the oldest", vm.LastModified, metaGRPCConfig)
		return 1
	}
	return uint64(t.UnixMilli())
}

// checkGRPCConfig validates a service config list as gRPC's A2 defines
// it and returns it compacted:
//
//	[{"clientLanguage": [string], "percentage": 0-100,
//	  "clientHostname": [string], "serviceConfig": {...}}, ...]
//
// Every choice needs a serviceConfig object and no other fields (a client
// drops a choice with unknown fields, and with it the whole config). The
// service config's own well-known fields must have their types; unknown
// ones pass, as gRPC ignores them. TXT records carry ASCII only.
func checkGRPCConfig(s string) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return "", fmt.Errorf("not JSON: %v", err)
	}
	b := buf.Bytes()
	if len(b) > maxGRPCConfig {
		return "", fmt.Errorf("%d octets once compacted, more than %d", len(b), maxGRPCConfig)
	}
	if i := slices.IndexFunc(b, func(c byte) bool { return c >= 0x7f }); i >= 0 {
		return "", fmt.Errorf("octet %d is not printable ASCII (TXT records carry ASCII)", i)
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("not JSON: %v", err)
	}
	choices, ok := v.([]any)
	if !ok {
		return "", fmt.Errorf(`want a list of service config choices [{"serviceConfig": {...}}], got %s`, jsonType(v))
	}
	if len(choices) == 0 {
		return "", errors.New("no service config choice")
	}
	for i, c := range choices {
		if err := checkChoice(c); err != nil {
			return "", fmt.Errorf("choice %d: %v", i+1, err)
		}
	}
	return buf.String(), nil
}

// grpcGoLanguage is the only clientLanguage grpc-go selects a choice
// for: it compares case-sensitively, although A2 says case-insensitive.
const grpcGoLanguage = "GO"

// grpcGoHints explains how grpc-go will read a valid config when that
// is likely a surprise: a choice for "go" it ignores, and no choice for
// it at all, which makes grpc-go fail every call of the channel
// (Unavailable: "no JSON service config provided").
func grpcGoHints(compact string) []string {
	var choices []struct {
		ClientLanguage *[]string `json:"clientLanguage"`
	}
	if json.Unmarshal([]byte(compact), &choices) != nil {
		return nil
	}
	var hints []string
	forGo := false
	for i, c := range choices {
		if c.ClientLanguage == nil || len(*c.ClientLanguage) == 0 || slices.Contains(*c.ClientLanguage, grpcGoLanguage) {
			forGo = true
			continue
		}
		for _, l := range *c.ClientLanguage {
			if strings.EqualFold(l, grpcGoLanguage) {
				hints = append(hints, fmt.Sprintf("choice %d: clientLanguage %q: grpc-go selects only %q", i+1, l, grpcGoLanguage))
			}
		}
	}
	if !forGo {
		hints = append(hints, fmt.Sprintf("no choice for grpc-go (clientLanguage %q or none): its calls will fail", grpcGoLanguage))
	}
	return hints
}

// percentage is A2's pattern for a choice's percentage.
var percentage = regexp.MustCompile(`^(0|[1-9][0-9]?|100)$`)

func checkChoice(c any) error {
	obj, ok := c.(map[string]any)
	if !ok {
		return fmt.Errorf("want an object, got %s", jsonType(c))
	}
	if _, ok := obj["serviceConfig"]; !ok {
		return errors.New("no serviceConfig")
	}
	for _, k := range sortedKeys(obj) {
		v := obj[k]
		var err error
		switch k {
		case "clientLanguage", "clientHostname":
			err = checkStrings(v)
		case "percentage":
			if n, ok := v.(json.Number); !ok || !percentage.MatchString(string(n)) {
				err = fmt.Errorf("want an integer in 0-100, got %s", jsonText(v))
			}
		case "serviceConfig":
			err = checkServiceConfig(v)
		default:
			err = errors.New("unknown field (gRPC then ignores the whole config)")
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// checkServiceConfig checks the types of the fields of gRPC's service
// config (grpc/grpc doc/service_config.md) that clients parse strictly.
func checkServiceConfig(v any) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("want an object, got %s", jsonType(v))
	}
	for _, k := range sortedKeys(obj) {
		v := obj[k]
		var err error
		switch k {
		case "loadBalancingPolicy":
			err = want[string](v)
		case "loadBalancingConfig":
			err = eachObject(v, func(lb map[string]any) error {
				if len(lb) != 1 {
					return fmt.Errorf("want one policy name per entry, got %d", len(lb))
				}
				for name, cfg := range lb {
					if err := want[map[string]any](cfg); err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
				}
				return nil
			})
		case "methodConfig":
			err = eachObject(v, checkMethodConfig)
		case "retryThrottling", "healthCheckConfig":
			err = want[map[string]any](v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// duration is the JSON form of a protobuf Duration as gRPC reads it.
var duration = regexp.MustCompile(`^[0-9]+(\.[0-9]{1,9})?s$`)

func checkMethodConfig(mc map[string]any) error {
	for _, k := range sortedKeys(mc) {
		v := mc[k]
		var err error
		switch k {
		case "name":
			err = eachObject(v, func(n map[string]any) error {
				for _, f := range []string{"service", "method"} {
					if x, ok := n[f]; ok {
						if err := want[string](x); err != nil {
							return fmt.Errorf("%s: %w", f, err)
						}
					}
				}
				return nil
			})
		case "waitForReady":
			err = want[bool](v)
		case "timeout":
			if s, ok := v.(string); !ok || !duration.MatchString(s) {
				err = fmt.Errorf(`want a duration such as "1.5s", got %s`, jsonText(v))
			}
		case "maxRequestMessageBytes", "maxResponseMessageBytes":
			if n, ok := v.(json.Number); !ok || strings.ContainsAny(string(n), ".eE-") {
				err = fmt.Errorf("want a byte count, got %s", jsonText(v))
			}
		case "retryPolicy", "hedgingPolicy":
			err = want[map[string]any](v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

func want[T any](v any) error {
	if _, ok := v.(T); !ok {
		var zero T
		return fmt.Errorf("want %s, got %s", jsonType(any(zero)), jsonType(v))
	}
	return nil
}

func checkStrings(v any) error {
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("want a list of strings, got %s", jsonType(v))
	}
	for _, x := range list {
		if err := want[string](x); err != nil {
			return err
		}
	}
	return nil
}

func eachObject(v any, fn func(map[string]any) error) error {
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("want a list, got %s", jsonType(v))
	}
	for i, x := range list {
		obj, ok := x.(map[string]any)
		if !ok {
			return fmt.Errorf("entry %d: want an object, got %s", i+1, jsonType(x))
		}
		if err := fn(obj); err != nil {
			return fmt.Errorf("entry %d: %w", i+1, err)
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonText renders a decoded JSON value for a problem.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 40 {
		return jsonType(v)
	}
	return string(b)
}

// txtStrings cuts s into TXT character-strings of at most 255 octets, in
// the presentation form miekg/dns keeps in dns.TXT (quotes and
// backslashes escaped, other unprintable octets as \DDD), which is also
// what it gives back when it decodes the record.
func txtStrings(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(len(s), maxTXTString)
		out = append(out, escapeTXT(s[:n]))
		s = s[n:]
	}
	return out
}

func escapeTXT(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c > '~':
			fmt.Fprintf(&b, "\\%03d", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// grpc adds a listed member's gRPC records under one form of its service
// name, prefix + s.Name + ".svc." + own (prefix is a network-name variant
// and a dot, or ""): for every service s balances for, the _grpclb._tcp
// SRV that sends that service's gRPC clients here, with priority and
// weight 0 as A5 asks; and the _grpc_config TXT of the member's service
// config, stamped so that the store serves one config per name.
func (b *builder) grpc(zone, prefix, own string, s Service) {
	if len(s.Balances) > 0 {
		if target, ok := b.fqdn(prefix+s.Name+".svc."+own, zone); ok {
			for _, lb := range s.Balances {
				name, ok := b.fqdn("_grpclb._tcp."+prefix+lb.Service+".svc."+own, zone)
				if !ok {
					continue
				}
				b.add(zone, &dns.SRV{Hdr: header(name, dns.TypeSRV), Port: lb.Port, Target: target}, 0)
			}
		}
	}
	if b.grpcTXT != nil {
		if name, ok := b.fqdn("_grpc_config."+prefix+s.Name+".svc."+own, zone); ok {
			b.addRecord(Record{Zone: zone, RR: &dns.TXT{Hdr: header(name, dns.TypeTXT), Txt: b.grpcTXT}, Stamp: b.grpcStamp})
		}
	}
}
