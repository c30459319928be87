package feeds

import (
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds/records"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
)

// referenceChangeHash is the hash as stores hold it: each record packed on
// its own in 512 octets, as text when it does not fit. vmChange hashes the
// records as PrepareRecords packs them, and must come to the same: a
// different hash rewrites every VM at the next start.
func referenceChangeHash(meta []byte, recs []db.Record, client *db.Client) uint64 {
	h := fnv.New64a()
	h.Write(meta)
	buf := make([]byte, 512)
	for _, r := range recs {
		h.Write([]byte(r.Zone))
		h.Write([]byte{0, r.Pref})
		if r.Stamp != 0 {
			h.Write(binary.BigEndian.AppendUint64(nil, r.Stamp))
		}
		if n, err := dns.PackRR(r.RR, buf, 0, nil, false); err == nil {
			h.Write(buf[:n])
		} else {
			h.Write([]byte(r.RR.String()))
		}
	}
	if client != nil {
		h.Write([]byte("\x00client\x00" + client.Owner))
		for _, a := range client.Addrs {
			h.Write([]byte(a.Addr.String() + " " + a.Fabric.String()))
		}
		h.Write([]byte(strings.Join(client.Zones, " ")))
	}
	return h.Sum64() | 1
}

func TestChangeHashAsStored(t *testing.T) {
	store, err := db.Open(filepath.Join(t.TempDir(), "cns.db"), db.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	u, err := NewUpdater(store, Options{Records: records.Config{Zones: []records.Zone{{Name: "dc.example.com", Networks: []string{"*"}}}},
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return time.Unix(1e9, 0) }})
	if err != nil {
		t.Fatal(err)
	}

	// Every VM of a generated data center.
	inv := sdcsim.Generate(sdcsim.GenerateOptions{VMs: 300, Seed: 5})
	u.SetInventory(inv, "test")
	n := 0
	for uuid := range u.vms {
		vc, ok, _ := u.change(uuid)
		if !ok || vc.RecordCount() == 0 {
			continue
		}
		n++
		meta, err := vc.StoredMeta()
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeVMMeta(meta)
		if err != nil {
			t.Fatal(err)
		}
		m.Updated = time.Time{}
		timeless, _ := json.Marshal(m)
		for _, r := range vc.Records {
			if r.RR != nil {
				t.Fatalf("vm %s: record %s kept its RR once prepared", uuid, r.RR)
			}
		}
		want := referenceChangeHash(timeless, computedRecords(t, u, uuid), vc.Client)
		if vc.Hash != want {
			t.Fatalf("vm %s: hash %x, stored hashes say %x", uuid, vc.Hash, want)
		}
		// Stored with another hash: hashed before it is prepared, to the
		// same; stored with this one: found unchanged without preparing.
		u.hashes[uuid] = 7
		if again, _, _ := u.change(uuid); again.Hash != want || again.RecordCount() != vc.RecordCount() || stored(t, &again) == nil {
			t.Fatalf("vm %s stored with another hash: hash %x (want %x), %d records (want %d)", uuid, again.Hash, want, again.RecordCount(), vc.RecordCount())
		}
		u.hashes[uuid] = want
		if same, _, _ := u.change(uuid); same.Hash != want || same.RecordCount() != 0 || stored(t, &same) != nil {
			t.Fatalf("vm %s stored as computed: hash %x (want %x), %d records prepared", uuid, same.Hash, want, same.RecordCount())
		}
		delete(u.hashes, uuid)
	}
	if n < 100 {
		t.Fatalf("only %d VMs with records", n)
	}

	// Records that do not pack, do not fit 512 octets, or are outside
	// any zone, with stamps and a client.
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	long := &dns.TXT{Hdr: dns.RR_Header{Name: "big.dc.example.com.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 30},
		Txt: []string{strings.Repeat("x", 250), strings.Repeat("y", 250), strings.Repeat("z", 100)}}
	unpackable := &dns.A{Hdr: dns.RR_Header{Name: "no-dot.dc.example.com", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}}
	recs := []db.Record{
		{Zone: "dc.example.com", RR: rr("Mixed.DC.example.com. 30 IN A 10.0.0.1"), Pref: 1},
		{Zone: "dc.example.com", RR: long, Stamp: 77},
		{Zone: "dc.example.com", RR: unpackable},
		{Zone: "other.example", RR: rr("a.dc.example.com. 30 IN CNAME b.dc.example.com.")},
		{Zone: "bad..zone", RR: rr("x.example. 30 IN TXT \"t\"")},
		{Zone: "10.in-addr.arpa", RR: rr("1.0.0.10.in-addr.arpa. 30 IN PTR Mixed.DC.example.com."), Pref: 2},
	}
	client := &db.Client{Owner: "o", Addrs: []db.ClientAddr{{Addr: netip.MustParseAddr("10.0.0.1")}}, Zones: []string{"dc.example.com"}}
	const id = "5e1f0000-0000-4000-8000-000000000001"
	for _, c := range []*db.Client{nil, client} {
		want := referenceChangeHash([]byte(mustJSON(t, &VMMeta{State: "running"})), recs, c)
		for _, stored := range []map[string]uint64{nil, {id: 7}, {id: want}} {
			got := (&Updater{now: time.Now, hashes: stored}).vmChange(id, &VMMeta{State: "running"},
				&records.Result{Records: toResult(recs)}, c)
			if got.Hash != want {
				t.Errorf("client %v, stored %x: hash %x, stored hashes say %x", c != nil, stored[id], got.Hash, want)
			}
		}
	}
}

// stored is the meta vc stores.
func stored(t *testing.T, vc *db.VMChange) []byte {
	t.Helper()
	meta, err := vc.StoredMeta()
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// computedRecords are the records change computes for uuid, before
// PrepareRecords encodes them and lets go of their RRs.
func computedRecords(t *testing.T, u *Updater, uuid string) []db.Record {
	t.Helper()
	vm, err := u.vms[uuid].vm()
	if err != nil {
		t.Fatal(err)
	}
	in := records.Input{VM: vm, Owner: u.users[vm.OwnerUUID], CNDown: u.servers[vm.ServerUUID] != nil && u.servers[vm.ServerUUID].down}
	d := records.Decide(&u.cfg, in)
	res := u.computeListing(&d, in, nil)
	recs := make([]db.Record, 0, len(res.Records))
	for _, r := range res.Records {
		recs = append(recs, storedRecord(r))
	}
	return recs
}

func toResult(recs []db.Record) []records.Record {
	out := make([]records.Record, len(recs))
	for i, r := range recs {
		out[i] = records.Record{Zone: r.Zone, RR: r.RR, Pref: r.Pref, Stamp: r.Stamp}
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
