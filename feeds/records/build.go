package records

import (
	"net"
	"net/netip"
	"sort"
	"strings"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// builder generates the records of one VM whose listing is decided. Every
// record is added through add, which keeps each (zone, RR) once however
// many NICs, addresses and zones lead to it.
type builder struct {
	cfg *Config
	w   *World
	l   listing
	p   *problems

	uuid  string // VM UUID, lower case: the TXT value and the uuid label
	owner string // owner UUID, lower case
	login string // cleaned login label, "" without use_login
	alias string // cleaned alias label, "" without use_alias or alias
	admin bool   // owner is the "admin" account: bare service names
	acme  []string

	grpcTXT   []string // the _grpc_config TXT strings, nil without one
	grpcStamp uint64   // their Record.Stamp

	instStems []string          // instance names relative to the zone
	primary   map[string]string // zone -> primary instance FQDN, "" if none
	recs      []Record          // as added; records drops the duplicates
	names     map[string]bool   // FQDNs (no trailing dot) with TXT = uuid
}

func newBuilder(cfg *Config, w *World, in Input, l listing, p *problems) *builder {
	b := &builder{
		cfg:     cfg,
		w:       w,
		l:       l,
		p:       p,
		uuid:    strings.ToLower(in.VM.UUID),
		owner:   strings.ToLower(in.Owner.UUID),
		admin:   in.Owner.Login == "admin",
		acme:    acmeTokens(in.VM, p),
		primary: make(map[string]string),
		names:   make(map[string]bool),
	}
	b.grpcTXT, b.grpcStamp = grpcConfig(in.VM, p)
	if cfg.UseLogin && in.Owner.Login != "" {
		login, err := cleanLabel(in.Owner.Login)
		if err != nil {
			p.addf("owner login %v: no login names", err)
		}
		b.login = login
	}
	if alias := in.VM.AliasString(); cfg.UseAlias && alias != "" {
		a, err := cleanLabel(alias)
		if err != nil {
			p.addf("alias %v: no alias names", err)
		}
		b.alias = a
	}

	// In the order of the reference, which is also the reverse of
	// friendliness: primaryName picks the last that exists.
	b.instStems = append(b.instStems, b.uuid+".inst."+b.owner)
	if b.login != "" {
		b.instStems = append(b.instStems, b.uuid+".inst."+b.login)
	}
	if b.alias != "" {
		b.instStems = append(b.instStems, b.alias+".inst."+b.owner)
		if b.login != "" {
			b.instStems = append(b.instStems, b.alias+".inst."+b.login)
		}
	}
	return b
}

// build places every address of every published NIC in its zones and
// adds the CMON CNAMEs.
func (b *builder) build(svcs []Service, nics []dc.NIC) {
	if b.grpcTXT != nil && len(svcs) == 0 {
		b.p.addf("metadata %s: the VM is in no service: no _grpc_config record", metaGRPCConfig)
	}
	for i := range nics {
		nic := &nics[i]
		zones := nicZones(b.cfg, b.w, nic)
		if len(zones) == 0 {
			continue
		}
		addrs := nicAddrs(i, nic, b.p)
		for _, zi := range zones {
			z := &b.cfg.Zones[zi]
			variant := ""
			if z.wildcard() {
				variant = networkLabel(b.w, nic, b.owner, b.p)
			}
			for _, a := range addrs {
				b.place(zoneName(z), a, variant, svcs)
			}
		}
	}

	// CMON finds every VM as <uuid>.cmon.<zone>, in every zone whatever
	// its NICs (CNS-169, CNS-187).
	for i := range b.cfg.Zones {
		zone := zoneName(&b.cfg.Zones[i])
		if name, ok := b.fqdn(b.uuid+".cmon", zone); ok {
			b.add(zone, cmonCNAME(name, zone), 0)
		}
	}
}

// place adds the names of one address in one zone. variant is the
// network-name label for this NIC in this zone, or "".
func (b *builder) place(zone string, a netip.Addr, variant string, svcs []Service) {
	if b.l.instance {
		for _, stem := range b.instStems {
			b.instanceName(zone, stem, a)
			if variant != "" {
				b.instanceName(zone, variant+"."+stem, a)
			}
		}
		b.ptr(zone, a)
	}
	owners := []string{b.owner}
	if b.login != "" {
		owners = append(owners, b.login)
	}
	for _, s := range svcs {
		listed := b.l.services || b.l.held[s.Name]
		for _, own := range owners {
			b.service(zone, "", own, s, a, listed)
			if variant != "" {
				b.service(zone, variant+".", own, s, a, listed)
			}
		}
		// Triton's own services also answer directly under the zone
		// (cloudapi.<zone>, cmon.<zone>), without SRV records.
		if b.admin {
			b.serviceName(zone, s.Name, s, a, listed, false)
		}
	}
}

// service adds a member's records under one form of a service name:
// prefix (a network-name variant and a dot, or "") + name + ".svc." + own.
func (b *builder) service(zone, prefix, own string, s Service, a netip.Addr, listed bool) {
	b.serviceName(zone, prefix+s.Name+".svc."+own, s, a, listed, true)
	if listed {
		b.grpc(zone, prefix, own, s)
	}
}

func (b *builder) instanceName(zone, stem string, a netip.Addr) {
	name, ok := b.fqdn(stem, zone)
	if !ok {
		return
	}
	b.add(zone, addressRR(name, a), 0)
	b.add(zone, txt(name, b.uuid), 0)
	b.names[strings.TrimSuffix(name, ".")] = true
	b.acmeChallenge(zone, stem)
}

// InstanceName reports whether owner (fully qualified, lower case) is an
// instance name in zone: <uuid or alias>.inst.<owner>.<zone>, with its
// network-name variant and ACME challenge names. Such a name names one
// instance (two only when they share an alias), where a service's name
// (<name>.svc.<owner>) names all its members.
func InstanceName(owner, zone string) bool {
	rel, ok := strings.CutSuffix(strings.TrimSuffix(owner, "."), "."+zone)
	if !ok {
		return false
	}
	labels := strings.Split(rel, ".")
	return len(labels) >= 3 && labels[len(labels)-2] == "inst"
}

// serviceName adds a member's records under a service name: its address,
// its UUID and an SRV per port when listed, or only the "verifying:" TXT
// that lets ACME validate a name with no member up (TRITON-599).
func (b *builder) serviceName(zone, stem string, s Service, a netip.Addr, listed, srv bool) {
	name, ok := b.fqdn(stem, zone)
	if !ok {
		return
	}
	if listed {
		b.add(zone, addressRR(name, a), 0)
		b.add(zone, txt(name, b.uuid), 0)
		b.names[strings.TrimSuffix(name, ".")] = true
		if target := b.primaryName(zone); srv && target != "" {
			for _, p := range s.Ports {
				b.add(zone, &dns.SRV{
					Hdr:      header(name, dns.TypeSRV),
					Priority: p.Priority,
					Weight:   p.Weight,
					Port:     p.Port,
					Target:   target,
				}, 0)
			}
		}
	} else {
		b.add(zone, txt(name, "verifying:"+b.uuid), 0)
	}
	b.acmeChallenge(zone, stem)
}

// ptr adds the PTR candidate for an address published in zone. Which
// candidate an address finally gets is decided across VMs and zones by
// the store: Pref, then the shortest target, then the lexically first.
func (b *builder) ptr(zone string, a netip.Addr) {
	target, pref := b.l.ptrName, uint8(0)
	if target == "" {
		target, pref = b.primaryName(zone), 1
	}
	if target == "" {
		return
	}
	name, rzone := reverseName(a, b.cfg.ReverseV4Prefix, b.cfg.ReverseV6Prefix)
	b.add(rzone, &dns.PTR{Hdr: header(name, dns.TypePTR), Ptr: dns.Fqdn(target)}, pref)
}

// primaryName is the friendliest instance name of the VM in zone, fully
// qualified: alias+login, alias+uuid, uuid+login, then uuid+uuid. It is
// the target of SRV and PTR records.
func (b *builder) primaryName(zone string) string {
	if n, ok := b.primary[zone]; ok {
		return n
	}
	n := ""
	for i := len(b.instStems) - 1; i >= 0; i-- {
		if name := b.instStems[i] + "." + zone; len(name) <= maxName {
			n = name + "."
			break
		}
	}
	b.primary[zone] = n
	return n
}

// acmeChallenge adds the ACME DNS-01 tokens beside a name (CNS-193).
func (b *builder) acmeChallenge(zone, stem string) {
	if len(b.acme) == 0 {
		return
	}
	name, ok := b.fqdn("_acme-challenge."+stem, zone)
	if !ok {
		return
	}
	for _, tok := range b.acme {
		b.add(zone, txt(name, tok), 0)
	}
}

// fqdn joins a name relative to the zone with the zone, fully qualified,
// or reports that the result is too long to be a DNS name.
func (b *builder) fqdn(stem, zone string) (string, bool) {
	name := stem + "." + zone
	if len(name) > maxName {
		b.p.addf("name %s is longer than %d octets: skipped", name, maxName)
		return "", false
	}
	return name + ".", true
}

func (b *builder) add(zone string, rr dns.RR, pref uint8) {
	b.addRecord(Record{Zone: zone, RR: rr, Pref: pref})
}

func (b *builder) addRecord(r Record) { b.recs = append(b.recs, r) }

// records returns the records sorted by zone, owner name, type and text,
// each record (zone and text) once: the first added. Records with the same
// text have the same name and type, so the sort puts them side by side; the
// text of a record is made only to order records that tie on those (a map
// keyed by every record's text cost a tenth of a first load's allocations).
func (b *builder) records() []Record {
	out := b.recs
	sort.SliceStable(out, func(i, j int) bool { return lessRecord(&out[i], &out[j]) })
	kept := out[:0]
	for i := range out {
		if n := len(kept); n > 0 && sameRecord(&kept[n-1], &out[i]) {
			continue
		}
		kept = append(kept, out[i])
	}
	b.recs = kept
	return kept
}

// sameRecord reports whether a and b are the same record of the same zone.
func sameRecord(a, b *Record) bool {
	ha, hb := a.RR.Header(), b.RR.Header()
	return a.Zone == b.Zone && ha.Name == hb.Name && ha.Rrtype == hb.Rrtype && a.RR.String() == b.RR.String()
}

func lessRecord(a, b *Record) bool {
	if a.Zone != b.Zone {
		return a.Zone < b.Zone
	}
	ha, hb := a.RR.Header(), b.RR.Header()
	if ha.Name != hb.Name {
		return ha.Name < hb.Name
	}
	if ha.Rrtype != hb.Rrtype {
		return ha.Rrtype < hb.Rrtype
	}
	return a.RR.String() < b.RR.String()
}

func (b *builder) sortedNames() []string {
	out := make([]string, 0, len(b.names))
	for n := range b.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// acmeTokens splits triton.cns.acme-challenge on runs of white space: one
// TXT string per token, never an empty one (the reference split on single
// spaces).
func acmeTokens(vm *dc.VM, p *problems) []string {
	v, ok := lookup(vm.CustomerMetadata, metaACME)
	if !ok {
		return nil
	}
	s, isString := v.(string)
	if !isString {
		p.addf("metadata %s %s: want a string, got %s", metaACME, quote(v), jsonType(v))
		return nil
	}
	var toks []string
	for _, t := range strings.Fields(s) {
		if len(t) > 255 {
			p.addf("metadata %s: token %.20q... is longer than a TXT string (255 octets): skipped", metaACME, t)
			continue
		}
		toks = append(toks, t)
	}
	return toks
}

// zoneName is a configured zone's name as records use it: lower case,
// without the trailing dot.
func zoneName(z *Zone) string {
	return strings.TrimSuffix(strings.ToLower(z.Name), ".")
}

func header(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: TTL}
}

func addressRR(name string, a netip.Addr) dns.RR {
	if a.Is4() {
		return &dns.A{Hdr: header(name, dns.TypeA), A: net.IP(a.AsSlice())}
	}
	return &dns.AAAA{Hdr: header(name, dns.TypeAAAA), AAAA: net.IP(a.AsSlice())}
}

func txt(name, value string) dns.RR {
	return &dns.TXT{Hdr: header(name, dns.TypeTXT), Txt: []string{value}}
}
