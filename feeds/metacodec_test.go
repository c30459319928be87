package feeds

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// Ensure every VMMeta reads back from the binary encoding exactly as it
// reads back from the JSON that older stores hold, so `cnsadm vm`, the
// API and the TUI show the same whichever wrote it, and that the binary
// form is much smaller.
func TestVMMetaEncodingMatchesJSON(t *testing.T) {
	at := time.Date(2026, 11, 24, 4, 27, 29, 681931602, time.UTC)
	for _, m := range []VMMeta{
		{UUID: "00058e63-082d-49e4-a9fd-cd5cb26da7ab", Owner: "3590efb5-2bb9-4367-9deb-c7c95a154295", Login: "user1619",
			Server: "5b26179a-3f91-4953-b3a9-272dbebea53b", State: "running", ListInstance: true, ListServices: true,
			Reasons: []string{}, Updated: at},
		{UUID: "00058E63-082D-49E4-A9FD-CD5CB26DA7AB", Alias: "web-1", Owner: "not-a-uuid", State: "stopped",
			CNDown: true, Reasons: []string{"vm_not_running", "cn_down"}, Services: []string{"web", "db"},
			Problems: []string{"tag triton.cns.services: bad port"}, Updated: at},
		{UUID: "5b26179a-3f91-4953-b3a9-272dbebea53b", Alias: "cn1", Server: "5b26179a-3f91-4953-b3a9-272dbebea53b",
			ComputeNode: true, Reasons: []string{"compute_node"}},
		{UUID: "0123456789abcdef0123456789abcdefxxxx", Owner: "0123456g-082d-49e4-a9fd-cd5cb26da7ab"},
		{},
		{UUID: "5b26179a-3f91-4953-b3a9-272dbebea53b", Services: []string{}, Problems: []string{}},
	} {
		js, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, err := DecodeVMMeta(js)
		if err != nil {
			t.Fatal(err)
		}
		bin := m.Encode()
		fromBin, err := DecodeVMMeta(bin)
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if !reflect.DeepEqual(fromBin, fromJSON) {
			t.Errorf("binary and JSON read back differently:\n%#v\n%#v", fromBin, fromJSON)
		}
		up := UpgradeVMMeta(js)
		if string(up) != string(bin) {
			t.Errorf("UpgradeVMMeta(%s) = %x, want %x", js, up, bin)
		}
		if again := UpgradeVMMeta(bin); string(again) != string(bin) {
			t.Errorf("UpgradeVMMeta changed an upgraded meta: %x", again)
		}
		if m.UUID != "" && len(bin)*2 > len(js) {
			t.Errorf("binary meta %d bytes, JSON %d: want under half", len(bin), len(js))
		}
		// DecodeVMMetaNames reads the same names from either form.
		for _, b := range [][]byte{bin, js} {
			alias, owner, login, err := DecodeVMMetaNames(b)
			if err != nil || alias != fromJSON.Alias || owner != fromJSON.Owner || login != fromJSON.Login {
				t.Errorf("DecodeVMMetaNames(%q) = %q %q %q %v, want %q %q %q", b, alias, owner, login, err, fromJSON.Alias, fromJSON.Owner, fromJSON.Login)
			}
		}
	}
	if _, _, _, err := DecodeVMMetaNames([]byte{metaVersion, 1, 0}); err == nil {
		t.Error("a truncated meta's names decoded")
	}
	if _, err := DecodeVMMeta([]byte{9}); err == nil {
		t.Error("unknown version decoded")
	}
}

// FuzzVMMeta: no input panics the decoder, and whatever decodes survives
// a round trip.
func FuzzVMMeta(f *testing.F) {
	f.Add((&VMMeta{UUID: "00058e63-082d-49e4-a9fd-cd5cb26da7ab", Reasons: []string{"x"}, Updated: time.Unix(1, 2)}).Encode())
	f.Add([]byte{metaVersion, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeVMMeta(b)
		if err != nil || (len(b) > 0 && b[0] == '{') {
			return
		}
		again, err := DecodeVMMeta(m.Encode())
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip (%v):\n%#v\n%#v", err, m, again)
		}
	})
}
