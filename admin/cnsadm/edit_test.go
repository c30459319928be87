package cnsadm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/admin/config"
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
		obj := config.NewJSONObject()
		if err := m.Apply(obj); err != nil {
			t.Fatalf("%s: %v", tc.mod, err)
		}
		got, _ := json.Marshal(obj.Value(m.Key))
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
	if err := os.WriteFile(path, demoConfig(t), 0o600); err != nil {
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
	if data, _ := os.ReadFile(path); string(data) != string(demoConfig(t)) {
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
		obj := config.NewJSONObject()
		obj.Set("allow_transfer", []any{"10.0.0.0/8", "127.0.0.1", "::1/128"})
		err = m.Apply(obj)
		if tc.refused == "" && err != nil || tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)) {
			t.Errorf("%s: %v, want refused %q", tc.mod, err, tc.refused)
		}
	}
}

// cnsadm config edits only the keys the table lets it (Settable and
// Shown): an unknown key, or one cns ignores, is refused with the list of
// editable keys, and the file is left alone; cnsadm zones edits only a
// zone's settings.
func TestEditorRefusesUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, demoConfig(t), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &Editor{Store: FileStore{Path: path}, File: path}
	mods := func(args ...string) []Modifier {
		var ms []Modifier
		for _, s := range args {
			m, err := ParseModifier(s)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		return ms
	}
	editable := strings.Join(config.Editable(), ", ")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"foo=bar"}, "foo: not a key cnsadm config edits; it edits " + editable + " (and zones with cnsadm zones)"},
		{[]string{"use_login=true", "colour=blue"}, "colour: not a key cnsadm config edits"},
		{[]string{"redis_opts={}"}, "redis_opts: not a key cnsadm config edits"},
		{[]string{`reverse_zones={"peers":["ns1.example.org"]}`}, "reverse_zones: edit zones with cnsadm zones"},
	} {
		_, err := e.Config(context.Background(), mods(tc.args...))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("config %v: %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, tc := range []struct {
		zone, mod, want string
	}{
		{"us-west-1.cns.example.com", "colour=blue", "colour: not a zone setting; cnsadm zones edits networks, peers, hidden_primary, also_notify, zone"},
		{"reverse", "networks=*", "networks: not a zone setting; cnsadm zones edits peers, hidden_primary, also_notify"},
	} {
		_, err := e.Zone(context.Background(), tc.zone, false, false, mods(tc.mod))
		if err == nil || err.Error() != tc.want {
			t.Errorf("zones %s %s: %v, want %q", tc.zone, tc.mod, err, tc.want)
		}
	}
	if data, _ := os.ReadFile(path); string(data) != string(demoConfig(t)) {
		t.Error("a refused edit changed the file")
	}
	for _, want := range []string{"my_name", "allow_transfer", "max_rrset", "catalog_zone"} {
		if !strings.Contains(editable, want) {
			t.Errorf("%s not editable: %s", want, editable)
		}
	}
	for _, not := range []string{"forward_zones", "reverse_zones", "redis_opts", "binder_domain"} {
		if strings.Contains(editable, not) {
			t.Errorf("%s editable: %s", not, editable)
		}
	}
	// A known key still goes through.
	if _, err := e.Config(context.Background(), mods("max_rrset=50")); err != nil {
		t.Errorf("max_rrset=50: %v", err)
	}
}

// demoConfig is the demo data center's config file, testdata/cns.json.
func demoConfig(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("../../testdata/cns.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}
