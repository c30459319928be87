package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Loopback may always transfer, whatever allow_transfer says, as with the
// reference; /allowed-peers lists both loopback addresses.
func TestLoopbackAlwaysTransfers(t *testing.T) {
	p := startCNS(t, testConfig(t, t.TempDir(), "testdata/inventory.json", func(c map[string]any) {
		c["allow_transfer"] = []string{"10.0.0.0/8"}
		c["api_server"] = map[string]any{"listen": "127.0.0.1:0"}
	}))
	api := "http://" + p.waitLog(10*time.Second, func(l logLine) bool { return l.str("msg") == "API listening" }).str("addr")
	p.waitCommitted(0)

	m := new(dns.Msg)
	m.SetAxfr(demoZone + ".")
	ch, err := new(dns.Transfer).In(m, p.addr)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for env := range ch {
		if env.Error != nil {
			t.Fatalf("AXFR from 127.0.0.1 with allow_transfer [10.0.0.0/8]: %v", env.Error)
		}
		n += len(env.RR)
	}
	if n < 10 {
		t.Errorf("AXFR from 127.0.0.1: %d records", n)
	}

	res, err := http.Get(api + "/allowed-peers")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var peers []struct {
		Address string `json:"address"`
		Mask    int    `json:"mask"`
	}
	if err := json.NewDecoder(res.Body).Decode(&peers); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, p := range peers {
		seen[p.Address] = p.Mask
	}
	if seen["127.0.0.1"] != 32 || seen["::1"] != 128 || seen["10.0.0.0"] != 8 {
		t.Errorf("/allowed-peers %+v, want 10.0.0.0/8, 127.0.0.1/32 and ::1/128", peers)
	}
}
