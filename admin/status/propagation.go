package status

import (
	"fmt"
	"net/netip"
	"time"
)

// Propagation states of a serial, and of one peer for a serial.
const (
	StatePending = "PENDING"
	StateActive  = "ACTIVE"
	StateError   = "ERROR"
)

// Propagation is how far one serial of a zone has spread to the zone's
// secondaries. The DNS server tracks it in this form and stores it so.
type Propagation struct {
	Zone      string            `json:"zone"`
	Serial    uint32            `json:"serial"`
	State     string            `json:"state"`
	Committed time.Time         `json:"committed"`
	Peers     []PeerPropagation `json:"peers"`
}

// PeerPropagation is one secondary's progress with a serial.
type PeerPropagation struct {
	Address string `json:"address"`
	Serial  uint32 `json:"serial"` // last of cns's serials seen served
	// SignerSerial is a signer's own serial (0 for other peers), under
	// which it serves Serial.
	SignerSerial uint32  `json:"signer_serial,omitempty"`
	State        string  `json:"state"`
	Seconds      float64 `json:"seconds"` // commit to serving; -1 while pending
	Polls        int     `json:"polls"`
	// Error says why the state is ERROR when it is not the retries
	// running out (a peer holding a serial ahead of cns's).
	Error string `json:"error,omitempty"`
	// Target is where the peer is polled (its NOTIFY address).
	Target netip.AddrPort `json:"target"`
}

// Summary is how cnsadm status and the terminal UI show a serial's
// progress: "ACTIVE", or the state with how many peers serve it
// ("PENDING 1/2").
func (p *Propagation) Summary() string {
	if p.State == StateActive || len(p.Peers) == 0 {
		return p.State
	}
	have := 0
	for _, pp := range p.Peers {
		if pp.State == StateActive {
			have++
		}
	}
	return fmt.Sprintf("%s %d/%d", p.State, have, len(p.Peers))
}
