package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/tritondatacenter/cns/admin"
)

type servicesLoaded struct{ views []admin.Service }

func loadServices(ctx context.Context, src Source) (tea.Msg, error) {
	v, err := src.Services(ctx)
	if err != nil {
		return nil, err
	}
	return servicesLoaded{v}, nil
}

// servicesPage lists the services with their self-removal hysteresis:
// who is pending removal, when each may leave (a countdown that ticks
// every second from the last read), the window's budget. The selected
// service's members show under the list; enter opens the whole state.
type servicesPage struct {
	c       *Common
	table   table
	members table
	filter  filterBox
	views   []admin.Service
	byKey   map[string]admin.Service
	loaded  bool

	detail     string // the key of the service whose detail is open
	detailView scrollView
}

func newServicesPage(c *Common) *servicesPage {
	members := newTable(
		column{title: "MEMBER", flex: true, min: 8},
		column{title: "STATUS"},
		column{title: "DOWN SINCE"},
		column{title: "LEAVES"},
	)
	members.passive = true
	return &servicesPage{c: c, filter: newFilterBox("/ ", "filter services"), detailView: newScrollView(), members: members,
		table: newTable(
			column{title: "SERVICE", flex: true, min: 8},
			column{title: "OWNER"},
			column{title: "LISTED", right: true},
			column{title: "PENDING", right: true},
			column{title: "BUDGET LEFT"},
			column{title: "NEXT LEAVES"},
		)}
}

func (p *servicesPage) Title() string { return "Services" }

func (p *servicesPage) SetSize() {
	p.filter.setWidth(p.c.Width)
	h := p.c.Height
	if p.filter.shown() {
		h--
	}
	// The list takes up to half (at least 4 lines), the members the rest.
	list := max(min(len(p.table.shown)+1, h/2), 4)
	p.table.setSize(p.c.Width, list)
	p.members.setSize(p.c.Width, max(h-list-1, 2))
	p.detailView.setSize(p.c.Width, p.c.Height)
}

func (p *servicesPage) Load(bool) loader { return loadServices }
func (p *servicesPage) Capturing() bool  { return p.filter.editing }

func (p *servicesPage) ShortHelp() []key.Binding {
	if p.detail != "" {
		return scrollHelp(p.c.Keys)
	}
	return listHelp(p.c.Keys, "service")
}

func (p *servicesPage) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case servicesLoaded:
		p.loaded = true
		p.views = msg.views
		p.rebuild()
		p.SetSize()
	case clockMsg:
		p.rebuild()
	case tea.KeyMsg:
		return p.key(msg)
	}
	return nil
}

func svcKey(v admin.Service) string { return v.Owner + "/" + v.Service }

// rebuild lays out the rows from the last read and the time: the
// countdowns move every second without a read.
func (p *servicesPage) rebuild() {
	p.byKey = map[string]admin.Service{}
	rows := make([]row, 0, len(p.views))
	for _, v := range p.views {
		p.byKey[svcKey(v)] = v
		pending, next := 0, time.Time{}
		for _, m := range v.Members {
			if m.Status != admin.MemberPending {
				continue
			}
			pending++
			if !m.MayLeaveAt.IsZero() && (next.IsZero() || m.MayLeaveAt.Before(next)) {
				next = m.MayLeaveAt
			}
		}
		nextText := "-"
		switch {
		case !next.IsZero():
			nextText = countdown(p.c.Now, next)
		case pending > 0:
			nextText = "not foreseeable"
		}
		mk := markNone
		if pending > 0 {
			mk = markPending
		}
		rows = append(rows, row{key: svcKey(v), mark: mk, cells: []string{v.Service, short(v.Owner),
			fmt.Sprintf("%d of %d", v.Listed, len(v.Members)), strconv.Itoa(pending),
			fmt.Sprintf("%d of %d", v.BudgetLeft, v.Budget), nextText}})
	}
	p.table.setRows(rows)
	p.memberRows()
	if p.detail != "" {
		if v, ok := p.byKey[p.detail]; ok {
			p.detailView.set("Service "+v.Service+" of "+v.Owner, p.serviceDetail(v))
		}
	}
}

