package cnsadm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/db/durable"
	"github.com/tritondatacenter/cns/feeds/dc"
)

// cnsadm's exit statuses are the reference's, which scripts test.
const (
	ExitUsage      = 1 // a usage error, or talking to cns or SAPI failed
	ExitValidation = 2 // the configuration, current or new, does not validate
)

// ExitCode is cnsadm's exit status for an error a command returned.
func ExitCode(err error) int {
	var ce *config.Error
	if errors.As(err, &ce) {
		return ExitValidation
	}
	return ExitUsage
}

// Cmd is cnsadm's command line: the operator's tool, talking to a
// running cns through its API (and, for config and zones, to where the
// configuration lives). It is the whole command line of the binary
// invoked as cnsadm, and `cns adm`.
type Cmd struct {
	API        string `name:"api" env:"CNS_API" help:"API of the cns to talk to (default: the first api_server.listen address in --config-file, else 127.0.0.1:80)."`
	Token      string `name:"token" env:"CNS_API_TOKEN" help:"Bearer token for the API."`
	ConfigFile string `name:"config-file" env:"CNS_CONFIG" default:"/opt/triton/cns/etc/config.json" help:"The server's config file."`
	JSON       bool   `name:"json" help:"Print the API's JSON instead of tables."`

	Status   StatusCmd   `cmd:"" help:"Zones with their serials, and every peer's serial, drift and version."`
	VM       VMCmd       `cmd:"" name:"vm" help:"A VM's names, and why it is or is not listed."`
	Peers    PeersCmd    `cmd:"" help:"List peers, show one, or delete one (-d)."`
	Config   ConfigCmd   `cmd:"" help:"Show or change the main settings (key=value, key+=value, key-=value)."`
	Zones    ZonesCmd    `cmd:"" help:"Show, add (-a), delete (-d) or change zones."`
	History  HistoryCmd  `cmd:"" help:"What changed in a zone, serial by serial, and why."`
	Wait     WaitCmd     `cmd:"" help:"Wait until every peer of a zone serves a serial."`
	Feeds    FeedsCmd    `cmd:"" help:"Health of each feed and of the updater; accept [CAUSE] applies the removals the guard holds."`
	Services ServicesCmd `cmd:"" help:"Services and their self-removal hysteresis: who is pending, when each may leave."`
	Backup   BackupCmd   `cmd:"" help:"Write a consistent copy of the running server's db."`
	Upgrade  UpgradeCmd  `cmd:"" help:"Migrate old configuration keys (slaves, hidden_master)."`
	TUI      TUICmd      `cmd:"" name:"tui" help:"Terminal UI: zones, peers, services, VMs and feeds, live."`
	Man      ManCmd      `cmd:"" hidden:"" help:"Print this manual page, cnsadm(1), in roff."`

	// OpenDB opens a db file as the offline read model (cnsadm tui
	// --db): the program's, which knows how the DNS server stores its
	// peers.
	OpenDB func(path string) (*admin.DBModel, error) `kong:"-"`
}

// Summary is what cnsadm is, in a line (cns --help, cnsadm(1)'s NAME).
const Summary = "Operate a running cns (the same binary installed as cnsadm)."

// Help is cnsadm's description (cnsadm --help, and cnsadm(1)).
func (Cmd) Help() string {
	return `cnsadm is the operator's tool of cns: it reads a running server's state through its REST API, and changes the configuration the server reads. It is the cns binary installed (or linked) as cnsadm, or run as cns adm.

It talks to the API at --api, else at the first api_server.listen address of --config-file, else at port 80 of 127.0.0.1, as the reference's cnsadm does. The commands the reference has (status, vm, peers, config, zones, upgrade) print its lines first, in its layout, which scripts parse, and cns's own lines after them; --json prints the API's JSON instead, for machines.

config and zones validate the whole new configuration with the server's own parser before writing anything. In an SDC zone (when mdata-get sapi-url answers, or CNS_SAPI_URL is set) they change the cns service's SAPI metadata and config-agent renders the file; elsewhere they rewrite the file and ask the server to reload it.`
}

// client builds the API client: --api, else the config file's
// api_server.listen, else the reference's port 80 on loopback.
func (a *Cmd) client() *admin.Client {
	base := a.API
	if base == "" {
		if cfg, err := config.Load(a.ConfigFile); err == nil && len(cfg.APIListen) > 0 {
			base = cfg.APIListen[0]
			if a.Token == "" {
				a.Token = cfg.APIToken
			}
		}
	}
	if base == "" {
		base = "127.0.0.1:80"
	}
	return admin.NewClient(base, a.Token)
}

