package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/tritondatacenter/cns/admin"
)

// historyLimit is how many of a zone's latest changes the history shows.
const historyLimit = 50

type (
	zonesLoaded   struct{ zones []admin.Zone }
	historyLoaded struct {
		zone    string
		changes []admin.Change
	}
)

func loadZones(ctx context.Context, src Source) (tea.Msg, error) {
	z, err := src.Zones(ctx)
	if err != nil {
		return nil, err
	}
	return zonesLoaded{z}, nil
}

func loadHistory(zone string) loader {
	return func(ctx context.Context, src Source) (tea.Msg, error) {
		ch, err := src.History(ctx, zone, historyLimit)
		if err != nil {
			return nil, err
		}
		return historyLoaded{zone, ch}, nil
	}
}

// zonesPage lists the zones: serial, last change, counts, journal, peers
// in step; enter opens a zone's history.
type zonesPage struct {
	c      *Common
	table  table
	filter filterBox
	list   []admin.Zone
	zones  map[string]admin.Zone
	loaded bool

	// history is the drill-down: the zone whose history is open ("" for
	// none).
	history     string
	historyView scrollView
	changes     []admin.Change
	historyErr  error
}

func newZonesPage(c *Common) *zonesPage {
	return &zonesPage{c: c, filter: newFilterBox("/ ", "filter zones"), historyView: newScrollView(),
		table: newTable(
			column{title: "ZONE", flex: true, min: 16, want: 25},
			column{title: "SERIAL", right: true},
			column{title: "CHANGED"},
			column{title: "NAMES", right: true},
			column{title: "RECORDS", right: true},
			column{title: "JOURNAL", right: true, drop: 1},
			column{title: "PROPAGATION", drop: 2},
			column{title: "PEERS", drop: 3},
		)}
}

func (p *zonesPage) Title() string { return "Zones" }

func (p *zonesPage) SetSize() {
	p.filter.setWidth(p.c.Width)
	h := p.c.Height - 6 // the detail lines
	if p.filter.shown() {
		h--
	}
	p.table.setSize(p.c.Width, max(h, 2))
	p.historyView.setSize(p.c.Width, p.c.Height)
}

func (p *zonesPage) Load(periodic bool) loader {
	if p.history != "" {
		return loadHistory(p.history)
	}
	return loadZones
}

func (p *zonesPage) Capturing() bool { return p.filter.editing }

func (p *zonesPage) ShortHelp() []key.Binding {
	if p.history != "" {
		return scrollHelp(p.c.Keys)
	}
	return listHelp(p.c.Keys, "history")
}

func (p *zonesPage) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case zonesLoaded:
		p.loaded = true
		p.list = msg.zones
		p.zones = map[string]admin.Zone{}
		for _, z := range msg.zones {
			p.zones[z.Name] = z
		}
		p.rebuild()
	case clockMsg:
		// Ages move with the clock between reads.
		p.rebuild()
		if p.history != "" {
			p.renderHistory()
		}
	case historyLoaded:
		if msg.zone == p.history {
			p.changes, p.historyErr = msg.changes, nil
			p.renderHistory()
		}
	case loadFailedMsg:
		if p.history != "" {
			p.historyErr = msg.err
			p.renderHistory()
		}
	case tea.KeyMsg:
		return p.key(msg)
	}
	return nil
}

func (p *zonesPage) key(k tea.KeyMsg) tea.Cmd {
	keys := p.c.Keys
	if p.history != "" && !p.filter.editing {
		if key.Matches(k, keys.Back) {
			p.history, p.changes = "", nil
			return load(loadZones)
		}
		p.historyView.update(k, keys)
		return nil
	}
	chosen, cmd, relayout := listKey(k, keys, &p.table, &p.filter)
	if relayout {
		p.SetSize()
	}
	if chosen != nil {
		p.history, p.changes, p.historyErr = chosen.key, nil, nil
		p.historyView = newScrollView()
		p.historyView.setSize(p.c.Width, p.c.Height)
		p.renderHistory()
		return load(loadHistory(chosen.key))
	}
	return cmd
}

func (p *zonesPage) rebuild() {
	rows := make([]row, 0, len(p.list))
	for _, z := range p.list {
		rows = append(rows, p.row(z))
	}
	p.table.setRows(rows)
}

