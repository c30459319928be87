package cnsadm

import (
	"strings"
	"testing"
	"time"

	"github.com/tritondatacenter/cns/admin"
)

// The expected texts below are written from the reference cnsadm's
// layout code (lib/cmd-utils.js printFromSchema and printTable, bin/cnsadm),
// not from cns's output: label column = longest reference label + colon,
// two spaces, the value; lists one item per line under the first, "[]"
// when empty; tables padded to their widest cell, the last column too.
// A "|" ends each line so that trailing spaces stay visible.
func layout(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimSuffix(l, "|") + "\n")
	}
	return b.String()
}

// cnsadm vm of a compute node says what it is and lists its CMON names.
func TestWriteVMComputeNode(t *testing.T) {
	const headnode = "6da8b7df-c541-498f-90ef-01d5730ef236"
	names := []string{headnode + ".cmon.us-west-1.cns.example.com", headnode + ".cmon.us-west-1.int.example.com"}
	vm := &admin.VM{UUID: headnode, ComputeNode: true, Alias: "headnode", Names: names, Reasons: []string{"compute_node"}}
	var out strings.Builder
	if err := WriteVM(&out, vm, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"listed:      CMON names (a compute node)\n", "why:         compute_node  a compute node: ",
		"names:       " + names[0] + "\n             " + names[1] + "\n"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("cnsadm vm of a compute node lacks %q:\n%s", line, out.String())
		}
	}
}

// cnsadm vm of a VM with client_answers lists the addresses it asks from
// and its owner-less names.
func TestWriteVMShortNames(t *testing.T) {
	const uuid = "a1000000-0000-4000-8000-000000000001"
	vm := &admin.VM{UUID: uuid, ClientAddrs: []string{"10.0.0.5", "192.168.128.5 (fabric 192.168.128.0/22)"},
		ShortNames: []string{uuid + ".inst.z.example", "db-1.inst.z.example", "self.inst.z.example", "web.svc.z.example"}}
	var out strings.Builder
	if err := WriteVM(&out, vm, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "asks_from:   10.0.0.5, 192.168.128.5 (fabric 192.168.128.0/22)\nscoped:      "+uuid+".inst.z.example\n             db-1.inst.z.example\n") {
		t.Errorf("cnsadm vm:\n%s", out.String())
	}
}

func TestWriteVMLayout(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	vm := &admin.VM{
		UUID: "b752d788-c0e4-4307-8c56-353a4ea66c02", LastVisit: now.Add(-3 * time.Minute).UnixMilli(),
		Names: []string{"a.example.com", "b.example.com"}, Alias: "cloudapi0",
		ListInstance: true, ListServices: true, Reasons: []string{"user_en_flag", "admin"},
		Problems: []string{"no NIC on a zone's networks"},
	}
	want := layout(
		"uuid:        b752d788-c0e4-4307-8c56-353a4ea66c02|",
		"last_visit:  3 mins ago|",
		"names:       a.example.com|",
		"             b.example.com|",
		"alias:       cloudapi0|",
		"listed:      instance names, service names|",
		"why:         user_en_flag  the owner has not enabled CNS (triton_cns_enabled): not listed|",
		"             admin         an admin VM with services: always listed|",
		"problem:     no NIC on a zone's networks|",
	)
	var b strings.Builder
	WriteVM(&b, vm, now)
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	// No names: the reference's "[]"; nothing listed, no reasons.
	b.Reset()
	WriteVM(&b, &admin.VM{UUID: "e76f7f8b-fb63-4c58-adf4-5b275a0d5aa6", LastVisit: now.UnixMilli()}, now)
	want = layout(
		"uuid:        e76f7f8b-fb63-4c58-adf4-5b275a0d5aa6|",
		"last_visit:  0 sec ago|",
		"names:       []|",
		"listed:      nothing|",
	)
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWritePeerLayout(t *testing.T) {
	p := &admin.Peer{
		Address: "127.0.0.1", Version: "unknown", UsingNotify: true,
		Serials:  map[string]uint32{"us-west-1.cns.example.com": 1700000000, "128.168.192.in-addr.arpa": 1700000001},
		Counters: map[string]uint64{"axfr": 1, "ixfr": 0},
	}
	want := layout(
		"address:       127.0.0.1|",
		"version:       unknown|",
		"using_notify:  true|",
		"using_ixfr:    false|",
		"serials:       |",
		"    128.168.192.in-addr.arpa: 1700000001|",
		"    us-west-1.cns.example.com: 1700000000|",
		"|",
		"counters:      |",
		"    axfr: 1|",
		"    ixfr: 0|",
		"|",
	)
	var b strings.Builder
	WritePeer(&b, p)
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}

// A peer's drift: nothing in step, the time it lags, its serials behind
// when the time is unknown, "no copy" for a zone it has not transferred.
func TestDriftText(t *testing.T) {
	serials := map[string]uint32{"z": 1795909011}
	for _, tc := range []struct {
		name string
		pz   admin.PeerZone
		want string
	}{
		{"in step", peerZone(1795909011, 0, 0), ""},
		{"behind", peerZone(1795909001, 3, 120), "2 mins"},
		{"behind, time unknown", peerZone(1795909001, 3, -1), "3 serials"},
		{"no copy", peerZone(0, 1795909011, -1), "no copy"},
	} {
		p := admin.Peer{Zones: map[string]admin.PeerZone{"z": tc.pz}}
		if got := driftText(p, "z", serials); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := driftText(admin.Peer{}, "other", serials); got != "???" {
		t.Errorf("a zone cns does not serve: %q", got)
	}
}

func peerZone(serial uint32, driftSerials int64, driftSeconds float64) admin.PeerZone {
	return admin.PeerZone{ZoneTracking: admin.ZoneTracking{Serial: serial}, DriftSerials: driftSerials, DriftSeconds: driftSeconds}
}
