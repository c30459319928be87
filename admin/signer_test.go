package admin

import (
	"bytes"
	"strings"
	"testing"
)

// Ensure a signing secondary's own serial shows next to cns's, and a
// plain secondary's serial alone.
func TestSignerSerialText(t *testing.T) {
	for _, c := range []struct {
		pz   PeerZone
		want string
	}{
		{PeerZone{Serial: 1795486965}, "1795486965"},
		{PeerZone{Serial: 1795486965, Signer: true, SignerSerial: 1795487264}, "1795486965 (signed 1795487264)"},
	} {
		if got := c.pz.SerialText(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.pz, got, c.want)
		}
	}
	var b bytes.Buffer
	if err := writePropagationPeers(&b, []PeerPropagation{{Address: "127.0.0.2", Serial: 7, SignerSerial: 12, State: "ACTIVE", Seconds: 0.25}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "7 (signed 12)  ACTIVE  0.250") {
		t.Errorf("propagation table:\n%s", b.String())
	}
}
