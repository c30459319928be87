package db

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// Ensure the journal drops the entries an IXFR would not use (the
// difference from their serial to now at least as big as the zone, which
// serve answers with the whole zone), oldest first, and keeps the others,
// whatever their size.
func TestJournalDropsUnusableEntries(t *testing.T) {
	const z = "dc.example.com"
	d, _ := openTest(t, Options{})
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	vm := func(i, addr int) VMChange {
		return VMChange{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Records: []Record{
			rec(t, z, fmt.Sprintf("vm%d.dc.example.com. 30 IN A 10.%d.%d.%d", i, addr, i/256, i%256)),
		}}
	}
	batch := func(from, to, addr int) *ChangeSet {
		cs := &ChangeSet{}
		for i := from; i < to; i++ {
			cs.VMs = append(cs.VMs, vm(i, addr))
		}
		return cs
	}
	mustCommit(t, d, batch(0, 200, 0)) // 200 names, from the empty zone: 202 records ≥ 200
	if zi, _, _ := d.Zone(z); zi.JournalEntries != 0 {
		t.Errorf("a load of the whole zone kept %d journal entries, want 0", zi.JournalEntries)
	}
	var serials []uint32
	for i := range 5 { // small: 4 records each
		serials = append(serials, zoneSerial(t, d, z))
		mustCommit(t, d, batch(i, i+1, 1))
	}
	serials = append(serials, zoneSerial(t, d, z))
	mustCommit(t, d, batch(100, 160, 2)) // 122 records: with the 5 small ones 142 < 200, all kept
	if zi, _, _ := d.Zone(z); zi.JournalEntries != 6 || zi.JournalFrom != serials[0] {
		t.Errorf("after a batch of 60: %d entries from %d, want 6 from %d", zi.JournalEntries, zi.JournalFrom, serials[0])
	}
	before := zoneSerial(t, d, z)
	mustCommit(t, d, batch(100, 160, 3)) // 122 more: from the previous batch 244 ≥ 200
	zi, _, _ := d.Zone(z)
	if zi.JournalEntries != 1 || zi.JournalFrom != before {
		t.Errorf("after a second batch of 60: %d entries from %d, want 1 from %d", zi.JournalEntries, zi.JournalFrom, before)
	}
	if _, ok, _ := d.Journal(z, serials[5]); ok {
		t.Error("an IXFR from before the first batch is still served from the journal")
	}
	if e, ok, err := d.Journal(z, before); !ok || err != nil || len(e) != 1 || len(e[0].Added) != 60 {
		t.Errorf("journal from %d: ok %v err %v, %d entries", before, ok, err, len(e))
	}
	if probs, err := d.Check(); err != nil || len(probs) != 0 {
		t.Errorf("check: %v %v", err, probs)
	}
	for _, c := range []struct {
		records, names int
		want           bool
	}{{63, 0, true}, {64, 64, false}, {64, 65, true}, {1000, 999, false}} {
		if got := IXFRWorthIt(c.records, c.names); got != c.want {
			t.Errorf("IXFRWorthIt(%d, %d) = %v", c.records, c.names, got)
		}
	}
}

// encodeJournalEntryV1 is the encoder of version 1, as it was, to write
// the entries older files hold.
func encodeJournalEntryV1(j *JournalEntry, zone []byte) []byte {
	e := &enc{}
	e.U8(journalV1)
	e.U32(j.From)
	e.U32(j.To)
	e.I64(j.Time.UnixNano())
	e.Str16(j.Cause)
	e.Bytes16(j.SOAFrom)
	e.Bytes16(j.SOATo)
	for _, list := range [][]JournalRR{j.Deleted, j.Added} {
		e.U32(uint32(len(list)))
		for _, r := range list {
			e.Bytes16(relativeWire(r.Owner, zone))
			e.Bytes16(r.RR)
		}
	}
	return e.B
}

// Ensure a journal entry reads back the same from version 1 (older
// files) and version 2, and that version 2 writes the owners a load's
// entries repeat in well under the bytes of version 1.
func TestJournalEntryEncodings(t *testing.T) {
	zone, _ := ZoneWire("dc.example.com")
	soa, _ := EncodeRR(rr(t, "dc.example.com. 30 IN SOA ns. host. 1 30 60 2592000 30"))
	e := JournalEntry{From: 1, To: 2, Time: time.Unix(1700000000, 5).UTC(), Cause: "load", SOAFrom: soa, SOATo: soa}
	owner := "3590efb5-2bb9-4367-9deb-c7c95a154295"
	for i := range 20 {
		vm := fmt.Sprintf("%08d-082d-49e4-a9fd-cd5cb26da7ab", i)
		for _, name := range []string{vm + ".inst." + owner, fmt.Sprintf("web%d.inst.%s", i, owner), "web.svc." + owner} {
			w, _ := wireName(name + ".dc.example.com.")
			for _, s := range []string{"30 IN A 10.0.0.1", `30 IN TXT "` + vm + `"`} {
				r, _ := EncodeRR(rr(t, name+".dc.example.com. "+s))
				e.Added = append(e.Added, JournalRR{Owner: w, RR: r})
			}
		}
	}
	e.Deleted = e.Added[:7]
	v1, v2 := encodeJournalEntryV1(&e, zone), e.encode(zone)
	for _, b := range [][]byte{v1, v2} {
		got, err := decodeJournalEntry(b, zone)
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Errorf("version %d: %v\n%+v", b[0], err, got)
		}
		if n, ok := journalRecords(b); !ok || n != e.ixfrRecords() {
			t.Errorf("version %d: journalRecords %d %v, want %d", b[0], n, ok, e.ixfrRecords())
		}
		if from, to, _, ok := journalHeader(b); !ok || from != 1 || to != 2 {
			t.Errorf("version %d: header %d %d %v", b[0], from, to, ok)
		}
	}
	if len(v2)*10 > len(v1)*6 {
		t.Errorf("version 2 takes %d bytes, version 1 %d: want under 60 %%", len(v2), len(v1))
	}
	t.Logf("version 1: %d bytes, version 2: %d", len(v1), len(v2))
}
