package tui

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"
)

// Golden screens: the model over a fake source with fixed data and a
// fixed clock, driven by keys, its final View compared with
// testdata/<test>/<case>.golden (go test ./tui -update rewrites them;
// review the diff).

func init() {
	lipgloss.SetColorProfile(termenv.Ascii)
}

// harness runs the model in a teatest program.
type harness struct {
	t  *testing.T
	tm *teatest.TestModel
}

func start(t *testing.T, src Source, w, h int, opts Options) *harness {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = fixedClock
	}
	tm := teatest.NewTestModel(t, New(src, opts), teatest.WithInitialTermSize(w, h))
	return &harness{t: t, tm: tm}
}

// wait waits until the screen shows text.
func (h *harness) wait(text string) {
	h.t.Helper()
	teatest.WaitFor(h.t, h.tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(text)) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
}

// keys sends key presses: "enter", "esc", "down", or runes typed one by
// one.
func (h *harness) keys(keys ...string) {
	for _, k := range keys {
		switch k {
		case "enter":
			h.tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
		case "esc":
			h.tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
		case "down":
			h.tm.Send(tea.KeyMsg{Type: tea.KeyDown})
		case "tab":
			h.tm.Send(tea.KeyMsg{Type: tea.KeyTab})
		default:
			h.tm.Type(k)
		}
	}
}

// screen quits and returns the final screen.
func (h *harness) screen() string {
	h.t.Helper()
	if err := h.tm.Quit(); err != nil {
		h.t.Fatal(err)
	}
	return h.tm.FinalModel(h.t, teatest.WithFinalTimeout(10*time.Second)).View()
}

func TestScreens(t *testing.T) {
	cases := []struct {
		name  string
		w, h  int
		steps func(h *harness)
	}{
		{"zones", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("down")
			h.wait("propagation of")
		}},
		{"zones-wide", 120, 40, func(h *harness) { h.wait(intZone) }},
		{"history", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("down", "enter")
			h.wait("hysteresis: web2 left web")
		}},
		{"filter", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("/", "int")
			h.wait("/ int")
		}},
		{"peers", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("2")
			h.wait("never seen")
		}},
		{"peers-wide", 120, 40, func(h *harness) {
			h.wait(intZone)
			h.keys("2")
			h.wait("never seen")
			h.keys("down")
			h.wait("stale: behind for more than")
		}},
		{"peer", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("2")
			h.wait("never seen")
			h.keys("down", "enter")
			h.wait("counters:")
		}},
		{"services", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("3")
			h.wait("8bcba6b8")
			h.keys("down")
			h.wait("2bcfed83")
		}},
		{"service", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("3")
			h.wait("8bcba6b8")
			h.keys("down", "enter")
			h.wait("decisions")
		}},
		{"vms", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("4")
			h.wait("carol-web")
		}},
		{"vm-search", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("4")
			h.wait("carol-web")
			h.keys("/", "carol", "enter")
			h.wait(`matching "carol"`)
		}},
		{"vm", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("4")
			h.wait("carol-web")
			h.keys("/", "carol", "enter")
			h.wait(`matching "carol"`)
			h.keys("enter")
			h.wait("triton_cns_enabled")
		}},
		{"vm-wide", 120, 40, func(h *harness) {
			h.wait(intZone)
			h.keys("4")
			h.wait("carol-web")
		}},
		{"feeds", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("5")
			h.wait("degraded")
		}},
		{"help", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("?")
			h.wait("Marks")
		}},
		{"resize", 80, 24, func(h *harness) {
			h.wait(intZone)
			h.keys("3")
			h.wait("8bcba6b8")
			h.tm.Send(tea.WindowSizeMsg{Width: 100, Height: 30})
			h.wait("BUDGET LEFT  NEXT LEAVES")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, newFake(), tc.w, tc.h, Options{})
			tc.steps(h)
			teatest.RequireEqualOutput(t, []byte(h.screen()))
		})
	}
}

