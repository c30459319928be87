package cnsadm

import (
	"fmt"
	"strings"

	"github.com/alecthomas/kong"
)

// ManPath is where the cnsadm(1) page is committed, relative to the
// repository (and shipped in the release tarball with smf/);
// TestManPage keeps it equal to what ManPage builds.
const ManPath = "smf/man/cnsadm.1"

// ManCmd prints cnsadm(1) in roff.
type ManCmd struct{}

func (ManCmd) Run() error {
	page, err := ManPage()
	if err != nil {
		return err
	}
	fmt.Print(page)
	return nil
}

// ManPage builds cnsadm(1) from the command line's own model: cnsadm's
// help, then each of its commands with its arguments and flags, as
// `cnsadm VERB --help` describes them. Only the exit status, the
// environment and the files are stated here.
func ManPage() (string, error) {
	parser, err := kong.New(&Cmd{}, kong.Name("cnsadm"))
	if err != nil {
		return "", err
	}
	adm := parser.Model.Node
	var b strings.Builder
	b.WriteString(".TH CNSADM 1 \"\" \"cns\" \"Triton Container Naming Service\"\n")
	b.WriteString(".SH NAME\ncnsadm \\- " + roffText(strings.TrimSuffix(lowerFirst(Summary), ".")) + "\n")
	b.WriteString(".SH SYNOPSIS\n.B cnsadm\n[\\fIoptions\\fR] \\fIcommand\\fR [\\fIarguments\\fR]\n")
	b.WriteString(".SH DESCRIPTION\n" + roffParagraphs(Cmd{}.Help()))
	b.WriteString(".SH OPTIONS\n")
	for _, f := range visibleFlags(adm) {
		manFlag(&b, f)
	}
	b.WriteString(".SH COMMANDS\n")
	for _, c := range adm.Children {
		if !c.Hidden {
			manCommand(&b, c, "cnsadm "+c.Name)
		}
	}
	fmt.Fprintf(&b, `.SH EXIT STATUS
.TP
.B 0
Success.
.TP
.B %d
A usage error, or cnsadm could not talk to cns (or to SAPI).
.TP
.B %d
The configuration, current or as changed, does not validate; nothing was written.
`, ExitUsage, ExitValidation)
	b.WriteString(".SH ENVIRONMENT\n")
	for _, f := range visibleFlags(adm) {
		for _, env := range f.Envs {
			fmt.Fprintf(&b, ".TP\n.B %s\nAs \\fB%s\\fR.\n", roffWord(env), roffWord("--"+f.Name))
		}
	}
	b.WriteString(`.TP
.B CNS_SAPI_URL
SAPI's URL: config and zones change the cns service's SAPI metadata (as they do when mdata\-get sapi\-url answers) instead of the config file.
.TP
.B COLUMNS
The terminal's width: the help column of config and the width of the zones table follow it (80 when unset; the table at most 120).
.SH FILES
.TP
.I /opt/triton/cns/etc/config.json
The server's configuration (\fB\-\-config\-file\fR).
`)
	b.WriteString(".SH EXAMPLES\n")
	for _, ex := range examples {
		words := []string{"cnsadm"}
		for _, a := range ex.Args {
			words = append(words, roffWord(a))
		}
		if ex.What != "" { // else: a second command for the task above
			fmt.Fprintf(&b, ".PP\n%s\n", roffText(ex.What))
		}
		fmt.Fprintf(&b, ".PP\n.RS\n.nf\n%s\n.fi\n.RE\n", strings.Join(words, " "))
	}
	return b.String(), nil
}

