package tui

import (
	"context"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/tritondatacenter/cns/admin"
)

// vmSearchLimit is how many VMs a search lists.
const vmSearchLimit = 200

type (
	vmsLoaded struct{ res *admin.VMSearch }
	vmLoaded  struct{ vm *admin.VM }
)

func searchVMs(q string) loader {
	return func(ctx context.Context, src Source) (tea.Msg, error) {
		res, err := src.SearchVMs(ctx, q, vmSearchLimit)
		if err != nil {
			return nil, err
		}
		return vmsLoaded{res}, nil
	}
}

func loadVM(uuid string) loader {
	return func(ctx context.Context, src Source) (tea.Msg, error) {
		vm, err := src.VM(ctx, uuid)
		if err != nil {
			return nil, err
		}
		return vmLoaded{vm}, nil
	}
}

// vmsPage searches the stored VMs by UUID, alias, owner or IP ("/" then
// enter); enter on a VM shows every name it has and why it is or is not
// listed, each reason flag spelled out.
type vmsPage struct {
	c      *Common
	table  table
	search filterBox
	query  string // the query of the results shown
	res    *admin.VMSearch
	vms    map[string]admin.VMSummary

	detail     string // the VM whose detail is open
	vm         *admin.VM
	vmErr      error
	detailView scrollView
}

func newVMsPage(c *Common) *vmsPage {
	return &vmsPage{c: c, search: newFilterBox("search: ", "uuid, alias, owner, login or IP; enter"), detailView: newScrollView(),
		table: newTable(
			column{title: "ALIAS", flex: true, min: 8, want: 16},
			column{title: "UUID", flex: true, min: 8},
			column{title: "OWNER", flex: true, min: 8},
			column{title: "STATE", drop: 2},
			column{title: "LISTED"},
			column{title: "WHY", flex: true, min: 12, drop: 1},
		)}
}

func (p *vmsPage) Title() string { return "VMs" }

func (p *vmsPage) SetSize() {
	p.search.setWidth(p.c.Width)
	p.table.setSize(p.c.Width, max(p.c.Height-3, 2))
	p.detailView.setSize(p.c.Width, p.c.Height)
}

func (p *vmsPage) Load(periodic bool) loader {
	switch {
	case p.detail != "":
		return loadVM(p.detail)
	case p.res == nil || !periodic:
		return searchVMs(p.query)
	}
	return nil // a search is not repeated every second
}

func (p *vmsPage) Capturing() bool { return p.search.editing }

func (p *vmsPage) ShortHelp() []key.Binding {
	if p.detail != "" {
		return scrollHelp(p.c.Keys)
	}
	s := p.c.Keys.Filter
	s.SetHelp("/", "search")
	return []key.Binding{key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑↓", "move")),
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "why")), s}
}

func (p *vmsPage) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case vmsLoaded:
		p.res = msg.res
		p.query = msg.res.Query
		p.vms = map[string]admin.VMSummary{}
		rows := make([]row, 0, len(msg.res.VMs))
		for _, v := range msg.res.VMs {
			p.vms[v.UUID] = v
			rows = append(rows, row{key: v.UUID, cells: []string{v.Alias, v.UUID, ownerName(v.Login, v.Owner), v.State,
				listedText(v.ListInstance, v.ListServices), strings.Join(v.Reasons, ",")}})
		}
		p.table.setRows(rows)
	case vmLoaded:
		if msg.vm.UUID == p.detail {
			p.vm, p.vmErr = msg.vm, nil
			p.renderDetail()
		}
	case loadFailedMsg:
		if p.detail != "" {
			p.vmErr = msg.err
			p.renderDetail()
		}
	case clockMsg:
		if p.detail != "" {
			p.renderDetail()
		}
	case tea.KeyMsg:
		return p.key(msg)
	}
	return nil
}

func listedText(inst, svc bool) string {
	switch {
	case inst && svc:
		return "inst+svc"
	case inst:
		return "inst"
	case svc:
		return "svc"
	}
	return "no"
}

func (p *vmsPage) key(k tea.KeyMsg) tea.Cmd {
	keys := p.c.Keys
	if p.search.editing {
		switch p.search.update(k, keys) {
		case filterDone:
			return load(searchVMs(p.search.value()))
		case filterCleared:
			p.search.input.SetValue(p.query)
		}
		return nil
	}
	if p.detail != "" {
		if key.Matches(k, keys.Back) {
			p.detail, p.vm, p.vmErr = "", nil, nil
			return nil
		}
		p.detailView.update(k, keys)
		return nil
	}
	switch {
	case key.Matches(k, keys.Filter):
		p.search.input.CursorEnd()
		return p.search.start()
	case key.Matches(k, keys.Back):
		if p.query != "" {
			p.search.clear()
			return load(searchVMs(""))
		}
	case key.Matches(k, keys.Enter):
		if r, ok := p.table.selected(); ok {
			p.detail, p.vm, p.vmErr = r.key, nil, nil
			p.detailView = newScrollView()
			p.detailView.setSize(p.c.Width, p.c.Height)
			p.renderDetail()
			return load(loadVM(r.key))
		}
	default:
		p.table.update(k, keys)
	}
	return nil
}

