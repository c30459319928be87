package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/tritondatacenter/cns/admin"
)

// ago is cnsadm's age ("3 mins ago"); "never" for a zero time.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	if now.Sub(t) < time.Second {
		return "just now"
	}
	return admin.Ago(now.Sub(t)) + " ago"
}

// age is a compact age for table cells, cnsadm's rounding with one
// letter units: "8s", "3m", "2h", "5d", "3w"; "never" for a zero time.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	n, unit, _ := strings.Cut(admin.Ago(max(now.Sub(t), 0)), " ")
	return n + unit[:1]
}

// countdown is a time still to come, to the second, so that it visibly
// ticks: "in 45s", "in 9m58s", "in 1h02m"; "now" once it has come.
func countdown(now, t time.Time) string {
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return "now"
	}
	return "in " + clock(d)
}

// clock renders a duration to the second: 45s, 9m58s, 1h02m.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// msTime is a time in ms since the epoch, as the API gives last visits.
func msTime(ms int64) time.Time { return time.UnixMilli(ms) }

// truncate cuts s to width cells with an ellipsis.
func truncate(s string, width int) string {
	if width <= 0 {
		return ""
	}
	return ansi.Truncate(s, width, "…")
}

// pad fits s into exactly width cells: cut with an ellipsis, or padded
// with spaces (on the left when right is set).
func pad(s string, width int, right bool) string {
	s = truncate(s, width)
	gap := width - ansi.StringWidth(s)
	if gap <= 0 {
		return s
	}
	if right {
		return strings.Repeat(" ", gap) + s
	}
	return s + strings.Repeat(" ", gap)
}

// fit makes text exactly height lines of at most width cells, for a
// fixed-size content area.
func fit(text string, width, height int) string {
	if height <= 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > height {
		lines = lines[:height]
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > width {
			lines[i] = ansi.Truncate(l, width, "…")
		}
	}
	for len(lines) < height {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// short is the first 8 characters of a UUID, as operators abbreviate
// them.
func short(uuid string) string {
	if len(uuid) > 8 {
		return uuid[:8]
	}
	return uuid
}

// ownerName names an owner where there is no room for its UUID: its
// login, or the start of its UUID when cns does not know the login.
func ownerName(login, uuid string) string {
	if login != "" {
		return login
	}
	return short(uuid)
}

// vmName names a VM where there is no room for its UUID: its alias, or
// the start of its UUID when it has none.
func vmName(alias, uuid string) string {
	if alias != "" {
		return alias
	}
	return short(uuid)
}

// wrap breaks text into lines of at most width cells, at spaces where it
// can, each continuation line indented by indent.
func wrap(text string, width int, indent string) []string {
	if width <= len(indent)+8 {
		return []string{text}
	}
	var lines []string
	first := true
	for text != "" {
		w := width
		if !first {
			w -= len(indent)
		}
		if ansi.StringWidth(text) <= w {
			lines = append(lines, prefix(first, indent)+text)
			break
		}
		cut := strings.LastIndex(ansi.Truncate(text, w, ""), " ")
		if cut <= 0 {
			cut = len(ansi.Truncate(text, w, ""))
		}
		lines = append(lines, prefix(first, indent)+strings.TrimRight(text[:cut], " "))
		text = strings.TrimLeft(text[cut:], " ")
		first = false
	}
	return lines
}

func prefix(first bool, indent string) string {
	if first {
		return ""
	}
	return indent
}
