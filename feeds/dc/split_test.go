package dc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// cutObject cuts doc's top-level members as a cutter reading size bytes at
// a time does (a repeated key: the last, as encoding/json keeps), and the
// elements of each member that is an array; false when the cutter refuses
// doc.
func cutObject(doc []byte, size int) (members map[string]json.RawMessage, elems map[string][]json.RawMessage, ok bool) {
	c := newCutter(bytes.NewReader(doc), size)
	members, elems = map[string]json.RawMessage{}, map[string][]json.RawMessage{}
	err := c.object(func(key string) error {
		if b, _ := c.peek(); b == '[' {
			var items []json.RawMessage
			err := c.array(func(raw []byte) error {
				items = append(items, slices.Clone(raw))
				return nil
			})
			if err != nil {
				return err
			}
			elems[key] = items
			members[key] = nil
			return nil
		}
		raw, err := c.value()
		members[key] = slices.Clone(raw)
		delete(elems, key)
		return err
	})
	if err == nil {
		err = c.end()
	}
	return members, elems, err == nil
}

// The cutter must cut exactly where encoding/json does, or an element
// would be decoded from the wrong bytes, wherever its reads end.
func TestCutterMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		`{}`, ` { } `, `{"a":1}`, "{\n\t\"vms\" : [ {\"uuid\":\"x\"} , {} ],\r\n\"users\":[]}",
		`{"a":"}]\\\"[{","b":[["]"],{"c":"\\\\"}],"c":-1.5e+3,"d":true,"e":null,"f":false}`,
		`{"dup":[1],"dup":[2,3]}`, `{"\u0076ms":[1, 2 ,3]}`, `{"a":[ ]}`, `{"a":[{"b":{"c":[1,{"d":"e"}]}}, "x,y", 7, null]}`,
		`{"n":[12345678901234567890, 1.25e-7 ,-0]}`,
	}
	for _, doc := range docs {
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		for _, size := range []int{1, 2, 3, 7, 64, readSize} {
			checkCut(t, []byte(doc), size, want)
		}
	}
	for _, bad := range []string{``, `null`, `[]`, `{"a":}`, `{"a":1`, `{"a":1}x`, `"s"`, `{"a":[1 2]}`, `{"a":"x\"}`, `{"a" 1}`, `{"a":1,}`} {
		for _, size := range []int{1, 5, readSize} {
			if _, _, ok := cutObject([]byte(bad), size); ok {
				t.Errorf("the cutter (%d bytes at a time) accepted %q", size, bad)
			}
		}
	}
}

// checkCut compares what the cutter cuts of doc with encoding/json's
// members (want) and their elements.
func checkCut(t *testing.T, doc []byte, size int, want map[string]json.RawMessage) {
	t.Helper()
	members, elems, ok := cutObject(doc, size)
	if !ok || len(members) != len(want) {
		t.Fatalf("cutting %s (%d bytes at a time): %q, %v; encoding/json: %q", doc, size, members, ok, want)
	}
	for k, raw := range want {
		items, isArray := elems[k]
		var wantItems []json.RawMessage
		if json.Unmarshal(raw, &wantItems) == nil && raw[0] == '[' {
			if !isArray || len(items) != len(wantItems) || len(items) > 0 && !reflect.DeepEqual(items, wantItems) {
				t.Fatalf("cutting %s of %s (%d bytes at a time): %q; encoding/json: %q", k, doc, size, items, wantItems)
			}
		} else if isArray || !bytes.Equal(members[k], raw) {
			t.Fatalf("cutting %s of %s (%d bytes at a time): %q; encoding/json: %s", k, doc, size, members[k], raw)
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

// FuzzSplitChecksSyntax: the cutter checks no values, so ParseInventory
// must still refuse every document encoding/json finds broken, with the
// line and column, and cut every one it accepts where encoding/json does,
// wherever its reads end.
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
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		_, err := ParseInventory(data)
		if !json.Valid(data) {
			if err == nil || !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("%q: not valid JSON, but ParseInventory says %v", data, err)
			}
			return
		}
		var want map[string]json.RawMessage
		if json.Unmarshal(data, &want) == nil && want != nil {
			checkCut(t, data, int(size), want)
		}
	})
}

// An inventory file is read as a stream: its VMs are handed on a batch at
// a time as they are decoded, never all at once, and checked across
// batches (a UUID used twice, a network listed after the VMs that name
// it).
func TestReadInventoryFileStreamsVMs(t *testing.T) {
	const n = 3*vmBatch + 5
	vm := func(i int) map[string]any {
		return map[string]any{"uuid": fmt.Sprintf("00000000-0000-4000-8000-%012d", i), "owner_uuid": "o", "state": "running",
			"nics": []map[string]any{{"ip": "10.0.0.1", "network_uuid": "c66bd90b-6e21-4a55-a4b5-18f6010c6b14"}}}
	}
	vms := make([]map[string]any, n)
	for i := range vms {
		vms[i] = vm(i)
	}
	network := []map[string]any{{"uuid": "c66bd90b-6e21-4a55-a4b5-18f6010c6b14", "name": "n", "subnet": "10.0.0.0/8"}}
	write := func(doc string) string {
		path := filepath.Join(t.TempDir(), "inventory.json")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// The networks come after the VMs that name them.
	doc, _ := json.Marshal(vms)
	nets, _ := json.Marshal(network)
	path := write(`{"vms":` + string(doc) + `,"networks":` + string(nets) + `}`)
	var batches []int
	inv, got, err := ReadInventoryFile(path, func(b []VM) { batches = append(batches, len(b)) })
	if err != nil {
		t.Fatal(err)
	}
	if got != n || len(inv.VMs) != 0 || len(inv.Networks) != 1 || !slices.Equal(batches, []int{vmBatch, vmBatch, vmBatch, 5}) {
		t.Fatalf("%d VMs handed on in batches %v, %d in the inventory, %d networks; want %d in batches of %d", got, batches, len(inv.VMs), len(inv.Networks), n, vmBatch)
	}

	for _, c := range []struct{ name, doc, want string }{
		{"a UUID used in two batches", func() string {
			dup := slices.Clone(vms)
			dup[vmBatch+7] = vm(3)
			d, _ := json.Marshal(dup)
			return `{"networks":` + string(nets) + `,"vms":` + string(d) + `}`
		}(), fmt.Sprintf("vms[%d]: uuid 00000000-0000-4000-8000-000000000003 already used by vms[3]", vmBatch+7)},
		{"a network no one lists", `{"vms":` + string(doc) + `}`,
			"vms[0] (00000000-0000-4000-8000-000000000000): nics[0]: network c66bd90b-6e21-4a55-a4b5-18f6010c6b14 is not in networks"},
		{"VMs given twice", `{"vms":[],"networks":` + string(nets) + `,"vms":[]}`, `top-level key "vms" is given twice`},
		{"a syntax error after the VMs", `{"vms":` + string(doc) + `,` + "\n" + `"networks" ` + string(nets) + `}`, "line 2, column 12: invalid character '[' after object key"},
	} {
		path := write(c.doc)
		_, _, err := ReadInventoryFile(path, func([]VM) {})
		if want := path + ": " + c.want; err == nil || err.Error() != want {
			t.Errorf("%s: err = %v, want %s", c.name, err, want)
		}
	}
}
