package sdcsim

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-ldap/ldap/v3"
	"github.com/gorilla/websocket"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// syncBuffer is a log sink the test can read while Run writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// writeFile replaces the file atomically, as editors and config tools do.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func writeInventory(t *testing.T, path string, inv dc.Inventory) {
	t.Helper()
	b, err := json.MarshalIndent(inv, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
}

type runConfig struct {
	VMAPI struct {
		Address string `json:"address"`
		Limit   int    `json:"limit"`
	} `json:"vmapi_opts"`
	CNAPI struct {
		Address string `json:"address"`
	} `json:"cnapi_opts"`
	NAPI struct {
		Address string `json:"address"`
	} `json:"napi_opts"`
	UFDS struct {
		Address      string `json:"address"`
		BindDN       string `json:"bindDN"`
		BindPassword string `json:"bindPassword"`
		CAFile       string `json:"ca_file"`
	} `json:"ufds_opts"`
	Changefeed struct {
		Resource     string   `json:"resource"`
		SubResources []string `json:"subResources"`
		Instance     string   `json:"instance"`
	} `json:"changefeed_opts"`
}

func TestRun(t *testing.T) {
	inv := testInventory()
	path := filepath.Join(t.TempDir(), "inventory.json")
	writeInventory(t, path, inv)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, stdout := io.Pipe()
	logs := &syncBuffer{}
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, path, stdout, slog.New(slog.NewTextHandler(logs, nil)))
		stdout.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v (logs: %s)", err, logs)
	}
	var cfg runConfig
	if err := json.Unmarshal([]byte(line), &cfg); err != nil {
		t.Fatalf("config line %q: %v", line, err)
	}
	if !strings.HasPrefix(cfg.VMAPI.Address, "http://127.0.0.1:") || !strings.HasPrefix(cfg.CNAPI.Address, "http://127.0.0.1:") ||
		!strings.HasPrefix(cfg.NAPI.Address, "http://127.0.0.1:") || !strings.HasPrefix(cfg.UFDS.Address, "ldaps://127.0.0.1:") ||
		cfg.UFDS.BindDN != "cn=root" || cfg.UFDS.CAFile == "" || cfg.Changefeed.Resource != "vm" ||
		len(cfg.Changefeed.SubResources) != 9 || cfg.Changefeed.Instance == "" || cfg.VMAPI.Limit != 500 {
		t.Fatalf("config %+v", cfg)
	}

	// The services answer at the printed addresses.
	var servers []map[string]any
	if code, _ := get(t, cfg.CNAPI.Address, "/servers?setup=true", &servers); code != 200 || len(servers) != 2 {
		t.Fatalf("CNAPI at %s: %d %d", cfg.CNAPI.Address, code, len(servers))
	}

	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(cfg.VMAPI.Address, "http")+"/changefeeds", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, registration(cfg.Changefeed.Instance, cfg.Changefeed.SubResources)); err != nil {
		t.Fatal(err)
	}
	readBootstrap(t, ws)

	// A tag edit becomes one change item.
	inv.VMs[0].Tags = map[string]any{"triton.cns.services": "edited"}
	writeInventory(t, path, inv)
	it := readItem(t, ws)
	if it.ChangedResourceID != vmID(1) || !strings.Contains(strings.Join(it.ChangeKind.SubResources, ","), "tags") {
		t.Fatalf("after the tag edit: %+v", it)
	}

	// A broken file is logged and ignored; the next good edit applies.
	writeFile(t, path, []byte(`{"vms": [`))
	waitFor(t, "the parse error in the log", func() bool { return strings.Contains(logs.String(), "inventory edit ignored") })

	inv.VMs = append(inv.VMs[:1], inv.VMs[2:]...) // VM 2 leaves the file
	inv.Users[1].TritonCNSEnabled = "true"
	writeInventory(t, path, inv)
	it = readItem(t, ws)
	if it.ChangedResourceID != vmID(2) || !strings.Contains(strings.Join(it.ChangeKind.SubResources, ","), "destroyed") {
		t.Fatalf("after removing VM 2: %+v", it)
	}
	var vm map[string]any
	if code, _ := get(t, cfg.VMAPI.Address, "/vms/"+vmID(2), &vm); code != 200 || vm["state"] != "destroyed" {
		t.Fatalf("removed VM: %d %v", code, vm["state"])
	}

	// The user flag edit is in the UFDS changelog, read over LDAPS trusting
	// the printed CA file.
	pem, err := os.ReadFile(cfg.UFDS.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c, err := ldap.DialURL(cfg.UFDS.Address, ldap.DialWithTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bind(cfg.UFDS.BindDN, cfg.UFDS.BindPassword); err != nil {
		t.Fatal(err)
	}
	entries := search(t, c, "cn=changelog", ldap.ScopeSingleLevel, "(changenumber>=0)", 1000)
	if len(entries) != 1 || entries[0].GetAttributeValue("targetdn") != "uuid="+ownerB+", ou=users, o=smartdc" ||
		!strings.Contains(entries[0].GetAttributeValue("changes"), `"type":"triton_cns_enabled"`) {
		t.Fatalf("changelog after the user edit: %d entries", len(entries))
	}
	if n, _ := strconv.Atoi(search(t, c, "cn=latestchangenumber", ldap.ScopeSingleLevel, "(objectclass=*)", 0)[0].GetAttributeValue("count")); n != 1 {
		t.Fatalf("latestchangenumber %d", n)
	}

	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestRunBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inventory.json")
	writeFile(t, path, []byte(`{"vms":[{"uuid":"nope"}]}`))
	var out bytes.Buffer
	if err := Run(context.Background(), path, &out, nil); err == nil || out.Len() != 0 {
		t.Fatalf("Run on an invalid file: %v, printed %q", err, out.String())
	}
}

// The shared inventory, if another package has written it, loads and serves.
func TestLoadSharedInventory(t *testing.T) {
	inv, err := dc.LoadInventory("../../../testdata/inventory.json")
	if os.IsNotExist(err) {
		t.Skip("testdata/inventory.json not written yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(*inv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var vms []listedVM
	if code, hdr := get(t, s.VMAPIURL(), "/vms?state=active&limit=1000", &vms); code != 200 || hdr.Get("x-joyent-resource-count") != strconv.Itoa(len(vms)) {
		t.Fatalf("list: %d, count %s for %d VMs", code, hdr.Get("x-joyent-resource-count"), len(vms))
	}
}
