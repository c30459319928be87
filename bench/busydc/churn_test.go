package busydc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/feeds/dc"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// vmState is what the churn knows of one VM, to pick changes and to say
// what the answer must become.
type vmState struct {
	vm      dc.VM
	login   string
	svcs    []string // service names (lower case, no port)
	running bool
}

func (v *vmState) ip() string { return v.vm.NICs[0].IP }

// change is one mutation of the data center; when it has a visible effect
// on DNS, probe says which name to ask and what the answer must become.
type change struct {
	kind    string
	visible bool // the change shows in DNS, so it could be probed
	probe   *probe
}

// probe is the observable effect of a change: the answer to name/qtype
// satisfies want once the change has reached a server.
type probe struct {
	kind  string
	name  string
	qtype uint16
	want  func(*dns.Msg) bool
	at    time.Time // the moment the change was handed to the simulator
	uuid  string
}

// churn makes a realistic mix of VM changes through the simulator, as
// VMAPI would publish them: creations, destructions, IP changes, stops
// and starts (which move VMs out of and into their services), alias
// changes and service tag changes.
type churn struct {
	sim  *sdcsim.Sim
	zone string
	rng  *rand.Rand

	vms     map[string]*vmState
	running []string // uuids, in no order
	stopped []string
	logins  map[string]string // owner uuid → login
	servers []string
	n       int // changes made, for fresh names and addresses

	mu     sync.Mutex
	probed map[string]bool // VMs a probe is waiting on: left alone until it ends
}

// The mix, in percent; it adds up to 100.
var churnMix = []struct {
	kind   string
	weight int
}{
	{"create", 15}, {"destroy", 10}, {"ip", 20}, {"stop", 15}, {"start", 15}, {"alias", 15}, {"service", 10},
}

func newChurn(sim *sdcsim.Sim, inv *dc.Inventory, zone string, seed uint64) *churn {
	c := &churn{sim: sim, zone: zone, rng: rand.New(rand.NewPCG(seed, 0xc4a1)), vms: map[string]*vmState{},
		logins: map[string]string{}, probed: map[string]bool{}}
	for _, u := range inv.Users {
		c.logins[u.UUID] = u.Login
	}
	for _, s := range inv.Servers {
		c.servers = append(c.servers, s.UUID)
	}
	for _, vm := range inv.VMs {
		v := &vmState{vm: vm, login: c.logins[vm.OwnerUUID], svcs: serviceNames(vm), running: vm.State == "running"}
		c.vms[vm.UUID] = v
		if v.running {
			c.running = append(c.running, vm.UUID)
		} else {
			c.stopped = append(c.stopped, vm.UUID)
		}
	}
	return c
}

func serviceNames(vm dc.VM) []string {
	tag, _ := vm.Tags["triton.cns.services"].(string)
	var out []string
	for _, s := range strings.Split(tag, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(s), ":")
		if name != "" {
			out = append(out, strings.ToLower(name))
		}
	}
	return out
}

// pick takes a random VM from list that no probe is waiting on.
func (c *churn) pick(list []string) (int, *vmState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range 20 {
		if len(list) == 0 {
			return -1, nil
		}
		i := c.rng.IntN(len(list))
		if !c.probed[list[i]] {
			return i, c.vms[list[i]]
		}
	}
	return -1, nil
}

func removeAt(list []string, i int) []string {
	list[i] = list[len(list)-1]
	return list[:len(list)-1]
}

// next makes one change; sample asks for its probe (a change with no
// visible effect, such as stopping a VM in no service, has none).
func (c *churn) next(sample bool) (change, error) {
	w := c.rng.IntN(100)
	kind := churnMix[len(churnMix)-1].kind
	for _, m := range churnMix {
		if w < m.weight {
			kind = m.kind
			break
		}
		w -= m.weight
	}
	c.n++
	var p *probe
	var err error
	switch kind {
	case "create":
		p, err = c.create()
	case "destroy":
		p, err = c.destroy()
	case "ip":
		p, err = c.changeIP()
	case "stop", "start":
		p, err = c.setRunning(kind == "start")
	case "alias":
		p, err = c.changeAlias()
	case "service":
		p, err = c.addService()
	}
	if p == nil || !sample || err != nil {
		return change{kind: kind, visible: p != nil && err == nil}, err
	}
	c.mu.Lock()
	c.probed[p.uuid] = true
	c.mu.Unlock()
	return change{kind: kind, visible: true, probe: p}, nil
}

// done releases a probed VM to the churn.
func (c *churn) done(p *probe) {
	c.mu.Lock()
	delete(c.probed, p.uuid)
	c.mu.Unlock()
}

func (c *churn) instName(v *vmState, label string) string {
	return label + ".inst." + v.login + "." + c.zone + "."
}

func (c *churn) svcName(v *vmState, svc string) string {
	return svc + ".svc." + v.login + "." + c.zone + "."
}

