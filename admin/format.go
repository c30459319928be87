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