// examples are the page's EXAMPLES: an operator's tasks, in the
// order an incident meets them. TestManExamples parses each with
// the CLI, so a renamed command or flag cannot leave one behind.
var examples = []struct {
	What string
	Args []string
}{
	{"Are the zones served, and does every secondary have the current serial?",
		[]string{"status"}},
	{"Why does an instance have the names it has, or none?",
		[]string{"vm", "4e0b4d4c-7a8e-4ab4-9d0e-3b1b8e0e2c11"}},
	{"What changed in a zone, serial by serial, and why:",
		[]string{"history", "us-west-1.cns.example.com"}},
	{"Let a new secondary transfer the zones, and send it NOTIFYs for one zone:",
		[]string{"config", "allow_transfer+=10.1.2.3"}},
	{"", []string{"zones", "us-west-1.cns.example.com", "peers+=ns2.example.com"}},
	{"After a change, wait until every secondary of the zone serves it (at most 5 minutes):",
		[]string{"wait", "--timeout=5m", "us-west-1.cns.example.com"}},
	{"Forget a secondary that was taken out of service:",
		[]string{"peers", "-d", "10.1.2.3"}},
	{"Watch zones, secondaries, services and feeds live:",
		[]string{"tui"}},
}

// manCommand writes one command: its synopsis and help, then its
// arguments and flags.
func manCommand(b *strings.Builder, c *kong.Node, path string) {
	syn := []string{"\\fB" + roffWord(path) + "\\fR"}
	for _, f := range visibleFlags(c) {
		syn = append(syn, "[\\fB"+roffWord(flagName(f))+"\\fR"+flagValue(f)+"]")
	}
	for _, p := range c.Positional {
		a := "\\fI" + roffWord(p.Name) + "\\fR"
		if p.IsCumulative() {
			a += " ..."
		}
		if !p.Required {
			a = "[" + a + "]"
		}
		syn = append(syn, a)
	}
	fmt.Fprintf(b, ".TP\n%s\n%s\n", strings.Join(syn, " "), roffText(c.Help))
	if c.Detail != "" {
		for _, para := range strings.Split(strings.TrimSpace(c.Detail), "\n\n") {
			b.WriteString(".IP\n" + roffText(para) + "\n")
		}
	}
	if len(c.Positional) > 0 || len(visibleFlags(c)) > 0 {
		b.WriteString(".RS\n")
		for _, p := range c.Positional {
			fmt.Fprintf(b, ".TP\n.I %s\n%s\n", roffWord(p.Name), roffText(p.Help))
		}
		for _, f := range visibleFlags(c) {
			manFlag(b, f)
		}
		b.WriteString(".RE\n")
	}
	for _, sub := range c.Children {
		if !sub.Hidden {
			manCommand(b, sub, path+" "+sub.Name)
		}
	}
}

// manFlag writes one flag with its help, default and environment variable.
func manFlag(b *strings.Builder, f *kong.Flag) {
	name := "\\fB" + roffWord("--"+f.Name) + "\\fR" + flagValue(f)
	if f.Short != 0 {
		name = "\\fB" + roffWord("-"+string(f.Short)) + "\\fR, " + name
	}
	help := f.Help
	if f.HasDefault && f.Default != "" {
		help += " Default: " + f.Default + "."
	}
	if len(f.Envs) > 0 {
		help += " Environment: " + strings.Join(f.Envs, ", ") + "."
	}
	fmt.Fprintf(b, ".TP\n%s\n%s\n", name, roffText(help))
}

// visibleFlags are a node's own flags, without --help and hidden ones.
func visibleFlags(n *kong.Node) []*kong.Flag {
	var out []*kong.Flag
	for _, f := range n.Flags {
		if !f.Hidden && f.Name != "help" {
			out = append(out, f)
		}
	}
	return out
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
	return " \\fI" + roffWord(strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))) + "\\fR"
}

// roffWord escapes a name or option: backslashes, and minus signs (which
// roff would otherwise print as hyphens).
func roffWord(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\e`), "-", `\-`)
}

// roffText escapes running text: backslashes, and a leading dot or quote,
// which roff would read as a request.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// roffParagraphs turns blank-line separated paragraphs into .PP ones.
func roffParagraphs(s string) string {
	var b strings.Builder
	for i, para := range strings.Split(strings.TrimSpace(s), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		b.WriteString(roffText(para) + "\n")
	}
	return b.String()
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
