package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
)

// helpView is the "?" screen: every key, and what the markers mean.
func helpView(c *Common) string {
	k := c.Keys
	entries := []struct {
		b    key.Binding
		keys string
	}{
		{k.Next, "tab  →  l"},
		{k.Prev, "shift+tab  ←  h"},
		{k.Jump, "1 2 3 4 5"},
		{key.NewBinding(key.WithHelp("", "move")), "↑ ↓  k j"},
		{key.NewBinding(key.WithHelp("", "page")), "pgup pgdn space"},
		{key.NewBinding(key.WithHelp("", "first, last")), "g G  home end"},
		{k.Enter, "enter"},
		{k.Back, "esc"},
		{k.Filter, "/"},
		{k.Refresh, "r"},
		{k.Help, "?"},
		{k.Quit, "q  ctrl+c"},
	}
	desc := map[string]string{
		"go to view": "Zones, Peers, Services, VMs, Feeds",
		"open":       "open: a zone's history, a peer, a service, a VM's why",
		"back":       "back; clears a filter",
		"filter":     "filter by name, login, alias or UUID (VMs: search, IP too)",
		"refresh":    "read the source again now",
		"help":       "this help",
	}
	var b strings.Builder
	b.WriteString(c.Styles.Title.Render("Keys") + "\n")
	for _, e := range entries {
		d := e.b.Help().Desc
		if x, ok := desc[d]; ok {
			d = x
		}
		fmt.Fprintf(&b, "  %-18s %s\n", e.keys, d)
	}
	b.WriteString("\n" + c.Styles.Title.Render("Marks") + "\n")
	fmt.Fprintf(&b, "  %s  %s\n", ">", "the selected row")
	fmt.Fprintf(&b, "  %s  %s\n", "!", fmt.Sprintf("stale: a peer behind over %ds or NOTIFY unanswered; a failing feed", int(StaleAfter.Seconds())))
	fmt.Fprintf(&b, "  %s  %s\n", "~", "a service member pending removal (self-removal hysteresis)")
	if c.Live {
		b.WriteString("\nThe screen refreshes by itself every second; countdowns tick between reads.\n")
	} else {
		b.WriteString("\nA db file is read once per view: press r to read it again.\n")
	}
	return b.String()
}
