package admin

import (
	"fmt"
	"math"
	"time"
)

// How operators read times and listing flags, in cnsadm and the terminal
// UI alike.

// Ago renders a duration the way cnsadm always has: sec, min, hr, day, wk,
// rounded, with a plural s above one ("3 days", "1 day", "0 sec").
func Ago(d time.Duration) string {
	v := d.Seconds()
	unit := "sec"
	for _, step := range []struct {
		limit, div float64
		next       string
	}{{59.5, 60, "min"}, {59.5, 60, "hr"}, {23.5, 24, "day"}, {6.5, 7, "wk"}} {
		if v < step.limit {
			break
		}
		v /= step.div
		unit = step.next
	}
	n := int(math.Round(v))
	if n > 1 {
		unit += "s"
	}
	return fmt.Sprintf("%d %s", n, unit)
}

// reasonText spells out the reference's listing flags.
var reasonText = map[string]string{
	"invalid_tag":       "the triton.cns.services tag is invalid: no service names",
	"inst_en_flag":      "triton.cns.status metadata is not \"up\": out of its services",
	"cn_down":           "its compute node is down: out of its services",
	"vm_down":           "the VM is not running: out of its services",
	"user_en_flag":      "the owner has not enabled CNS (triton_cns_enabled): not listed",
	"user_not_approved": "the owner is not approved for provisioning: not listed",
	"ptr":               "triton.cns.reverse_ptr re-enabled its instance names",
	"admin":             "an admin VM with services: always listed",
	"poseidon":          "a Manta (poseidon) VM with services: always listed",
	"inst_en_tag":       "the triton.cns.disable tag is set: not listed",
	"destroyed":         "the VM is destroyed: not listed",
	"held":              "status down, but the self-removal hysteresis keeps it in its services for now",
	"compute_node":      "a compute node: its <uuid>.cmon names in every forward zone while it is set up, whatever its state",
}

// ReasonText spells out a listing flag ("" for a flag it does not know).
func ReasonText(flag string) string { return reasonText[flag] }

// RemovalProblems says, one sentence each, which causes' removals the
// guard holds and what applies them: cnsadm status's PROBLEM lines and
// the terminal UI's.
func RemovalProblems(g *RemovalGuard, now time.Time) []string {
	if g == nil {
		return nil
	}
	var out []string
	for _, h := range g.Holds {
		if h.Phase == "applying" {
			continue
		}
		out = append(out, fmt.Sprintf("removals held (%s): %d VMs would lose their names (of %d stored) for %s, for %s; %s; `cnsadm feeds accept %s` applies them now",
			h.Cause, h.VMs, h.Of, h.What, Ago(now.Sub(h.Since)), HoldApplies(h, now), h.Cause))
	}
	return out
}

// HoldApplies says when a hold applies by itself.
func HoldApplies(h RemovalHold, now time.Time) string {
	switch {
	case h.Phase == "applying":
		return "being applied"
	case h.ConfirmAt.After(now):
		return fmt.Sprintf("they apply if %s still says so after %s", h.Upstream, Ago(h.ConfirmAt.Sub(now)))
	}
	return fmt.Sprintf("they apply at %s's next answer", h.Upstream)
}
