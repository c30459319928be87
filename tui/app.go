// Package tui is cns's terminal UI for operators (`cns tui`, `cnsadm
// tui`): zones and their history, peers and their drift, services and
// their self-removal hysteresis, VMs and why they are or are not listed,
// and the feeds' health, live from a running cns's admin API or offline
// from a db file.
//
// It follows the bubbletea style of soft-serve and gh-dash: one model per
// page sharing a Common, typed messages, and no I/O in Update or View:
// every read of the Source runs in a tea.Cmd and comes back as a
// fetchedMsg.
package tui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/tritondatacenter/cns/admin"
)

// Options tune the model; zero values take the defaults.
type Options struct {
	// Refresh is how often a live source is read again (default 1 s).
	Refresh time.Duration
	// MaxBackoff is the longest wait between retries while the source
	// fails (default 10 s); retries start at 2 × Refresh and double.
	MaxBackoff time.Duration
	// Clock is the time (default time.Now); tests fix it.
	Clock func() time.Time
	// Timeout bounds one read of the source (default 5 s).
	Timeout time.Duration
}

// loader reads what a page shows; it runs inside a tea.Cmd and returns
// one of the *Loaded messages.
type loader func(ctx context.Context, src Source) (tea.Msg, error)

// loadMsg asks the root model to run a loader now: a page's drill-down or
// search.
type loadMsg struct{ load loader }

func load(l loader) tea.Cmd { return func() tea.Msg { return loadMsg{l} } }

// fetchedMsg is a loader's outcome; gen tells the current refresh chain
// from an older one.
type fetchedMsg struct {
	gen  int
	data tea.Msg
	err  error
}

// tickMsg is the periodic refresh's turn; clockMsg moves the clock once a
// second, so countdowns and ages tick without a fetch or a key.
type (
	tickMsg  struct{ gen int }
	clockMsg struct{}
)

// page is one view (a tab). Pages keep pointers to the shared Common.
type page interface {
	Title() string
	SetSize()
	Update(tea.Msg) tea.Cmd
	View() string
	// Load returns what to read now (nil: nothing); periodic is the
	// refresh timer asking, rather than the operator.
	Load(periodic bool) loader
	// ShortHelp lists the page's own keys for the help line.
	ShortHelp() []key.Binding
	// Capturing reports that a text input has the keyboard.
	Capturing() bool
}

// conn is the source's health as the UI saw it.
type conn struct {
	failing bool
	since   time.Time // first failure of the current outage
	err     error     // the latest failure
	lastOK  time.Time // last successful read
	apiErr  error     // the latest error the API answered with (not an outage)
}

// Model is the root model: the tab bar, the banner, the active page, the
// status and help lines. It owns the refresh loop and the connection
// state.
type Model struct {
	c      *Common
	src    Source
	opts   Options
	pages  []page
	active int
	help   bool
	width  int
	height int

	gen     int
	backoff time.Duration
	conn    conn
}

// New returns the UI's model over src.
func New(src Source, opts Options) *Model {
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	c := &Common{Styles: DefaultStyles(), Keys: DefaultKeyMap(), Now: opts.Clock(), Live: src.Live(), Width: 80, Height: 20}
	m := &Model{c: c, src: src, opts: opts, backoff: opts.Refresh, width: 80, height: 24}
	m.pages = []page{newZonesPage(c), newPeersPage(c), newServicesPage(c), newVMsPage(c), newFeedsPage(c)}
	m.resize()
	return m
}

func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.clockTick(), m.refresh(m.pages[m.active].Load(false)))
}

func (m *Model) clockTick() tea.Cmd {
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return clockMsg{} })
}

// refresh starts a new refresh chain with l (a tick, when l is nil).
func (m *Model) refresh(l loader) tea.Cmd {
	m.gen++
	gen := m.gen
	if l == nil {
		return m.next(gen)
	}
	src, timeout := m.src, m.opts.Timeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		data, err := l(ctx, src)
		return fetchedMsg{gen: gen, data: data, err: err}
	}
}

