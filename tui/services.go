package tui

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

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
		column{title: "MEMBER", flex: true, min: 8, want: 16},
		column{title: "UUID", flex: true, min: 8},
		column{title: "STATUS"},
		column{title: "DOWN SINCE"},
		column{title: "LEAVES"},
	)
	members.passive = true
	return &servicesPage{c: c, filter: newFilterBox("/ ", "filter services"), detailView: newScrollView(), members: members,
		table: newTable(
			column{title: "SERVICE", flex: true, min: 8},
			column{title: "OWNER", flex: true, min: 8, want: 12},
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
		p.views = admin.ByOwnerName(msg.views)
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
		rows = append(rows, row{key: svcKey(v), mark: mk, also: serviceAlso(v),
			cells: []string{v.Service, ownerName(v.Login, v.Owner),
				fmt.Sprintf("%d of %d", v.Listed, len(v.Members)), strconv.Itoa(pending),
				fmt.Sprintf("%d of %d", v.BudgetLeft, v.Budget), nextText}})
	}
	p.table.setRows(rows)
	p.memberRows()
	if p.detail != "" {
		if v, ok := p.byKey[p.detail]; ok {
			p.detailView.set("Service "+v.Service+" of "+ownerName(v.Login, v.Owner), p.serviceDetail(v))
		}
	}
}

// serviceAlso is what "/" finds a service by besides its row: its
// owner's UUID and login, and its members' aliases and UUIDs.
func serviceAlso(v admin.Service) string {
	words := []string{v.Owner, v.Login}
	for _, m := range v.Members {
		words = append(words, m.Alias, m.VM)
	}
	return strings.Join(words, " ")
}

// downSince is a member's DOWN SINCE cell: how long ago its status went
// down or, for a member cns never saw up, how long ago cns first saw it
// down.
func downSince(now time.Time, m admin.ServiceMember) string {
	switch {
	case !m.FirstSeenDown.IsZero():
		return "first seen " + age(now, m.FirstSeenDown) + " ago"
	case !m.DownSince.IsZero():
		return age(now, m.DownSince) + " ago"
	}
	return ""
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
	for _, m := range v.MembersByAlias() {
		status, since, leaves := string(m.Status), downSince(p.c.Now, m), ""
		mk := markNone
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
		rows = append(rows, row{key: m.VM, mark: mk, cells: []string{cmp.Or(m.Alias, "-"), m.VM, status, since, leaves}})
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

// serviceDetail is the whole state of one service: every VM by alias
// with its UUID beside it, the owner by login and UUID.
func (p *servicesPage) serviceDetail(v admin.Service) []string {
	now, w := p.c.Now, p.c.Width
	owner := v.Owner
	if v.Login != "" {
		owner = v.Login + " (" + v.Owner + ")"
	}
	lines := []string{
		"owner:        " + owner,
		fmt.Sprintf("listed:       %d of %d members (n=%d in this window)", v.Listed, len(v.Members), v.N),
		fmt.Sprintf("budget:       %d of %d self-removals left in this window", v.BudgetLeft, v.Budget),
	}
	if !v.WindowFreesAt.IsZero() {
		lines = append(lines, "window:       one more may leave "+countdown(now, v.WindowFreesAt))
	}
	if !v.NextCheck.IsZero() {
		lines = append(lines, "next check:   "+countdown(now, v.NextCheck))
	}
	// Aliases in a column of their own, as wide as the widest.
	aliasW := 0
	for _, m := range v.Members {
		aliasW = max(aliasW, len(cmp.Or(m.Alias, "-")))
	}
	for _, d := range v.Departures {
		aliasW = max(aliasW, len(cmp.Or(d.Alias, "-")))
	}
	named := func(alias, uuid string) string { return fmt.Sprintf("%-*s  %s", aliasW, cmp.Or(alias, "-"), uuid) }
	lines = append(lines, "", "members:")
	for _, m := range v.MembersByAlias() {
		l := fmt.Sprintf("  %s  %-7s", named(m.Alias, m.VM), m.Status)
		var state []string
		switch {
		case !m.FirstSeenDown.IsZero():
			state = append(state, fmt.Sprintf("down since before cns saw it (first seen down at %s, %s)",
				m.FirstSeenDown.UTC().Format("15:04:05"), ago(now, m.FirstSeenDown)))
		case !m.DownSince.IsZero():
			state = append(state, "down "+age(now, m.DownSince))
		}
		switch {
		case !m.MayLeaveAt.IsZero():
			state = append(state, "leaves "+countdown(now, m.MayLeaveAt))
		case !m.LeftAt.IsZero():
			state = append(state, "left "+age(now, m.LeftAt)+" ago")
		case m.Status == admin.MemberPending:
			state = append(state, "waits its turn")
		}
		// The state follows the status, or goes under the UUID when the
		// line would not fit.
		text := strings.Join(state, ", ")
		switch {
		case text == "":
			lines = append(lines, l)
		case ansi.StringWidth(l+"  "+text) <= w:
			lines = append(lines, l+"  "+text)
		default:
			indent := strings.Repeat(" ", 2+aliasW+2)
			lines = append(lines, l)
			lines = append(lines, wrap(indent+text, w, indent)...)
		}
	}
	if len(v.Departures) > 0 {
		lines = append(lines, "", "self-removals in this window:")
		for _, d := range v.Departures {
			lines = append(lines, fmt.Sprintf("  %s  left %s", named(d.Alias, d.VM), ago(now, d.At)))
		}
	}
	if len(v.History) > 0 {
		// A decision names its VM by alias, or by the start of its UUID
		// for one the store no longer holds; the members above give the
		// UUIDs.
		nameW := 8
		for _, d := range v.History {
			nameW = max(nameW, len(vmName(d.Alias, d.VM)))
		}
		indent := strings.Repeat(" ", 2+8+2+nameW+2+12+1)
		lines = append(lines, "", "decisions (newest first):")
		for i := len(v.History) - 1; i >= 0; i-- {
			d := v.History[i]
			l := fmt.Sprintf("  %s  %-*s  %-12s", d.Time.UTC().Format("15:04:05"), nameW, vmName(d.Alias, d.VM), d.Action)
			if d.Reason != "" {
				l += " " + d.Reason
			}
			lines = append(lines, wrap(l, w, indent)...)
		}
	}
	return lines
}
