package admin

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
	"github.com/tritondatacenter/cns/feeds"
)

// GET /vm/:uuid lists names as the reference does, which CloudAPI shows
// as dns_names: zone by zone in configuration order, in a zone the
// instance names then the service names, each in the reference's making
// order (lib/vm-to-zones.js): UUID before alias, owner UUID before login,
// a name before its network-name variant; whatever order the store gives.
func TestVMNamesInReferenceOrder(t *testing.T) {
	const (
		vmUUID = "a1000000-0000-4000-8000-000000000001"
		owner  = "6c96670e-4204-4bc0-bd64-b4c576c09876"
	)
	meta, _ := json.Marshal(feeds.VMMeta{UUID: vmUUID, Alias: "db-1", Owner: owner, Login: "alice",
		ListInstance: true, ListServices: true, Services: []string{"web", "db"}})
	// Forward zones: b.example first in the configuration.
	forward := []string{"b.example", "a.example"}
	in := func(zone string) []string {
		return []string{
			vmUUID + ".inst." + owner + "." + zone,
			"mynet." + vmUUID + ".inst." + owner + "." + zone,
			vmUUID + ".inst.alice." + zone,
			"mynet." + vmUUID + ".inst.alice." + zone,
			"db-1.inst." + owner + "." + zone,
			"mynet.db-1.inst." + owner + "." + zone,
			"db-1.inst.alice." + zone,
			"mynet.db-1.inst.alice." + zone,
			"web.svc." + owner + "." + zone,
			"web." + zone, // an admin-owned service's bare name
			"mynet.web.svc." + owner + "." + zone,
			"web.svc.alice." + zone,
			"db.svc." + owner + "." + zone,
			"db.svc.alice." + zone,
		}
	}
	want := append(in("b.example"), in("a.example")...)
	var recs []db.VMRecord
	for _, zone := range forward {
		for _, name := range in(zone) {
			rr, err := dns.NewRR(name + ` 30 IN TXT "` + vmUUID + `"`)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, db.VMRecord{Zone: zone, Owner: name + ".", RRs: []dns.RR{rr}})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
		got := VMJSON(db.VM{UUID: vmUUID, Meta: meta, Records: recs}, forward).Names
		if !slices.Equal(got, want) {
			t.Fatalf("names:\n%q\nwant\n%q", got, want)
		}
	}
	// Without the configuration (a db file read offline), zones by name.
	got := VMJSON(db.VM{UUID: vmUUID, Meta: meta, Records: recs}, nil).Names
	if !slices.Equal(got, append(in("a.example"), in("b.example")...)) {
		t.Errorf("offline names:\n%q", got)
	}
}