// out prints v as JSON with --json, else calls text.
func (a *Cmd) out(v any, text func(io.Writer) error) error {
	if a.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return text(os.Stdout)
}

// columns is the terminal's width from $COLUMNS, 0 when unset or not a
// number: the reference's layouts fit their tables and help to it.
func columns() int {
	n, _ := strconv.Atoi(strings.TrimSpace(os.Getenv("COLUMNS")))
	return n
}

func ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// StatusCmd is cnsadm status.
type StatusCmd struct{}

func (StatusCmd) Run(a *Cmd) error {
	c, cancel := ctx()
	defer cancel()
	st, err := a.client().Status(c)
	if err != nil {
		return err
	}
	return a.out(st, func(w io.Writer) error { return WriteStatus(w, st, time.Now()) })
}

// VMCmd is cnsadm vm.
type VMCmd struct {
	UUID string `arg:"" help:"VM UUID."`
}

func (v VMCmd) Run(a *Cmd) error {
	c, cancel := ctx()
	defer cancel()
	vm, err := a.client().VM(c, v.UUID)
	if admin.IsNotFound(err) {
		return fmt.Errorf("VM %s not found: cns has never seen it (wrong UUID, or not yet visited by the feed)", v.UUID)
	}
	if err != nil {
		return err
	}
	return a.out(vm, func(w io.Writer) error { return WriteVM(w, vm, time.Now()) })
}

// PeersCmd is cnsadm peers.
type PeersCmd struct {
	Delete bool   `short:"d" help:"Delete the peer (it comes back if it transfers again)."`
	Addr   string `arg:"" optional:"" help:"Peer address."`
}

func (p PeersCmd) Run(a *Cmd) error {
	c, cancel := ctx()
	defer cancel()
	cl := a.client()
	switch {
	case p.Delete && p.Addr == "":
		return errors.New("peers -d needs an address")
	case p.Delete:
		if err := cl.DeletePeer(c, p.Addr); err != nil {
			if admin.IsNotFound(err) {
				return fmt.Errorf("peer %s not found", p.Addr)
			}
			return err
		}
		fmt.Printf("peer %s deleted\n", p.Addr)
		return nil
	case p.Addr == "":
		peers, err := cl.Peers(c)
		if err != nil {
			return err
		}
		return a.out(peers, func(w io.Writer) error { return WritePeers(w, peers) })
	}
	peer, err := cl.Peer(c, p.Addr)
	if admin.IsNotFound(err) {
		return fmt.Errorf("peer %s not found", p.Addr)
	}
	if err != nil {
		return err
	}
	return a.out(peer, func(w io.Writer) error { return WritePeer(w, peer) })
}

// editor returns the configuration editor: SAPI in an SDC zone (when
// mdata-get knows a sapi-url, or CNS_SAPI_URL is set), else the file.
func (a *Cmd) editor() *Editor {
	var store Store = FileStore{Path: a.ConfigFile}
	sapi := os.Getenv("CNS_SAPI_URL")
	if sapi == "" {
		if out, err := exec.Command("mdata-get", "sapi-url").Output(); err == nil {
			sapi = strings.TrimSpace(string(out))
		}
	}
	if sapi != "" {
		// The zone's name is its SAPI instance UUID, whose merged
		// metadata (GET /configs/<zonename>) is what config-agent renders.
		var instance string
		if out, err := exec.Command("zonename").Output(); err == nil {
			instance = strings.TrimSpace(string(out))
		}
		store = SAPIStore{URL: sapi, Instance: instance, Base: FileStore{Path: a.ConfigFile}}
	}
	return &Editor{
		Store:  store,
		File:   a.ConfigFile,
		Reload: func(c context.Context) error { return a.client().Reload(c) },
	}
}

func parseModifiers(args []string) ([]Modifier, error) {
	var mods []Modifier
	for _, s := range args {
		m, err := ParseModifier(s)
		if err != nil {
			return nil, err
		}
		mods = append(mods, m)
	}
	return mods, nil
}

// ConfigCmd is cnsadm config.
type ConfigCmd struct {
	Modifiers []string `arg:"" optional:"" help:"key=value, key+=value (lists), key-=value (lists)."`
}