// next schedules the chain's next turn: after Refresh, or the backoff
// while the source fails; never for a db file.
func (m *Model) next(gen int) tea.Cmd {
	if !m.c.Live {
		return nil
	}
	wait := m.opts.Refresh
	if m.conn.failing {
		wait = m.backoff
	}
	return tea.Tick(wait, func(time.Time) tea.Msg { return tickMsg{gen} })
}

func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m.c.Now = m.opts.Clock()
	cmd := m.update(msg)
	// The banner comes and goes with the connection: the content area
	// follows it.
	if m.c.Height != m.contentHeight() {
		m.resize()
	}
	return m, cmd
}

func (m *Model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.resize()
		return nil
	case clockMsg:
		cmds := []tea.Cmd{m.clockTick()}
		for _, p := range m.pages {
			cmds = append(cmds, p.Update(msg))
		}
		return tea.Batch(cmds...)
	case tickMsg:
		if msg.gen != m.gen {
			return nil
		}
		return m.refresh(m.pages[m.active].Load(true))
	case loadMsg:
		return m.refresh(msg.load)
	case fetchedMsg:
		return m.fetched(msg)
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m.pages[m.active].Update(msg)
}

// fetched applies a read's outcome: the data to the pages, the error to
// the connection state, and schedules the next refresh.
func (m *Model) fetched(msg fetchedMsg) tea.Cmd {
	// Only the latest request counts: an older read (a search typed
	// over, a periodic read overtaken by a drill-down) may finish last.
	if msg.gen != m.gen {
		return nil
	}
	var ae *admin.Error
	switch {
	case msg.err == nil:
		m.conn = conn{lastOK: m.c.Now}
		m.backoff = m.opts.Refresh
	case errors.As(msg.err, &ae):
		// The API answered: not an outage. The page shows what it can.
		m.conn = conn{lastOK: m.c.Now, apiErr: msg.err}
		m.backoff = m.opts.Refresh
	default:
		if !m.conn.failing {
			m.conn.failing, m.conn.since = true, m.c.Now
			m.backoff = m.opts.Refresh
		}
		m.conn.err = msg.err
		m.backoff = min(2*m.backoff, m.opts.MaxBackoff)
	}
	cmds := []tea.Cmd{m.next(msg.gen)}
	if msg.err != nil {
		cmds = append(cmds, m.pages[m.active].Update(loadFailedMsg{err: msg.err}))
	} else if msg.data != nil {
		for _, p := range m.pages {
			cmds = append(cmds, p.Update(msg.data))
		}
	}
	return tea.Batch(cmds...)
}

// loadFailedMsg tells the active page its read failed (a VM that is not
// found, say).
type loadFailedMsg struct{ err error }

func (m *Model) key(k tea.KeyMsg) tea.Cmd {
	// Keys typed faster than the terminal is read (or sent by tmux
	// send-keys) arrive as one message of several runes: take them one by
	// one, as typed, so "/web" opens the filter and types "web". A paste
	// goes whole to whatever has the keyboard.
	if k.Type == tea.KeyRunes && len(k.Runes) > 1 && !k.Paste {
		var cmds []tea.Cmd
		for _, r := range k.Runes {
			cmds = append(cmds, m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: k.Alt}))
		}
		return tea.Sequence(cmds...)
	}
	keys := m.c.Keys
	p := m.pages[m.active]
	if k.String() == "ctrl+c" {
		return tea.Quit
	}
	if m.help {
		switch {
		case key.Matches(k, keys.Quit):
			return tea.Quit
		case key.Matches(k, keys.Help, keys.Back), k.String() == "enter":
			m.help = false
		}
		return nil
	}
	if p.Capturing() {
		return p.Update(k)
	}
	switch {
	case key.Matches(k, keys.Quit):
		return tea.Quit
	case key.Matches(k, keys.Help):
		m.help = true
		return nil
	case key.Matches(k, keys.Next):
		return m.switchTo((m.active + 1) % len(m.pages))
	case key.Matches(k, keys.Prev):
		return m.switchTo((m.active + len(m.pages) - 1) % len(m.pages))
	case key.Matches(k, keys.Jump):
		return m.switchTo(int(k.String()[0]-'1') % len(m.pages))
	case key.Matches(k, keys.Refresh):
		return m.refresh(p.Load(false))
	}
	return p.Update(k)
}

