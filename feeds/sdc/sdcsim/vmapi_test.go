package sdcsim

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type listedVM struct {
	UUID      string  `json:"uuid"`
	State     string  `json:"state"`
	Destroyed *string `json:"destroyed"`
}

func uuids(vms []listedVM) []string {
	out := make([]string, len(vms))
	for i, vm := range vms {
		out[i] = vm.UUID
	}
	return out
}

func TestListVMsMarkerPaging(t *testing.T) {
	s := startSim(t, Options{})
	// Active: 1..6 and 9 (7 destroyed and 8 failed are not), uuid DESC.
	want := []string{vmID(9), vmID(6), vmID(5), vmID(4), vmID(3), vmID(2), vmID(1)}

	var probe []listedVM
	if code, _ := get(t, s.VMAPIURL(), "/vms?limit=1&state=active&marker="+marker("000000"), &probe); code != 200 || len(probe) != 0 {
		t.Fatalf("marker probe: %d %v, want 200 []", code, probe)
	}

	var got []string
	path := "/vms?limit=3&state=active"
	for range 10 {
		var page []listedVM
		code, hdr := get(t, s.VMAPIURL(), path, &page)
		if code != 200 {
			t.Fatalf("%s: status %d", path, code)
		}
		if n := hdr.Get("x-joyent-resource-count"); n != "7" {
			t.Errorf("%s: x-joyent-resource-count %q, want 7", path, n)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, uuids(page)...)
		path = "/vms?limit=3&state=active&marker=" + marker(page[len(page)-1].UUID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v\nwant  %v", got, want)
	}
}

// When the marker VM leaves the result set, (uuid<=M) with limit+1 rows
// and nothing to drop gives a page of limit+1.
func TestListVMsMarkerLimitPlusOne(t *testing.T) {
	s := startSim(t, Options{})
	var first []listedVM
	get(t, s.VMAPIURL(), "/vms?limit=2&state=active", &first)
	if !slices.Equal(uuids(first), []string{vmID(9), vmID(6)}) {
		t.Fatalf("first page %v", uuids(first))
	}
	if err := s.DestroyVM(vmID(6)); err != nil {
		t.Fatal(err)
	}
	var next []listedVM
	get(t, s.VMAPIURL(), "/vms?limit=2&state=active&marker="+marker(vmID(6)), &next)
	if want := []string{vmID(5), vmID(4), vmID(3)}; !slices.Equal(uuids(next), want) {
		t.Fatalf("page after a vanished marker: %v, want the limit+1 page %v", uuids(next), want)
	}
}

func TestListVMsOffsetAndFilters(t *testing.T) {
	s := startSim(t, Options{})
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"limit=2&offset=2&state=active", []string{vmID(5), vmID(4)}},
		{"state=running&owner_uuid=" + ownerA, []string{vmID(5), vmID(4), vmID(3), vmID(2), vmID(1)}},
		{"state=active&server_uuid=" + serverB, []string{vmID(9)}},
		{"state=destroyed", []string{vmID(7)}},
		{"uuid=" + vmID(3), []string{vmID(3)}},
		{"", []string{vmID(9), vmID(8), vmID(7), vmID(6), vmID(5), vmID(4), vmID(3), vmID(2), vmID(1)}},
		{"alias=vm&state=stopped", []string{vmID(6)}},
		{"tag.triton.cns.services=web&owner_uuid=" + ownerB, []string{vmID(9)}},
	} {
		var page []listedVM
		code, hdr := get(t, s.VMAPIURL(), "/vms?"+tc.query, &page)
		if code != 200 || !slices.Equal(uuids(page), tc.want) {
			t.Errorf("%s: %d %v, want %v", tc.query, code, uuids(page), tc.want)
		}
		if tc.query == "limit=2&offset=2&state=active" && hdr.Get("x-joyent-resource-count") != "7" {
			t.Errorf("%s: count %q, want 7", tc.query, hdr.Get("x-joyent-resource-count"))
		}
	}
}