func (p *zonesPage) row(z admin.Zone) row {
	peers := ""
	if len(z.Peers) > 0 {
		in := 0
		for _, zp := range z.Peers {
			if zp.DriftSerials == 0 && zp.Serial == z.Serial {
				in++
			}
		}
		peers = fmt.Sprintf("%d/%d in step", in, len(z.Peers))
	}
	return row{key: z.Name, cells: []string{z.Name, strconv.FormatUint(uint64(z.Serial), 10),
		age(p.c.Now, z.LastChange), strconv.Itoa(z.Names), strconv.Itoa(z.Records),
		strconv.Itoa(z.Journal.Entries), propagationText(z), peers}}
}

// propagationText is the progress of the zone's newest serial ("" when
// it is not followed).
func propagationText(z admin.Zone) string {
	if p := z.Propagation; p != nil && p.Serial == z.Serial {
		return p.Summary()
	}
	return ""
}

func (p *zonesPage) View() string {
	if p.history != "" {
		return p.historyView.view(p.c.Styles)
	}
	st := p.c.Styles
	var b strings.Builder
	if p.filter.shown() {
		b.WriteString(p.filter.view() + "\n")
	}
	if !p.loaded {
		return b.String() + st.Dim.Render("loading zones…")
	}
	b.WriteString(p.table.view(st) + "\n")
	if r, ok := p.table.selected(); ok {
		z := p.zones[r.key]
		b.WriteString(strings.Join(p.detail(z), "\n"))
	}
	return b.String()
}

// detail describes the selected zone under the table.
func (p *zonesPage) detail(z admin.Zone) []string {
	kind := "forward"
	if z.Reverse {
		kind = "reverse"
	}
	changed := "never changed"
	if !z.LastChange.IsZero() {
		changed = "changed " + z.LastChange.UTC().Format("2006-01-02 15:04:05Z") + " (" + ago(p.c.Now, z.LastChange) + ")"
	}
	lines := []string{
		fmt.Sprintf("%s (%s)", z.Name, kind),
		fmt.Sprintf("serial %d, %s", z.Serial, changed),
	}
	if prop := propagationText(z); prop != "" {
		l := fmt.Sprintf("propagation of %d: %s", z.Serial, prop)
		for _, pp := range z.Propagation.Peers {
			l += "; " + pp.Address + " " + pp.State
			if pp.SignerSerial != 0 {
				l += fmt.Sprintf(" (signed %d)", pp.SignerSerial)
			}
			if pp.Seconds >= 0 && pp.State == admin.StateActive {
				l += fmt.Sprintf(" in %.1fs", pp.Seconds)
			}
		}
		lines = append(lines, l)
	}
	if len(z.Peers) > 0 {
		in := 0
		for _, zp := range z.Peers {
			if zp.DriftSerials == 0 && zp.Serial == z.Serial {
				in++
			}
		}
		lines = append(lines, fmt.Sprintf("peers: %d of %d in step (details in Peers)", in, len(z.Peers)))
	}
	if z.Journal.Entries == 0 {
		lines = append(lines, "journal: empty (an IXFR from any older serial gets the whole zone)")
	} else {
		entries := fmt.Sprintf("%d entries", z.Journal.Entries)
		if z.Journal.Entries == 1 {
			entries = "1 entry"
		}
		lines = append(lines, fmt.Sprintf("journal: IXFR from serial %d to %d, %s, %s",
			z.Journal.From, z.Serial, entries, bytesText(z.Journal.Bytes)))
	}
	for i := range lines {
		lines[i] = truncate(lines[i], p.c.Width)
	}
	return lines
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// renderHistory lays the changes out newest first: serial step, time,
// cause, then the records deleted and added.
func (p *zonesPage) renderHistory() {
	title := "History of " + p.history + " (newest first)"
	var lines []string
	switch {
	case p.historyErr != nil:
		lines = append(lines, "error: "+oneLine(p.historyErr.Error()))
	case p.changes == nil:
		lines = append(lines, "loading…")
	case len(p.changes) == 0:
		lines = append(lines, "no changes in the journal (a zone's first version has none)")
	}
	for i := len(p.changes) - 1; i >= 0; i-- {
		c := p.changes[i]
		lines = append(lines, fmt.Sprintf("serial %d → %d  %s  %s", c.From, c.To,
			c.Time.UTC().Format("2006-01-02 15:04:05"), ago(p.c.Now, c.Time)))
		if c.Cause != "" {
			lines = append(lines, wrap("  why: "+c.Cause, p.c.Width, "       ")...)
		}
		for _, r := range c.Deleted {
			lines = append(lines, "  - "+r)
		}
		for _, r := range c.Added {
			lines = append(lines, "  + "+r)
		}
		lines = append(lines, "")
	}
	p.historyView.set(title, lines)
}
