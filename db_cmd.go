package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/admin/cnsadm"
	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/db/durable"
	"github.com/tritondatacenter/cns/feeds"
	"github.com/tritondatacenter/cns/serve"
)

// DBCmd inspects a db file without changing it. The file is opened
// read-only; a file a running server holds is refused with a pointer to
// `cns adm backup`, which gets a consistent copy through the API. Restore
// and compact are the two offline writers: each replaces the file
// atomically and refuses one a running server holds.
type DBCmd struct {
	Path string `name:"db" required:"" type:"path" help:"The db file."`
	JSON bool   `name:"json" help:"Print JSON."`

	Info     DBInfoCmd     `cmd:"" help:"Schema, size and counts."`
	Zones    DBZonesCmd    `cmd:"" help:"List zones: name, serial, record count."`
	Export   DBExportCmd   `cmd:"" help:"Print a zone as RFC 1035 zone text."`
	Journal  DBJournalCmd  `cmd:"" help:"Print a zone's journal: what each serial changed."`
	VM       DBVMCmd       `cmd:"" name:"vm" help:"What the db holds about a VM."`
	Peers    DBPeersCmd    `cmd:"" help:"The peers the server tracked."`
	Services DBServicesCmd `cmd:"" help:"Services' self-removal hysteresis state."`
	Check    DBCheckCmd    `cmd:"" help:"Verify the file: journals replay to the stored zones, serials increase, no orphans."`
	Backup   DBBackupCmd   `cmd:"" help:"Write a consistent copy of the file."`
	Restore  DBRestoreCmd  `cmd:"" help:"Install a backup as the db (offline), marked so that cns serve moves its serials past the secondaries' before announcing any."`
	Compact  DBCompactCmd  `cmd:"" help:"Rewrite the file without its free pages (offline; after the data center shrank)."`
}

// openDBModel opens a db file, read-only, as the offline read model (cns
// db, cns tui --db, cnsadm tui --db); the peers in it are in the DNS
// server's stored form.
func openDBModel(path string) (*admin.DBModel, error) {
	return admin.OpenDB(path, serve.StoredPeerStatus)
}

// open opens the file read-only.
func (c *DBCmd) open() (*db.DB, error) {
	return db.Open(c.Path, db.Options{ReadOnly: true})
}

