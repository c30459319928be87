package cnsadm

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/admin/status"
)

// What cnsadm prints. The reference verbs keep the reference's layout so
// operators' habits and scripts still work.

// WriteStatus prints the zones table and the peers table of cnsadm status,
// after a PROBLEM line for each cause whose removals are held.
func WriteStatus(w io.Writer, st *admin.Status, now time.Time) error {
	if problems := admin.RemovalProblems(st.RemovalGuard, now); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(w, "PROBLEM: "+p)
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ZONE\tLATEST SERIAL\tCHANGED\tPROPAGATION")
	serials := map[string]uint32{}
	for _, z := range st.Zones {
		serials[z.Name] = z.Serial
		changed := ""
		if t, ok := st.Changed[z.Name]; ok && !t.IsZero() {
			changed = admin.Ago(now.Sub(t)) + " ago"
		}
		prop := ""
		if p, ok := st.Propagation[z.Name]; ok && p.Serial == z.Serial {
			prop = p.Summary()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", z.Name, z.Serial, changed, prop)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tZONE\tLATEST SERIAL\tDRIFT\tVERSION")
	for _, p := range st.Peers {
		zones := make([]string, 0, len(p.Serials))
		for z := range p.Serials {
			zones = append(zones, z)
		}
		sort.Strings(zones)
		for i, z := range zones {
			addr, version := "", ""
			if i == 0 {
				addr, version = p.Address, p.Version
			}
			serial := status.SerialText(p.Serials[z], p.Zones[z].SignerSerial)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", addr, z, serial, driftText(p, z, serials), version)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeSources(w, st.Sources, now)
}

// writeSources prints an aggregator's sources (nothing when there are
// none).
func writeSources(w io.Writer, sources []admin.AggregateSource, now time.Time) error {
	if len(sources) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tREGION\tSTATE\tSERIAL\tLAST TRANSFER\tLAG\tNAMES\tERROR")
	for _, x := range sources {
		last := "never"
		if !x.LastTransfer.IsZero() {
			last = admin.Ago(now.Sub(x.LastTransfer)) + " ago"
			if x.LastKind != "" {
				last += " (" + x.LastKind + ")"
			}
		}
		lag := "-"
		if x.LagSeconds >= 0 && !x.LastCheck.IsZero() {
			lag = admin.Ago(time.Duration(x.LagSeconds * float64(time.Second)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\n", x.Zone, x.Region, x.State, x.Serial, last, lag, x.Names, x.Error)
	}
	return tw.Flush()
}

// driftText is empty in sync, a time when behind, "no copy" for a peer
// that has not transferred the zone (serial 0: the commits it lacks are
// every one, which says nothing), ??? for a zone cns does not serve.
func driftText(p admin.Peer, zone string, serials map[string]uint32) string {
	cur, ok := serials[zone]
	if !ok {
		return "???"
	}
	pz, ok := p.Zones[zone]
	if !ok || pz.Serial == cur || pz.DriftSerials == 0 {
		return ""
	}
	if pz.Serial == 0 {
		return "no copy"
	}
	if pz.DriftSeconds < 0 {
		return fmt.Sprintf("%d serials", pz.DriftSerials)
	}
	return admin.Ago(time.Duration(pz.DriftSeconds * float64(time.Second)))
}

// WriteVM prints cnsadm vm: the reference's uuid, last_visit and names,
// then what cns adds (alias, owner by login and UUID, listing decision
// and its reasons, problems).
func WriteVM(w io.Writer, vm *admin.VM, now time.Time) error {
	f := newFields(w, "uuid", "last_visit", "names")
	f.text("uuid", vm.UUID)
	lastVisit := "unknown"
	if vm.LastVisit > 0 {
		lastVisit = admin.Ago(now.Sub(time.UnixMilli(vm.LastVisit))) + " ago"
	}
	f.text("last_visit", lastVisit)
	f.list("names", vm.Names, "")
	// cns's lines.
	if vm.Alias != "" {
		f.text("alias", vm.Alias)
	}
	switch {
	case vm.Login != "":
		f.text("owner", vm.Login+" ("+vm.Owner+")")
	case vm.Owner != "":
		f.text("owner", vm.Owner)
	}
	f.text("listed", listedText(vm))
	if len(vm.Reasons) > 0 {
		f.list("why", reasonLines(vm.Reasons), "")
	}
	for _, p := range vm.Problems {
		f.text("problem", p)
	}
	// client_answers: where the VM asks from, and the owner-less names
	// its owner's instances have for it.
	if len(vm.ClientAddrs) > 0 {
		f.text("asks_from", strings.Join(vm.ClientAddrs, ", "))
		f.list("scoped", vm.ShortNames, "")
	}
	return nil
}

// listedText says which of a VM's names are listed.
func listedText(vm *admin.VM) string {
	var listed []string
	if vm.ListInstance {
		listed = append(listed, "instance names")
	}
	if vm.ListServices {
		listed = append(listed, "service names")
	}
	if vm.ComputeNode {
		listed = append(listed, "CMON names (a compute node)")
	}
	if len(listed) == 0 {
		return "nothing"
	}
	return strings.Join(listed, ", ")
}

// reasonLines is each listing flag with its meaning, the flags aligned.
func reasonLines(reasons []string) []string {
	width := 0
	for _, r := range reasons {
		width = max(width, len(r))
	}
	lines := make([]string, len(reasons))
	for i, r := range reasons {
		text := admin.ReasonText(r)
		if text == "" {
			text = "(unknown flag)"
		}
		lines[i] = pad(r, width) + "  " + text
	}
	return lines
}

// WritePeer prints cnsadm peers <addr> as the reference does: address,
// version, using_notify, using_ixfr, then serials and counters as
// indented "key: value" lines, each block followed by an empty line.
func WritePeer(w io.Writer, p *admin.Peer) error {
	f := newFields(w, "address", "version", "using_notify", "using_ixfr", "serials", "counters")
	f.text("address", p.Address)
	f.text("version", p.Version)
	f.text("using_notify", fmt.Sprint(p.UsingNotify))
	f.text("using_ixfr", fmt.Sprint(p.UsingIXFR))
	f.object("serials", slices.Sorted(maps.Keys(p.Serials)), func(z string) string { return fmt.Sprint(p.Serials[z]) })
	f.object("counters", slices.Sorted(maps.Keys(p.Counters)), func(c string) string { return fmt.Sprint(p.Counters[c]) })
	return nil
}

// WritePeers prints the list of peers (cnsadm peers with no address).
func WritePeers(w io.Writer, peers []admin.PeerSummary) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tZONES\tVERSION")
	for _, p := range peers {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", p.Address, len(p.Serials), p.Version)
	}
	return tw.Flush()
}

// WriteHistory prints cnsadm history: per serial, when, why and what.
func WriteHistory(w io.Writer, changes []admin.Change) error {
	if len(changes) == 0 {
		_, err := fmt.Fprintln(w, "no changes in the journal (a zone's first version has none)")
		return err
	}
	for i, c := range changes {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "serial %d → %d  %s  %s\n", c.From, c.To, c.Time.UTC().Format(time.RFC3339), c.Cause)
		for _, r := range c.Deleted {
			fmt.Fprintf(w, "  - %s\n", r)
		}
		for _, r := range c.Added {
			fmt.Fprintf(w, "  + %s\n", r)
		}
	}
	return nil
}

// WriteFeeds prints cnsadm feeds.
func WriteFeeds(w io.Writer, f *admin.Feeds, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FEED\tSTATE\tSINCE\tLAST OK\tREASON")
	for _, x := range f.Feeds {
		state := "healthy"
		if !x.Healthy {
			state = "degraded"
		}
		lastOK := "never"
		if !x.LastOK.IsZero() {
			lastOK = admin.Ago(now.Sub(x.LastOK)) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s ago\t%s\t%s\n", x.Name, state, admin.Ago(now.Sub(x.Since)), lastOK, x.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeSources(w, f.Sources, now); err != nil {
		return err
	}
	if err := writeRemovalGuard(w, f.RemovalGuard, now); err != nil {
		return err
	}
	fmt.Fprintf(w, "\npending VMs: %d\n", f.Pending)
	if c := f.LastCommit; c != nil {
		fmt.Fprintf(w, "last commit: %s ago, %d VMs, %.1f ms", admin.Ago(now.Sub(c.Time)), c.VMs, c.DurationMS)
		if c.OldestChangeMS > 0 {
			fmt.Fprintf(w, "; its oldest change waited %.1f ms", c.OldestChangeMS)
		}
		if c.Error != "" {
			fmt.Fprintf(w, ", failed: %s", c.Error)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// WriteWait prints cnsadm wait.
func WriteWait(w io.Writer, res *admin.Wait) error {
	fmt.Fprintf(w, "zone %s serial %d: %s\n", res.Zone, res.Serial, res.State)
	return writePropagationPeers(w, res.Peers)
}

// writePropagationPeers prints each peer's progress with a serial.
func writePropagationPeers(w io.Writer, peers []admin.PeerPropagation) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tSERIAL\tSTATE\tSECONDS")
	for _, p := range peers {
		addr := p.Address
		if p.Target.IsValid() {
			addr = p.Target.String()
		}
		secs := ""
		if p.Seconds >= 0 {
			secs = fmt.Sprintf("%.3f", p.Seconds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", addr, status.SerialText(p.Serial, p.SignerSerial), p.State, secs)
	}
	return tw.Flush()
}

// WriteServices prints cnsadm services: one line per service, its owner
// by login (by UUID when cns does not know the login).
func WriteServices(w io.Writer, views []admin.Service, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "OWNER\tSERVICE\tLISTED\tPENDING\tBUDGET LEFT\tNEXT CHECK")
	for _, v := range admin.ByOwnerName(views) {
		pending := 0
		for _, m := range v.Members {
			if m.Status == admin.MemberPending {
				pending++
			}
		}
		next := ""
		if !v.NextCheck.IsZero() {
			next = "in " + admin.Ago(v.NextCheck.Sub(now))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d/%d\t%s\n", cmp.Or(v.Login, v.Owner), v.Service, v.Listed, pending, v.BudgetLeft, v.Budget, next)
	}
	return tw.Flush()
}

// WriteService prints one service: its owner by login and UUID, its
// members by alias and UUID, who is pending and when each may leave, the
// window's budget, and recent decisions.
func WriteService(w io.Writer, v *admin.Service, now time.Time) error {
	owner := v.Owner
	if v.Login != "" {
		owner = v.Login + ", " + v.Owner
	}
	fmt.Fprintf(w, "service:     %s (owner %s)\n", v.Service, owner)
	fmt.Fprintf(w, "listed:      %d of %d (n)\n", v.Listed, v.N)
	fmt.Fprintf(w, "budget:      %d of %d left in this window", v.BudgetLeft, v.Budget)
	if !v.WindowFreesAt.IsZero() {
		fmt.Fprintf(w, " (one more in %s)", admin.Ago(v.WindowFreesAt.Sub(now)))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tUUID\tSTATUS\tDOWN SINCE\tLEAVES")
	unseen := false
	for _, m := range v.MembersByAlias() {
		since, leaves := "", ""
		switch {
		case !m.FirstSeenDown.IsZero():
			since, unseen = "first seen "+admin.Ago(now.Sub(m.FirstSeenDown))+" ago", true
		case !m.DownSince.IsZero():
			since = admin.Ago(now.Sub(m.DownSince)) + " ago"
		}
		switch {
		case !m.MayLeaveAt.IsZero():
			leaves = "in " + admin.Ago(m.MayLeaveAt.Sub(now))
		case !m.LeftAt.IsZero():
			leaves = "left " + admin.Ago(now.Sub(m.LeftAt)) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cmp.Or(m.Alias, "-"), m.VM, m.Status, since, leaves)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if unseen {
		fmt.Fprintln(w, "first seen: down since before cns saw it; the time is when cns first saw it down")
	}
	if len(v.History) > 0 {
		fmt.Fprintln(w, "history:")
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, d := range v.History {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", d.Time.UTC().Format(time.RFC3339), cmp.Or(d.Alias, "-"), d.VM, d.Action, d.Reason)
		}
		return tw.Flush()
	}
	return nil
}

// writeRemovalGuard prints the guard's holds (nothing when there are
// none).
func writeRemovalGuard(w io.Writer, g *admin.RemovalGuard, now time.Time) error {
	if g == nil || len(g.Holds) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "HELD REMOVALS\tPHASE\tSINCE\tVMS\tOF\tAPPLIES")
	for _, h := range g.Holds {
		fmt.Fprintf(tw, "%s\t%s\t%s ago\t%d\t%d\t%s\n", h.Cause, h.Phase, admin.Ago(now.Sub(h.Since)), h.VMs, h.Of, admin.HoldApplies(h, now))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "(held: removals of one cause within %s over %d VMs and %d %% of the VMs stored; `cnsadm feeds accept [CAUSE]` applies them)\n",
		admin.Ago(time.Duration(g.WindowSeconds*float64(time.Second))), g.MinVMs, g.Percent)
	return err
}
