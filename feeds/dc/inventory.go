package dc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
)

// Inventory is a whole data center as the SDC APIs describe it: the format
// of the inventory file feed and the seed of the SDC simulator.
type Inventory struct {
	VMs          []VM          `json:"vms"`
	Servers      []Server      `json:"servers"`
	Users        []User        `json:"users"`
	Networks     []Network     `json:"networks"`
	NetworkPools []NetworkPool `json:"network_pools"`
	// Listing, when not nil, is the listing the sink began
	// (Sink.BeginListing) and the feed read VMs into; they are the
	// inventory's besides VMs. A change the sink got after the listing
	// began overtakes the listing's copy of its VM. Nil: nothing
	// overtakes the inventory's VMs (a file, a test).
	Listing Listing `json:"-"`
}

// vmBatch is how many VMs of an inventory are decoded at once, on every
// core, then handed on: a few megabytes.
const vmBatch = 4096

// LoadInventory reads and validates an inventory file, VMs and all: the
// format of the file feed and of the simulator (`cns sim`).
func LoadInventory(path string) (*Inventory, error) {
	var vms VMList
	inv, _, err := ReadInventoryFile(path, vms.Add)
	if err != nil {
		return nil, err
	}
	inv.VMs = vms
	return inv, nil
}

// ReadInventoryFile reads and validates an inventory file as a stream:
// its VMs go to vms a few thousand at a time as they are decoded and
// checked, and are not in the inventory returned, so neither the file nor
// every decoded VM is held at once (a million VMs are half a gigabyte of
// JSON and ~2.8 GB decoded). It returns how many VMs it handed on. When
// it fails, what it handed on is not an inventory: the caller drops it.
func ReadInventoryFile(path string, vms func([]VM)) (*Inventory, int, error) {
	open := func() (io.ReadCloser, error) { return os.Open(path) }
	inv, n, err := readInventory(open, vms)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return inv, n, nil
}

// ParseInventory decodes and validates an inventory held in memory.
// Errors name the object and field at fault ("vms[3] (uuid): nics: ...")
// or the line and column of a syntax error.
func ParseInventory(data []byte) (*Inventory, error) {
	var vms VMList
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	inv, _, err := readInventory(open, vms.Add)
	if err != nil {
		return nil, err
	}
	inv.VMs = vms
	return inv, nil
}

// readInventory reads the document open opens, handing its VMs to vms. A
// document that is not JSON is reported where it stops being JSON (read
// again from the start), whatever part failed first.
func readInventory(open func() (io.ReadCloser, error), vms func([]VM)) (*Inventory, int, error) {
	r, err := open()
	if err != nil {
		return nil, 0, err
	}
	inv, n, err := decodeInventory(newCutter(r, readSize), vms)
	r.Close()
	var read readError
	if err == nil || errors.As(err, &read) {
		return inv, n, err
	}
	if serr := syntaxError(open); serr != nil {
		return nil, 0, serr
	}
	if errors.Is(err, errSyntax) { // (the cutter and encoding/json disagree: never)
		return nil, 0, errors.New("not a JSON object")
	}
	return nil, 0, err
}

// readError is a failure to read the document (not its content).
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// decodeInventory decodes the document c cuts, its sections in the order
// they come, and checks it (inventoryCheck): the VMs as they are decoded,
// the rest once it is read.
func decodeInventory(c *cutter, vms func([]VM)) (*Inventory, int, error) {
	inv := &Inventory{}
	var check inventoryCheck
	n := 0
	var err error
	if b, ok := c.peek(); ok && b != '{' {
		// Not an object: null is an empty inventory; encoding/json says
		// what is wrong with anything else.
		var raw []byte
		if raw, err = c.value(); err == nil {
			var top map[string]json.RawMessage
			err = fieldError(json.Unmarshal(raw, &top))
		}
	} else {
		given := map[string]bool{}
		err = c.object(func(key string) error {
			if given[key] { // (its VMs would be handed on already)
				return fmt.Errorf("top-level key %q is given twice", key)
			}
			given[key] = true
			switch key {
			case "vms":
				return decodeList(c, key, func(batch []VM, first int) error {
					for i := range batch {
						if err := check.vm(first+i, &batch[i]); err != nil {
							return err
						}
					}
					n += len(batch)
					vms(batch)
					return nil
				})
			case "servers":
				return decodeList(c, key, appendTo(&inv.Servers))
			case "users":
				return decodeList(c, key, appendTo(&inv.Users))
			case "networks":
				return decodeList(c, key, appendTo(&inv.Networks))
			case "network_pools":
				return decodeList(c, key, appendTo(&inv.NetworkPools))
			}
			return fmt.Errorf("unknown top-level key %q (want vms, servers, users, networks, network_pools)", key)
		})
	}
	if err == nil {
		err = c.end()
	}
	if c.err != nil {
		return nil, 0, readError{c.err}
	}
	if err == nil {
		err = check.rest(inv)
	}
	if err != nil {
		return nil, 0, err
	}
	return inv, n, nil
}