func (c *churn) create() (*probe, error) {
	_, tmpl := c.pick(c.running)
	if tmpl == nil {
		return nil, nil
	}
	n := c.n
	ip := fmt.Sprintf("10.%d.%d.%d", 128+n>>16&127, n>>8&255, n&255)
	alias := fmt.Sprintf("churn-%d", n)
	nic := tmpl.vm.NICs[0]
	nic.IP, nic.IPs, nic.MAC = ip, []string{ip + "/8"}, fmt.Sprintf("90:b9:%02x:%02x:%02x:%02x", n>>24&255, n>>16&255, n>>8&255, n&255)
	vm := dc.VM{UUID: c.uuid(), Alias: &alias, OwnerUUID: tmpl.vm.OwnerUUID, ServerUUID: c.servers[c.rng.IntN(len(c.servers))],
		State: "running", Brand: "joyent", NICs: []dc.NIC{nic}, Tags: map[string]any{}, CustomerMetadata: map[string]any{}}
	v := &vmState{vm: vm, login: tmpl.login, running: true}
	if n%3 == 0 { // a third join one of 200 new services
		svc := fmt.Sprintf("churnsvc%d", n%200)
		vm.Tags["triton.cns.services"] = svc
		v.vm, v.svcs = vm, []string{svc}
	}
	p := &probe{kind: "create", name: c.instName(v, alias), qtype: dns.TypeA, want: hasA(ip, true), at: time.Now(), uuid: vm.UUID}
	if err := c.sim.CreateVM(vm); err != nil {
		return nil, err
	}
	c.vms[vm.UUID] = v
	c.running = append(c.running, vm.UUID)
	return p, nil
}

func (c *churn) uuid() string {
	a, b := c.rng.Uint64(), c.rng.Uint64()
	a = a&^(0xF<<12) | 0x4<<12
	b = b&^(0x3<<62) | 0x2<<62
	h := fmt.Sprintf("%016x%016x", a, b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (c *churn) destroy() (*probe, error) {
	i, v := c.pick(c.running)
	if v == nil {
		return nil, nil
	}
	p := &probe{kind: "destroy", name: c.instName(v, v.vm.UUID), qtype: dns.TypeA, want: hasA(v.ip(), false), at: time.Now(), uuid: v.vm.UUID}
	if err := c.sim.DestroyVM(v.vm.UUID); err != nil {
		return nil, err
	}
	c.running = removeAt(c.running, i)
	delete(c.vms, v.vm.UUID)
	return p, nil
}

func (c *churn) changeIP() (*probe, error) {
	_, v := c.pick(c.running)
	if v == nil {
		return nil, nil
	}
	n := c.n
	ip := fmt.Sprintf("10.%d.%d.%d", 128+n>>16&127, n>>8&255, n&255)
	nics := slices.Clone(v.vm.NICs)
	nics[0].IP, nics[0].IPs = ip, []string{ip + "/8"}
	p := &probe{kind: "ip", name: c.instName(v, v.vm.UUID), qtype: dns.TypeA, want: onlyA(ip), at: time.Now(), uuid: v.vm.UUID}
	if err := c.sim.SetNICs(v.vm.UUID, nics); err != nil {
		return nil, err
	}
	v.vm.NICs = nics
	return p, nil
}

// setRunning stops a running VM or starts a stopped one; the visible
// effect is the VM leaving or joining its first service.
func (c *churn) setRunning(start bool) (*probe, error) {
	from := &c.running
	if start {
		from = &c.stopped
	}
	i, v := c.pick(*from)
	if v == nil {
		return nil, nil
	}
	var p *probe
	if len(v.svcs) > 0 {
		kind := map[bool]string{true: "start", false: "stop"}[start]
		p = &probe{kind: kind, name: c.svcName(v, v.svcs[0]), qtype: dns.TypeA, want: hasA(v.ip(), start), at: time.Now(), uuid: v.vm.UUID}
	}
	state := map[bool]string{true: "running", false: "stopped"}[start]
	if err := c.sim.SetVMState(v.vm.UUID, state); err != nil {
		return nil, err
	}
	*from = removeAt(*from, i)
	if start {
		c.running = append(c.running, v.vm.UUID)
	} else {
		c.stopped = append(c.stopped, v.vm.UUID)
	}
	v.running = start
	return p, nil
}

func (c *churn) changeAlias() (*probe, error) {
	_, v := c.pick(c.running)
	if v == nil {
		return nil, nil
	}
	alias := fmt.Sprintf("renamed-%d", c.n)
	p := &probe{kind: "alias", name: c.instName(v, alias), qtype: dns.TypeA, want: hasA(v.ip(), true), at: time.Now(), uuid: v.vm.UUID}
	if err := c.sim.SetAlias(v.vm.UUID, alias); err != nil {
		return nil, err
	}
	v.vm.Alias = &alias
	return p, nil
}

func (c *churn) addService() (*probe, error) {
	_, v := c.pick(c.running)
	if v == nil {
		return nil, nil
	}
	svc := fmt.Sprintf("churnsvc%d", c.n%200)
	if slices.Contains(v.svcs, svc) {
		return nil, nil
	}
	svcs := append(slices.Clone(v.svcs), svc)
	p := &probe{kind: "service", name: c.svcName(v, svc), qtype: dns.TypeA, want: hasA(v.ip(), true), at: time.Now(), uuid: v.vm.UUID}
	if err := c.sim.SetTag(v.vm.UUID, "triton.cns.services", strings.Join(svcs, ",")); err != nil {
		return nil, err
	}
	v.svcs = svcs
	return p, nil
}

// hasA: the answer holds (present) or lacks (!present) an A record for ip.
func hasA(ip string, present bool) func(*dns.Msg) bool {
	return func(m *dns.Msg) bool {
		found := false
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok && a.A.String() == ip {
				found = true
			}
		}
		return found == present && (m.Rcode == dns.RcodeSuccess || (!present && m.Rcode == dns.RcodeNameError))
	}
}

// onlyA: the answer is exactly one A record, ip.
func onlyA(ip string) func(*dns.Msg) bool {
	return func(m *dns.Msg) bool {
		var as []string
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok {
				as = append(as, a.A.String())
			}
		}
		return m.Rcode == dns.RcodeSuccess && len(as) == 1 && as[0] == ip
	}
}
