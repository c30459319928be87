package serve

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin/status"
)

// A peer as the store holds it comes back as the API shows it: what the
// tracker knows, each zone's tracking whole, a configured peer's state
// "configured", and a zone without a record left out.
func TestStoredPeerStatus(t *testing.T) {
	at := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	tracking := status.ZoneTracking{Serial: 6, LastTransfer: at, LastKind: "IXFR", AXFR: 1, IXFR: 3,
		NotifySerial: 7, NotifySent: at, NotifyAcked: at, LastSOAQuery: at, Signer: true, SignerSerial: 9}
	p := Peer{Address: "192.0.2.1", State: PeerSilent, Version: "9.18.28", NotifyFailures: 2,
		Counters: map[string]uint64{"axfr": 1, "ixfr": 3},
		Zones:    map[string]*PeerZone{"z.example": {ZoneTracking: tracking, SerialAt: at, SignerSerialAt: at}, "gone.example": nil}}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := StoredPeerStatus(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := status.Peer{Address: "192.0.2.1", State: status.PeerSilent, Version: "9.18.28", NotifyFailures: 2,
		Counters: map[string]uint64{"axfr": 1, "ixfr": 3}, Zones: map[string]status.PeerZone{"z.example": {ZoneTracking: tracking}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stored peer as the API shows it:\n got %+v\nwant %+v", got, want)
	}
	p.Configured = true
	if s := p.Status(); s.State != status.PeerConfigured {
		t.Errorf("a configured peer's state is %q, want %q", s.State, status.PeerConfigured)
	}
}