func appendTo[T any](into *[]T) func([]T, int) error {
	return func(batch []T, _ int) error {
		*into = append(*into, batch...)
		return nil
	}
}

// decodeList decodes the JSON array c is at element by element, so an
// error can say which element is wrong, a batch at a time (vmBatch), and
// hands each batch on with the index of its first element. A batch's
// elements are decoded on every core; the error reported is the first
// element's, as one pass would find it. null is an empty list.
func decodeList[T any](c *cutter, key string, batch func(items []T, first int) error) error {
	if b, _ := c.peek(); b != '[' {
		raw, err := c.value()
		if err != nil {
			return err
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("%s: want an array: %w", key, err)
		}
		return nil // null
	}
	var raws []byte // the batch's elements, cut, one after the other
	var ends []int
	first := 0
	flush := func() error {
		if len(ends) == 0 {
			return nil
		}
		out, err := decodeBatch[T](raws, ends, key, first)
		if err != nil {
			return err
		}
		if err := batch(out, first); err != nil {
			return err
		}
		first += len(ends)
		raws, ends = raws[:0], ends[:0]
		return nil
	}
	err := c.array(func(raw []byte) error {
		raws = append(raws, raw...)
		ends = append(ends, len(raws))
		if len(ends) < vmBatch {
			return nil
		}
		return flush()
	})
	if err != nil {
		return err
	}
	return flush()
}

