package main

import (
	"fmt"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/smf"
	"github.com/tritondatacenter/cns/smf/man"
)

//go:generate go test . -run TestManPageCNS -update

// manPath is where cns(8) is committed (and what the release installs as
// /opt/local/man/man8/cns.8); TestManPageCNS keeps it equal to manPage's.
const manPath = man.Dir + "/cns.8"

// description is cns's own, in `cns --help` and cns(8).
const description = `Triton Container Naming Service: DNS names for the instances of a Triton data center.

cns gives every opted-in instance of the data center DNS names that follow it through its life, and serves them to the data center's resolvers and to secondary name servers. It learns the data center from its APIs (VMAPI and its changefeed, CNAPI, NAPI, UFDS) or from an inventory file, keeps records, serials and IXFR journals in one db file, and answers DNS queries, zone transfers and NOTIFY over UDP and TCP. Its REST API serves cnsadm, the terminal UI and the Triton services that ask it for names.

The same binary installed as cnsadm is cns adm, the operator's tool (cnsadm(1)); the configuration file is cns.json(5).`

// ManCmd prints cns(8) in roff.
type ManCmd struct{}

func (ManCmd) Run() error {
	page, err := manPage()
	if err != nil {
		return err
	}
	fmt.Print(page)
	return nil
}

// manPage builds cns(8) from the command line's own model: its
// description, then each command with its arguments and flags as `cns
// COMMAND --help` describes them (cns adm only by name: cnsadm(1) is its
// page). Signals, exit statuses, the environment and the files are stated
// here.
func manPage() (string, error) {
	parser, err := kong.New(&CLI{}, kong.Name("cns"))
	if err != nil {
		return "", err
	}
	summary, rest, _ := strings.Cut(description, "\n\n")
	var b strings.Builder
	man.Header(&b, "cns", 8, summary)
	b.WriteString(".SH SYNOPSIS\n.B cns\n\\fIcommand\\fR [\\fIoptions\\fR] [\\fIarguments\\fR]\n")
	b.WriteString(".SH DESCRIPTION\n" + man.Paragraphs(rest))
	b.WriteString(".SH COMMANDS\n")
	for _, c := range parser.Model.Node.Children {
		switch {
		case c.Hidden:
		case c.Name == "adm":
			fmt.Fprintf(&b, ".TP\n\\fBcns adm\\fR \\fIcommand\\fR [\\fIarguments\\fR]\n%s See\n.BR cnsadm (1).\n", man.Text(c.Help))
		default:
			man.Command(&b, c, "cns "+c.Name)
		}
	}
	fmt.Fprintf(&b, `.SH SIGNALS
\fBcns serve\fR handles:
.TP
.B SIGHUP
Reads the configuration file again. A key applied in place (marked "at a reload" in
.BR cns.json (5))
takes effect without dropping a query; a changed key only a start applies makes cns stop as for SIGTERM and start again in the same process (same PID), serving the db at once. A file that does not validate changes nothing and is logged with its error.
.TP
.BR SIGTERM ", " SIGINT
Stops the listeners and closes the db without waiting for the batch being computed; a batch bbolt is not yet writing is dropped, and the next start computes it again from the feeds.
.SH EXIT STATUS
.TP
.B 0
Success.
.TP
.B %d
A failure the service manager answers with a restart (a listener that cannot open, a db that cannot be opened).
.TP
.B %d
The configuration does not validate (SMF's configuration error: the service goes to maintenance rather than restart-looping). The message names the file, the key and the problem.
`, smf.ExitError, smf.ExitConfig)
	b.WriteString(".SH ENVIRONMENT\n")
	for _, env := range flagEnvs(parser.Model.Node) {
		fmt.Fprintf(&b, ".TP\n.B %s\nAs \\fB%s\\fR of \\fBcns %s\\fR.\n", man.Word(env.name), man.Word("--"+env.flag), man.Word(env.command))
	}
	fmt.Fprintf(&b, `.TP
.B GOMEMLIMIT
The heap's soft limit (for example 1500MiB). Without it, cns serve sets 3/4 of its cgroup's memory limit on Linux; the SMF method sets 3/4 of the zone's memory cap. The limit is logged at start.
.TP
.B LOGLEVEL
The log level when the configuration has no log_level (the SMF manifest sets it).
.TP
.B NO_COLOR
When set, the terminal UI uses no colour.
.SH FILES
.TP
.I /opt/triton/cns/etc/config.json
The configuration in a Triton zone, rendered by config-agent from SAPI
.RB ( cns.json (5)).
.TP
.I %s
The db (db_path): records, serials, journals, peers, hysteresis state.
.TP
.I /opt/triton/cns/smf/manifests/cns.xml
The SMF service, svc:/triton/application/cns:default; its log is
.BR "svcs \-L cns" .
`, man.Word(strings.Trim(keyDefault("db_path"), `"`)))
	man.Examples(&b, "cns", examples)
	man.SeeAlso(&b, "cnsadm(1)", "cns.json(5)", "svcadm(8)", "dig(1)")
	return b.String(), nil
}

// examples are cns(8)'s EXAMPLES; TestManExamplesCNS parses each with
// the CLI.
var examples = []man.Example{
	{What: "Serve the demo data center of the source tree on 127.0.0.1:5353:",
		Args: []string{"serve", "-c", "testdata/cns.json"}},
	{What: "Check a configuration file without starting:",
		Args: []string{"serve", "--check", "-c", "/opt/triton/cns/etc/config.json"}},
	{What: "List the zones a db file holds, export one as zone text, and check the file:",
		Args: []string{"db", "--db", "cns.db", "zones"}},
	{What: "", Args: []string{"db", "--db", "cns.db", "export", "us-west-1.cns.example.com"}},
	{What: "", Args: []string{"db", "--db", "cns.db", "check"}},
	{What: "Watch a running cns:",
		Args: []string{"tui", "--config-file", "/opt/triton/cns/etc/config.json"}},
	{What: "Simulate a data center from an inventory file, for cns serve to follow:",
		Args: []string{"sim", "--inventory", "testdata/inventory.json"}},
}

type flagEnv struct{ name, flag, command string }

// flagEnvs are the environment variables of every command's flags but
// cns adm's (cnsadm(1) has those), each once.
func flagEnvs(root *kong.Node) []flagEnv {
	var out []flagEnv
	seen := map[string]bool{}
	var walk func(n *kong.Node, path string)
	walk = func(n *kong.Node, path string) {
		for _, f := range man.Flags(n) {
			for _, e := range f.Envs {
				if !seen[e] {
					seen[e] = true
					out = append(out, flagEnv{e, f.Name, path})
				}
			}
		}
		for _, c := range n.Children {
			if !c.Hidden && c.Name != "adm" {
				walk(c, strings.TrimSpace(path+" "+c.Name))
			}
		}
	}
	walk(root, "")
	return out
}

// keyDefault is a configuration key's default, as the key table has it.
func keyDefault(name string) string {
	for _, k := range config.Keys {
		if k.Name == name {
			return k.Default
		}
	}
	panic("no configuration key " + name)
}