func (m *Model) switchTo(i int) tea.Cmd {
	if i == m.active {
		return nil
	}
	m.active = i
	m.conn.apiErr = nil
	return m.refresh(m.pages[i].Load(false))
}

// resize gives the pages the content area: the screen less the tab bar,
// the banner (when shown), the status line and the help line.
func (m *Model) resize() {
	m.c.Width = max(m.width, 20)
	m.c.Height = m.contentHeight()
	for _, p := range m.pages {
		p.SetSize()
	}
}

func (m *Model) contentHeight() int {
	h := m.height - 3
	if m.conn.failing {
		h--
	}
	return max(h, 1)
}

func (m *Model) View() string {
	st := m.c.Styles
	lines := []string{m.tabs()}
	if m.conn.failing {
		lines = append(lines, st.Banner.Render(pad(m.bannerText(), m.c.Width, false)))
	}
	if m.help {
		lines = append(lines, fit(helpView(m.c), m.c.Width, m.c.Height))
	} else {
		lines = append(lines, fit(m.pages[m.active].View(), m.c.Width, m.c.Height))
	}
	lines = append(lines, m.status(), m.helpLine())
	return strings.Join(lines, "\n")
}

// bannerText says since when the source has been unreachable and that
// the UI keeps trying.
func (m *Model) bannerText() string {
	what := "API unreachable"
	if !m.c.Live {
		what = "db file unreadable"
	}
	since := m.conn.since
	text := fmt.Sprintf("! %s since %s (%s), retrying every %s", what, since.Format("15:04:05"),
		admin.Ago(m.c.Now.Sub(since)), clock(m.backoff))
	if m.conn.err != nil {
		text += ": " + errText(m.conn.err)
	}
	return text
}

// errText is the telling part of a failed read: what the network said
// ("connection refused", "i/o timeout"), without the URL and
// client wrapping around it (the status line names the API).
func errText(err error) string {
	var sc *os.SyscallError
	if errors.As(err, &sc) {
		return sc.Err.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return oneLine(err.Error())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (m *Model) tabs() string {
	st := m.c.Styles
	var parts []string
	for i, p := range m.pages {
		label := fmt.Sprintf("%d %s", i+1, p.Title())
		if i == m.active {
			parts = append(parts, st.ActiveTab.Render("["+label+"]"))
		} else {
			parts = append(parts, st.Tab.Render(" "+label+" "))
		}
	}
	bar := strings.Join(parts, " ")
	title := "cns"
	if gap := m.c.Width - ansi.StringWidth(bar) - len(title); gap > 1 {
		bar += strings.Repeat(" ", gap) + st.Title.Render(title)
	}
	return truncate(bar, m.c.Width)
}

func (m *Model) status() string {
	st := m.c.Styles
	left := m.src.Describe()
	switch {
	case m.conn.apiErr != nil:
		return st.Error.Render(truncate("error: "+oneLine(m.conn.apiErr.Error()), m.c.Width))
	case m.conn.lastOK.IsZero():
		left += " · loading…"
	case m.c.Live:
		left += " · updated " + ago(m.c.Now, m.conn.lastOK)
	}
	return st.Dim.Render(truncate(left, m.c.Width))
}

func (m *Model) helpLine() string {
	keys := m.c.Keys
	var b []key.Binding
	if m.help {
		b = []key.Binding{keys.Back, keys.Quit}
	} else {
		views := key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab/1-5", "view"))
		b = append([]key.Binding{views}, m.pages[m.active].ShortHelp()...)
		b = append(b, keys.Help, keys.Quit)
	}
	var parts []string
	for _, k := range b {
		h := k.Help()
		parts = append(parts, h.Key+" "+h.Desc)
	}
	return m.c.Styles.Dim.Render(truncate(strings.Join(parts, " · "), m.c.Width))
}
