package tui

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/tritondatacenter/cns/admin"
)

// A peer is stale, and marked "!", when it has been behind its zone for
// longer than StaleAfter (or for a time the journal no longer tells), or
// when a NOTIFY to it went unanswered for longer than NotifyTimeout.
const (
	StaleAfter    = 60 * time.Second
	NotifyTimeout = 10 * time.Second
)

type peersLoaded struct {
	zones []admin.Zone
	peers []admin.Peer
}

func loadPeers(ctx context.Context, src Source) (tea.Msg, error) {
	zones, err := src.Zones(ctx)
	if err != nil {
		return nil, err
	}
	peers, err := src.Peers(ctx)
	if err != nil {
		return nil, err
	}
	return peersLoaded{zones, peers}, nil
}

// peerRow is one secondary's state for one zone.
type peerRow struct {
	addr, zone, version string
	known               bool // cns has seen it transfer or answer; false: an expected peer never seen
	pz                  admin.PeerZone
	peer                admin.Peer
}

func (r peerRow) key() string { return r.addr + " " + r.zone }

// peersPage lists every (peer, zone): the serial it has, its drift in
// serials and time, its last transfer, the NOTIFY state and its version.
type peersPage struct {
	c        *Common
	table    table
	filter   filterBox
	rows     []peerRow
	byKey    map[string]peerRow
	loaded   bool
	loadedAt time.Time // drift seconds grow from here between reads

	detail     string // the peer whose detail is open ("" for none)
	detailView scrollView
}

func newPeersPage(c *Common) *peersPage {
	return &peersPage{c: c, filter: newFilterBox("/ ", "filter peers"), detailView: newScrollView(),
		table: newTable(
			column{title: "PEER", flex: true, min: 9, want: 15},
			column{title: "ZONE", flex: true, min: 12, want: 20},
			column{title: "SERIAL", right: true},
			column{title: "DRIFT"},
			column{title: "LAST XFR", drop: 2},
			column{title: "NOTIFY"},
			column{title: "VERSION", drop: 3},
		)}
}

func (p *peersPage) Title() string { return "Peers" }

func (p *peersPage) SetSize() {
	p.filter.setWidth(p.c.Width)
	h := p.c.Height - 5 // the detail lines
	if p.filter.shown() {
		h--
	}
	p.table.setSize(p.c.Width, max(h, 2))
	p.detailView.setSize(p.c.Width, p.c.Height)
}

func (p *peersPage) Load(bool) loader { return loadPeers }
func (p *peersPage) Capturing() bool  { return p.filter.editing }

func (p *peersPage) ShortHelp() []key.Binding {
	if p.detail != "" {
		return scrollHelp(p.c.Keys)
	}
	return listHelp(p.c.Keys, "peer")
}

func (p *peersPage) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case peersLoaded:
		p.loaded, p.loadedAt = true, p.c.Now
		p.rows = peerRows(msg.zones, msg.peers)
		p.rebuild()
	case clockMsg:
		p.rebuild()
	case tea.KeyMsg:
		return p.key(msg)
	}
	return nil
}

// peerRows joins what the peers reported with the peers each zone
// expects: an expected peer never seen is a row too.
func peerRows(zones []admin.Zone, peers []admin.Peer) []peerRow {
	var out []peerRow
	seen := map[string]bool{}
	for _, pe := range peers {
		for _, z := range slices.Sorted(maps.Keys(pe.Zones)) {
			out = append(out, peerRow{addr: pe.Address, zone: z, version: pe.Version, known: true, pz: pe.Zones[z], peer: pe})
			seen[pe.Address+" "+z] = true
		}
	}
	for _, z := range zones {
		for _, zp := range z.Peers {
			if seen[zp.Address+" "+z.Name] {
				continue
			}
			out = append(out, peerRow{addr: zp.Address, zone: z.Name, version: zp.Version,
				pz: admin.PeerZone{ZoneTracking: admin.ZoneTracking{Serial: zp.Serial}, ZoneSerial: z.Serial, DriftSerials: zp.DriftSerials, DriftSeconds: zp.DriftSeconds}})
		}
	}
	slices.SortFunc(out, func(a, b peerRow) int { return strings.Compare(a.key(), b.key()) })
	return out
}

