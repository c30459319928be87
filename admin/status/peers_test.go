package status

import "testing"

// A signing secondary's own serial shows next to cns's, and a plain
// secondary's serial alone.
func TestSerialText(t *testing.T) {
	for _, c := range []struct {
		z    ZoneTracking
		want string
	}{
		{ZoneTracking{Serial: 1795486965}, "1795486965"},
		{ZoneTracking{Serial: 1795486965, Signer: true, SignerSerial: 1795487264}, "1795486965 (signed 1795487264)"},
	} {
		if got := c.z.SerialText(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.z, got, c.want)
		}
	}
}