func (p *vmsPage) View() string {
	st := p.c.Styles
	if p.detail != "" {
		return p.detailView.view(st)
	}
	var b strings.Builder
	b.WriteString(p.search.view() + "\n")
	switch {
	case p.res == nil:
		b.WriteString(st.Dim.Render("loading VMs…"))
		return b.String()
	case len(p.res.VMs) == 0:
		b.WriteString(st.Dim.Render(truncate(fmt.Sprintf("No stored VM matches %q.", p.query), p.c.Width)))
		return b.String()
	}
	b.WriteString(p.table.view(st) + "\n")
	n := fmt.Sprintf("%d VMs", len(p.res.VMs))
	if len(p.res.VMs) == 1 {
		n = "1 VM"
	}
	if p.query != "" {
		n += fmt.Sprintf(" matching %q", p.query)
	}
	if p.res.Truncated {
		n += fmt.Sprintf(" (the first %d: more match, refine the search)", len(p.res.VMs))
	}
	b.WriteString(st.Dim.Render(truncate(n, p.c.Width)))
	return b.String()
}

// renderDetail lays out the open VM: who it is, whether it is listed and
// why, its names and records.
func (p *vmsPage) renderDetail() {
	title := "VM " + p.detail
	if s, ok := p.vms[p.detail]; ok && s.Alias != "" {
		title = "VM " + s.Alias + " (" + p.detail + ")"
	}
	var lines []string
	switch {
	case p.vmErr != nil && admin.IsNotFound(p.vmErr):
		lines = []string{"cns has not stored this VM (destroyed and reaped, or not yet visited by the feed)."}
	case p.vmErr != nil:
		lines = []string{"error: " + oneLine(p.vmErr.Error())}
	case p.vm == nil:
		lines = []string{"loading…"}
	default:
		lines = vmDetail(p.vm, p.c)
	}
	p.detailView.set(title, lines)
}

func vmDetail(vm *admin.VM, c *Common) []string {
	w := c.Width
	var lines []string
	switch {
	case vm.Login != "":
		lines = append(lines, "owner:      "+vm.Login+" ("+vm.Owner+")")
	case vm.Owner != "": // a compute node has none
		lines = append(lines, "owner:      "+vm.Owner)
	}
	switch {
	case vm.State != "" && vm.Server != "":
		lines = append(lines, "state:      "+vm.State+" on server "+vm.Server)
	case vm.State != "":
		lines = append(lines, "state:      "+vm.State)
	}
	if vm.LastVisit > 0 {
		lines = append(lines, "last visit: "+ago(c.Now, msTime(vm.LastVisit)))
	}
	listed := []string{}
	if vm.ListInstance {
		listed = append(listed, "instance names")
	}
	if vm.ListServices {
		listed = append(listed, "service names")
	}
	if len(listed) == 0 {
		listed = append(listed, "nothing: not in DNS")
	}
	lines = append(lines, "listed:     "+strings.Join(listed, ", "))
	if len(vm.Services) > 0 {
		lines = append(lines, "services:   "+strings.Join(vm.Services, ", "))
	}
	lines = append(lines, "", "why:")
	if len(vm.Reasons) == 0 {
		lines = append(lines, "  no flag: listed by the rules (running, opted in, status up)")
	}
	for _, r := range vm.Reasons {
		text := admin.ReasonText(r)
		if text == "" {
			text = "(a flag this version does not know)"
		}
		lines = append(lines, wrap(fmt.Sprintf("  %-18s %s", r, text), w, strings.Repeat(" ", 21))...)
	}
	for _, pr := range vm.Problems {
		lines = append(lines, wrap("  problem: "+pr, w, "           ")...)
	}
	lines = append(lines, "", fmt.Sprintf("names (%d):", len(vm.Names)))
	if len(vm.Names) == 0 {
		lines = append(lines, "  none")
	}
	for _, n := range vm.Names {
		lines = append(lines, "  "+n)
	}
	if len(vm.ClientAddrs) > 0 {
		lines = append(lines, "", "asks from:  "+strings.Join(vm.ClientAddrs, ", "),
			fmt.Sprintf("short names (%d, its owner's instances asking cns):", len(vm.ShortNames)))
		for _, n := range vm.ShortNames {
			lines = append(lines, "  "+n)
		}
	}
	lines = append(lines, "", fmt.Sprintf("records (%d):", len(vm.Records)))
	if len(vm.Records) == 0 {
		lines = append(lines, "  none")
	}
	for _, r := range vm.Records {
		lines = append(lines, "  "+r)
	}
	return lines
}
