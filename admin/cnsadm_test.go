package admin

import (
	"strings"
	"testing"
	"time"
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

func TestAgo(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 sec"}, {time.Second, "1 sec"}, {2 * time.Second, "2 secs"},
		{59400 * time.Millisecond, "59 secs"}, {59500 * time.Millisecond, "1 min"},
		{90 * time.Second, "2 mins"}, {36 * time.Hour, "2 days"}, {23 * time.Hour, "23 hrs"},
		{23*time.Hour + 30*time.Minute, "1 day"}, {45 * 24 * time.Hour, "6 wks"},
	} {
		if got := Ago(tc.d); got != tc.want {
			t.Errorf("Ago(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestWriteVMLayout(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	vm := &VM{
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
	WriteVM(&b, &VM{UUID: "e76f7f8b-fb63-4c58-adf4-5b275a0d5aa6", LastVisit: now.UnixMilli()}, now)
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
	p := &Peer{
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