func (ConfigCmd) Help() string {
	return `With no modifiers, print the main settings, a list one item per line and [] when empty, with a help column when $COLUMNS is wide enough. In an SDC zone, a key whose SAPI metadata config-agent has not yet rendered into the file is marked *.

A modifier key=value sets a key, key+=value adds to a list and key-=value removes from one. Booleans are true, yes, on, false, no or off; lists are comma-separated; objects are JSON. Loopback (127.0.0.1 and ::1) may always transfer: it cannot be removed from allow_transfer.

The keys config edits: ` + strings.Join(config.Editable(), ", ") + `. Any other key is refused; zones are edited with cnsadm zones.`
}

func (cc ConfigCmd) Run(a *Cmd) error {
	mods, err := parseModifiers(cc.Modifiers)
	if err != nil {
		return err
	}
	c, cancel := ctx()
	defer cancel()
	e := a.editor()
	var cfg *config.JSONObject
	if len(mods) == 0 {
		cfg, err = e.Store.Load()
	} else {
		cfg, err = e.Config(c, mods)
	}
	if err != nil {
		return err
	}
	var waiting map[string]bool
	if sapi, ok := e.Store.(SAPIStore); ok {
		if waiting, err = sapi.Waiting(); err != nil {
			return err
		}
	}
	return a.out(cfg, func(w io.Writer) error { return WriteConfig(w, cfg, columns(), waiting) })
}

// ZonesCmd is cnsadm zones.
type ZonesCmd struct {
	Add       bool     `short:"a" help:"Add the zone."`
	Delete    bool     `short:"d" help:"Delete the zone."`
	Zone      string   `arg:"" optional:"" help:"Zone name, or \"reverse\" for the reverse zones' settings."`
	Modifiers []string `arg:"" optional:"" help:"networks=..., peers=..., hidden_primary=..., also_notify=..., zone=NEWNAME."`
}

func (ZonesCmd) Help() string {
	var keys []string
	for _, k := range config.ZoneKeys {
		keys = append(keys, k.Name)
	}
	return `With no zone, the table ZONE, NETWORKS, PEERS, HIDDEN PRIMARY, the reverse zones' settings as the row (ip-reverse-lookup), fitted to $COLUMNS. With a zone, its settings; with modifiers (as for config), they change: ` + strings.Join(keys, ", ") + `, and zone=NEW renames the zone. The reverse zones' settings are the zone reverse (or ip-reverse-lookup), without networks.`
}

func (z ZonesCmd) Run(a *Cmd) error {
	e := a.editor()
	if z.Zone == "" {
		if z.Add || z.Delete {
			return errors.New("zones -a and -d need a zone name")
		}
		cfg, err := e.Store.Load()
		if err != nil {
			return err
		}
		return a.out(cfg.Value("forward_zones"), func(w io.Writer) error { return WriteZones(w, cfg, columns()) })
	}
	mods, err := parseModifiers(z.Modifiers)
	if err != nil {
		return err
	}
	c, cancel := ctx()
	defer cancel()
	zone, err := e.Zone(c, z.Zone, z.Add, z.Delete, mods)
	if IsNothingToDo(err) {
		fmt.Printf("zone %s not added: give its settings, e.g. networks=*\n", z.Zone)
		return nil
	}
	if err != nil {
		return err
	}
	if z.Delete {
		fmt.Printf("zone %s deleted\n", z.Zone)
		return nil
	}
	return a.out(zone, func(w io.Writer) error { return WriteZone(w, z.Zone, zone) })
}

// HistoryCmd is cnsadm history.
type HistoryCmd struct {
	Zone  string `arg:"" help:"Zone name."`
	Since uint32 `help:"Only changes after this serial."`
	Limit int    `default:"20" help:"At most this many changes (newest)."`
}

func (h HistoryCmd) Run(a *Cmd) error {
	c, cancel := ctx()
	defer cancel()
	changes, err := a.client().History(c, h.Zone, h.Since, h.Limit)
	if err != nil {
		return err
	}
	return a.out(changes, func(w io.Writer) error { return WriteHistory(w, changes) })
}

// WaitCmd is cnsadm wait.
type WaitCmd struct {
	Zone    string        `arg:"" help:"Zone name."`
	Serial  uint32        `arg:"" optional:"" help:"Serial (default: the current one)."`
	Timeout time.Duration `default:"60s" help:"Give up after this long."`
}

func (wc WaitCmd) Run(a *Cmd) error {
	c, cancel := context.WithTimeout(context.Background(), wc.Timeout+time.Minute)
	defer cancel()
	res, err := a.client().Wait(c, wc.Zone, wc.Serial, wc.Timeout)
	if err != nil {
		return err
	}
	if err := a.out(res, func(w io.Writer) error { return WriteWait(w, res) }); err != nil {
		return err
	}
	if !res.Done {
		return fmt.Errorf("zone %s serial %d: not every peer has it after %v", res.Zone, res.Serial, wc.Timeout)
	}
	return nil
}

