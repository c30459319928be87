package cnsadm

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The two text layouts of the reference cnsadm (lib/cmd-utils.js), which
// scripts parse: labelled fields (vm, peers ADDR, zones ZONE, config) and
// tables (zones, status). They are reproduced to the space, trailing
// padding included.

// fields writes labelled values: "label:" padded to the widest of the
// reference's labels for the verb (plus its colon), two spaces, the value.
// Labels cns adds after the reference's use the same width, so the
// reference's lines come first and keep their layout.
type fields struct {
	w     io.Writer
	label int // width of the label column
	value int // width of the value column when a help column follows; 0: no help column
}

// newFields sizes the label column from the reference's labels.
func newFields(w io.Writer, labels ...string) *fields {
	f := &fields{w: w}
	for _, l := range labels {
		f.label = max(f.label, utf8.RuneCountInString(l)+1)
	}
	return f
}

// withHelp adds the help column when the terminal is wider than the
// labels, the longest help and 40 columns for the values, as the
// reference decides it; columns ≤ 0 means $COLUMNS unset (80).
func (f *fields) withHelp(helps []string, columns int) *fields {
	if columns <= 0 {
		columns = 80
	}
	help := 0
	for _, h := range helps {
		help = max(help, utf8.RuneCountInString(h))
	}
	help += 4 // the parentheses and some room
	if columns > f.label+help+40 {
		f.value = columns - (f.label + help + 6)
	}
	return f
}

// line writes one line; help is "" or already in parentheses.
func (f *fields) line(label, value, help string) {
	if f.value > 0 {
		fmt.Fprintf(f.w, "%s  %s  %s\n", pad(label, f.label), pad(value, f.value), help)
		return
	}
	fmt.Fprintf(f.w, "%s  %s\n", pad(label, f.label), value)
}

// text writes "label:  value".
func (f *fields) text(label, value string) { f.line(label+":", value, "") }

// helped writes "label:  value  (help)" (the help only with the help column).
func (f *fields) helped(label, value, help string) {
	if help != "" {
		help = "(" + help + ")"
	}
	f.line(label+":", value, help)
}

// list writes a list: its first item on the label's line, the others one
// per line under it, "[]" when it is empty.
func (f *fields) list(label string, items []string, help string) {
	first := "[]"
	if len(items) > 0 {
		first = items[0]
	}
	f.helped(label, first, help)
	for _, it := range items[min(1, len(items)):] {
		f.line("", it, "")
	}
}

// object writes an object the reference's way: the label alone, then
// "    key: value" lines, then an empty line.
func (f *fields) object(label string, keys []string, value func(string) string) {
	f.line(label+":", "", "")
	for _, k := range keys {
		fmt.Fprintf(f.w, "    %s: %s\n", k, value(k))
	}
	fmt.Fprintln(f.w)
}

// pad pads s with spaces to width (never cuts it), as sprintf's %-Ns does.
func pad(s string, width int) string {
	if n := utf8.RuneCountInString(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}

// writeTable writes the reference's table: upper-case titles, every
// column as wide as its widest cell, two spaces between columns and every
// cell padded (the last too). When the table is wider than the terminal
// ($COLUMNS, less 2 above 80, at most 120; 80 when columns ≤ 0), the
// widest column shrinks (not below its title and 3) and its longer cells
// end in "...".
func writeTable(w io.Writer, titles []string, rows [][]string, columns int) error {
	widths := make([]int, len(titles))
	widest := 0
	for i, t := range titles {
		widths[i] = utf8.RuneCountInString(t)
		for _, r := range rows {
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
		if widths[i] > widths[widest] {
			widest = i
		}
	}
	limit := columns
	if limit <= 0 {
		limit = 80
	}
	if limit > 80 {
		limit -= 2
	}
	limit = min(limit, 120)
	total := 2 * (len(widths) - 1)
	for _, n := range widths {
		total += n
	}
	if total > limit {
		widths[widest] = max(widths[widest]-(total-limit), utf8.RuneCountInString(titles[widest])+3)
	}
	row := func(cells []string) {
		out := make([]string, len(cells))
		for i, c := range cells {
			if utf8.RuneCountInString(c) > widths[i] {
				c = string([]rune(c)[:widths[i]-3]) + "..."
			}
			out[i] = pad(c, widths[i])
		}
		fmt.Fprintln(w, strings.Join(out, "  "))
	}
	heads := make([]string, len(titles))
	for i, t := range titles {
		heads[i] = strings.ToUpper(t)
	}
	row(heads)
	for _, r := range rows {
		row(r)
	}
	return nil
}
