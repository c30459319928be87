package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tritondatacenter/cns/db"
)

// DBCmd inspects a db file without changing it.
type DBCmd struct {
	Path string `name:"db" required:"" type:"existingfile" help:"The db file."`

	Zones  DBZonesCmd  `cmd:"" help:"List zones: name, serial, record count."`
	Export DBExportCmd `cmd:"" help:"Print a zone as RFC 1035 zone text."`
	Check  DBCheckCmd  `cmd:"" help:"Verify the file: journals replay to the stored zones, serials increase, no orphans."`
}

// open opens the file read-only.
func (c *DBCmd) open() (*db.DB, error) {
	return db.Open(c.Path, db.Options{ReadOnly: true})
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
	for _, z := range zones {
		fmt.Printf("%s %d %d\n", z.Name, z.Serial, z.Records)
	}
	return nil
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