// rebuild lays out the rows (and the open detail) from the last read and
// the time.
func (p *peersPage) rebuild() {
	if p.detail != "" {
		p.detailView.set("Peer "+p.detail, p.peerDetail(p.detail))
	}
	p.byKey = map[string]peerRow{}
	rows := make([]row, 0, len(p.rows))
	for _, r := range p.rows {
		p.byKey[r.key()] = r
		m := markNone
		if why := p.stale(r); why != "" {
			m = markStale
		}
		serial := "-"
		if r.known || r.pz.Serial != 0 {
			serial = r.pz.SerialText()
		}
		rows = append(rows, row{key: r.key(), mark: m, cells: []string{r.addr, r.zone, serial, p.driftText(r),
			transferText(p.c.Now, r.pz), p.notifyText(r), r.version}})
	}
	p.table.setRows(rows)
}

// driftSeconds is how long r has been behind now: the API's figure plus
// the time since it was read (-1 unknown).
func (p *peersPage) driftSeconds(r peerRow) float64 {
	if r.pz.DriftSeconds < 0 {
		return -1
	}
	return r.pz.DriftSeconds + max(p.c.Now.Sub(p.loadedAt).Seconds(), 0)
}

func (p *peersPage) driftText(r peerRow) string {
	switch {
	case !r.known && r.pz.Serial == 0:
		return "never seen"
	case r.pz.DriftSerials == 0:
		return "in step"
	}
	secs := p.driftSeconds(r)
	if secs < 0 {
		return fmt.Sprintf("-%d / ?", r.pz.DriftSerials)
	}
	return fmt.Sprintf("-%d / %s", r.pz.DriftSerials, clock(time.Duration(secs*float64(time.Second))))
}

func transferText(now time.Time, pz admin.PeerZone) string {
	if pz.LastTransfer.IsZero() {
		return "none"
	}
	return pz.LastKind + " " + age(now, pz.LastTransfer) + " ago"
}

func (p *peersPage) notifyText(r peerRow) string {
	pz := r.pz
	switch {
	case r.peer.NotifyFailures > 0:
		return fmt.Sprintf("%d unanswered", r.peer.NotifyFailures)
	case !pz.NotifySent.IsZero() && pz.NotifyAcked.Before(pz.NotifySent):
		if p.c.Now.Sub(pz.NotifySent) > NotifyTimeout {
			return "unanswered"
		}
		return "sent"
	case !pz.NotifyAcked.IsZero():
		return "acked"
	}
	return "-"
}

// stale says why r is stale, "" when it is not.
func (p *peersPage) stale(r peerRow) string {
	switch {
	case !r.known && r.pz.Serial == 0:
		return "an expected peer cns has never seen transfer the zone"
	case r.pz.DriftSerials > 0 && p.driftSeconds(r) < 0:
		return "behind by changes the journal no longer holds"
	case r.pz.DriftSerials > 0 && p.driftSeconds(r) > StaleAfter.Seconds():
		return fmt.Sprintf("behind for more than %ds", int(StaleAfter.Seconds()))
	case r.peer.NotifyFailures > 0:
		return "its NOTIFYs go unanswered"
	case p.notifyText(r) == "unanswered":
		return fmt.Sprintf("a NOTIFY unanswered after %ds", int(NotifyTimeout.Seconds()))
	}
	return ""
}

func (p *peersPage) key(k tea.KeyMsg) tea.Cmd {
	keys := p.c.Keys
	if p.detail != "" && !p.filter.editing {
		if key.Matches(k, keys.Back) {
			p.detail = ""
			return nil
		}
		p.detailView.update(k, keys)
		return nil
	}
	chosen, cmd, relayout := listKey(k, keys, &p.table, &p.filter)
	if relayout {
		p.SetSize()
	}
	if chosen != nil {
		p.detail = p.byKey[chosen.key].addr
		p.detailView = newScrollView()
		p.detailView.setSize(p.c.Width, p.c.Height)
		p.rebuild()
	}
	return cmd
}