// print writes v as JSON with --json, else calls text with a buffered
// stdout.
func (c *DBCmd) print(v any, text func(io.Writer) error) error {
	w := bufio.NewWriter(os.Stdout)
	var err error
	if c.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(v)
	} else {
		err = text(w)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// DBInfoCmd describes the file.
type DBInfoCmd struct {
	Space bool `help:"Also the bytes each bucket's pages take, per VM (reads the whole file)."`
}

func (cmd DBInfoCmd) Run(c *DBCmd) error {
	store, err := c.open()
	if err != nil {
		return err
	}
	defer store.Close()
	fi, err := os.Stat(c.Path)
	if err != nil {
		return err
	}
	zones, err := store.Zones()
	if err != nil {
		return err
	}
	vms, servers := 0, 0
	if err := store.EachVM(func(_ string, meta []byte) error {
		if m, err := feeds.DecodeVMMeta(meta); err == nil && m.ComputeNode {
			servers++ // a compute node's CMON names
		} else {
			vms++
		}
		return nil
	}); err != nil {
		return err
	}
	peers, err := store.Peers()
	if err != nil {
		return err
	}
	// A restored or recreated file's serials may be behind what the
	// secondaries hold; cns serve checks them at its next start.
	unverified, err := store.SerialsUnverified()
	if err != nil {
		return err
	}
	serials := "verified"
	if unverified != "" {
		serials = "unverified (" + unverified + "): cns serve asks the secondaries at its next start"
	}
	info := struct {
		File    string `json:"file"`
		Bytes   int64  `json:"bytes"`
		Schema  int    `json:"schema"`
		Zones   int    `json:"zones"`
		Names   int    `json:"names"`
		Records int    `json:"records"`
		VMs     int    `json:"vms"`
		Servers int    `json:"servers"`
		Peers   int    `json:"peers"`
		Serials string `json:"serials"`
		// With --space: the end of the last page, and each bucket's pages.
		HighWater int64            `json:"high_water,omitempty"`
		Buckets   []db.BucketSpace `json:"buckets,omitempty"`
	}{File: c.Path, Bytes: fi.Size(), Schema: store.Schema(), Zones: len(zones), VMs: vms, Servers: servers, Peers: len(peers), Serials: serials}
	for _, z := range zones {
		info.Names += z.Names
		info.Records += z.Records
	}
	if cmd.Space {
		if info.Buckets, info.HighWater, err = store.Space(); err != nil {
			return err
		}
	}
	return c.print(info, func(w io.Writer) error {
		fmt.Fprintf(w, "file:    %s (%d bytes)\nschema:  %d\nzones:   %d\nnames:   %d\nrecords: %d\nvms:     %d\nservers: %d\npeers:   %d\nserials: %s\n",
			info.File, info.Bytes, info.Schema, info.Zones, info.Names, info.Records, info.VMs, info.Servers, info.Peers, info.Serials)
		if cmd.Space {
			printSpace(w, info.Bytes, info.HighWater, info.Buckets, vms+servers)
		}
		return nil
	})
}

// printSpace shows where the file's bytes are, per VM entry.
func printSpace(w io.Writer, file, highWater int64, buckets []db.BucketSpace, vms int) {
	perVM := func(n int64) int64 { return n / int64(max(vms, 1)) }
	fmt.Fprintf(w, "space:   %-56s %12s %12s %5s %8s\n", "BUCKET", "BYTES", "IN USE", "FILL", "B/VM")
	var taken int64
	for _, b := range buckets {
		taken += b.Bytes
		fill := 0
		if b.Bytes > 0 {
			fill = int(100 * b.InUse / b.Bytes)
		}
		fmt.Fprintf(w, "         %-56s %12d %12d %4d%% %8d\n", b.Name, b.Bytes, b.InUse, fill, perVM(b.Bytes))
	}
	fmt.Fprintf(w, "         %-56s %12d %12s %5s %8d\n", "(free pages, meta, freelist)", highWater-taken, "", "", perVM(highWater-taken))
	fmt.Fprintf(w, "         %-56s %12d %12s %5s %8d\n", "(past the last page)", file-highWater, "", "", perVM(file-highWater))
	fmt.Fprintf(w, "         %-56s %12d %12s %5s %8d\n", "file", file, "", "", perVM(file))
}

// DBZonesCmd lists zones.
type DBZonesCmd struct{}

func (DBZonesCmd) Run(c *DBCmd) error {
	store, err := c.open()
	if err != nil {
		return err
	}
	defer store.Close()
	zones, err := store.Zones()
	if err != nil {
		return err
	}
	return c.print(zones, func(w io.Writer) error {
		for _, z := range zones {
			fmt.Fprintf(w, "%s %d %d\n", z.Name, z.Serial, z.Records)
		}
		return nil
	})
}

// DBExportCmd prints a zone.
type DBExportCmd struct {
	Zone string `arg:"" help:"Zone name."`
}

func (e DBExportCmd) Run(c *DBCmd) error {
	store, err := c.open()
	if err != nil {
		return err
	}
	defer store.Close()
	w := bufio.NewWriter(os.Stdout)
	if err := exportZone(w, store, strings.ToLower(strings.TrimSuffix(e.Zone, "."))); err != nil {
		return err
	}
	return w.Flush()
}

// exportZone writes zone as zone text: SOA, NS, then every name in store
// order (a parent before its descendants).
func exportZone(w io.Writer, store *db.DB, zone string) error {
	zi, ok, err := store.Zone(zone)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("zone %s is not in %s", zone, store.Path())
	}
	fmt.Fprintf(w, "; zone %s serial %d, exported by %s\n", zi.Name, zi.Serial, versionString())
	fmt.Fprintln(w, zi.Apex.SOA(zone, zi.Serial).String())
	for _, ns := range zi.Apex.NSRecords(zone) {
		fmt.Fprintln(w, ns.String())
	}
	return store.ScanZone(zone, func(owner []byte, rrs db.RRs) error {
		list, err := rrs.ToRR(db.WireToString(owner))
		if err != nil {
			return err
		}
		for _, rr := range list {
			if _, err := fmt.Fprintln(w, rr.String()); err != nil {
				return err
			}
		}
		return nil
	})
}

// DBJournalCmd prints a zone's journal.
type DBJournalCmd struct {
	Zone  string `arg:"" help:"Zone name."`
	Since uint32 `help:"Only entries after this serial."`
}

func (j DBJournalCmd) Run(c *DBCmd) error {
	store, err := c.open()
	if err != nil {
		return err
	}
	defer store.Close()
	entries, err := store.History(strings.ToLower(strings.TrimSuffix(j.Zone, ".")), j.Since, 0)
	if err != nil {
		return err
	}
	changes := make([]admin.Change, 0, len(entries))
	for _, e := range entries {
		changes = append(changes, admin.ChangeJSON(e))
	}
	return c.print(changes, func(w io.Writer) error { return cnsadm.WriteHistory(w, changes) })
}