// memberRows fills the members table with the selected service's.
func (p *servicesPage) memberRows() {
	r, ok := p.table.selected()
	if !ok {
		p.members.setRows(nil)
		return
	}
	v := p.byKey[r.key]
	rows := make([]row, 0, len(v.Members))
	for _, m := range v.Members {
		status, since, leaves := string(m.Status), "", ""
		mk := markNone
		if !m.DownSince.IsZero() {
			since = age(p.c.Now, m.DownSince) + " ago"
		}
		switch m.Status {
		case admin.MemberPending:
			mk = markPending
			leaves = "waits its turn"
			if !m.MayLeaveAt.IsZero() {
				leaves = countdown(p.c.Now, m.MayLeaveAt)
			}
		case admin.MemberLeft:
			if !m.LeftAt.IsZero() {
				leaves = "left " + age(p.c.Now, m.LeftAt) + " ago"
			}
		case admin.MemberUp:
			mk = markGood
		}
		rows = append(rows, row{key: m.VM, mark: mk, cells: []string{m.VM, status, since, leaves}})
	}
	p.members.setRows(rows)
}

func (p *servicesPage) key(k tea.KeyMsg) tea.Cmd {
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
	// The members follow the selection, which filtering and moving change.
	p.memberRows()
	if relayout {
		p.SetSize()
	}
	if chosen != nil {
		p.detail = chosen.key
		p.detailView = newScrollView()
		p.detailView.setSize(p.c.Width, p.c.Height)
		p.rebuild()
	}
	return cmd
}

func (p *servicesPage) View() string {
	st := p.c.Styles
	if p.detail != "" {
		return p.detailView.view(st)
	}
	var b strings.Builder
	if p.filter.shown() {
		b.WriteString(p.filter.view() + "\n")
	}
	if !p.loaded {
		return b.String() + st.Dim.Render("loading services…")
	}
	if len(p.views) == 0 {
		return b.String() + st.Dim.Render("No services: no VM has a triton.cns.services tag.")
	}
	b.WriteString(p.table.view(st) + "\n")
	if r, ok := p.table.selected(); ok {
		v := p.byKey[r.key]
		b.WriteString(st.Title.Render(truncate(p.summary(v), p.c.Width)) + "\n")
		b.WriteString(p.members.view(st))
	}
	return b.String()
}

// summary is one line on a service's state: listed, n, budget.
func (p *servicesPage) summary(v admin.Service) string {
	s := fmt.Sprintf("%s: %d listed, n=%d, budget %d of %d left", v.Service, v.Listed, v.N, v.BudgetLeft, v.Budget)
	if !v.WindowFreesAt.IsZero() {
		s += " (one more " + countdown(p.c.Now, v.WindowFreesAt) + ")"
	}
	return s
}

// serviceDetail is the whole state of one service.
func (p *servicesPage) serviceDetail(v admin.Service) []string {
	now := p.c.Now
	lines := []string{
		fmt.Sprintf("owner:        %s", v.Owner),
		fmt.Sprintf("listed:       %d of %d members (n=%d in this window)", v.Listed, len(v.Members), v.N),
		fmt.Sprintf("budget:       %d of %d self-removals left in this window", v.BudgetLeft, v.Budget),
	}
	if !v.WindowFreesAt.IsZero() {
		lines = append(lines, "window:       one more may leave "+countdown(now, v.WindowFreesAt))
	}
	if !v.NextCheck.IsZero() {
		lines = append(lines, "next check:   "+countdown(now, v.NextCheck))
	}
	lines = append(lines, "", "members:")
	for _, m := range v.Members {
		l := fmt.Sprintf("  %s  %-7s", m.VM, m.Status)
		if !m.DownSince.IsZero() {
			l += "  down " + age(now, m.DownSince)
		}
		switch {
		case !m.MayLeaveAt.IsZero():
			l += ", leaves " + countdown(now, m.MayLeaveAt)
		case !m.LeftAt.IsZero():
			l += ", left " + age(now, m.LeftAt) + " ago"
		case m.Status == admin.MemberPending:
			l += ", waits its turn"
		}
		lines = append(lines, l)
	}
	if len(v.Departures) > 0 {
		lines = append(lines, "", "self-removals in this window:")
		for _, d := range v.Departures {
			lines = append(lines, fmt.Sprintf("  %s  left %s", d.VM, ago(now, d.At)))
		}
	}
	if len(v.History) > 0 {
		lines = append(lines, "", "decisions (newest first):")
		for i := len(v.History) - 1; i >= 0; i-- {
			d := v.History[i]
			l := fmt.Sprintf("  %s  %s  %-12s", d.Time.UTC().Format("15:04:05"), short(d.VM), d.Action)
			if d.Reason != "" {
				l += " " + d.Reason
			}
			lines = append(lines, wrap(l, p.c.Width, strings.Repeat(" ", 34))...)
		}
	}
	return lines
}
