package cnsadm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/admin"
)

// The propagation table shows a signing secondary's own serial next to
// cns's.
func TestPropagationPeersSignerSerial(t *testing.T) {
	var b bytes.Buffer
	if err := writePropagationPeers(&b, []admin.PeerPropagation{{Address: "127.0.0.2", Serial: 7, SignerSerial: 12, State: "ACTIVE", Seconds: 0.25}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "7 (signed 12)  ACTIVE  0.250") {
		t.Errorf("propagation table:\n%s", b.String())
	}
}
