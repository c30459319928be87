package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
)

// scrollView is a title line over a scrolling text (a drill-down: a
// zone's history, a VM, a service, a peer).
type scrollView struct {
	title   string
	content string
	vp      viewport.Model
}

func newScrollView() scrollView {
	return scrollView{vp: viewport.New(80, 10)}
}

func (s *scrollView) setSize(w, h int) {
	s.vp.Width, s.vp.Height = w, max(h-1, 1)
	s.vp.SetContent(s.content) // re-clamp the offset
}

// set replaces the text, keeping the scroll position.
func (s *scrollView) set(title string, lines []string) {
	s.title = title
	s.content = strings.Join(lines, "\n")
	s.vp.SetContent(s.content)
}

func (s *scrollView) update(msg tea.Msg, keys KeyMap) {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return
	}
	switch {
	case key.Matches(k, keys.Up):
		s.vp.ScrollUp(1)
	case key.Matches(k, keys.Down):
		s.vp.ScrollDown(1)
	case key.Matches(k, keys.PageUp):
		s.vp.PageUp()
	case key.Matches(k, keys.PgDown):
		s.vp.PageDown()
	case key.Matches(k, keys.Top):
		s.vp.GotoTop()
	case key.Matches(k, keys.Bottom):
		s.vp.GotoBottom()
	}
}

func (s *scrollView) view(st Styles) string {
	title := s.title
	if total := s.vp.TotalLineCount(); total > s.vp.Height {
		title += fmt.Sprintf("  (%d-%d of %d lines)", s.vp.YOffset+1, min(s.vp.YOffset+s.vp.Height, total), total)
	}
	return st.Title.Render(truncate(title, s.vp.Width)) + "\n" + s.vp.View()
}

func scrollHelp(keys KeyMap) []key.Binding {
	return []key.Binding{key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑↓", "scroll")), keys.Back}
}
