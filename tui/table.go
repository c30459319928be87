package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// column describes one column of a table.
type column struct {
	title string
	// flex columns give up width first, down to want, and are cut with
	// an ellipsis; below want only once the droppable columns are gone,
	// down to min.
	flex      bool
	min, want int
	// right aligns numbers.
	right bool
	// drop > 0 lets the column go when even the flex columns at their
	// minimum do not fit; higher goes first.
	drop int
}

// mark is a row's state, shown in its gutter and colour.
type mark int

const (
	markNone    mark = iota
	markStale        // "!" and red: a peer behind for too long, NOTIFY unanswered, a degraded feed
	markPending      // "~" and yellow: a service member waiting to leave
	markGood         // green, no marker
)

// row is one line of a table. key identifies it across refreshes, so the
// selection stays on the same zone, peer or VM when the data changes.
type row struct {
	key   string
	cells []string
	mark  mark
	// also is text the filter matches besides the cells: the UUIDs
	// behind the names a row shows, the members of a service.
	also string
}

// table is a scrolling, filterable list with a cursor. It is a value
// inside the pages that use it; it does no I/O.
type table struct {
	cols   []column
	all    []row
	shown  []row // all, filtered
	filter string
	cursor int
	offset int
	width  int
	height int // lines, the header included
	// passive tables show rows without a cursor (a detail under a list).
	passive bool
}

func newTable(cols ...column) table { return table{cols: cols} }

// setRows replaces the rows, keeping the cursor on the row with the same
// key when there is one.
func (t *table) setRows(rows []row) {
	sel := t.selectedKey()
	t.all = rows
	t.apply(sel)
}

// setFilter keeps the rows any of whose cells, or also, contain f (any
// case).
func (t *table) setFilter(f string) {
	sel := t.selectedKey()
	t.filter = f
	t.apply(sel)
}

func (t *table) apply(sel string) {
	t.shown = t.shown[:0]
	f := strings.ToLower(t.filter)
	for _, r := range t.all {
		if f == "" || strings.Contains(strings.ToLower(strings.Join(r.cells, " ")+" "+r.also), f) {
			t.shown = append(t.shown, r)
		}
	}
	t.cursor = min(t.cursor, max(len(t.shown)-1, 0))
	for i, r := range t.shown {
		if sel != "" && r.key == sel {
			t.cursor = i
		}
	}
	t.scroll()
}

func (t *table) setSize(w, h int) {
	t.width, t.height = w, h
	t.scroll()
}

// selected returns the row under the cursor.
func (t *table) selected() (row, bool) {
	if !t.passive && t.cursor < len(t.shown) {
		return t.shown[t.cursor], true
	}
	return row{}, false
}

func (t *table) selectedKey() string {
	r, _ := t.selected()
	return r.key
}

// visible is how many rows fit under the header.
func (t *table) visible() int { return max(t.height-1, 1) }

func (t *table) scroll() {
	n := t.visible()
	if t.cursor < t.offset {
		t.offset = t.cursor
	}
	if t.cursor >= t.offset+n {
		t.offset = t.cursor - n + 1
	}
	t.offset = max(min(t.offset, len(t.shown)-n), 0)
}

// update moves the cursor on navigation keys.
func (t *table) update(msg tea.Msg, keys KeyMap) {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return
	}
	switch {
	case key.Matches(k, keys.Up):
		t.cursor--
	case key.Matches(k, keys.Down):
		t.cursor++
	case key.Matches(k, keys.PageUp):
		t.cursor -= t.visible()
	case key.Matches(k, keys.PgDown):
		t.cursor += t.visible()
	case key.Matches(k, keys.Top):
		t.cursor = 0
	case key.Matches(k, keys.Bottom):
		t.cursor = len(t.shown) - 1
	default:
		return
	}
	t.cursor = max(min(t.cursor, len(t.shown)-1), 0)
	t.scroll()
}

// layout decides each column's width for the table's width: natural
// widths; flex columns shrink to their minimum; then droppable columns
// go, highest drop first, and flex columns take back what they free.
// A width of 0 hides the column.
func (t *table) layout() []int {
	natural := make([]int, len(t.cols))
	for i, c := range t.cols {
		natural[i] = ansi.StringWidth(c.title)
		for _, r := range t.all {
			if i < len(r.cells) {
				natural[i] = max(natural[i], ansi.StringWidth(r.cells[i]))
			}
		}
	}
	avail := t.width - 2 // the gutter
	widths := append([]int(nil), natural...)
	total := func() int {
		sum, n := 0, 0
		for _, w := range widths {
			if w > 0 {
				sum += w
				n++
			}
		}
		return sum + 2*max(n-1, 0)
	}
	// shrink gives flex columns their natural width back, then takes
	// from them, in order, what is over, down to their floor.
	shrink := func(floor func(column) int) {
		for i, c := range t.cols {
			if widths[i] > 0 && c.flex {
				widths[i] = natural[i]
			}
		}
		for i, c := range t.cols {
			if widths[i] == 0 || !c.flex {
				continue
			}
			if over := total() - avail; over > 0 {
				widths[i] = max(natural[i]-over, min(max(floor(c), c.min), natural[i]))
			}
		}
	}
	want := func(c column) int { return c.want }
	shrink(want)
	for total() > avail {
		drop, best := -1, 0
		for i, c := range t.cols {
			if widths[i] > 0 && c.drop > best {
				drop, best = i, c.drop
			}
		}
		if drop < 0 {
			break
		}
		widths[drop] = 0
		shrink(want)
	}
	if total() > avail {
		shrink(func(c column) int { return c.min })
	}
	return widths
}

// view renders the header and the visible rows, exactly height lines.
func (t *table) view(st Styles) string {
	widths := t.layout()
	line := func(cells []string) string {
		var b strings.Builder
		first := true
		for i, c := range t.cols {
			if widths[i] == 0 {
				continue
			}
			if !first {
				b.WriteString("  ")
			}
			first = false
			cell := ""
			if i < len(cells) {
				cell = cells[i]
			}
			b.WriteString(pad(cell, widths[i], c.right))
		}
		return strings.TrimRight(b.String(), " ")
	}
	titles := make([]string, len(t.cols))
	for i, c := range t.cols {
		titles[i] = c.title
	}
	out := []string{st.Header.Render(truncate("  "+line(titles), t.width))}
	end := min(t.offset+t.visible(), len(t.shown))
	for i := t.offset; i < end; i++ {
		r := t.shown[i]
		gutter := []byte("  ")
		cur := i == t.cursor && !t.passive
		if cur {
			gutter[0] = '>'
		}
		style := lipgloss.NewStyle()
		switch r.mark {
		case markStale:
			gutter[1] = '!'
			style = st.Stale
		case markPending:
			gutter[1] = '~'
			style = st.Pending
		case markGood:
			style = st.Good
		}
		text := truncate(string(gutter)+line(r.cells), t.width)
		if cur {
			style = style.Inherit(st.Selected)
			text = pad(text, t.width, false)
		}
		out = append(out, style.Render(text))
	}
	if len(t.shown) == 0 {
		msg := "  (nothing)"
		if t.filter != "" {
			msg = "  (nothing matches " + "\"" + t.filter + "\")"
		}
		out = append(out, st.Dim.Render(truncate(msg, t.width)))
	}
	return fit(strings.Join(out, "\n"), t.width, t.height)
}