// FeedsCmd is cnsadm feeds, and cnsadm feeds accept [CAUSE].
type FeedsCmd struct {
	Action string `arg:"" optional:"" default:"" enum:",accept" help:"accept: apply the removals the guard on mass removals holds."`
	Cause  string `arg:"" optional:"" default:"" enum:",cn_down,unlisted,owner_off" help:"The cause whose removals to apply (cn_down, unlisted, owner_off; default: every cause)."`
}

func (fc FeedsCmd) Run(a *Cmd) error {
	c, cancel := ctx()
	defer cancel()
	if fc.Action == "accept" {
		n, err := a.client().AcceptRemovals(c, fc.Cause)
		if err != nil {
			return err
		}
		return a.out(admin.RemovalsAccepted{Applied: n}, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "%d VMs' held removals applied\n", n)
			return err
		})
	}
	f, err := a.client().Feeds(c)
	if err != nil {
		return err
	}
	return a.out(f, func(w io.Writer) error { return WriteFeeds(w, f, time.Now()) })
}

// BackupCmd is cnsadm backup.
type BackupCmd struct {
	Out string `arg:"" help:"File to write (- for stdout)."`
}

func (b BackupCmd) Run(a *Cmd) error {
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	var w io.Writer = os.Stdout
	var f *os.File
	if b.Out != "-" {
		var err error
		if f, err = os.OpenFile(b.Out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
			return err
		}
		w = f
	}
	n, err := a.client().Backup(c, w)
	if f != nil {
		if err == nil {
			err = durable.Close(f) // a backup that a power cut can empty is none
		} else {
			f.Close()
		}
		if err != nil {
			os.Remove(b.Out)
		}
	}
	if err != nil {
		return err
	}
	if b.Out != "-" {
		fmt.Fprintf(os.Stderr, "wrote %s (%d bytes)\n", b.Out, n)
	}
	return nil
}

// UpgradeCmd migrates configuration keys of old releases: slaves →
// peers (CNS-46) and hidden_master → hidden_primary (CNS-48). The result
// is validated before it is saved, and a running server reloads it.
type UpgradeCmd struct{}

func (UpgradeCmd) Run(a *Cmd) error {
	e := a.editor()
	cfg, err := e.Store.Load()
	if err != nil {
		return err
	}
	changes := config.Upgrade(cfg)
	if len(changes) == 0 {
		fmt.Fprintln(os.Stderr, "no schema upgrades required") // on stderr, as the reference's
		return nil
	}
	fmt.Println("upgrading configuration past CNS-46...")
	c, cancel := ctx()
	defer cancel()
	return e.Commit(c, cfg, changes)
}

// ServicesCmd is cnsadm services.
type ServicesCmd struct {
	Pending bool   `help:"Only services with members waiting to leave."`
	Owner   string `arg:"" optional:"" help:"Owner UUID or login (with a service name: show that service)."`
	Name    string `arg:"" optional:"" help:"Service name."`
}

func (sc ServicesCmd) Run(a *Cmd) error {
	c, cancel := ctx()
	defer cancel()
	cl := a.client()
	if sc.Owner != "" {
		if sc.Name == "" {
			return errors.New("services OWNER NAME shows one service; give both")
		}
		owner := sc.Owner
		if !dc.IsUUID(owner) {
			// A login, as the services table shows owners: the API
			// names services by owner UUID.
			views, err := cl.Services(c, false)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(views, func(v admin.Service) bool {
				return strings.EqualFold(v.Login, owner) && strings.EqualFold(v.Service, sc.Name)
			})
			if i < 0 {
				return fmt.Errorf("service %s of %s not found (no members, or no owner with that login)", sc.Name, sc.Owner)
			}
			owner = views[i].Owner
		}
		v, err := cl.Service(c, owner, sc.Name)
		if admin.IsNotFound(err) {
			return fmt.Errorf("service %s of %s not found (no members)", sc.Name, sc.Owner)
		}
		if err != nil {
			return err
		}
		return a.out(v, func(w io.Writer) error { return WriteService(w, v, time.Now()) })
	}
	views, err := cl.Services(c, sc.Pending)
	if err != nil {
		return err
	}
	return a.out(views, func(w io.Writer) error { return WriteServices(w, views, time.Now()) })
}
