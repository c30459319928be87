package config

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A key's Default, when it is JSON, is what Parse gives for an absent
// key: writing the default changes nothing.
func TestKeyDefaults(t *testing.T) {
	checked := 0
	for _, k := range Keys {
		if !json.Valid([]byte(k.Default)) {
			continue
		}
		var m map[string]any
		json.Unmarshal([]byte(referenceConfig), &m)
		delete(m, k.Name)
		absent, _ := json.Marshal(m)
		m[k.Name] = json.RawMessage(k.Default)
		given, _ := json.Marshal(m)
		a, err := Parse(absent, "cfg.json")
		if err != nil {
			t.Fatalf("%s absent: %v", k.Name, err)
		}
		g, err := Parse(given, "cfg.json")
		if err != nil {
			t.Fatalf("%s: %s: %v", k.Name, k.Default, err)
		}
		if !reflect.DeepEqual(a, g) {
			t.Errorf("%s: the table's default %s is not what an absent key gives:\n%+v\n%+v", k.Name, k.Default, a, g)
		}
		checked++
	}
	if checked < 10 {
		t.Errorf("only %d defaults checked", checked)
	}
}

// Every key the table lists is parsed (or is one of the reference's
// ignored keys, or is parsed with a neighbour), and no two keys share a
// name.
func TestKeysTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Keys {
		if seen[k.Name] {
			t.Errorf("%s listed twice", k.Name)
		}
		seen[k.Name] = true
		grouped := k.Name == "journal_max_bytes" || k.Name == "journal_max_age_s"
		switch {
		case k.Section == SectionIgnored && (k.parse != nil || k.value != nil):
			t.Errorf("%s: ignored, but parsed", k.Name)
		case k.Section != SectionIgnored && k.parse == nil && !grouped:
			t.Errorf("%s: no parse function", k.Name)
		case k.Section != SectionIgnored && k.value == nil:
			t.Errorf("%s: no value for Diff", k.Name)
		case k.Help == "":
			t.Errorf("%s: no help", k.Name)
		}
	}
}
