package db

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Check verifies that the store is consistent and returns every problem
// it finds (none: the store is sound):
//   - every zone's counters match its names;
//   - its journal is a chain of increasing serials ending at the zone's
//     serial, and undoing it entry by entry, newest first, is possible: every
//     record an entry added is there to remove and every record it deleted
//     is absent, so an IXFR from any retained serial rebuilds the zone;
//   - VMs and the names they feed point at each other (no orphans).
func (d *DB) Check() ([]string, error) {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	err := d.view(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			add("bbolt: %v", err)
		}
		zones := tx.Bucket(bucketZones)
		// vmNames[zone][key] = VMs whose candidates are there.
		fed := map[string]map[string]map[[16]byte]bool{}
		err := zones.ForEachBucket(func(k []byte) error {
			zone := string(k)
			feeds, err := d.checkZone(zones.Bucket(k), zone, add)
			fed[zone] = feeds
			return err
		})
		if err != nil {
			return err
		}
		// Every VM has a hash entry that locates it, and every hash entry
		// a VM.
		if hb := tx.Bucket(bucketVMHashes); hb != nil {
			hb.ForEach(func(k, v []byte) error {
				id, err := parseUUID(string(k))
				if err != nil {
					add("hash entry %q: %v", k, err)
					return nil
				}
				if tx.Bucket(bucketVMs).Get(vmEntryKey(k, id, v)) == nil {
					add("hash of vm %s, which is not stored where it says", k)
				}
				return nil
			})
			tx.Bucket(bucketVMs).ForEach(func(k, _ []byte) error {
				id, err := vmKeyID(k)
				if err != nil {
					return nil // reported below
				}
				uuid := []byte(formatUUID(id))
				if v := hb.Get(uuid); v == nil || !bytes.Equal(vmEntryKey(uuid, id, v), k) {
					add("vm %s has no hash entry that locates it", uuid)
				}
				return nil
			})
		}
		// Every VM entry's names carry its candidates, and every candidate
		// belongs to a VM entry that lists the name.
		listed := map[string]map[string]map[[16]byte]bool{}
		err = tx.Bucket(bucketVMs).ForEach(func(k, v []byte) error {
			id, err := vmKeyID(k)
			if err != nil {
				add("%v", err)
				return nil
			}
			uuid := formatUUID(id)
			e, err := decodeVMEntry(id, v)
			if err != nil {
				add("vm %s: %v", uuid, err)
				return nil
			}
			for _, n := range e.names {
				if listed[n.zone] == nil {
					listed[n.zone] = map[string]map[[16]byte]bool{}
				}
				if listed[n.zone][string(n.key)] == nil {
					listed[n.zone][string(n.key)] = map[[16]byte]bool{}
				}
				listed[n.zone][string(n.key)][id] = true
				if fed[n.zone] == nil {
					continue // the zone is gone; the entry is cleaned on the VM's next change
				}
				if !fed[n.zone][string(n.key)][id] {
					add("vm %s lists name %x in zone %s but has no records there", uuid, n.key, n.zone)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, zone := range slices.Sorted(maps.Keys(fed)) {
			for key, vms := range fed[zone] {
				for id := range vms {
					if id != catalogVM && !listed[zone][key][id] {
						add("zone %s name %x has records of vm %s, which does not list it", zone, key, formatUUID(id))
					}
				}
			}
		}
		return nil
	})
	return probs, err
}

// checkZone checks one zone and returns which VMs feed which names.
func (d *DB) checkZone(b *bolt.Bucket, zone string, add func(string, ...any)) (map[string]map[[16]byte]bool, error) {
	feeds := map[string]map[[16]byte]bool{}
	wire, err := ZoneWire(zone)
	if err != nil {
		add("zone %q: bad name: %v", zone, err)
		return feeds, nil
	}
	m, err := decodeZoneMeta(b.Get(keyZoneMeta))
	if err != nil {
		add("zone %s: %v", zone, err)
		return feeds, nil
	}
	// The served records, apex NS included, as owner+record keys.
	served := map[string]bool{}
	names, records := 0, 0
	err = b.Bucket(bucketNames).ForEach(func(k, v []byte) error {
		cands, err := decodeCandidates(v)
		if err != nil {
			add("zone %s name %x: %v", zone, k, err)
			return nil
		}
		if len(cands) == 0 {
			add("zone %s name %x: stored without records", zone, k)
		}
		feeds[string(k)] = map[[16]byte]bool{}
		for _, c := range cands {
			feeds[string(k)][c.vm] = true
		}
		rrs, _ := d.policy.publish(cands)
		if len(rrs) == 0 {
			return nil
		}
		names++
		owner := keyToWire(k, wire)
		rrs.Each(func(rr []byte) {
			records++
			served[string(owner)+string(rr)] = true
		})
		return nil
	})
	if err != nil {
		return feeds, err
	}
	if uint32(names) != m.Names || uint32(records) != m.Records {
		add("zone %s: meta says %d names %d records, found %d and %d", zone, m.Names, m.Records, names, records)
	}
	ns, err := m.Apex.nsRRs(zone)
	if err != nil {
		add("zone %s: apex: %v", zone, err)
	}
	ns.Each(func(rr []byte) { served[string(wire)+string(rr)] = true })

	// Walk the journal newest first, undoing each entry.
	var entries []JournalEntry
	var jbytes uint64
	err = b.Bucket(bucketJournal).ForEach(func(k, v []byte) error {
		e, err := decodeJournalEntry(v, wire)
		if err != nil {
			add("zone %s journal %x: %v", zone, k, err)
			return nil
		}
		jbytes += uint64(len(v))
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return feeds, err
	}
	if uint32(len(entries)) != m.JEntries || jbytes != m.JBytes {
		add("zone %s: meta says %d journal entries (%d bytes), found %d (%d bytes)", zone, m.JEntries, m.JBytes, len(entries), jbytes)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		want := m.Serial
		if i < len(entries)-1 {
			want = entries[i+1].From
		}
		if e.To != want {
			add("zone %s: journal entry %d→%d does not lead to %d", zone, e.From, e.To, want)
		}
		if !SerialLess(e.From, e.To) {
			add("zone %s: journal entry %d→%d does not increase the serial", zone, e.From, e.To)
		}
		for _, r := range e.Added {
			k := string(r.Owner) + string(r.RR)
			if !served[k] {
				add("zone %s: serial %d added %s %s, which is not there to undo", zone, e.To, WireToString(r.Owner), rrString(r))
			}
			delete(served, k)
		}
		for _, r := range e.Deleted {
			k := string(r.Owner) + string(r.RR)
			if served[k] {
				add("zone %s: serial %d deleted %s %s, which is present", zone, e.To, WireToString(r.Owner), rrString(r))
			}
			served[k] = true
		}
	}
	return feeds, nil
}

func rrString(r JournalRR) string {
	x, err := DecodeRR(r.Owner, r.RR)
	if err != nil {
		return err.Error()
	}
	return x.String()
}
