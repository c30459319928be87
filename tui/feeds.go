package tui

import (
	"context"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/tritondatacenter/cns/admin"
)

type feedsLoaded struct{ feeds *admin.Feeds }

func loadFeeds(ctx context.Context, src Source) (tea.Msg, error) {
	f, err := src.Feeds(ctx)
	if err != nil {
		return nil, err
	}
	return feedsLoaded{f}, nil
}

// feedsPage shows the removals the guard holds, each feed's health, how
// far behind its data is (the time since it last delivered), its last
// error, and the updater's pending VMs and last commit.
type feedsPage struct {
	c     *Common
	table table
	feeds *admin.Feeds
}

func newFeedsPage(c *Common) *feedsPage {
	return &feedsPage{c: c, table: newTable(
		column{title: "FEED", flex: true, min: 6},
		column{title: "STATE"},
		column{title: "SINCE"},
		column{title: "LAG"},
		column{title: "LAST ERROR", flex: true, min: 10},
	)}
}

func (p *feedsPage) Title() string { return "Feeds" }

func (p *feedsPage) SetSize() {
	rows := 1
	if p.feeds != nil {
		rows += len(p.feeds.Feeds)
	}
	p.table.setSize(p.c.Width, max(min(rows, p.c.Height-4), 2))
}

func (p *feedsPage) Load(bool) loader         { return loadFeeds }
func (p *feedsPage) Capturing() bool          { return false }
func (p *feedsPage) ShortHelp() []key.Binding { return []key.Binding{p.c.Keys.Refresh} }

func (p *feedsPage) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case feedsLoaded:
		p.feeds = msg.feeds
		p.rebuild()
		p.SetSize()
	case clockMsg:
		p.rebuild()
	case tea.KeyMsg:
		p.table.update(msg, p.c.Keys)
	}
	return nil
}

func (p *feedsPage) rebuild() {
	if p.feeds == nil {
		return
	}
	rows := make([]row, 0, len(p.feeds.Feeds))
	for _, f := range p.feeds.Feeds {
		state, mk := "healthy", markGood
		if !f.Healthy {
			state, mk = "degraded", markStale
		}
		lag := "-"
		if !f.LastOK.IsZero() {
			lag = age(p.c.Now, f.LastOK)
		} else if !f.Healthy {
			lag = "no data yet"
		}
		rows = append(rows, row{key: f.Name, mark: mk, cells: []string{f.Name, state, age(p.c.Now, f.Since), lag, oneLine(f.Reason)}})
	}
	p.table.setRows(rows)
}

func (p *feedsPage) View() string {
	st := p.c.Styles
	switch {
	case p.feeds == nil:
		return st.Dim.Render("loading feeds…")
	case !p.c.Live:
		return "A db file holds no feed state: feed health is known only to a running cns (cns tui --api)."
	case len(p.feeds.Feeds) == 0:
		return "No feed: this cns serves what its db holds."
	}
	var b strings.Builder
	// Held removals first: the names stay until an operator or the
	// upstream decides.
	for _, problem := range admin.RemovalProblems(p.feeds.RemovalGuard, p.c.Now) {
		b.WriteString(st.Stale.Render(strings.Join(wrap("PROBLEM: "+problem, p.c.Width, "  "), "\n")) + "\n\n")
	}
	b.WriteString(p.table.view(st) + "\n\n")
	b.WriteString(fmt.Sprintf("pending VMs:  %d (waiting for the next commit)\n", p.feeds.Pending))
	if c := p.feeds.LastCommit; c != nil {
		l := fmt.Sprintf("last commit:  %s, %d VMs, %.1f ms", ago(p.c.Now, c.Time), c.VMs, c.DurationMS)
		if c.OldestChangeMS > 0 {
			l += fmt.Sprintf("; oldest change waited %.1f ms", c.OldestChangeMS)
		}
		if c.Error != "" {
			b.WriteString(st.Stale.Render(truncate(l+", failed: "+oneLine(c.Error), p.c.Width)) + "\n")
		} else {
			b.WriteString(l + "\n")
		}
	}
	region := ""
	for _, x := range p.feeds.Sources {
		if x.Region != region {
			region = x.Region
			b.WriteString("\nregion " + region + " (RFD 172), from:\n")
		}
		l := fmt.Sprintf("  %s %s serial %d, %d names", x.Zone, x.State, x.Serial, x.Names)
		if !x.LastTransfer.IsZero() {
			l += fmt.Sprintf(", %s %s", x.LastKind, ago(p.c.Now, x.LastTransfer))
		}
		if x.Error != "" {
			l += ": " + oneLine(x.Error)
		}
		if x.State == "ok" {
			b.WriteString(truncate(l, p.c.Width) + "\n")
		} else {
			b.WriteString(st.Stale.Render(truncate(l, p.c.Width)) + "\n")
		}
	}
	if r, ok := p.table.selected(); ok {
		for _, f := range p.feeds.Feeds {
			if f.Name == r.key && f.Reason != "" {
				b.WriteString("\n" + strings.Join(wrap(f.Name+": "+oneLine(f.Reason), p.c.Width, "  "), "\n"))
			}
		}
	}
	return b.String()
}
