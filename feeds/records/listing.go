package records

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// listing is the outcome of the reference's FlagFilter for one VM.
type listing struct {
	instance bool
	services bool
	reasons  []Reason
	// ptrName is the triton.cns.reverse_ptr target, lower case, or "".
	ptrName string
	// holdable: out of services by its status alone (Decision.Holdable).
	holdable bool
	// held are the services kept listed by the hysteresis although the
	// VM's status says down.
	held map[string]bool
}

// decide makes the listing decision of reference §1.4. The steps run in
// the reference's order and later steps override earlier ones; the
// reasons record every step that applied, in that order.
func decide(in Input, svcs []Service, invalidTag bool, p *problems) listing {
	vm, owner := in.VM, in.Owner
	l := listing{instance: true, services: true}
	if invalidTag {
		l.reasons = append(l.reasons, ReasonInvalidTag)
	}

	// 1. Service-level: the VM is alive as an instance but should not
	// take traffic. Only the first that applies is recorded.
	statusDown := statusIsDown(vm, p)
	switch {
	case statusDown:
		l.services = false
		l.reasons = append(l.reasons, ReasonInstEnFlag)
	case in.CNDown:
		l.services = false
		l.reasons = append(l.reasons, ReasonCNDown)
	case vm.State != "running":
		l.services = false
		l.reasons = append(l.reasons, ReasonVMDown)
	}

	// 2. The owner's account flags, lowest priority of the removals.
	userOff := false
	switch {
	case !dc.Flag(owner.TritonCNSEnabled):
		userOff = true
		l.reasons = append(l.reasons, ReasonUserEnFlag)
	case !dc.Flag(owner.ApprovedForProvisioning):
		userOff = true
		l.reasons = append(l.reasons, ReasonUserNotApproved)
	}
	if userOff {
		l.instance, l.services = false, false
	}

	// 3. A valid reverse_ptr tag publishes the instance names and the PTR
	// even for an owner who has not opted in (CNS-57).
	if name := reversePTR(vm, p); name != "" {
		l.instance = true
		l.ptrName = name
		l.reasons = append(l.reasons, ReasonPTR)
	}

	// 4. Triton's own services are always published (triton-cns#14).
	if len(svcs) > 0 {
		switch owner.Login {
		case "admin":
			l.instance, l.services = true, true
			l.reasons = append(l.reasons, ReasonAdmin)
		case "poseidon":
			l.instance, l.services = true, true
			l.reasons = append(l.reasons, ReasonPoseidon)
		}
	}

	// 5. Top priority: the VM opted out or is gone.
	hardOff := true
	switch {
	case disabled(vm):
		l.reasons = append(l.reasons, ReasonInstEnTag)
	case vm.Destroyed.Set || vm.State == "destroyed" || vm.State == "failed":
		l.reasons = append(l.reasons, ReasonDestroyed)
	default:
		hardOff = false
	}
	if hardOff {
		l.instance, l.services = false, false
	}

	// The hysteresis only delays a VM that took itself out with its status
	// flag; a stopped VM, a dead CN or any removal above wins over it.
	l.holdable = statusDown && !l.services && l.instance && !userOff && !hardOff &&
		!in.CNDown && vm.State == "running"
	return l
}

// holding returns l with the services of svcs named in held keeping the
// VM listed, when it is holdable.
func (l listing) holding(svcs []Service, held []string) listing {
	if !l.holdable {
		return l
	}
	for _, name := range held {
		for _, s := range svcs {
			if s.Name == strings.ToLower(name) {
				if l.held == nil {
					l.held = make(map[string]bool)
				}
				l.held[s.Name] = true
			}
		}
	}
	if len(l.held) > 0 {
		l.reasons = append(slices.Clip(l.reasons), ReasonHeld)
	}
	return l
}

// statusIsDown reads customer_metadata triton.cns.status: absent is up,
// exactly "up" is up, anything else is down (the reference's rule; its
// docs claimed otherwise). A value that is neither "up" nor "down" is
// most likely a mistake, so it is reported.
func statusIsDown(vm *dc.VM, p *problems) bool {
	v, ok := lookup(vm.CustomerMetadata, metaStatus)
	if !ok {
		return false
	}
	switch v {
	case "up":
		return false
	case "down":
		return true
	}
	p.addf("metadata %s %s is neither \"up\" nor \"down\": treated as down", metaStatus, quote(v))
	return true
}

// disabled reads the triton.cns.disable tag and its docker label. The
// plain tag disables unless it is boolean false; as in the reference, the
// string "false" disables too (VMAPI stores this tag as a boolean). Docker
// labels are always strings, so there "false" means false (CNS-99).
func disabled(vm *dc.VM) bool {
	if v, ok := lookup(vm.Tags, tagDisable); ok {
		return v != false
	}
	if v, ok := lookup(vm.Tags, dockerLabel+tagDisable); ok {
		return v != false && v != "false"
	}
	return false
}

// reversePTR returns the lower-cased triton.cns.reverse_ptr name (or its
// docker label's) if it is a valid host name, else "". An invalid value
// is ignored, as in the reference, but reported.
func reversePTR(vm *dc.VM, p *problems) string {
	for _, key := range []string{tagReversePTR, dockerLabel + tagReversePTR} {
		v, ok := lookup(vm.Tags, key)
		if !ok || v == "" {
			continue
		}
		s, isString := v.(string)
		if !isString {
			p.addf("tag %s %s: want a string, got %s", key, quote(v), jsonType(v))
			continue
		}
		name := strings.ToLower(s)
		if err := checkHostName(name); err != nil {
			p.addf("tag %s %q ignored: %v", key, s, err)
			continue
		}
		return name
	}
	return ""
}

// problems collects, without repeats, what Compute ignored or rejected.
type problems struct {
	list []string
	seen map[string]bool
}

func (p *problems) addf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if p.seen[msg] {
		return
	}
	if p.seen == nil {
		p.seen = make(map[string]bool)
	}
	p.seen[msg] = true
	p.list = append(p.list, msg)
}
