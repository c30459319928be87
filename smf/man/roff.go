// Package man writes cns's manual pages in roff (man(7)) from the models
// the program already has: a kong command line (its commands, arguments,
// flags and help) or a table of keys. The committed pages beside this
// file are its output, which the release tarball installs where man(1)
// looks in the zone:
//
//   - cnsadm.1: admin/cnsadm (go generate ./admin/cnsadm)
//   - cns.8: the cns command line, package main (go generate .)
//   - cns.json.5: the configuration file, admin/config (go generate ./admin/config)
//
// Each page's test fails when the committed file differs from what its
// source makes now, and when groff warns about it.
package man

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/alecthomas/kong"
)

// Dir is where the pages are committed, relative to the repository.
const Dir = "smf/man"

// Header is a page's .TH line and its NAME section: name \- what, as
// whatis(1) lists it (without a final period).
func Header(b *strings.Builder, name string, section int, what string) {
	fmt.Fprintf(b, ".TH %s %d \"\" \"cns\" \"Triton Container Naming Service\"\n", strings.ToUpper(Word(name)), section)
	b.WriteString(".SH NAME\n" + Word(name) + " \\- " + Text(strings.TrimSuffix(what, ".")) + "\n")
}

// Command writes one command of a kong model: its synopsis and help,
// then its arguments and flags, then its subcommands, as `PATH --help`
// describes them.
func Command(b *strings.Builder, c *kong.Node, path string) {
	syn := []string{"\\fB" + Word(path) + "\\fR"}
	for _, f := range Flags(c) {
		a := "\\fB" + Word(flagName(f)) + "\\fR" + flagValue(f)
		if !f.Required {
			a = "[" + a + "]"
		}
		syn = append(syn, a)
	}
	for _, p := range c.Positional {
		a := "\\fI" + Word(p.Name) + "\\fR"
		if p.IsCumulative() {
			a += " ..."
		}
		if !p.Required {
			a = "[" + a + "]"
		}
		syn = append(syn, a)
	}
	fmt.Fprintf(b, ".TP\n%s\n%s\n", strings.Join(syn, " "), Text(c.Help))
	if c.Detail != "" {
		for _, para := range strings.Split(strings.TrimSpace(c.Detail), "\n\n") {
			b.WriteString(".IP\n" + Text(para) + "\n")
		}
	}
	if len(c.Positional) > 0 || len(Flags(c)) > 0 {
		b.WriteString(".RS\n")
		for _, p := range c.Positional {
			fmt.Fprintf(b, ".TP\n.I %s\n%s\n", Word(p.Name), Text(p.Help))
		}
		for _, f := range Flags(c) {
			Flag(b, f)
		}
		b.WriteString(".RE\n")
	}
	for _, sub := range c.Children {
		if !sub.Hidden {
			Command(b, sub, path+" "+sub.Name)
		}
	}
}

// Flag writes one flag with its help, default and environment variable.
func Flag(b *strings.Builder, f *kong.Flag) {
	name := "\\fB" + Word("--"+f.Name) + "\\fR" + flagValue(f)
	if f.Short != 0 {
		name = "\\fB" + Word("-"+string(f.Short)) + "\\fR, " + name
	}
	help := f.Help
	if f.HasDefault && f.Default != "" {
		help += " Default: " + f.Default + "."
	}
	if len(f.Envs) > 0 {
		help += " Environment: " + strings.Join(f.Envs, ", ") + "."
	}
	fmt.Fprintf(b, ".TP\n%s\n%s\n", name, Text(help))
}

// Flags are a node's own flags, without --help and hidden ones.
func Flags(n *kong.Node) []*kong.Flag {
	var out []*kong.Flag
	for _, f := range n.Flags {
		if !f.Hidden && f.Name != "help" {
			out = append(out, f)
		}
	}
	return out
}

// Examples writes an EXAMPLES section: each task's command lines, a
// task without a description (What "") continuing the one above.
func Examples(b *strings.Builder, command string, examples []Example) {
	b.WriteString(".SH EXAMPLES\n")
	for _, ex := range examples {
		words := []string{command}
		for _, a := range ex.Args {
			words = append(words, Word(a))
		}
		if ex.What != "" {
			fmt.Fprintf(b, ".PP\n%s\n", Text(ex.What))
		}
		fmt.Fprintf(b, ".PP\n.RS\n.nf\n%s\n.fi\n.RE\n", strings.Join(words, " "))
	}
}

// Example is one command line of a page's EXAMPLES and the task it does.
// Each page's test parses Args with the page's own command line, so a
// renamed command or flag cannot leave an example behind.
type Example struct {
	What string
	Args []string
}

// SeeAlso writes a SEE ALSO section naming other pages, "name(section)".
func SeeAlso(b *strings.Builder, pages ...string) {
	refs := make([]string, len(pages))
	for i, p := range pages {
		name, sec, _ := strings.Cut(strings.TrimSuffix(p, ")"), "(")
		refs[i] = ".BR " + Word(name) + " (" + sec + ")"
		if i < len(pages)-1 {
			refs[i] += " ,"
		}
	}
	b.WriteString(".SH SEE ALSO\n" + strings.Join(refs, "\n") + "\n")
}

// flagName is a flag as a synopsis shows it: its short form if it has one.
func flagName(f *kong.Flag) string {
	if f.Short != 0 {
		return "-" + string(f.Short)
	}
	return "--" + f.Name
}

// flagValue is " VALUE" for a flag that takes one.
func flagValue(f *kong.Flag) string {
	if f.IsBool() || f.IsCounter() {
		return ""
	}
	return " \\fI" + Word(strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))) + "\\fR"
}

// Word escapes a name or option: backslashes, and minus signs (which
// roff would otherwise print as hyphens).
func Word(s string) string {
	return strings.ReplaceAll(escape(s), "-", `\-`)
}

// Text escapes running text: backslashes, and a leading dot or quote,
// which roff would read as a request.
func Text(s string) string { return guardLines(escape(s)) }

// Markdown escapes running text written for Markdown, as the key table's
// help is: `code` is set in bold, never hyphenated, its minus signs kept
// as minus signs; the rest as Text.
func Markdown(s string) string {
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 { // an unpaired backtick: no code spans
		return Text(s)
	}
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 {
			b.WriteString(`\fB\%` + Word(p) + `\fR`)
		} else {
			b.WriteString(escape(p))
		}
	}
	return guardLines(b.String())
}

// escape writes backslashes as roff's \e, and characters outside ASCII as
// \[uXXXX], which groff and mandoc read whatever the page's encoding.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r > unicode.MaxASCII:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// guardLines keeps a line that starts with a dot or a quote from being
// read as a request.
func guardLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// Paragraphs turns blank-line separated paragraphs into .PP ones.
func Paragraphs(s string) string {
	var b strings.Builder
	for i, para := range strings.Split(strings.TrimSpace(s), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		b.WriteString(Text(para) + "\n")
	}
	return b.String()
}
