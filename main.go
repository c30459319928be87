// Command cns is the Container Naming Service of a Triton data center in
// one binary: `cns serve` runs the service, `cns adm` (or the binary
// invoked as cnsadm) is the operator's tool, `cns db` inspects a db file
// offline.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/tritondatacenter/cns/admin/cnsadm"
	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/smf"
)

// version and commit are stamped at build time:
//
//	go build -ldflags "-X main.version=1.0.0 -X main.commit=$(git rev-parse --short HEAD)"
var (
	version = "dev"
	commit  = ""
)

// CLI is the whole command line.
type CLI struct {
	Serve   ServeCmd   `cmd:"" help:"Run the naming service: serve DNS from the db and keep it in step with the data center."`
	DB      DBCmd      `cmd:"" name:"db" help:"Inspect a db file offline (read-only)."`
	Adm     cnsadm.Cmd `cmd:"" name:"adm" help:"Operate a running cns (the same binary installed as cnsadm)."`
	TUI     TUICmd     `cmd:"" name:"tui" help:"Terminal UI: zones, peers, services, VMs and feeds, live from the API (or --db FILE offline)."`
	Version VersionCmd `cmd:"" help:"Print the version."`
	Sim     SimCmd     `cmd:"" help:"Run a simulated Triton data center (VMAPI, changefeed, CNAPI, NAPI, UFDS) on 127.0.0.1 from an inventory file; prints the config keys for cns serve."`
	Man     ManCmd     `cmd:"" hidden:"" help:"Print the manual page, cns(8), in roff."`
}

// VersionCmd prints the version.
type VersionCmd struct{}

func (VersionCmd) Run() error {
	fmt.Println(versionString())
	return nil
}

// metaVersionString answers version._cns_meta in the reference's form,
// "<version>, <runtime>" ("0.1.0, node v6.17.1" there), which its peer
// version probe shows as "Triton CNS <answer>".
func metaVersionString() string {
	return strings.TrimPrefix(versionString(), "cns ") + ", " + runtime.Version()
}

func versionString() string {
	v, c := version, commit
	if c == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					c = s.Value[:12]
				}
			}
		}
	}
	if c != "" {
		return fmt.Sprintf("cns %s (%s)", v, c)
	}
	return "cns " + v
}

// newParser is the command line's parser: grammar under name, usage on
// an error; with adm, cnsadm's usage errors exit with the reference's
// status rather than kong's 80.
func newParser(grammar any, name, description string, adm bool) *kong.Kong {
	parser, err := kong.New(grammar,
		kong.Name(name),
		kong.Description(description),
		kong.UsageOnError(),
		kong.Exit(func(code int) {
			if adm && code != 0 {
				code = cnsadm.ExitUsage // kong's usage errors are 80
			}
			os.Exit(code)
		}),
	)
	if err != nil {
		panic(err) // the grammar is the program's own
	}
	return parser
}

// isAdm reports whether the command line runs cnsadm (cns adm ...).
func isAdm(args []string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a == "adm"
		}
	}
	return false
}

// runCnsadm runs the binary invoked as cnsadm: cnsadm.Cmd is the whole
// command line, so usage and help say "cnsadm <command>", as the
// reference's do, not "cnsadm adm". It returns the exit status.
func runCnsadm(args []string) int {
	adm := cnsadm.Cmd{OpenDB: openDBModel}
	parser := newParser(&adm, "cnsadm", adm.Help(), true)
	kctx, err := parser.Parse(args)
	parser.FatalIfErrorf(err)
	if err := kctx.Run(&adm); err != nil {
		fmt.Fprintf(os.Stderr, "cnsadm: %v\n", err)
		return cnsadm.ExitCode(err)
	}
	return 0
}

func main() {
	args := os.Args[1:]
	// The same binary installed as cnsadm is `cns adm`.
	if strings.HasPrefix(filepath.Base(os.Args[0]), "cnsadm") {
		os.Exit(runCnsadm(args))
	}
	name := "cns"
	adm := isAdm(args)
	cli := CLI{Adm: cnsadm.Cmd{OpenDB: openDBModel}}
	parser := newParser(&cli, name, description, adm)
	kctx, err := parser.Parse(args)
	parser.FatalIfErrorf(err)
	if err := kctx.Run(&cli.DB, &cli.Adm); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		if adm {
			os.Exit(cnsadm.ExitCode(err))
		}
		var ce *config.Error
		if errors.As(err, &ce) {
			os.Exit(smf.ExitConfig) // fix the config; SMF does not restart it
		}
		os.Exit(smf.ExitError)
	}
}