// The API goes away: a banner says since when and that the UI retries;
// the last data stays on screen.
func TestBanner(t *testing.T) {
	src := newFake()
	// Retries every 2 s at most: the screen is the same whether a periodic
	// read or the r key failed first.
	h := start(t, src, 80, 24, Options{Refresh: time.Second, MaxBackoff: 2 * time.Second})
	h.wait(intZone)
	src.setDown(true)
	h.keys("r")
	h.wait("API unreachable")
	teatest.RequireEqualOutput(t, []byte(h.screen()))
}

// The banner goes once the API answers again, with no key pressed: the
// retries carry on by themselves.
func TestReconnect(t *testing.T) {
	src := newFake()
	src.setDown(true)
	h := start(t, src, 80, 24, Options{Refresh: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
	h.wait("API unreachable")
	src.setDown(false)
	h.wait(intZone)
	if s := h.screen(); strings.Contains(s, "unreachable") || !strings.Contains(s, cnsZone) {
		t.Errorf("after recovery the screen is:\n%s", s)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.calls["zones"] < 2 {
		t.Errorf("%d reads of the zones: the UI did not retry", src.calls["zones"])
	}
}

// Countdowns tick every second from the last read, without a read or a
// key: the source is read once (no periodic refresh here), the clock
// moves, the screen follows.
func TestCountdownTicks(t *testing.T) {
	var mu sync.Mutex
	clk := now
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return clk }
	src := newFake()
	h := start(t, src, 80, 24, Options{Clock: clock, Refresh: time.Hour})
	h.wait(intZone)
	h.keys("3")
	h.wait("8bcba6b8")
	h.keys("down")
	h.wait("in 45s")
	mu.Lock()
	clk = now.Add(2 * time.Second)
	mu.Unlock()
	h.wait("in 43s")
	mu.Lock()
	clk = now.Add(50 * time.Second)
	mu.Unlock()
	h.wait(" now ")
	h.screen()
	src.mu.Lock()
	defer src.mu.Unlock()
	if n := src.calls["services"]; n != 1 {
		t.Errorf("services read %d times, want once", n)
	}
}

// Keys typed faster than they are read arrive as one message of several
// runes; they act one by one.
func TestRunesOneByOne(t *testing.T) {
	h := start(t, newFake(), 80, 24, Options{})
	h.wait(intZone)
	h.tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("4/carol")})
	h.wait("search: carol")
	h.keys("enter")
	h.wait(`matching "carol"`)
	if s := h.screen(); !strings.Contains(s, "[4 VMs]") {
		t.Errorf("screen:\n%s", s)
	}
}

// Every page, and every drill-down, fills the terminal exactly: as many
// lines as it has, none wider, from a cramped one to a wide one.
func TestLayoutFits(t *testing.T) {
	src := newFake()
	check := func(what string, m *Model, w, h int) {
		t.Helper()
		lines := strings.Split(m.View(), "\n")
		if len(lines) != h {
			t.Errorf("%s at %dx%d: %d lines", what, w, h, len(lines))
		}
		for i, l := range lines {
			if lw := lipgloss.Width(l); lw > w {
				t.Errorf("%s at %dx%d: line %d is %d wide: %q", what, w, h, i, lw, l)
			}
		}
	}
	// run runs a page's command when it asks for a load, as the program
	// would (timers are left alone).
	run := func(m *Model, cmd tea.Cmd) {
		if cmd == nil {
			return
		}
		if lm, ok := cmd().(loadMsg); ok {
			_, fetch := m.Update(lm)
			m.Update(fetch())
		}
	}
	for _, size := range [][2]int{{80, 24}, {100, 30}, {200, 60}, {50, 12}, {20, 6}} {
		w, h := size[0], size[1]
		m := New(src, Options{Clock: fixedClock})
		m.Update(tea.WindowSizeMsg{Width: w, Height: h})
		for i, p := range m.pages {
			m.active = i
			_, fetch := m.Update(loadMsg{p.Load(false)})
			m.Update(fetch())
			check(p.Title(), m, w, h)
			m.Update(tea.KeyMsg{Type: tea.KeyDown})
			_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyEnter})
			run(m, cmd)
			check(p.Title()+" opened", m, w, h)
			m.Update(tea.KeyMsg{Type: tea.KeyEsc})
		}
		m.conn = conn{failing: true, since: now, err: errRefused}
		m.resize()
		check("banner", m, w, h)
		m.help = true
		check("help", m, w, h)
	}
}
