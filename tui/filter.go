package tui

import (
	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
)

// filterBox is the "/" line of a list: while editing it has the
// keyboard; enter keeps what was typed, esc drops it.
type filterBox struct {
	input   textinput.Model
	editing bool
	prompt  string
}

func newFilterBox(prompt, placeholder string) filterBox {
	in := textinput.New()
	in.Prompt = prompt
	in.Placeholder = placeholder
	in.CharLimit = 200
	in.Cursor.SetMode(cursor.CursorStatic) // no blinking: screens stay comparable
	return filterBox{input: in, prompt: prompt}
}

// start focuses the input.
func (f *filterBox) start() tea.Cmd {
	f.editing = true
	return f.input.Focus()
}

// filterEvent is what a key did to the filter.
type filterEvent int

const (
	filterTyped   filterEvent = iota // the text changed (or the cursor moved)
	filterDone                       // enter: keep the text
	filterCleared                    // esc: text dropped
)

// update handles a key while editing.
func (f *filterBox) update(k tea.KeyMsg, keys KeyMap) filterEvent {
	switch {
	case k.String() == "enter":
		f.editing = false
		f.input.Blur()
		return filterDone
	case k.String() == "esc":
		f.clear()
		return filterCleared
	}
	f.input, _ = f.input.Update(k)
	return filterTyped
}

func (f *filterBox) clear() {
	f.editing = false
	f.input.Blur()
	f.input.SetValue("")
}

func (f *filterBox) value() string { return f.input.Value() }

// shown reports whether the filter line takes a line of the page.
func (f *filterBox) shown() bool { return f.editing || f.value() != "" }

func (f *filterBox) setWidth(width int) {
	f.input.Width = max(width-len(f.prompt)-2, 1)
}

func (f *filterBox) view() string { return f.input.View() }

// pageKeys are the list pages' own help entries.
func listHelp(keys KeyMap, enter string) []key.Binding {
	out := []key.Binding{key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑↓", "move"))}
	if enter != "" {
		e := keys.Enter
		e.SetHelp("enter", enter)
		out = append(out, e)
	}
	return append(out, keys.Filter)
}

// listKey handles the keys every filtered list answers the same way:
// typing into the filter, "/" to start one, esc to drop it, moving
// through the rows. It returns the row enter chose, if any, and whether
// the rows shown may have changed so the page lays itself out again.
func listKey(k tea.KeyMsg, keys KeyMap, t *table, f *filterBox) (chosen *row, cmd tea.Cmd, relayout bool) {
	if f.editing {
		f.update(k, keys)
		t.setFilter(f.value())
		return nil, nil, true
	}
	switch {
	case key.Matches(k, keys.Filter):
		return nil, f.start(), true
	case key.Matches(k, keys.Back):
		f.clear()
		t.setFilter("")
		return nil, nil, true
	case key.Matches(k, keys.Enter):
		if r, ok := t.selected(); ok {
			return &r, nil, false
		}
	default:
		t.update(k, keys)
	}
	return nil, nil, false
}