func TestListVMsValidation(t *testing.T) {
	s := startSim(t, Options{})
	for _, tc := range []struct {
		query, field string
	}{
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"foo=bar", "foo"},
		{"state=sleeping", "state"},
		{"owner_uuid=admin", "owner_uuid"},
		{"marker=notjson", "marker"},
		{"marker=" + strings.ReplaceAll(marker("x"), "uuid", "id"), "marker"},
		{"marker=" + marker(vmID(3)) + "&offset=1", "marker"},
	} {
		var body restError
		code, _ := get(t, s.VMAPIURL(), "/vms?"+tc.query, &body)
		if code != http.StatusConflict || body.Code != "ValidationFailed" {
			t.Errorf("%s: %d %+v, want 409 ValidationFailed", tc.query, code, body)
			continue
		}
		if !slices.ContainsFunc(body.Errors, func(e fieldError) bool { return e.Field == tc.field && e.Code == "Invalid" }) {
			t.Errorf("%s: errors %+v, want one on field %q", tc.query, body.Errors, tc.field)
		}
	}
	var body restError
	if code, _ := get(t, s.VMAPIURL(), "/vms?predicate=%7B%7D", &body); code != 500 || !strings.Contains(body.Message, "not simulated") {
		t.Errorf("predicate: %d %+v, want 500 not simulated", code, body)
	}
}

func TestGetVM(t *testing.T) {
	s := startSim(t, Options{})
	var vm map[string]any
	if code, _ := get(t, s.VMAPIURL(), "/vms/"+vmID(7), &vm); code != 200 {
		t.Fatalf("GET destroyed VM: %d", code)
	}
	if vm["state"] != "destroyed" || vm["destroyed"] == nil {
		t.Errorf("destroyed VM: state %v destroyed %v", vm["state"], vm["destroyed"])
	}
	// translateVm's always-present keys (sdc-apis §1.3), listed here from
	// the reference rather than from the renderer.
	alwaysPresent := []string{"uuid", "alias", "autoboot", "brand", "billing_id", "cpu_cap", "cpu_shares",
		"create_timestamp", "customer_metadata", "datasets", "destroyed", "firewall_enabled", "internal_metadata",
		"last_modified", "limit_priv", "max_locked_memory", "max_lwps", "max_physical_memory", "max_swap",
		"nics", "owner_uuid", "platform_buildstamp", "quota", "ram", "resolvers", "server_uuid", "snapshots",
		"state", "tags", "zfs_filesystem", "zfs_io_priority", "zone_state", "zonepath", "zpool"}
	for _, k := range alwaysPresent {
		if _, ok := vm[k]; !ok {
			t.Errorf("always-present key %q missing", k)
		}
	}
	if v, ok := vm["billing_id"]; !ok || v != nil {
		t.Errorf("billing_id = %v, %v; want null", v, ok)
	}
	if _, ok := vm["docker"]; ok {
		t.Errorf("docker present on a non-docker VM")
	}

	var e restError
	if code, _ := get(t, s.VMAPIURL(), "/vms/"+vmID(99), &e); code != 404 || e.Code != "ResourceNotFound" {
		t.Errorf("unknown VM: %d %+v", code, e)
	}
	e = restError{}
	if code, _ := get(t, s.VMAPIURL(), "/vms/not-a-uuid", &e); code != 409 || e.Code != "ValidationFailed" ||
		len(e.Errors) != 1 || e.Errors[0].Field != "uuid" {
		t.Errorf("bad uuid: %d %+v", code, e)
	}
	e = restError{}
	if code, _ := get(t, s.VMAPIURL(), "/vms/"+vmID(1)+"?owner_uuid="+ownerB, &e); code != 404 {
		t.Errorf("owner mismatch: %d %+v, want 404", code, e)
	}
}

func TestVMAPIMisc(t *testing.T) {
	s := startSim(t, Options{})
	var ping map[string]any
	if code, hdr := get(t, s.VMAPIURL(), "/ping", &ping); code != 200 || ping["status"] != "OK" || hdr.Get("x-request-id") == "" {
		t.Errorf("ping: %d %v %v", code, ping, hdr)
	}
	var e restError
	if code, _ := get(t, s.VMAPIURL(), "/nope", &e); code != 404 || e.Message != "/nope does not exist" {
		t.Errorf("unknown route: %d %+v", code, e)
	}
	resp, err := httpClient.Post(s.VMAPIURL()+"/vms", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST /vms: %d, want 405", resp.StatusCode)
	}
	resp, err = httpClient.Head(s.VMAPIURL() + "/vms?state=active")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n, _ := strconv.Atoi(resp.Header.Get("x-joyent-resource-count")); resp.StatusCode != 200 || n != 7 {
		t.Errorf("HEAD /vms: %d count %d", resp.StatusCode, n)
	}
	if got := s.Requests(RouteListVMs); got != 1 {
		t.Errorf("Requests(ListVms) = %d, want 1", got)
	}
}
