package records

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// Constructors that keep the test tables short. A VM is built from
// options; the owner is an opted-in, approved account unless changed.

type vmOpt func(*dc.VM)

func newVM(uuid string, opts ...vmOpt) *dc.VM {
	vm := &dc.VM{
		UUID:             uuid,
		State:            "running",
		Tags:             map[string]any{},
		CustomerMetadata: map[string]any{},
	}
	for _, o := range opts {
		o(vm)
	}
	return vm
}

func alias(a string) vmOpt      { return func(vm *dc.VM) { vm.Alias = &a } }
func state(s string) vmOpt      { return func(vm *dc.VM) { vm.State = s } }
func nics(n ...dc.NIC) vmOpt    { return func(vm *dc.VM) { vm.NICs = append(vm.NICs, n...) } }
func tag(k string, v any) vmOpt { return func(vm *dc.VM) { vm.Tags[k] = v } }
func meta(k string, v any) vmOpt {
	return func(vm *dc.VM) { vm.CustomerMetadata[k] = v }
}
func services(s string) vmOpt { return tag(tagServices, s) }
func destroyed() vmOpt {
	return func(vm *dc.VM) { vm.Destroyed = dc.Destroyed{Set: true, Time: "2024-01-02T03:04:05.678Z"} }
}

// nic is a NIC on network with addresses as VMAPI lists them in "ips".
func nic(network string, ips ...string) dc.NIC {
	return dc.NIC{NetworkUUID: network, NICTag: "external", IPs: ips}
}

func taggedNIC(network, nicTag string, vlan int, ips ...string) dc.NIC {
	n := nic(network, ips...)
	n.NICTag, n.VLANID = nicTag, &vlan
	return n
}

type userOpt func(*dc.User)

func newUser(uuid string, opts ...userOpt) *dc.User {
	u := &dc.User{UUID: uuid, Login: "user-" + uuid, TritonCNSEnabled: "true", ApprovedForProvisioning: "true"}
	for _, o := range opts {
		o(u)
	}
	return u
}

func login(l string) userOpt                    { return func(u *dc.User) { u.Login = l } }
func cnsEnabled(v string) userOpt               { return func(u *dc.User) { u.TritonCNSEnabled = v } }
func approved(v string) userOpt                 { return func(u *dc.User) { u.ApprovedForProvisioning = v } }
func zone(name string, networks ...string) Zone { return Zone{Name: name, Networks: networks} }

func world(networks ...*dc.Network) *World {
	w := &World{Networks: map[string]*dc.Network{}, Pools: map[string][]string{}}
	for _, n := range networks {
		w.Networks[n.UUID] = n
	}
	return w
}

func network(uuid, name string, owners ...string) *dc.Network {
	return &dc.Network{UUID: uuid, Name: name, OwnerUUIDs: owners}
}

// Expected records, in the text form render gives: "zone | RR" with the
// RR as miekg prints it, tabs made spaces, and PTRs followed by their
// Pref. Names are relative to the zone.

type z string

func (zn z) fqdn(rel string) string {
	if rel == "" {
		return string(zn) + "."
	}
	return rel + "." + string(zn) + "."
}

func (zn z) rr(rel, typ, rdata string) string {
	return fmt.Sprintf("%s | %s 30 IN %s %s", zn, zn.fqdn(rel), typ, rdata)
}

func (zn z) a(rel, ip string) string      { return zn.rr(rel, "A", ip) }
func (zn z) aaaa(rel, ip string) string   { return zn.rr(rel, "AAAA", ip) }
func (zn z) txt(rel, v string) string     { return zn.rr(rel, "TXT", `"`+v+`"`) }
func (zn z) cname(rel, tgt string) string { return zn.rr(rel, "CNAME", zn.fqdn(tgt)) }

// srv takes the target relative to the zone.
func (zn z) srv(rel string, prio, weight, port int, tgt string) string {
	return zn.rr(rel, "SRV", fmt.Sprintf("%d %d %d %s", prio, weight, port, zn.fqdn(tgt)))
}

// inst is an instance (or listed service) name: address and UUID.
func (zn z) inst(rel, ip, uuid string) []string {
	if strings.Contains(ip, ":") {
		return []string{zn.aaaa(rel, ip), zn.txt(rel, uuid)}
	}
	return []string{zn.a(rel, ip), zn.txt(rel, uuid)}
}

func (zn z) cmon(uuid string) string { return zn.cname(uuid+".cmon", "cmon") }

// ptr is a PTR in a reverse zone; the target is absolute, without dot.
func ptr(rzone, leaf, target string, pref int) string {
	return fmt.Sprintf("%s | %s.%s. 30 IN PTR %s. ; pref %d", rzone, leaf, rzone, target, pref)
}

// lines flattens strings and slices of strings.
func lines(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			out = append(out, v)
		case []string:
			out = append(out, v...)
		default:
			panic(fmt.Sprintf("lines: %T", p))
		}
	}
	return out
}

func render(r Record) string {
	s := r.Zone + " | " + strings.ReplaceAll(r.RR.String(), "\t", " ")
	if r.RR.Header().Rrtype == dns.TypePTR {
		s += fmt.Sprintf(" ; pref %d", r.Pref)
	}
	return s
}

func renderAll(recs []Record, types ...uint16) []string {
	var out []string
	for _, r := range recs {
		if len(types) == 0 || slices.Contains(types, r.RR.Header().Rrtype) {
			out = append(out, render(r))
		}
	}
	return out
}

// sameSet compares record texts as sets and reports the differences.
func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	sort.Strings(g)
	sort.Strings(w)
	if slices.Equal(g, w) {
		return
	}
	have := map[string]int{}
	for _, s := range g {
		have[s]++
	}
	var missing, extra []string
	for _, s := range w {
		if have[s] > 0 {
			have[s]--
		} else {
			missing = append(missing, s)
		}
	}
	for _, s := range g {
		if have[s] > 0 {
			have[s]--
			extra = append(extra, s)
		}
	}
	t.Errorf("%s differ\nmissing:\n  %s\nunexpected:\n  %s", what,
		strings.Join(missing, "\n  "), strings.Join(extra, "\n  "))
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
