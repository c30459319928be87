package tui

import (
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/lipgloss"
)

// Common is what every page shares (soft-serve's common.Common): the
// size of the content area, the styles, the key map and the time the
// screen is drawn for. Pages read it; only the root model writes it.
type Common struct {
	Width, Height int // the content area: the screen less the tab bar, banner, status and help lines
	Styles        Styles
	Keys          KeyMap
	// Now is the time of the current update: countdowns and ages are
	// computed from it, never from the clock inside View.
	Now time.Time
	// Live is true for the API (periodic refresh), false for a db file.
	Live bool
}

// Styles are the lipgloss styles of the UI. Nothing depends on colour
// alone: stale peers carry "!", the selected row ">", the active tab
// brackets, so the screen reads the same with NO_COLOR.
type Styles struct {
	ActiveTab, Tab lipgloss.Style
	Header         lipgloss.Style
	Selected       lipgloss.Style
	Stale          lipgloss.Style
	Pending        lipgloss.Style
	Good           lipgloss.Style
	Dim            lipgloss.Style
	Banner         lipgloss.Style
	Title          lipgloss.Style
	Error          lipgloss.Style
}

// DefaultStyles are the UI's styles; lipgloss drops the colours on a
// terminal without them (or with NO_COLOR).
func DefaultStyles() Styles {
	return Styles{
		ActiveTab: lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(lipgloss.Color("62")),
		Tab:       lipgloss.NewStyle().Foreground(lipgloss.Color("246")),
		Header:    lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("110")),
		Selected:  lipgloss.NewStyle().Reverse(true),
		Stale:     lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("9")),
		Pending:   lipgloss.NewStyle().Foreground(lipgloss.Color("11")),
		Good:      lipgloss.NewStyle().Foreground(lipgloss.Color("10")),
		Dim:       lipgloss.NewStyle().Foreground(lipgloss.Color("244")),
		Banner:    lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(lipgloss.Color("1")),
		Title:     lipgloss.NewStyle().Bold(true),
		Error:     lipgloss.NewStyle().Foreground(lipgloss.Color("9")),
	}
}

// KeyMap is every key the UI answers to.
type KeyMap struct {
	Next, Prev     key.Binding
	Jump           key.Binding // 1..5
	Up, Down       key.Binding
	PageUp, PgDown key.Binding
	Top, Bottom    key.Binding
	Enter, Back    key.Binding
	Filter         key.Binding
	Refresh        key.Binding
	Help, Quit     key.Binding
}

// DefaultKeyMap is the UI's keys.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Next:    key.NewBinding(key.WithKeys("tab", "right", "l"), key.WithHelp("tab", "next view")),
		Prev:    key.NewBinding(key.WithKeys("shift+tab", "left", "h"), key.WithHelp("shift+tab", "previous view")),
		Jump:    key.NewBinding(key.WithKeys("1", "2", "3", "4", "5"), key.WithHelp("1-5", "go to view")),
		Up:      key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:    key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:  key.NewBinding(key.WithKeys("pgup", "ctrl+b"), key.WithHelp("pgup", "page up")),
		PgDown:  key.NewBinding(key.WithKeys("pgdown", "ctrl+f", " "), key.WithHelp("pgdn", "page down")),
		Top:     key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "first")),
		Bottom:  key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "last")),
		Enter:   key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open")),
		Back:    key.NewBinding(key.WithKeys("esc", "backspace"), key.WithHelp("esc", "back")),
		Filter:  key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Refresh: key.NewBinding(key.WithKeys("r", "ctrl+r"), key.WithHelp("r", "refresh")),
		Help:    key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:    key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}
