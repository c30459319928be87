package cnsadm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tritondatacenter/cns/admin/config"
)

const legacyConfig = `{
	"my_name": "ns.example.com", "hostmaster": "h@example.com", "inventory_file": "inv.json",
	"forward_zones": {
		"a.example": {"networks": ["*"], "slaves": ["ns1.example.com"], "hidden_master": true},
		"b.example": {"networks": ["*"], "peers": [], "slaves": ["ns2.example.com"]},
		"c.example": {"networks": ["*"], "peers": ["ns3.example.com"], "slaves": ["old.example.com"]}
	},
	"reverse_zones": {"slaves": ["ns1.example.com"], "hidden_master": false}
}`

// cnsadm upgrade renames the legacy keys, keeps what the file meant,
// validates and saves, and asks the server to reload.
func TestUpgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(path, []byte(legacyConfig), 0o600)
	before, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	reloads := 0
	e := &Editor{Store: FileStore{Path: path}, File: path, Reload: func(context.Context) error { reloads++; return nil }}
	cfg, _ := e.Store.Load()
	changes := config.Upgrade(cfg)
	if len(changes) != 2 {
		t.Fatalf("changes %v, want forward_zones and reverse_zones", changes)
	}
	if err := e.Commit(context.Background(), cfg, changes); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "slaves") || strings.Contains(string(data), "hidden_master") {
		t.Errorf("legacy keys left:\n%s", data)
	}
	after, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the upgrade changed the configuration:\n%+v\n%+v", before, after)
	}
	if reloads != 1 {
		t.Errorf("%d reloads, want 1", reloads)
	}
	cfg, _ = e.Store.Load()
	if changes := config.Upgrade(cfg); len(changes) != 0 {
		t.Errorf("second upgrade: %v", changes)
	}
}

// An upgraded file that does not validate is not saved, and the server
// is not asked to reload.
func TestUpgradeValidates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	var m map[string]any
	json.Unmarshal([]byte(legacyConfig), &m)
	delete(m, "my_name")
	orig, _ := json.Marshal(m)
	os.WriteFile(path, orig, 0o600)
	e := &Editor{Store: FileStore{Path: path}, File: path, Reload: func(context.Context) error {
		t.Error("reload after a refused upgrade")
		return nil
	}}
	cfg, _ := e.Store.Load()
	err := e.Commit(context.Background(), cfg, config.Upgrade(cfg))
	if want := "not saved: config " + path + ": my_name: required"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	if data, _ := os.ReadFile(path); string(data) != string(orig) {
		t.Error("a refused upgrade changed the file")
	}
}
