package dc

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The splitter must cut exactly where encoding/json does, or an element
// would be decoded from the wrong bytes.
func TestSplitMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		`{}`, ` { } `, `{"a":1}`, "{\n\t\"vms\" : [ {\"uuid\":\"x\"} , {} ],\r\n\"users\":[]}",
		`{"a":"}]\\\"[{","b":[["]"],{"c":"\\\\"}],"c":-1.5e+3,"d":true,"e":null,"f":false}`,
		`{"dup":[1],"dup":[2,3]}`, `{"\u0076ms":[1, 2 ,3]}`, `{"a":[ ]}`, `{"a":[{"b":{"c":[1,{"d":"e"}]}}, "x,y", 7, null]}`,
	}
	for _, doc := range docs {
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		got, ok := splitObject([]byte(doc))
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("splitObject(%s) = %q, %v; encoding/json: %q", doc, got, ok, want)
		}
		for k, raw := range want {
			var items []json.RawMessage
			isArray := json.Unmarshal(raw, &items) == nil && raw[0] == '['
			elems, ok := splitArray(raw)
			if ok != isArray || (ok && !reflect.DeepEqual(elems, items)) && !(len(elems) == 0 && len(items) == 0) {
				t.Errorf("splitArray(%s) of %s = %q, %v; encoding/json: %q", raw, k, elems, ok, items)
			}
		}
	}
	for _, bad := range []string{``, `null`, `[]`, `{"a":}`, `{"a":1`, `{"a":1}x`, `"s"`} {
		if _, ok := splitObject([]byte(bad)); ok {
			t.Errorf("splitObject(%q) accepted it", bad)
		}
	}
}

// The first bad element is reported, whichever worker decodes it.
func TestParseInventoryReportsFirstBadVM(t *testing.T) {
	vms := make([]json.RawMessage, 3000)
	for i := range vms {
		vms[i] = json.RawMessage(`{"uuid":"00000000-0000-4000-8000-000000000001","state":"running"}`)
	}
	vms[1400] = json.RawMessage(`{"uuid":"00000000-0000-4000-8000-000000001400","state":7}`)
	vms[1450] = json.RawMessage(`{"state":8}`)
	vms[2100] = json.RawMessage(`{"uuid":"00000000-0000-4000-8000-000000002100","state":9}`) // decoded by another worker
	data, _ := json.Marshal(map[string]any{"vms": vms})
	_, err := ParseInventory(data)
	if want := "vms[1400] (00000000-0000-4000-8000-000000001400): state: want string, got number"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

// FuzzSplitChecksSyntax: the splitter checks no values, so ParseInventory
// must still refuse every document encoding/json finds broken, with the
// line and column, and cut every one it accepts where encoding/json does.
func FuzzSplitChecksSyntax(f *testing.F) {
	for _, s := range []string{
		`{"vms":[{"uuid":"00000000-0000-4000-8000-000000000001","owner_uuid":"x","state":"running"}]}`,
		`{"vms":[{"uuid":"00000000-0000-4000-8000-000000000001","owner_uuid":"x","state":"running"} {}]}`,
		`{"vms":[{"uuid":"00000000-0000-4000-8000-000000000001","owner_uuid":"x","state":"running",}]}`,
		`{"vms":[{"uuid":"00000000-0000-4000-8000-000000000001","owner_uuid":"x","state":"running"}],}`,
		`{"vms":[{"uuid":"00000000-0000-4000-8000-000000000001","state":7]}, "users":[]}`,
		`{"vms":[1 2]}`, `{"vms":tru,"vms":[]}`, `{"other":[1 2]}`, `{"vms":[,]}`, `{"vms":[]]}`, `{"vms":[}`, `{"vms":tru}`, `{"vms":"a\"}`, `{"vms" "x"}`,
		`{"users":[{"uuid":"00000000-0000-4000-8000-000000000001","login":"a"}]} {}`, `{"servers":[{"uuid":"\x"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := ParseInventory(data)
		if !json.Valid(data) {
			if err == nil || !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("%q: not valid JSON, but ParseInventory says %v", data, err)
			}
			return
		}
		if top, ok := splitObject(data); ok {
			var want map[string]json.RawMessage
			if json.Unmarshal(data, &want) != nil || !reflect.DeepEqual(top, want) {
				t.Fatalf("splitObject(%q) = %q; encoding/json: %q", data, top, want)
			}
			for k, raw := range top {
				var items []json.RawMessage
				if elems, ok := splitArray(raw); ok {
					if json.Unmarshal(raw, &items) != nil || (len(elems) > 0 || len(items) > 0) && !reflect.DeepEqual(elems, items) {
						t.Fatalf("splitArray(%s) of %s = %q; encoding/json: %q", raw, k, elems, items)
					}
				}
			}
		}
	})
}
