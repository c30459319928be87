package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tritondatacenter/cns/admin/config"
)

// sapiStandIn is SAPI as cnsadm uses it (sdc-sapi lib/server/endpoints,
// read through sdc-clients' SAPI client): GET /services?name=cns; PUT
// /services/:uuid {metadata, action} merging the metadata ("update", the
// default) or removing keys ("delete"); GET /configs/:uuid, this
// instance's metadata merged from the application's, the service's and
// the instance's own (the instance's winning), 404 for any other
// instance. Metadata keeps the order it was written in, as SAPI's moray
// objects keep the JSON they were given.
type sapiStandIn struct {
	mu             sync.Mutex
	app, svc, inst *config.JSONObject
	puts           []string
	srv            *httptest.Server
}

const (
	sapiServiceUUID  = "5b8c7a4e-1b9c-4e52-8f36-3d2b1c0a9e77"
	sapiInstanceUUID = "0c3f9a6e-7d21-4b8e-9f54-2a6d8e1b7c90"
)

// startSAPI runs the stand-in with the service's and the instance's
// metadata (JSON objects), a typical sdc application's, and puts a
// zonename that names the instance on the PATH of the cnsadm the test
// runs, as an SDC zone's /usr/bin/zonename would.
func startSAPI(t *testing.T, svc, inst string) *sapiStandIn {
	t.Helper()
	s := &sapiStandIn{
		app:  mustObject(t, `{"datacenter_name": "us-west-1", "dns_domain": "example.com", "ufds_ldap_root_dn": "cn=root", "ufds_ldap_root_pw": "secret"}`),
		svc:  mustObject(t, svc),
		inst: mustObject(t, inst),
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	t.Setenv("CNS_SAPI_URL", s.srv.URL)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "zonename"), []byte("#!/bin/sh\necho "+sapiInstanceUUID+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return s
}

func mustObject(t *testing.T, s string) *config.JSONObject {
	t.Helper()
	o := config.NewJSONObject()
	if err := json.Unmarshal([]byte(s), o); err != nil {
		t.Fatal(err)
	}
	return o
}

func (s *sapiStandIn) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	notFound := func() {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"code":"ResourceNotFound","message":"not found"}`))
	}
	switch {
	case r.Method == "GET" && r.URL.Path == "/services" && r.URL.Query().Get("name") == "cns":
		json.NewEncoder(w).Encode([]any{map[string]any{"uuid": sapiServiceUUID, "name": "cns", "metadata": s.svc}})
	case r.Method == "PUT" && r.URL.Path == "/services/"+sapiServiceUUID:
		data, _ := io.ReadAll(r.Body)
		s.puts = append(s.puts, string(data))
		var body struct {
			Action   string             `json:"action"`
			Metadata *config.JSONObject `json:"metadata"`
		}
		if err := json.Unmarshal(data, &body); err != nil || body.Metadata == nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, k := range body.Metadata.Keys() {
			if body.Action == "delete" {
				s.svc.Delete(k)
			} else {
				s.svc.Set(k, body.Metadata.Value(k))
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"uuid": sapiServiceUUID, "metadata": s.svc})
	case r.Method == "GET" && r.URL.Path == "/configs/"+sapiInstanceUUID:
		merged := config.NewJSONObject()
		for _, level := range []*config.JSONObject{s.app, s.svc, s.inst} {
			for _, k := range level.Keys() {
				merged.Set(k, level.Value(k))
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"manifests": []any{}, "metadata": merged})
	default:
		notFound()
	}
}

// putBodies returns the PUT bodies received so far and forgets them.
func (s *sapiStandIn) putBodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.puts
	s.puts = nil
	return p
}

// In an SDC zone cnsadm config shows this instance's configuration as
// config-agent renders it (GET /configs/<zonename>, instance overrides
// included), marking "*" what config-agent has not yet rendered into the
// file, and writes the cns service's metadata. A change the instance's
// own metadata overrides is said to have no effect.
func TestCnsadmConfigSAPI(t *testing.T) {
	sapi := startSAPI(t, `{"hostmaster": "other@example.com", "allow_transfer": ["10.0.0.0/8"]}`,
		`{"use_alias": false}`)
	t.Setenv("COLUMNS", "80")
	cfg := testConfig(t, t.TempDir(), "", nil)
	adm := func(args ...string) (string, string, int) {
		return runCNS(t, append([]string{"adm", "--api", "http://127.0.0.1:1", "--config-file", cfg}, args...)...)
	}
	out, stderr, code := adm("config")
	want := "my_name:         cns.us-west-1.example.com\n" +
		"hostmaster:      other@example.com*\n" +
		"use_login:       true\n" +
		"use_alias:       false*\n" +
		"allow_transfer:  10.0.0.0/8*\n" +
		"* - changes waiting on config-agent to apply\n"
	if code != 0 || out != want {
		t.Errorf("config: exit %d: %s\ngot\n%s\nwant\n%s", code, stderr, out, want)
	}
	before, _ := os.ReadFile(cfg)
	out, stderr, code = adm("config", "use_login=false")
	if code != 0 || !strings.Contains(out, "use_login:       false*\n") {
		t.Errorf("config use_login=false: exit %d: %s\n%s", code, stderr, out)
	}
	if puts := sapi.putBodies(); len(puts) != 1 || puts[0] != `{"metadata":{"use_login":false}}` {
		t.Errorf("PUTs to SAPI: %q", puts)
	}
	if after, _ := os.ReadFile(cfg); string(after) != string(before) {
		t.Error("a SAPI edit wrote the file (config-agent renders it)")
	}
	// The instance's own use_alias wins over the service's: the edit
	// is saved, and cnsadm says it does not apply here.
	_, stderr, code = adm("config", "use_alias=true")
	if code != 1 || !strings.Contains(stderr, "instance "+sapiInstanceUUID+" has its own use_alias") {
		t.Errorf("shadowed edit: exit %d: %s", code, stderr)
	}

	// Not in an SDC zone after all: no zonename.
	t.Setenv("PATH", "/nonexistent")
	_, stderr, code = runCNS(t, "adm", "--api", "http://127.0.0.1:1", "--config-file", cfg, "config")
	if code != 1 || !strings.Contains(stderr, "zonename") {
		t.Errorf("without zonename: exit %d: %s", code, stderr)
	}
}
