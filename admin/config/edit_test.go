package config

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A modifier's value takes the key's kind from the table, for a key the
// file does not have yet too; zone keys have theirs.
func TestModifierKinds(t *testing.T) {
	for _, tc := range []struct {
		mod  string
		want any
	}{
		{"hide_version=true", true},
		{"max_rrset=50", 50.0},
		{"dns_listen=127.0.0.1:53, [::1]:53", []any{"127.0.0.1:53", "[::1]:53"}},
		{"log_level=debug", "debug"},
		{"hidden_primary=yes", true},
		{"peers=ns1.example.com", []any{"ns1.example.com"}},
		{"colour=blue", "blue"},
	} {
		m, err := ParseModifier(tc.mod)
		if err != nil {
			t.Fatal(err)
		}
		obj := map[string]any{}
		if err := m.Apply(obj); err != nil {
			t.Fatalf("%s: %v", tc.mod, err)
		}
		got, _ := json.Marshal(obj[m.Key])
		want, _ := json.Marshal(tc.want)
		if string(got) != string(want) {
			t.Errorf("%s: %s, want %s", tc.mod, got, want)
		}
	}
}

// forward_zones is edited with cnsadm zones only; an edit that does not
// validate is not saved.
func TestEditorRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(referenceConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &Editor{Store: FileStore{Path: path}, File: path}
	mod := func(s string) []Modifier {
		m, err := ParseModifier(s)
		if err != nil {
			t.Fatal(err)
		}
		return []Modifier{m}
	}
	if _, err := e.Config(context.Background(), mod(`forward_zones={}`)); err == nil || err.Error() != "forward_zones: edit zones with cnsadm zones" {
		t.Errorf("forward_zones: %v", err)
	}
	_, err := e.Config(context.Background(), mod("max_rrset=5000"))
	if want := "not saved: config " + path + ": max_rrset: must be between 1 and 1000"; err == nil || err.Error() != want {
		t.Errorf("invalid edit: %v, want %s", err, want)
	}
	if data, _ := os.ReadFile(path); string(data) != referenceConfig {
		t.Error("an invalid edit changed the file")
	}
}

// Loopback may always transfer: removing it is refused with the reason,
// other addresses come and go.
func TestLoopbackTransferKept(t *testing.T) {
	for _, tc := range []struct {
		mod, refused string
	}{
		{"allow_transfer-=127.0.0.1", "127.0.0.1 cannot be removed"},
		{"allow_transfer-=::1/128", "::1/128 cannot be removed"},
		{"allow_transfer-=10.0.0.0/8", ""},
	} {
		m, err := ParseModifier(tc.mod)
		if err != nil {
			t.Fatal(err)
		}
		obj := map[string]any{"allow_transfer": []any{"10.0.0.0/8", "127.0.0.1", "::1/128"}}
		err = m.Apply(obj)
		if tc.refused == "" && err != nil || tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)) {
			t.Errorf("%s: %v, want refused %q", tc.mod, err, tc.refused)
		}
	}
}