func (p *peersPage) View() string {
	st := p.c.Styles
	if p.detail != "" {
		return p.detailView.view(st)
	}
	var b strings.Builder
	if p.filter.shown() {
		b.WriteString(p.filter.view() + "\n")
	}
	if !p.loaded {
		return b.String() + st.Dim.Render("loading peers…")
	}
	b.WriteString(p.table.view(st) + "\n")
	if r, ok := p.table.selected(); ok {
		pr := p.byKey[r.key]
		lines := p.rowDetail(pr)
		for i := range lines {
			lines[i] = truncate(lines[i], p.c.Width)
		}
		if why := p.stale(pr); why != "" {
			lines = append(lines, st.Stale.Render(truncate("! stale: "+why, p.c.Width)))
		}
		b.WriteString(strings.Join(lines, "\n"))
	} else if len(p.rows) == 0 {
		b.WriteString(st.Dim.Render("No secondary has transferred a zone yet."))
	}
	return b.String()
}

// rowDetail describes the selected (peer, zone) under the table.
func (p *peersPage) rowDetail(r peerRow) []string {
	pz := r.pz
	state := "in step"
	switch {
	case !r.known && pz.Serial == 0:
		state = "never seen: no transfer, no SOA answer"
	case pz.DriftSerials > 0:
		state = fmt.Sprintf("%d serials behind", pz.DriftSerials)
		if pz.DriftSerials == 1 {
			state = "1 serial behind"
		}
		if s := p.driftSeconds(r); s >= 0 {
			state += fmt.Sprintf(" for %s", clock(time.Duration(s*float64(time.Second))))
		}
	}
	lines := []string{fmt.Sprintf("%s for %s: %s", r.addr, r.zone, state)}
	has := fmt.Sprintf("has serial %d, the zone is at %d", pz.Serial, pz.ZoneSerial)
	if pz.Signer {
		has += fmt.Sprintf("; signs it with DNSSEC, as serial %d", pz.SignerSerial)
	}
	if r.version != "" {
		has += "; version " + r.version
	}
	lines = append(lines, has)
	xfer := fmt.Sprintf("transfers: %d AXFR, %d IXFR", pz.AXFR, pz.IXFR)
	if !pz.LastTransfer.IsZero() {
		xfer += ", last " + pz.LastKind + " " + ago(p.c.Now, pz.LastTransfer)
	}
	if !pz.LastSOAQuery.IsZero() {
		xfer += "; SOA query " + ago(p.c.Now, pz.LastSOAQuery)
	}
	lines = append(lines, xfer)
	n := "NOTIFY: none sent"
	if !pz.NotifySent.IsZero() {
		n = fmt.Sprintf("NOTIFY: serial %d sent %s", pz.NotifySerial, ago(p.c.Now, pz.NotifySent))
		if !pz.NotifyAcked.IsZero() && !pz.NotifyAcked.Before(pz.NotifySent) {
			n += ", answered"
		} else {
			n += ", not answered"
		}
	}
	return append(lines, n)
}

// peerDetail is everything known of one peer, every zone.
func (p *peersPage) peerDetail(addr string) []string {
	var lines []string
	var pe admin.Peer
	for _, r := range p.rows {
		if r.addr == addr && r.known {
			pe = r.peer
			break
		}
	}
	if pe.Address != "" {
		lines = append(lines,
			"version:         "+pe.Version,
			fmt.Sprintf("using NOTIFY:    %v (%d unanswered since the last answer)", pe.UsingNotify, pe.NotifyFailures),
			fmt.Sprintf("using IXFR:      %v", pe.UsingIXFR))
		var counters []string
		for _, c := range slices.Sorted(maps.Keys(pe.Counters)) {
			counters = append(counters, fmt.Sprintf("%s %d", c, pe.Counters[c]))
		}
		lines = append(lines, "counters:        "+strings.Join(counters, ", "), "")
	}
	for _, r := range p.rows {
		if r.addr != addr {
			continue
		}
		mark := "  "
		if why := p.stale(r); why != "" {
			mark = "! "
			lines = append(lines, mark+r.zone+" (stale: "+why+")")
		} else {
			lines = append(lines, mark+r.zone)
		}
		for _, l := range p.rowDetail(r) {
			lines = append(lines, "    "+l)
		}
	}
	return lines
}
