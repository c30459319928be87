// Package records turns one VM, with its owner, its compute node's state and
// the data center's networks, into the DNS records RFD 1 gives it: instance
// and service names, A/AAAA/TXT/SRV/CNAME in the forward zones, PTR in the
// reverse zones, and the listing decision with the reasons behind it.
//
// It is pure: no I/O, no clock, no state between calls. The same input always
// gives the same records in the same order, so the updater can diff them.
package records

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// TTLs of generated records (reference §1.7).
const (
	TTL = 30 // every data record: A, AAAA, TXT, SRV, PTR, CNAME
)

// Config is the part of cns's configuration that shapes names.
type Config struct {
	// Zones are the forward zones in configuration order. Names are lower
	// case, without the trailing dot.
	Zones []Zone
	// UseAlias and UseLogin add the alias and login name variants.
	UseAlias bool
	UseLogin bool
	// ReverseV4Prefix (8, 16 or 24) and ReverseV6Prefix (32, 48 or 64) are
	// the prefix lengths of the reverse zones PTRs land in; 0 means the
	// reference's /24 and /64.
	ReverseV4Prefix int
	ReverseV6Prefix int
	// ClientNetworks are client_answers' network and pool UUIDs: a listed
	// instance's addresses on them identify it when it asks (Result.Clients).
	ClientNetworks []string
}

// Zone is one forward zone and the networks whose addresses it publishes.
type Zone struct {
	Name string
	// Networks holds network and network pool UUIDs, or "*": the zone then
	// takes every NIC that no explicitly listed zone takes.
	Networks []string
}

// World is what the data center knows besides the VM itself.
type World struct {
	// Networks by UUID. A NIC whose network is not here is placed by the
	// zones' "*" rule but gets no network-name variants.
	Networks map[string]*dc.Network
	// Pools maps a network UUID to the UUIDs of the pools that contain it.
	Pools map[string][]string
	// PoolNetworks maps a pool UUID to its networks, in NAPI's order.
	PoolNetworks map[string][]string
}

// WithPools returns w with more network pools: a copy when there are any,
// w itself when there are none.
func (w *World) WithPools(pools []dc.NetworkPool) *World {
	if len(pools) == 0 {
		return w
	}
	out := &World{Networks: w.Networks, Pools: maps.Clone(w.Pools), PoolNetworks: maps.Clone(w.PoolNetworks)}
	if out.Pools == nil {
		out.Pools = map[string][]string{}
	}
	if out.PoolNetworks == nil {
		out.PoolNetworks = map[string][]string{}
	}
	for _, p := range pools {
		id := strings.ToLower(p.UUID)
		var members []string
		for _, n := range p.Networks {
			n = strings.ToLower(n)
			members = append(members, n)
			out.Pools[n] = append(slices.Clip(out.Pools[n]), id)
		}
		out.PoolNetworks[id] = members
	}
	return out
}

// Input is one VM and its context.
type Input struct {
	VM *dc.VM
	// Owner is the VM owner's UFDS account. It must not be nil: a VM whose
	// owner cannot be looked up is not recomputed at all (its records stay).
	Owner *dc.User
	// CNDown is the CN-down decision for the VM's server (feeds make it).
	CNDown bool
	// HeldServices names services the VM stays listed in although its
	// triton.cns.status says down: the self-removal hysteresis has not let it
	// go yet. Hard removals ignore it.
	HeldServices []string
}

// Reason is one of the reference implementation's "why" flags, kept with
// the same spelling so operators' runbooks still apply.
type Reason string

const (
	ReasonInvalidTag      Reason = "invalid_tag"       // triton.cns.services did not parse or failed validation
	ReasonInstEnFlag      Reason = "inst_en_flag"      // triton.cns.status is not "up": out of services
	ReasonCNDown          Reason = "cn_down"           // compute node down: out of services
	ReasonVMDown          Reason = "vm_down"           // VM not running: out of services
	ReasonUserEnFlag      Reason = "user_en_flag"      // owner has not opted in (triton_cns_enabled)
	ReasonUserNotApproved Reason = "user_not_approved" // owner not approved_for_provisioning
	ReasonPTR             Reason = "ptr"               // triton.cns.reverse_ptr re-enabled instance names
	ReasonAdmin           Reason = "admin"             // admin-owned VM with services: always listed
	ReasonPoseidon        Reason = "poseidon"          // poseidon-owned VM with services: always listed
	ReasonInstEnTag       Reason = "inst_en_tag"       // triton.cns.disable tag set
	ReasonDestroyed       Reason = "destroyed"         // destroyed or failed
	ReasonHeld            Reason = "held"              // status down, kept listed by the hysteresis
)

// Service is one entry of the triton.cns.services tag (or a role tag).
type Service struct {
	Name  string
	Ports []Port
	// Balances are the services this one is the gRPC load balancer of
	// (the "grpclb=" property): each gets a _grpclb._tcp SRV record
	// pointing at this service's name.
	Balances []Balance
}

// Balance is one "grpclb=" property: the service carrying it runs the
// grpclb balancer of Service on Port (gRPC's "Load Balancing and DNS").
type Balance struct {
	Service string
	Port    uint16
}

// Port is one port of a service, with the SRV priority and weight the tag
// asked for (defaults 0 and 10).
type Port struct {
	Port     uint16
	Priority uint16
	Weight   uint16
}

