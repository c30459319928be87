package sdcsim

import (
	"reflect"
	"slices"
	"testing"
)

func TestListServers(t *testing.T) {
	s := startSim(t, Options{})

	var list []map[string]any
	if code, _ := get(t, s.CNAPIURL(), "/servers?setup=true&extras=status,sysinfo", &list); code != 200 || len(list) != 2 {
		t.Fatalf("setup servers: %d %d", code, len(list))
	}
	if list[0]["uuid"] != serverA || list[1]["uuid"] != serverB {
		t.Errorf("order %v %v, want uuid ASC", list[0]["uuid"], list[1]["uuid"])
	}
	if list[0]["sysinfo"] == nil || list[0]["last_heartbeat"] == nil {
		t.Errorf("server A: sysinfo %v last_heartbeat %v", list[0]["sysinfo"], list[0]["last_heartbeat"])
	}
	if hb, ok := list[1]["last_heartbeat"]; !ok || hb != nil {
		t.Errorf("server B: last_heartbeat %v present %v, want null", hb, ok)
	}
	if list[1]["status"] != "rebooting" {
		t.Errorf("server B: status %v, want the transitional rebooting", list[1]["status"])
	}

	list = nil
	get(t, s.CNAPIURL(), "/servers?extras=status", &list)
	if len(list) != 3 {
		t.Fatalf("all servers: %d", len(list))
	}
	for _, srv := range list {
		if _, ok := srv["sysinfo"]; ok {
			t.Errorf("%v: sysinfo without asking", srv["uuid"])
		}
		if _, ok := srv["last_heartbeat"]; !ok {
			t.Errorf("%v: no last_heartbeat with extras", srv["uuid"])
		}
	}
	list = nil
	get(t, s.CNAPIURL(), "/servers", &list)
	if _, ok := list[0]["last_heartbeat"]; ok || list[0]["status"] == nil {
		t.Errorf("no extras: %v", list[0])
	}

	list = nil
	get(t, s.CNAPIURL(), "/servers?limit=1&offset=1", &list)
	if len(list) != 1 || list[0]["uuid"] != serverA {
		t.Errorf("limit=1&offset=1: %v", list)
	}
	// CNAPI's answers to bad parameters (sdc-cnapi lib/validation/
	// endpoints.js ensureParamsValid, and Server.list's limit check).
	for _, tc := range []struct {
		q    string
		code int
		rest string
	}{
		{"limit=0", 400, "InvalidParameters"},
		{"limit=1001", 400, "InvalidParameters"},
		{"bogus=1", 409, "InvalidArgument"},
		{"setup=maybe", 500, "InvalidParameters"},
		{"extras=status,1x", 500, "InvalidParameters"},
	} {
		var e restError
		if code, _ := get(t, s.CNAPIURL(), "/servers?"+tc.q, &e); code != tc.code || e.Code != tc.rest {
			t.Errorf("%s: %d %+v, want %d %s", tc.q, code, e, tc.code, tc.rest)
		}
	}

	if err := s.ServerDown(serverA); err != nil {
		t.Fatal(err)
	}
	list = nil
	get(t, s.CNAPIURL(), "/servers?uuids="+serverA+"&extras=status", &list)
	if len(list) != 1 || list[0]["status"] != "unknown" {
		t.Errorf("after ServerDown: %v", list)
	}
	if err := s.ServerUp(serverA); err != nil {
		t.Fatal(err)
	}
	srv, _ := s.Server(serverA)
	if srv.Status != "running" || srv.LastBoot != *srv.LastHeartbeat {
		t.Errorf("after ServerUp: %+v", srv)
	}
}

func TestNAPI(t *testing.T) {
	s := startSim(t, Options{})

	var n map[string]any
	if code, _ := get(t, s.NAPIURL(), "/networks/"+netFab, &n); code != 200 || n["name"] != "My-Fabric-Network" ||
		n["fabric"] != true || n["netmask"] != "255.255.252.0" || n["family"] != "ipv4" {
		t.Errorf("GET network: %d %v", code, n)
	}
	n = nil
	get(t, s.NAPIURL(), "/networks/"+netExt, &n)
	if _, ok := n["owner_uuids"]; ok {
		t.Errorf("owner_uuids present on a network without owners: %v", n)
	}
	var e restError
	if code, _ := get(t, s.NAPIURL(), "/networks/"+vmID(1), &e); code != 404 || e.Code != "ResourceNotFound" {
		t.Errorf("unknown network: %d %+v", code, e)
	}
	e = restError{}
	if code, _ := get(t, s.NAPIURL(), "/networks/bogus", &e); code != 422 || e.Code != "InvalidParameters" {
		t.Errorf("bad network uuid: %d %+v", code, e)
	}
	// Strict list schemas: NAPI's own test expectation for an unknown
	// parameter (sdc-napi test/lib/common.js ce_unknown).
	for _, path := range []string{"/networks?terra=1", "/network_pools?terra=1"} {
		var body map[string]any
		code, _ := get(t, s.NAPIURL(), path, &body)
		want := map[string]any{"code": "InvalidParameters", "message": "Invalid parameters",
			"errors": []any{map[string]any{"code": "UnknownParameters", "field": []any{"terra"}, "message": "Unknown parameters: terra"}}}
		if code != 422 || !reflect.DeepEqual(body, want) {
			t.Errorf("%s: %d %v, want 422 %v", path, code, body, want)
		}
	}

	var nets []map[string]any
	get(t, s.NAPIURL(), "/networks?nic_tag=sdc_overlay&vlan_id=2", &nets)
	if len(nets) != 1 || nets[0]["uuid"] != netFab {
		t.Errorf("nic_tag+vlan_id: %v", nets)
	}
	nets = nil
	get(t, s.NAPIURL(), "/networks?limit=2", &nets)
	if len(nets) != 2 {
		t.Errorf("limit=2: %d", len(nets))
	}
	e = restError{}
	if code, _ := get(t, s.NAPIURL(), "/networks?limit=0", &e); code != 422 {
		t.Errorf("limit=0: %d", code)
	}

	var pools []map[string]any
	get(t, s.NAPIURL(), "/network_pools", &pools)
	if len(pools) != 1 || pools[0]["nic_tag"] != "external" || !slices.Equal(toStrings(pools[0]["networks"]), []string{netExt}) {
		t.Errorf("pools: %v", pools)
	}

	for _, mac := range []string{"90:b8:d0:00:00:02", "90b8d0000002", "90B8D0000002"} {
		var nic map[string]any
		if code, _ := get(t, s.NAPIURL(), "/nics/"+mac, &nic); code != 200 || nic["belongs_to_uuid"] != vmID(2) ||
			nic["mac"] != "90:b8:d0:00:00:02" || nic["network_uuid"] != netExt || nic["ip"] != "198.51.100.2" {
			t.Errorf("nic %s: %d %v", mac, code, nic)
		}
	}
	var legacy map[string]any
	get(t, s.NAPIURL(), "/nics/90b8d0000009", &legacy)
	if legacy["network_uuid"] != netFab || legacy["owner_uuid"] != ownerB {
		t.Errorf("legacy nic: %v", legacy)
	}
	e = restError{}
	if code, _ := get(t, s.NAPIURL(), "/nics/90b8d0ffffff", &e); code != 404 || e.Code != "ResourceNotFound" {
		t.Errorf("unknown nic: %d %+v", code, e)
	}
	if code, _ := get(t, s.NAPIURL(), "/nics/zz", nil); code != 422 {
		t.Errorf("bad mac: %d", code)
	}
}

func toStrings(v any) []string {
	xs, _ := v.([]any)
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
