package feeds

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// The meta stored with a VM is json.Marshal's, byte for byte, though it is
// not encoded twice.
func TestWithUpdatedIsMarshal(t *testing.T) {
	for _, m := range []VMMeta{
		{UUID: "u", Owner: "o", State: "running", Reasons: []string{}},
		{UUID: "u", Alias: `a"<&>`, Owner: "o", Login: "l", Server: "s", State: "stopped", CNDown: true, ListInstance: true,
			ListServices: true, Reasons: []string{"x"}, Services: []string{"s1", "s2"}, Problems: []string{"p"}},
	} {
		timeless, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range []time.Time{time.Unix(1_800_000_000, 123456789).UTC(), time.Unix(1_800_000_000, 0).UTC(), {}} {
			m.Updated = at
			want, _ := json.Marshal(&m)
			if got := withUpdated(timeless, &m); !bytes.Equal(got, want) {
				t.Errorf("withUpdated = %s\nwant          %s", got, want)
			}
		}
		m.Updated = time.Time{}
	}
}