// decodeBatch decodes the elements raws holds (each ending at its ends),
// the first being element first of list key.
func decodeBatch[T any](raws []byte, ends []int, key string, first int) ([]T, error) {
	item := func(i int) []byte {
		if i == 0 {
			return raws[:ends[0]]
		}
		return raws[ends[i-1]:ends[i]]
	}
	out := make([]T, len(ends))
	workers := min(runtime.GOMAXPROCS(0), 1+len(ends)/256)
	fails := make([]error, workers) // each share's first failure
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { // a contiguous share; its first failure, if any
			for i := w * len(ends) / workers; i < (w+1)*len(ends)/workers; i++ {
				if err := json.Unmarshal(item(i), &out[i]); err != nil {
					fails[w] = fmt.Errorf("%s[%d]%s: %w", key, first+i, idOf(item(i)), fieldError(err))
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range fails { // in share order: the first is the lowest element
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// idOf returns " (uuid)" when the item has a readable uuid.
func idOf(item json.RawMessage) string {
	var v struct {
		UUID string `json:"uuid"`
	}
	if json.Unmarshal(item, &v) == nil && v.UUID != "" {
		return " (" + v.UUID + ")"
	}
	return ""
}

// fieldError rewrites encoding/json type errors into "field: want T, got V".
func fieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: want %s, got %s", te.Field, te.Type, te.Value)
	}
	return err
}

// syntaxError reads the document open opens again and returns where
// and why it stops being JSON (line and column), or nil when it is JSON
// throughout: encoding/json's decoder checks every token, holding one at
// a time, and the document is read once more to count its lines.
func syntaxError(open func() (io.ReadCloser, error)) error {
	r, err := open()
	if err != nil {
		return err
	}
	d := json.NewDecoder(r)
	d.UseNumber() // (a number too big for a float64 is JSON)
	var msg string
	var offset int64
	depth, values := 0, 0
	for msg == "" {
		tok, err := d.Token()
		var se *json.SyntaxError
		switch {
		case err == io.EOF && values == 1:
			r.Close()
			return nil
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			msg, offset = "unexpected end of JSON input", d.InputOffset()
		case errors.As(err, &se):
			msg, offset = se.Error(), se.Offset
		case err != nil:
			r.Close()
			return err
		case values == 1:
			msg, offset = "invalid character after top-level value", d.InputOffset()
		default:
			switch tok {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
			if depth == 0 {
				values++
			}
		}
	}
	r.Close()
	line, col := 1, offset+1
	if r, err = open(); err == nil {
		line, col = position(r, offset)
		r.Close()
	}
	return fmt.Errorf("line %d, column %d: %s", line, col, msg)
}

// position returns the line and column of byte offset of what r reads.
func position(r io.Reader, offset int64) (line int, col int64) {
	line, lineStart := 1, int64(0)
	buf := make([]byte, 64<<10)
	for at := int64(0); at < offset; {
		n, err := r.Read(buf[:min(int64(len(buf)), offset-at)])
		for i, b := range buf[:n] {
			if b == '\n' {
				line, lineStart = line+1, at+int64(i)+1
			}
		}
		at += int64(n)
		if err != nil {
			break
		}
	}
	return line, offset - lineStart + 1
}

// Validate checks what every consumer relies on: identifiers present and
// well-formed, no duplicates, and references that resolve. It names the
// first offending object.
func (inv *Inventory) Validate() error {
	var check inventoryCheck
	for i := range inv.VMs {
		if err := check.vm(i, &inv.VMs[i]); err != nil {
			return err
		}
	}
	return check.rest(inv)
}

// inventoryCheck is Validate's, fed the VMs one at a time (a stream of
// them is not held), then the rest. It builds no string per object: a
// million VMs go through it.
type inventoryCheck struct {
	vms map[string]int // each VM's UUID, by the index of the first VM with it
	// nets are the networks the VMs name, each with the first NIC that
	// names it: the networks may come after the VMs.
	nets map[string]nicRef
}

// nicRef is a VM's NIC: the VM's index and UUID, and the NIC's index.
type nicRef struct {
	vm   int
	uuid string
	nic  int
}

// vm checks the i-th VM.
func (c *inventoryCheck) vm(i int, vm *VM) error {
	if c.vms == nil {
		c.vms, c.nets = map[string]int{}, map[string]nicRef{}
	}
	if err := checkUUID(c.vms, "vms", vm.UUID, i); err != nil {
		return err
	}
	if vm.OwnerUUID == "" {
		return fmt.Errorf("vms[%d] (%s): owner_uuid is missing", i, vm.UUID)
	}
	if vm.State == "" {
		return fmt.Errorf("vms[%d] (%s): state is missing", i, vm.UUID)
	}
	for j := range vm.NICs {
		if n := vm.NICs[j].NetworkUUID; n != "" {
			if _, ok := c.nets[n]; !ok {
				c.nets[n] = nicRef{vm: i, uuid: vm.UUID, nic: j}
			}
		}
	}
	return nil
}

// rest checks the users, servers, networks and pools of inv, and that
// every network the VMs named is among them.
func (c *inventoryCheck) rest(inv *Inventory) error {
	users := make(map[string]int, len(inv.Users))
	for i := range inv.Users {
		u := &inv.Users[i]
		if err := checkUUID(users, "users", u.UUID, i); err != nil {
			return err
		}
		if u.Login == "" {
			return fmt.Errorf("users[%d] (%s): login is empty", i, u.UUID)
		}
	}
	servers := make(map[string]int, len(inv.Servers))
	for i := range inv.Servers {
		if err := checkUUID(servers, "servers", inv.Servers[i].UUID, i); err != nil {
			return err
		}
	}
	networks := make(map[string]int, len(inv.Networks))
	for i := range inv.Networks {
		if err := checkUUID(networks, "networks", inv.Networks[i].UUID, i); err != nil {
			return err
		}
	}
	pools := make(map[string]int, len(inv.NetworkPools))
	for i := range inv.NetworkPools {
		p := &inv.NetworkPools[i]
		if err := checkUUID(pools, "network_pools", p.UUID, i); err != nil {
			return err
		}
		for _, n := range p.Networks {
			if _, ok := networks[n]; !ok {
				return fmt.Errorf("network_pools[%d] (%s): network %s is not in networks", i, p.UUID, n)
			}
		}
	}
	var missing nicRef // the first NIC naming a network there is not
	missingNet := ""
	for n, ref := range c.nets {
		if _, ok := networks[n]; !ok && (missingNet == "" || ref.vm < missing.vm || ref.vm == missing.vm && ref.nic < missing.nic) {
			missing, missingNet = ref, n
		}
	}
	if missingNet != "" {
		return fmt.Errorf("vms[%d] (%s): nics[%d]: network %s is not in networks", missing.vm, missing.uuid, missing.nic, missingNet)
	}
	return nil
}

// checkUUID checks the UUID id of the i-th object of kind, and that no
// object of seen (by UUID, the index of the first with it) had it.
func checkUUID(seen map[string]int, kind, id string, i int) error {
	if !IsUUID(id) {
		return fmt.Errorf("%s[%d]: uuid %q is not a UUID", kind, i, id)
	}
	if prev, dup := seen[id]; dup {
		return fmt.Errorf("%s[%d]: uuid %s already used by %s[%d]", kind, i, id, kind, prev)
	}
	seen[id] = i
	return nil
}

// IsUUID reports whether s is a UUID in the canonical 8-4-4-4-12 hex form
// SDC uses everywhere (any case).
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", rune(c)) {
				return false
			}
		}
	}
	return true
}
