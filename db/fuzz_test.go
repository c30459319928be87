package db

import (
	"bytes"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The decoders of what the store holds take any bytes without panicking:
// a damaged file gives errors (which `cns db check` reports), never a
// crash. What they accept encodes back to the same value.

func fuzzRR(t testing.TB, s string) []byte {
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeRR(rr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzCandidates(f *testing.F) {
	vm := [16]byte{1, 2, 3}
	a := fuzzRR(f, "x.example.com. 30 IN A 10.0.0.1")
	ptr := fuzzRR(f, "1.0.0.10.in-addr.arpa. 30 IN PTR x.example.com.")
	txt := fuzzRR(f, `x.example.com. 30 IN TXT "hello"`)
	f.Add(encodeCandidates(nil))
	f.Add(encodeCandidates([]candidate{{vm: vm, pref: 1, rr: a}}))
	f.Add(encodeCandidates([]candidate{{vm: vm, pref: 0, rr: ptr}, {vm: [16]byte{9}, pref: 1, rr: ptr}}))
	f.Add(encodeCandidates([]candidate{{vm: vm, pref: 1, stamp: 42, rr: txt}, {vm: vm, rr: a}}))
	f.Add(encodeCandidates([]candidate{{vm: vm, rr: a}})[:20])
	policy := publishPolicy{maxRRset: 3}
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := decodeCandidates(b)
		if err != nil {
			return
		}
		again, err := decodeCandidates(encodeCandidates(cs))
		if err != nil {
			t.Fatalf("re-encoded candidates do not decode: %v", err)
		}
		if len(again) != len(cs) {
			t.Fatalf("%d candidates became %d", len(cs), len(again))
		}
		for i := range cs {
			if again[i].vm != cs[i].vm || again[i].pref != cs[i].pref || again[i].stamp != cs[i].stamp || !bytes.Equal(again[i].rr, cs[i].rr) {
				t.Fatalf("candidate %d: %+v became %+v", i, cs[i], again[i])
			}
		}
		rrs, _ := policy.publish(cs)
		rrs.Each(func(rr []byte) { DecodeRR([]byte{1, 'x', 0}, rr) })
		disagreements(cs)
	})
}

func FuzzJournalEntry(f *testing.F) {
	zone, _ := ZoneWire("dc.example.com")
	owner, _ := wireName("web.inst.dc.example.com.")
	a := fuzzRR(f, "x.example.com. 30 IN A 10.0.0.1")
	soa := fuzzRR(f, "dc.example.com. 30 IN SOA ns. host. 1 30 60 2592000 30")
	e := JournalEntry{From: 1, To: 2, Time: time.Unix(1700000000, 5).UTC(), Cause: "vm changed", SOAFrom: soa, SOATo: soa,
		Deleted: []JournalRR{{Owner: owner, RR: a}}, Added: []JournalRR{{Owner: zone, RR: a}, {Owner: owner, RR: a}}}
	f.Add(e.encode(zone))
	f.Add((&JournalEntry{}).encode(zone))
	f.Add(e.encode(zone)[:30])
	f.Add(encodeJournalEntryV1(&e, zone))
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := decodeJournalEntry(b, zone)
		from, to, tm, ok := journalHeader(b)
		if err != nil {
			return
		}
		if !ok || from != j.From || to != j.To || !tm.Equal(j.Time) {
			t.Fatalf("header %d %d %v %v, entry %d %d %v", from, to, tm, ok, j.From, j.To, j.Time)
		}
		// An entry of the current encoding re-encodes to its bytes; one
		// of version 1 (written before) reads back the same from today's.
		if got := j.encode(zone); b[0] != journalV1 && !bytes.Equal(got, b) {
			t.Fatalf("entry re-encodes differently:\n%x\n%x", b, got)
		} else if again, err := decodeJournalEntry(got, zone); err != nil || !reflect.DeepEqual(again, j) {
			t.Fatalf("entry does not survive a round trip (%v):\n%+v\n%+v", err, j, again)
		}
		for _, list := range [][]JournalRR{j.Deleted, j.Added} {
			for _, r := range list {
				rrString(r)
				WireToString(r.Owner)
			}
		}
	})
}

func FuzzZoneMeta(f *testing.F) {
	m := zoneMeta{Serial: 7, LastChange: time.Unix(1700000000, 0).UTC(), Names: 3, Records: 9, NextSeq: 4, JEntries: 2, JBytes: 300,
		Apex: Apex{MName: "ns1.", RName: "h.", Refresh: 30, Retry: 60, Expire: 99, Minimum: 30, SOATTL: 30, NSTTL: 3600, NS: []string{"ns1.", "ns2."}}}
	f.Add(m.encode())
	f.Add((&zoneMeta{}).encode())
	zc := ZoneConfig{Forward: map[string]Apex{"a.example": m.Apex}, Reverse: m.Apex, Catalog: &CatalogConfig{Name: "cat.example", Apex: m.Apex}}
	f.Add(zc.encode())
	v := vmEntry{meta: []byte("meta"), names: []vmName{{zone: "a.example", key: []byte{1, 'x'}}, {zone: "b.example", key: []byte{0}}}}
	f.Add(v.encode(fuzzVM))
	f.Add(encodeVMEntryV2(&v))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := decodeZoneMeta(b); err == nil {
			if got := m.encode(); !bytes.Equal(got, b) {
				t.Fatalf("zone meta re-encodes differently:\n%x\n%x", b, got)
			}
			m.Apex.SOA("a.example", m.Serial)
			m.Apex.nsRRs("a.example")
		}
		// Every field survives a round trip: the whole value compares
		// equal after encode and decode.
		if c, err := decodeZoneConfig(b); err == nil {
			again, err := decodeZoneConfig(c.encode())
			if err != nil || !reflect.DeepEqual(again, c) {
				t.Fatalf("zone config does not survive a round trip (%v):\n%+v\n%+v", err, c, again)
			}
		}
		// A schema-1 entry whose keys are labels (as every stored key is)
		// reads back the same after the upgrade's re-encoding.
		if e, err := decodeVMEntry(fuzzVM, b); err == nil && allLabels(e) {
			// encode groups names by zone, so compare them as sets.
			again, err := decodeVMEntry(fuzzVM, e.encode(fuzzVM))
			if err != nil || !bytes.Equal(again.meta, e.meta) || !slices.Equal(vmNameSet(again), vmNameSet(e)) {
				t.Fatalf("vm entry does not survive a round trip (%v):\n%+v\n%+v", err, e, again)
			}
		}
	})
}

// vmNameSet is a VM entry's names as sorted "zone key" strings.
func vmNameSet(e vmEntry) []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, n.zone+" "+string(n.key))
	}
	slices.Sort(out)
	return out
}

// FuzzNameKey: store keys and wire names convert both ways; a damaged key
// never panics.
func FuzzNameKey(f *testing.F) {
	zone, _ := ZoneWire("dc.example.com")
	owner, _ := wireName("web.inst.dc.example.com.")
	f.Add(owner)
	f.Add([]byte{3, 'w', 'e', 'b', 9})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		WireToString(keyToWire(b, zone))
		name := append(append([]byte(nil), b...), zone...)
		if key, ok := relativeKey(name, zone); ok {
			if got := keyToWire(key, zone); !bytes.Equal(got, name) {
				t.Fatalf("%x: key %x gives back %x", name, key, got)
			}
		}
	})
}
