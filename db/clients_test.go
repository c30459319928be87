package db

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
)

// A VM's Client is stored with its records, reported in Committed only
// when it changes (Old and New), and gone with the VM.
func TestClients(t *testing.T) {
	d, _ := openTest(t, Options{})
	mustCommit(t, d, &ChangeSet{Zones: testConfig()})
	fabric := netip.MustParsePrefix("192.168.128.0/22")
	a := &Client{Owner: "owner-a", Addrs: []ClientAddr{{Addr: netip.MustParseAddr("10.0.0.5")}, {Addr: netip.MustParseAddr("192.168.128.5"), Fabric: fabric}}}
	b := &Client{Owner: "owner-b", Addrs: []ClientAddr{{Addr: netip.MustParseAddr("fd00::5")}}}
	rec1 := rec(t, "dc.example.com", vm1+".inst.owner-a.dc.example.com. 30 IN A 10.0.0.5")

	show := func(c *Client) string {
		if c == nil {
			return "-"
		}
		return fmt.Sprintf("%s%v", c.Owner, c.Addrs)
	}
	updates := func(c *Committed) []string {
		var out []string
		for _, u := range c.Clients {
			out = append(out, u.VM+" "+show(u.Old)+" > "+show(u.New))
		}
		return out
	}
	stored := func() []string {
		var out []string
		if err := d.Clients(func(vm string, c Client) error {
			out = append(out, vm+" "+show(&c))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	steps := []struct {
		name    string
		cs      ChangeSet
		updates []string
		stored  []string
	}{
		{"added", ChangeSet{VMs: []VMChange{{UUID: vm1, Records: []Record{rec1}, Client: a}, {UUID: vm2, Client: b}}},
			[]string{vm1 + " - > " + show(a), vm2 + " - > " + show(b)}, []string{vm1 + " " + show(a), vm2 + " " + show(b)}},
		{"unchanged: not reported", ChangeSet{VMs: []VMChange{{UUID: vm1, Records: []Record{rec1}, Client: a}}},
			nil, []string{vm1 + " " + show(a), vm2 + " " + show(b)}},
		{"moved to another owner", ChangeSet{VMs: []VMChange{{UUID: vm2, Client: &Client{Owner: "owner-a", Addrs: b.Addrs}}}},
			[]string{vm2 + " " + show(b) + " > owner-a" + fmt.Sprint(b.Addrs)}, []string{vm1 + " " + show(a), vm2 + " owner-a" + fmt.Sprint(b.Addrs)}},
		{"no addresses any more", ChangeSet{VMs: []VMChange{{UUID: vm1, Records: []Record{rec1}}}},
			[]string{vm1 + " " + show(a) + " > -"}, []string{vm2 + " owner-a" + fmt.Sprint(b.Addrs)}},
		{"deleted", ChangeSet{VMs: []VMChange{{UUID: vm2, Delete: true}}},
			[]string{vm2 + " owner-a" + fmt.Sprint(b.Addrs) + " > -"}, nil},
	}
	for _, st := range steps {
		c := mustCommit(t, d, &st.cs)
		if got := updates(c); !slices.Equal(got, st.updates) {
			t.Errorf("%s: updates %q, want %q", st.name, got, st.updates)
		}
		if got := stored(); !slices.Equal(got, st.stored) {
			t.Errorf("%s: stored %q, want %q", st.name, got, st.stored)
		}
	}
}

// DB.VM returns the VM's Client with its records.
func TestVMClient(t *testing.T) {
	d, _ := openTest(t, Options{})
	a := &Client{Owner: "owner-a", Addrs: []ClientAddr{{Addr: netip.MustParseAddr("10.0.0.5")}}}
	mustCommit(t, d, &ChangeSet{Zones: testConfig(), VMs: []VMChange{{UUID: vm1, Client: a}, {UUID: vm2}}})
	for _, tc := range []struct {
		vm   string
		want string
	}{{vm1, "owner-a[{10.0.0.5 invalid Prefix}]"}, {vm2, "<nil>"}} {
		vm, ok, err := d.VM(tc.vm)
		if err != nil || !ok {
			t.Fatalf("%s: ok %v err %v", tc.vm, ok, err)
		}
		got := "<nil>"
		if vm.Client != nil {
			got = fmt.Sprintf("%s%v", vm.Client.Owner, vm.Client.Addrs)
		}
		if got != tc.want {
			t.Errorf("%s: client %s, want %s", tc.vm, got, tc.want)
		}
	}
}
