package cnsadm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin"
)

var heldNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func heldGuard() *admin.RemovalGuard {
	return &admin.RemovalGuard{WindowSeconds: 60, MinVMs: 20, Percent: 25, ConfirmSeconds: 600, Holds: []admin.RemovalHold{{
		Cause: "cn_down", Phase: "holding", Since: heldNow.Add(-2 * time.Minute), VMs: 495, Peak: 495, Of: 1020,
		ConfirmAt: heldNow.Add(8 * time.Minute), What: "compute nodes reported down by CNAPI", Upstream: "CNAPI"}}}
}

// A hold is a PROBLEM at the top of cnsadm status, saying the cause, the
// counts, what applies it and how to accept it; nothing held, no line.
func TestStatusShowsHeldRemovals(t *testing.T) {
	var b bytes.Buffer
	if err := WriteStatus(&b, &admin.Status{RemovalGuard: heldGuard()}, heldNow); err != nil {
		t.Fatal(err)
	}
	want := "PROBLEM: removals held (cn_down): 495 VMs would lose their names (of 1020 stored) for compute nodes reported down by CNAPI, for 2 mins; " +
		"they apply if CNAPI still says so after 8 mins; `cnsadm feeds accept cn_down` applies them now\n"
	if got := b.String(); !strings.HasPrefix(got, want) {
		t.Errorf("cnsadm status:\n%s\nwant it to begin with\n%s", got, want)
	}
	b.Reset()
	if err := WriteStatus(&b, &admin.Status{RemovalGuard: &admin.RemovalGuard{Holds: []admin.RemovalHold{}}}, heldNow); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "PROBLEM") {
		t.Errorf("nothing held, yet:\n%s", b.String())
	}
	b.Reset()
	if err := WriteFeeds(&b, &admin.Feeds{RemovalGuard: heldGuard()}, heldNow); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "HELD REMOVALS") || !strings.Contains(got, "cn_down        holding  2 mins ago  495  1020") {
		t.Errorf("cnsadm feeds:\n%s", got)
	}
}
