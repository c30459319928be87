package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tritondatacenter/cns/smf/man"
)

//go:generate go test . -run TestManPage -update

// ManPath is where cns.json(5) is committed, relative to the repository
// (and what the release installs as /opt/local/man/man5/cns.json.5);
// TestManPage keeps it equal to what ManPage builds.
const ManPath = man.Dir + "/cns.json.5"

// ManPage builds cns.json(5), the configuration file's page, from the
// key table: every key with its type, default, how a change takes effect
// and its help, as the manual's key tables and cnsadm config show them.
func ManPage() string {
	var b strings.Builder
	man.Header(&b, "cns.json", 5, "configuration file of cns(8)")
	b.WriteString(`.SH SYNOPSIS
.I /opt/triton/cns/etc/config.json
(in a Triton zone; elsewhere the file that
.B cns serve \-c
names)
.SH DESCRIPTION
A JSON object. cns reads the reference implementation's config.json, as config\-agent renders it from the cns service's SAPI metadata, unchanged; cns's own keys are optional. Relative paths in it are relative to the file's directory.
.PP
An invalid file stops
.B cns serve
before it touches the db, with one line naming the file, the key and the problem, and exit status 96;
.B cns serve \-\-check \-c
.I FILE
validates a file without starting. An unknown key is logged as a warning and ignored. A section named in quotes ("Mass removals") is one of cns's manual, docs/ in its source tree.
.PP
A running cns reads the file again on SIGHUP
.RB ( "svcadm refresh cns" ,
.BR "cnsadm config" ,
POST /config/reload). A key marked
.I at a reload
is applied in place without dropping a query; a change to a key marked
.I restarts cns
makes cns stop and start again in the same process, serving its db at once. A file that does not validate changes nothing and is logged with its error.
.PP
In a Triton zone, change keys with
.B cnsadm config
and
.BR "cnsadm zones" :
they validate the whole new configuration, then write the cns service's SAPI metadata, from which config\-agent renders the file.
.SH KEYS
`)
	for s := SectionZones; s < SectionIgnored; s++ {
		fmt.Fprintf(&b, ".SS %s\n", man.Text(s.String()))
		for _, k := range Keys {
			if k.Section != s {
				continue
			}
			def := "default " + man.Markdown(defaultText(k.Default))
			if k.Default == "required" {
				def = "required"
			}
			fmt.Fprintf(&b, ".TP\n\\fB%s\\fR (%s; %s; %s)\n%s\n", man.Word(k.Name), k.Kind, def, k.takesEffect(), man.Markdown(k.Help))
		}
	}
	b.WriteString(".SS A zone's settings\nEach entry of \\fBforward_zones\\fR is an object of these keys; \\fBreverse_zones\\fR takes the ones marked.\n")
	for _, k := range ZoneKeys {
		var notes []string
		if k.Reverse {
			notes = append(notes, "also in \\fBreverse_zones\\fR")
		}
		if k.Legacy != "" {
			notes = append(notes, "formerly \\fB"+man.Word(k.Legacy)+"\\fR, which \\fBcnsadm upgrade\\fR renames")
		}
		fmt.Fprintf(&b, ".TP\n\\fB%s\\fR (%s)\n%s\n", man.Word(k.Name), strings.Join(append([]string{k.Kind.String()}, notes...), "; "), man.Markdown(k.Help))
	}
	var ignored []string
	for _, k := range Keys {
		if k.Section == SectionIgnored {
			ignored = append(ignored, "\\fB"+man.Word(k.Name)+"\\fR")
		}
	}
	fmt.Fprintf(&b, ".SS %s\nThe reference's keys cns does not use: %s.\n", man.Text(SectionIgnored.String()), strings.Join(ignored, ", "))
	b.WriteString(".SH EXAMPLES\n")
	for _, ex := range ManExamples {
		fmt.Fprintf(&b, ".PP\n%s\n.PP\n.RS\n.nf\n%s\n.fi\n.RE\n", man.Text(ex.What), man.Word(ex.JSON))
	}
	man.SeeAlso(&b, "cns(8)", "cnsadm(1)")
	return b.String()
}

// ManExamples are cns.json(5)'s EXAMPLES; TestManPage parses each.
var ManExamples = []struct{ What, JSON string }{
	{"A data center's cns: one public zone named for every network, transferred by one secondary, and the SDC APIs (as config-agent renders them, abridged):", `{
  "my_name": "cns.us-west-1.example.com",
  "hostmaster": "hostmaster@example.com",
  "forward_zones": {
    "us-west-1.cns.example.com": {"networks": ["*"], "peers": ["ns1.example.com"]}
  },
  "allow_transfer": ["10.0.0.53"],
  "vmapi_opts": {"address": "vmapi.us-west-1.example.com"},
  "cnapi_opts": {"address": "cnapi.us-west-1.example.com"},
  "napi_opts": {"address": "napi.us-west-1.example.com"},
  "ufds_opts": {"address": "ufds.us-west-1.example.com",
                "bindDN": "cn=root", "bindPassword": "secret"}
}`},
	{"A data center read from an inventory file, served on a high port with its db beside the file:", `{
  "my_name": "cns.example.com",
  "hostmaster": "hostmaster@example.com",
  "forward_zones": {"dc.cns.example.com": {"networks": ["*"]}},
  "inventory_file": "inventory.json",
  "db_path": "var/cns.db",
  "dns_listen": ["127.0.0.1:5353"],
  "api_server": {"listen": "127.0.0.1:5380"}
}`},
}

// defaultText is a key's default as the manual's tables and cns.json(5)
// show it, in Markdown: JSON as code, words as they are.
func defaultText(d string) string {
	switch {
	case d == "":
		return "(none)"
	case json.Valid([]byte(d)):
		return "`" + d + "`"
	}
	return d
}

// takesEffect says how a change of the key is applied, as the manual's
// tables and cns.json(5) put it.
func (k Key) takesEffect() string {
	if k.Restart {
		return "restarts cns"
	}
	return "at a reload"
}
