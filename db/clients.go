package db

import (
	"bytes"
	"fmt"
	"net/netip"

	bolt "go.etcd.io/bbolt"
)

// bucketClients keeps, per VM, how the VM is recognised when it queries
// cns itself (client_answers): its owner and its addresses on the client
// networks. The updater commits them with the VM's records, so the
// serving side sees a VM's scope change in the same commit as its names.
var bucketClients = []byte("clients")

// Client is how one VM is recognised when it asks.
type Client struct {
	Owner string // owner UUID, lower case
	Addrs []ClientAddr
	// Zones are the forward zones the VM has names in, where its scope
	// applies (lower case, no trailing dot).
	Zones []string
}

// ClientAddr is one address that identifies a VM.
type ClientAddr struct {
	Addr netip.Addr
	// Fabric, when valid, is the fabric subnet the address is on: it then
	// identifies the VM only to a query that reached cns on an address of
	// its own inside that subnet.
	Fabric netip.Prefix
}

// ClientUpdate is one VM's change of Client in a commit. Old or New is
// nil when the VM had or has none.
type ClientUpdate struct {
	VM       string // lower-case UUID
	Old, New *Client
}

// Clients calls fn with every stored VM's Client, in UUID order.
func (d *DB) Clients(fn func(vm string, c Client) error) error {
	return d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketClients)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			c, err := decodeClient(v)
			if err != nil {
				return fmt.Errorf("client %s: %w", k, err)
			}
			return fn(string(k), c)
		})
	})
}

// applyClient stores what vc says about the VM's Client (nothing when it
// is deleted or has no addresses) and notes a change for Committed.
func (c *commit) applyClient(vmKey []byte, vc *VMChange) error {
	b, err := c.tx.CreateBucketIfNotExists(bucketClients)
	if err != nil {
		return err
	}
	var now []byte
	if !vc.Delete && vc.Client != nil && len(vc.Client.Addrs) > 0 {
		now = encodeClient(vc.Client)
	}
	before := b.Get(vmKey)
	if bytes.Equal(before, now) {
		return nil
	}
	u := ClientUpdate{VM: string(vmKey)}
	if before != nil {
		old, err := decodeClient(before)
		if err != nil {
			return fmt.Errorf("client %s: %w", vmKey, err)
		}
		u.Old = &old
	}
	if now == nil {
		err = b.Delete(vmKey)
	} else {
		nc, _ := decodeClient(now) // a copy the caller cannot change
		u.New = &nc
		err = b.Put(vmKey, now)
	}
	c.clients = append(c.clients, u)
	return err
}

func encodeClient(cl *Client) []byte {
	e := &enc{}
	e.U8(1)
	e.Str16(cl.Owner)
	e.U16(uint16(len(cl.Addrs)))
	for _, a := range cl.Addrs {
		e.Bytes16(a.Addr.AsSlice())
		bits := -1
		if a.Fabric.IsValid() {
			bits = a.Fabric.Bits()
		}
		e.U8(uint8(bits + 1))
		if a.Fabric.IsValid() {
			e.Bytes16(a.Fabric.Addr().AsSlice())
		}
	}
	e.U16(uint16(len(cl.Zones)))
	for _, z := range cl.Zones {
		e.Str16(z)
	}
	return e.B
}

func decodeClient(b []byte) (Client, error) {
	d := &dec{B: b}
	d.Version(1, "client")
	cl := Client{Owner: d.Str16()}
	n := int(d.U16())
	for i := 0; i < n && d.Err == nil; i++ {
		var a ClientAddr
		a.Addr, _ = netip.AddrFromSlice(d.Bytes16())
		if bits := int(d.U8()) - 1; bits >= 0 {
			fa, _ := netip.AddrFromSlice(d.Bytes16())
			a.Fabric = netip.PrefixFrom(fa, bits)
		}
		cl.Addrs = append(cl.Addrs, a)
	}
	n = int(d.U16())
	for i := 0; i < n && d.Err == nil; i++ {
		cl.Zones = append(cl.Zones, d.Str16())
	}
	return cl, d.Done("client")
}