// Record is one generated resource record and the zone it belongs to.
type Record struct {
	// Zone is the forward zone or the reverse zone (e.g. 3.2.1.in-addr.arpa)
	// the record lives in, lower case without the trailing dot.
	Zone string
	// RR has a lower-case, fully qualified owner name.
	RR dns.RR
	// Pref orders competing PTR records for one address: the lowest wins,
	// then the shortest target, then the lexically smallest. A
	// triton.cns.reverse_ptr target has Pref 0, a generated one Pref 1.
	Pref uint8
	// Stamp, when not zero, makes the record a singleton at its name
	// across VMs: the store serves the one with the highest Stamp (ties:
	// Pref, then the shortest, then the lexically smallest). A
	// _grpc_config TXT carries its VM's last_modified in Unix
	// milliseconds (1 when unknown), so of members that disagree, the one
	// modified last wins.
	Stamp uint64
}

// Result is everything cns decides about one VM.
type Result struct {
	// ListInstance and ListServices are the listing decision. A VM with
	// neither has no records at all. Services named in Input.HeldServices
	// stay listed although ListServices is false (reason ReasonHeld).
	ListInstance bool
	ListServices bool
	// Reasons are the flags behind the decision, in the order they applied.
	Reasons []Reason
	// Services parsed from the tags (even when not listed).
	Services []Service
	// Names are the FQDNs (without trailing dot) whose TXT record carries
	// the VM's UUID: its instance names and listed service names. This is
	// what GET /vm/:uuid and CloudAPI's dns_names show.
	Names []string
	// Records in a deterministic order.
	Records []Record
	// Clients are the addresses that identify the instance when it queries
	// cns (ClientNetworks); none unless the instance is listed.
	Clients []ClientAddr
	// ClientZones are the forward zones the instance has names in: where
	// its owner-less names are answered in its owner's scope.
	ClientZones []string
	// Problems explain input that was ignored or rejected (a bad tag, a
	// label that cleaned to nothing, an unknown address), for logs and
	// cnsadm vm.
	Problems []string
}

// Compute decides the listing of in.VM and generates its records: Decide,
// then Assemble with in.HeldServices.
func Compute(cfg *Config, w *World, in Input) Result {
	d := Decide(cfg, in)
	return d.Assemble(w, in.HeldServices)
}

// Decision is the first half of Compute: the services a VM's tags name and
// its listing decision, before the self-removal hysteresis has said which
// of those services hold it. The updater reports the decision to the
// hysteresis and assembles the records once, with what it holds.
type Decision struct {
	cfg  *Config
	in   Input
	svcs []Service
	l    listing
	p    problems
	// Services are the services parsed from the tags (even when not
	// listed); ListInstance, ListServices and Reasons are the decision
	// without any service holding the VM.
	Services     []Service
	ListInstance bool
	ListServices bool
	Reasons      []Reason
	// Holdable: the VM is out of its services by its own
	// triton.cns.status alone, so a service may hold it (HeldServices);
	// any hard reason (stopped, CN down, opted out, ...) wins over that.
	Holdable bool
}

// Decide makes the listing decision of in.VM; in.HeldServices is not
// read (Assemble takes them).
func Decide(cfg *Config, in Input) Decision {
	d := Decision{cfg: cfg, in: in}
	switch {
	case cfg == nil:
		d.p.addf("no configuration")
	case in.VM == nil:
		d.p.addf("no VM")
	case in.Owner == nil:
		d.p.addf("VM %s: no owner", in.VM.UUID)
	}
	if len(d.p.list) > 0 {
		return d
	}
	var invalidTag bool
	d.svcs, invalidTag = vmServices(in.VM, in.Owner, &d.p)
	d.l = decide(in, d.svcs, invalidTag, &d.p)
	d.Services, d.ListInstance, d.ListServices, d.Reasons, d.Holdable = d.svcs, d.l.instance, d.l.services, d.l.reasons, d.l.holdable
	return d
}

// Assemble generates the records of the decision in w, the services named
// in held keeping the VM listed (reason held) where it is Holdable.
func (d *Decision) Assemble(w *World, held []string) Result {
	p := problems{list: slices.Clone(d.p.list), seen: maps.Clone(d.p.seen)}
	if d.cfg == nil || d.in.VM == nil || d.in.Owner == nil {
		return Result{Problems: p.list}
	}
	cfg, in, svcs := d.cfg, d.in, d.svcs
	l := d.l.holding(svcs, held)
	res := Result{
		ListInstance: l.instance,
		ListServices: l.services,
		Reasons:      l.reasons,
		Services:     svcs,
	}
	// A VM listed neither as an instance nor in services has no records at
	// all, not even its CMON name (reference §1.5).
	if l.instance || l.services {
		if err := checkIdentity(in); err != nil {
			p.addf("%v: no records", err)
		} else {
			b := newBuilder(cfg, w, in, l, &p)
			b.build(svcs, in.VM.NICs)
			res.Records, res.Names = b.records(), b.sortedNames()
			if l.instance {
				res.Clients = clientAddrs(cfg, w, in.VM)
				if len(res.Clients) > 0 {
					res.ClientZones = instanceZones(cfg, w, in.VM)
				}
			}
		}
	}
	res.Problems = p.list
	return res
}

// checkIdentity makes sure the UUIDs that become labels of every name are
// labels: SDC's are, but an inventory file is written by hand.
func checkIdentity(in Input) error {
	if err := checkLabel(strings.ToLower(in.VM.UUID)); err != nil {
		return fmt.Errorf("VM uuid %q: %v", in.VM.UUID, err)
	}
	if err := checkLabel(strings.ToLower(in.Owner.UUID)); err != nil {
		return fmt.Errorf("owner uuid %q: %v", in.Owner.UUID, err)
	}
	return nil
}