// DBVMCmd prints what the db holds about a VM.
type DBVMCmd struct {
	UUID string `arg:"" help:"VM UUID."`
}

func (v DBVMCmd) Run(c *DBCmd) error {
	store, err := c.open()
	if err != nil {
		return err
	}
	defer store.Close()
	vm, ok, err := store.VM(v.UUID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("VM %s is not in %s", v.UUID, c.Path)
	}
	out := admin.VMJSON(vm, nil)
	return c.print(out, func(w io.Writer) error {
		if err := cnsadm.WriteVM(w, &out, time.Now()); err != nil {
			return err
		}
		fmt.Fprintln(w, "records:")
		for _, r := range out.Records {
			fmt.Fprintf(w, "    %s\n", r)
		}
		return nil
	})
}

// DBPeersCmd prints the stored peer state, as the read model (and the
// API) shows it: with each zone's drift against the stored serial.
type DBPeersCmd struct{}

func (DBPeersCmd) Run(c *DBCmd) error {
	model, err := openDBModel(c.Path)
	if err != nil {
		return err
	}
	defer model.Close()
	peers, err := model.Peers(context.Background())
	if err != nil {
		return err
	}
	return c.print(peers, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "PEER\tZONE\tSERIAL\tLAST TRANSFER\tAXFR\tIXFR\tVERSION")
		for _, p := range peers {
			for _, z := range slices.Sorted(maps.Keys(p.Zones)) {
				pz := p.Zones[z]
				last := ""
				if !pz.LastTransfer.IsZero() {
					last = pz.LastTransfer.UTC().Format(time.RFC3339) + " " + pz.LastKind
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%s\n", p.Address, z, pz.Serial, last, pz.AXFR, pz.IXFR, p.Version)
			}
		}
		return tw.Flush()
	})
}

// DBCheckCmd verifies a db file.
type DBCheckCmd struct{}

func (DBCheckCmd) Run(c *DBCmd) error {
	store, err := c.open()
	if err != nil {
		return err
	}
	defer store.Close()
	probs, err := store.Check()
	if err != nil {
		return err
	}
	for _, p := range probs {
		fmt.Println(p)
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s: %d problems", c.Path, len(probs))
	}
	zones, err := store.Zones()
	if err != nil {
		return err
	}
	fmt.Printf("ok: %d zones consistent\n", len(zones))
	return nil
}

// DBBackupCmd copies the file consistently.
type DBBackupCmd struct {
	Out string `arg:"" help:"File to write (must not exist)."`
}

func (b DBBackupCmd) Run(c *DBCmd) error {
	store, err := c.open()
	if err != nil {
		return err
	}
	defer store.Close()
	f, err := os.OpenFile(b.Out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	n, err := store.Backup(f)
	if err == nil {
		err = durable.Close(f) // a backup that a power cut can empty is none
	} else {
		f.Close()
	}
	if err != nil {
		os.Remove(b.Out)
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s (%d bytes)\n", b.Out, n)
	return nil
}

// DBServicesCmd prints the stored hysteresis state of every service.
type DBServicesCmd struct{}

func (DBServicesCmd) Run(c *DBCmd) error {
	model, err := openDBModel(c.Path)
	if err != nil {
		return err
	}
	defer model.Close()
	now := time.Now()
	model.Now = func() time.Time { return now }
	views, err := model.Services(context.Background())
	if err != nil {
		return err
	}
	return c.print(views, func(w io.Writer) error { return cnsadm.WriteServices(w, views, now) })
}

// DBRestoreCmd installs a backup.
type DBRestoreCmd struct {
	Backup string `arg:"" type:"existingfile" help:"The backup (from cns adm backup or cns db backup)."`
}

func (r DBRestoreCmd) Run(c *DBCmd) error {
	if err := db.Restore(r.Backup, c.Path); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "restored %s from %s; at its next start cns serve asks the secondaries for their serials and continues above them\n", c.Path, r.Backup)
	return nil
}

// DBCompactCmd compacts the file.
type DBCompactCmd struct{}

func (DBCompactCmd) Run(c *DBCmd) error {
	res, err := db.Compact(c.Path)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "compacted %s: %d -> %d bytes; the copy passed cns db check\n", c.Path, res.Before, res.After)
	return nil
}
