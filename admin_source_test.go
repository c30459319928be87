package main

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/serve"
)

// zeroFields lists the exported fields of struct v that are zero, but for
// skip.
func zeroFields(v any, skip ...string) []string {
	var out []string
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		if f.IsExported() && rv.Field(i).IsZero() && !slices.Contains(skip, f.Name) {
			out = append(out, f.Name)
		}
	}
	return out
}

// The conversions from serve's types carry every field the API shows:
// a field of the API left zero by them would be silently missing.
func TestAPIConversionsCarryEveryField(t *testing.T) {
	at := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	prop := apiPropagation(serve.Propagation{Zone: "z.example", Serial: 7, State: serve.StateError, Committed: at,
		Peers: []serve.PeerPropagation{{Address: "192.0.2.1", Serial: 6, SignerSerial: 9, State: serve.StateError, Error: "ahead of cns", Seconds: 1.5, Polls: 20,
			Target: netip.MustParseAddrPort("192.0.2.1:53")}}})
	if z := zeroFields(prop); len(z) > 0 {
		t.Errorf("propagation: %v are zero", z)
	}
	if z := zeroFields(prop.Peers[0]); len(z) > 0 {
		t.Errorf("peer propagation: %v are zero", z)
	}

	stored, err := json.Marshal(serve.Peer{Address: "192.0.2.1", Version: "9.18.28", NotifyFailures: 2,
		Counters: map[string]uint64{"axfr": 1, "ixfr": 3},
		Zones: map[string]*serve.PeerZone{"z.example": {Serial: 6, LastTransfer: at, LastKind: "IXFR", AXFR: 1, IXFR: 3,
			NotifySerial: 7, NotifySent: at, NotifyAcked: at, LastSOAQuery: at, Signer: true, SignerSerial: 9, SignerSerialAt: at},
			"gone.example": nil}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := decodeStoredPeer(stored) // the stored form and apiPeer in one
	if err != nil {
		t.Fatal(err)
	}
	// What the read model derives is left to it.
	if z := zeroFields(p, "Serials", "UsingNotify", "UsingIXFR"); len(z) > 0 {
		t.Errorf("peer: %v are zero", z)
	}
	if len(p.Zones) != 1 {
		t.Fatalf("peer zones: %+v (a nil zone is skipped)", p.Zones)
	}
	if z := zeroFields(p.Zones["z.example"], "ZoneSerial", "DriftSerials", "DriftSeconds"); len(z) > 0 {
		t.Errorf("peer zone: %v are zero", z)
	}
}
