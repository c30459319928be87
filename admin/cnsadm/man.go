package cnsadm

import (
	"fmt"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/tritondatacenter/cns/smf/man"
)

// ManPath is where the cnsadm(1) page is committed, relative to the
// repository (and shipped in the release tarball);
// TestManPage keeps it equal to what ManPage builds.
const ManPath = man.Dir + "/cnsadm.1"

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
	man.Header(&b, "cnsadm", 1, strings.ToLower(Summary[:1])+Summary[1:])
	b.WriteString(".SH SYNOPSIS\n.B cnsadm\n[\\fIoptions\\fR] \\fIcommand\\fR [\\fIarguments\\fR]\n")
	b.WriteString(".SH DESCRIPTION\n" + man.Paragraphs(Cmd{}.Help()))
	b.WriteString(".SH OPTIONS\n")
	for _, f := range man.Flags(adm) {
		man.Flag(&b, f)
	}
	b.WriteString(".SH COMMANDS\n")
	for _, c := range adm.Children {
		if !c.Hidden {
			man.Command(&b, c, "cnsadm "+c.Name)
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
	for _, f := range man.Flags(adm) {
		for _, env := range f.Envs {
			fmt.Fprintf(&b, ".TP\n.B %s\nAs \\fB%s\\fR.\n", man.Word(env), man.Word("--"+f.Name))
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
	man.Examples(&b, "cnsadm", examples)
	man.SeeAlso(&b, "cns(8)", "cns.json(5)")
	return b.String(), nil
}

// examples are the page's EXAMPLES: an operator's tasks, in the
// order an incident meets them. TestManExamples parses each with
// the CLI, so a renamed command or flag cannot leave one behind.
var examples = []man.Example{
	{What: "Are the zones served, and does every secondary have the current serial?",
		Args: []string{"status"}},
	{What: "Why does an instance have the names it has, or none?",
		Args: []string{"vm", "4e0b4d4c-7a8e-4ab4-9d0e-3b1b8e0e2c11"}},
	{What: "What changed in a zone, serial by serial, and why:",
		Args: []string{"history", "us-west-1.cns.example.com"}},
	{What: "Let a new secondary transfer the zones, and send it NOTIFYs for one zone:",
		Args: []string{"config", "allow_transfer+=10.1.2.3"}},
	{What: "", Args: []string{"zones", "us-west-1.cns.example.com", "peers+=ns2.example.com"}},
	{What: "After a change, wait until every secondary of the zone serves it (at most 5 minutes):",
		Args: []string{"wait", "--timeout=5m", "us-west-1.cns.example.com"}},
	{What: "Forget a secondary that was taken out of service:",
		Args: []string{"peers", "-d", "10.1.2.3"}},
	{What: "Watch zones, secondaries, services and feeds live:",
		Args: []string{"tui"}},
}
