package cnsadm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/db/durable"
)

// cnsadm config and cnsadm zones edit the configuration: in an SDC zone
// the SAPI service metadata (config-agent then renders the file), elsewhere
// the config file itself. Every edit is validated before it is written.

// Store is where the configuration lives.
type Store interface {
	// Load returns the configuration as a JSON object, in its order.
	Load() (*config.JSONObject, error)
	// Save writes the changed top-level keys (nil value: delete the key).
	Save(changes map[string]any) error
	// Describe names the store for messages.
	Describe() string
}

// FileStore is a config.json on disk.
type FileStore struct{ Path string }

func (f FileStore) Describe() string { return f.Path }

func (f FileStore) Load() (*config.JSONObject, error) {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, err
	}
	m := config.NewJSONObject()
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return m, nil
}

// Save rewrites the file atomically and durably (durable.WriteFile), its
// keys in their order, new keys last.
func (f FileStore) Save(changes map[string]any) error {
	m, err := f.Load()
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(changes)) {
		if v := changes[k]; v == nil {
			m.Delete(k)
		} else {
			m.Set(k, v)
		}
	}
	data, err := json.MarshalIndent(m, "", "\t")
	if err != nil {
		return err
	}
	// Synced before and after the rename: a power cut leaves the old
	// file or the new one, never an empty one cns cannot start from.
	return durable.WriteFile(f.Path, append(data, '\n'), 0o644)
}

// SAPIStore is the configuration in SAPI, as the reference's cnsadm
// reads and writes it: this instance's merged metadata (GET
// /configs/<zonename>: the sdc application's, the cns service's and the
// instance's own, the instance's winning) over the rendered file, and
// writes to the cns service's metadata (PUT /services/<uuid>).
type SAPIStore struct {
	URL  string // SAPI base URL
	HTTP *http.Client
	// Instance is this zone's name, its SAPI instance UUID (zonename).
	Instance string
	// Base is the rendered config file, for the keys SAPI metadata does
	// not hold (those config-agent's template fills in).
	Base FileStore
}

func (s SAPIStore) Describe() string { return "SAPI " + s.URL + " (service cns)" }

func (s SAPIStore) client() *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// get GETs a SAPI path into v.
func (s SAPIStore) get(path string, v any) error {
	resp, err := s.client().Get(strings.TrimSuffix(s.URL, "/") + path)
	if err != nil {
		return fmt.Errorf("SAPI: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("SAPI: GET %s: %s %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("SAPI: GET %s: %w", path, err)
	}
	return nil
}

// service returns the cns service's uuid.
func (s SAPIStore) service() (string, error) {
	var svcs []struct {
		UUID string `json:"uuid"`
	}
	if err := s.get("/services?name=cns", &svcs); err != nil {
		return "", err
	}
	if len(svcs) != 1 {
		return "", fmt.Errorf("SAPI: %d services named cns, want 1", len(svcs))
	}
	return svcs[0].UUID, nil
}

// merged returns this instance's metadata as config-agent renders it.
func (s SAPIStore) merged() (*config.JSONObject, error) {
	if s.Instance == "" {
		return nil, errors.New("SAPI: this zone's instance UUID (zonename) is unknown")
	}
	var cfg struct {
		Metadata *config.JSONObject `json:"metadata"`
	}
	if err := s.get("/configs/"+url.PathEscape(s.Instance), &cfg); err != nil {
		return nil, err
	}
	if cfg.Metadata == nil {
		return nil, fmt.Errorf("SAPI: GET /configs/%s: no metadata", s.Instance)
	}
	return cfg.Metadata, nil
}

// overlaid returns the rendered file and, for each of its keys and each
// key cns knows, the metadata config-agent renders it from, when they
// differ. The rest of the metadata (the sdc application's datacenter_name,
// dns_domain, ...) is the template's input, not configuration. Loopback
// in allow_transfer is left out of the comparison: the template adds it.
func (s SAPIStore) overlaid() (file *config.JSONObject, meta map[string]any, err error) {
	merged, err := s.merged()
	if err != nil {
		return nil, nil, err
	}
	file, err = s.Base.Load()
	if err != nil {
		file = config.NewJSONObject() // nothing rendered yet
	}
	meta = map[string]any{}
	for _, k := range merged.Keys() {
		_, inFile := file.Get(k)
		if _, known := config.Lookup(k); !inFile && !known {
			continue
		}
		v, f := merged.Value(k), file.Value(k)
		if k == "allow_transfer" {
			v, f = withoutLoopback(v), withoutLoopback(f)
		}
		if !inFile || !reflect.DeepEqual(v, f) {
			meta[k] = merged.Value(k)
		}
	}
	return file, meta, nil
}

// Load is the rendered file with the metadata that differs from it laid
// over it, as the reference's cnsadm shows the configuration.
func (s SAPIStore) Load() (*config.JSONObject, error) {
	cfg, meta, err := s.overlaid()
	if err != nil {
		return nil, err
	}
	// Set keeps a file key in its place; the others go last, in order.
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		cfg.Set(k, meta[k])
	}
	return cfg, nil
}

// Waiting is the keys whose SAPI metadata config-agent has yet to render
// into the file, which cnsadm config marks "*" as the reference does.
func (s SAPIStore) Waiting() (map[string]bool, error) {
	_, meta, err := s.overlaid()
	if err != nil {
		return nil, err
	}
	waiting := map[string]bool{}
	for k := range meta {
		waiting[k] = true
	}
	return waiting, nil
}

// withoutLoopback is a JSON list without its loopback entries.
func withoutLoopback(v any) any {
	list, ok := v.([]any)
	if !ok {
		return v
	}
	out := []any{}
	for _, it := range list {
		if s, ok := it.(string); !ok || !isLoopback(s) {
			out = append(out, it)
		}
	}
	return out
}

// Save writes the changes as the cns service's metadata: PUT
// /services/<uuid> {"metadata": changes}, a deleted key with action
// "delete"; config-agent then renders the file. A key this instance's own
// metadata overrides would not change: Save says so.
func (s SAPIStore) Save(changes map[string]any) error {
	uuid, err := s.service()
	if err != nil {
		return err
	}
	update, remove := map[string]any{}, map[string]any{}
	for k, v := range changes {
		if v == nil {
			remove[k] = true
		} else {
			update[k] = v
		}
	}
	for _, body := range []map[string]any{{"metadata": update}, {"action": "delete", "metadata": remove}} {
		if len(body["metadata"].(map[string]any)) == 0 {
			continue
		}
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("PUT", strings.TrimSuffix(s.URL, "/")+"/services/"+uuid, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client().Do(req)
		if err != nil {
			return fmt.Errorf("SAPI: %w", err)
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("SAPI: PUT /services/%s: %s %s", uuid, resp.Status, strings.TrimSpace(string(msg)))
		}
	}
	return s.checkApplied(update)
}

// checkApplied reports the written keys whose value this instance does
// not get: its own metadata overrides the service's.
func (s SAPIStore) checkApplied(update map[string]any) error {
	if len(update) == 0 {
		return nil
	}
	merged, err := s.merged()
	if err != nil {
		return err
	}
	var shadowed []string
	for k, v := range update {
		b, _ := json.Marshal(v)
		want, _ := config.DecodeJSON(b)
		if !reflect.DeepEqual(merged.Value(k), want) {
			shadowed = append(shadowed, k)
		}
	}
	if len(shadowed) > 0 {
		slices.Sort(shadowed)
		return fmt.Errorf("saved to the cns service's SAPI metadata, but instance %s has its own %s, which wins: change or remove it there (sapiadm update %s)",
			s.Instance, strings.Join(shadowed, ", "), s.Instance)
	}
	return nil
}

// Modifier is one `key=value`, `key+=value` or `key-=value` argument.
type Modifier struct {
	Key   string
	Op    string // "=", "+=", "-="
	Value string
}

var modifierRE = regexp.MustCompile(`^([a-z][a-z0-9_.-]*[a-z0-9])([+-]?=)(.+)$`)

// ParseModifier parses a cnsadm modifier.
func ParseModifier(s string) (Modifier, error) {
	m := modifierRE.FindStringSubmatch(s)
	if m == nil {
		return Modifier{}, fmt.Errorf("%q is not a modifier (key=value, key+=value or key-=value)", s)
	}
	return Modifier{Key: m[1], Op: m[2], Value: m[3]}, nil
}

// kindOf is how a key's value is written on the command line: its kind
// in the key table (top-level keys, then a zone's keys), else the kind of
// its current value.
func kindOf(key string, current any) config.Kind {
	if k, ok := config.Lookup(key); ok {
		return k.Kind
	}
	for _, zk := range config.ZoneKeys {
		if zk.Name == key {
			return zk.Kind
		}
	}
	switch current.(type) {
	case bool:
		return config.Bool
	case []any:
		return config.List
	case float64:
		return config.Number
	case *config.JSONObject:
		return config.Object
	}
	return config.String
}

// Apply applies a modifier to obj, in place.
func (m Modifier) Apply(obj *config.JSONObject) error {
	cur := obj.Value(m.Key)
	kind := kindOf(m.Key, cur)
	if m.Op != "=" && kind != config.List {
		return fmt.Errorf("%s: %s works on lists only", m.Key, m.Op)
	}
	switch kind {
	case config.Bool:
		switch strings.ToLower(m.Value) {
		case "true", "yes", "on":
			obj.Set(m.Key, true)
		case "false", "no", "off":
			obj.Set(m.Key, false)
		default:
			return fmt.Errorf("%s: %q is not a boolean (true/yes/on, false/no/off)", m.Key, m.Value)
		}
	case config.Number:
		n, err := strconv.ParseFloat(m.Value, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a number", m.Key, m.Value)
		}
		obj.Set(m.Key, n)
	case config.Object:
		v := config.NewJSONObject()
		if err := json.Unmarshal([]byte(m.Value), v); err != nil {
			return fmt.Errorf("%s: want a JSON object: %v", m.Key, err)
		}
		obj.Set(m.Key, v)
	case config.List:
		items := strings.Split(m.Value, ",")
		var list []any
		if existing, ok := cur.([]any); ok {
			list = slices.Clone(existing)
		}
		switch m.Op {
		case "=":
			list = nil
			for _, it := range items {
				list = append(list, strings.TrimSpace(it))
			}
		case "+=":
			for _, it := range items {
				if it = strings.TrimSpace(it); !slices.Contains(list, any(it)) {
					list = append(list, it)
				}
			}
		case "-=":
			for _, it := range items {
				it = strings.TrimSpace(it)
				if m.Key == "allow_transfer" && isLoopback(it) {
					return fmt.Errorf("%s: %s cannot be removed: loopback may always transfer (local tools use it), as with the reference", m.Key, it)
				}
				if !slices.Contains(list, any(it)) {
					return fmt.Errorf("%s: %q is not in the list", m.Key, it)
				}
				list = slices.DeleteFunc(list, func(x any) bool { return x == it })
			}
		}
		if list == nil {
			list = []any{}
		}
		obj.Set(m.Key, list)
	default:
		obj.Set(m.Key, m.Value)
	}
	return nil
}

// isLoopback reports whether s is 127.0.0.1 or ::1, with or without a
// host-length prefix.
func isLoopback(s string) bool {
	if p, err := netip.ParsePrefix(s); err == nil && p.IsSingleIP() {
		s = p.Addr().String()
	}
	a, err := netip.ParseAddr(s)
	return err == nil && (a == netip.MustParseAddr("127.0.0.1") || a == netip.IPv6Loopback())
}

// Editor changes the configuration through a store, validating the whole
// result first.
type Editor struct {
	Store Store
	// File names the configuration in validation errors.
	File string
	// Reload asks the running server to apply the new file (file stores).
	Reload func(context.Context) error
}

// errNothingToDo marks a zones -a without modifiers: it only prints.
var errNothingToDo = errors.New("nothing to change")

// Config applies modifiers to the top-level configuration.
func (e *Editor) Config(ctx context.Context, mods []Modifier) (*config.JSONObject, error) {
	cfg, err := e.Store.Load()
	if err != nil {
		return nil, err
	}
	changes := map[string]any{}
	for _, m := range mods {
		k, known := config.Lookup(m.Key)
		switch {
		case strings.Contains(m.Key, ".") || known && k.Cnsadm == config.ZonesOnly:
			return nil, fmt.Errorf("%s: edit zones with cnsadm zones", m.Key)
		case !known || k.Cnsadm == config.Unedited:
			return nil, fmt.Errorf("%s: not a key cnsadm config edits; it edits %s (and zones with cnsadm zones)", m.Key, strings.Join(config.Editable(), ", "))
		}
		if err := m.Apply(cfg); err != nil {
			return nil, err
		}
		changes[m.Key] = cfg.Value(m.Key)
	}
	return cfg, e.Commit(ctx, cfg, changes)
}

// Zone edits one forward zone (or "reverse"/"ip-reverse-lookup" for the
// reverse zones' settings): add creates it, last; del deletes it;
// modifiers change it, and zone=NEW renames it in its place. Every other
// zone keeps its place: their order is the order a NIC's zones are tried.
func (e *Editor) Zone(ctx context.Context, name string, add, del bool, mods []Modifier) (*config.JSONObject, error) {
	cfg, err := e.Store.Load()
	if err != nil {
		return nil, err
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	reverse := name == "reverse" || name == "ip-reverse-lookup"
	zones := cfg.Object("forward_zones")
	if zones == nil {
		zones = config.NewJSONObject()
	}
	var z *config.JSONObject
	switch {
	case reverse:
		if add || del {
			return nil, errors.New("the reverse zones' settings cannot be added or deleted")
		}
		if z = cfg.Object("reverse_zones"); z == nil {
			z = config.NewJSONObject()
		}
	case add:
		if _, ok := zones.Get(name); ok {
			return nil, fmt.Errorf("zone %s already exists", name)
		}
		z = config.NewJSONObject()
	default:
		if z = zones.Object(name); z == nil {
			return nil, fmt.Errorf("zone %s is not configured", name)
		}
	}
	if del {
		zones.Delete(name)
		cfg.Set("forward_zones", zones)
		return z, e.Commit(ctx, cfg, map[string]any{"forward_zones": zones})
	}
	if len(mods) == 0 {
		if add {
			return z, errNothingToDo
		}
		return z, nil
	}
	newName := name
	for _, m := range mods {
		if m.Key == "zone" {
			if reverse || m.Op != "=" {
				return nil, errors.New("zone=NEW renames a forward zone")
			}
			newName = strings.ToLower(strings.TrimSuffix(m.Value, "."))
			continue
		}
		if !zoneKeyEditable(m.Key, reverse) {
			return nil, fmt.Errorf("%s: not a zone setting; cnsadm zones edits %s", m.Key, strings.Join(zoneKeyNames(reverse), ", "))
		}
		if err := m.Apply(z); err != nil {
			return nil, err
		}
	}
	if reverse {
		cfg.Set("reverse_zones", z)
		return z, e.Commit(ctx, cfg, map[string]any{"reverse_zones": z})
	}
	if newName != name {
		if _, ok := zones.Get(newName); ok {
			return nil, fmt.Errorf("zone %s already exists", newName)
		}
	}
	zones.Set(name, z)
	zones.Rename(name, newName)
	cfg.Set("forward_zones", zones)
	return z, e.Commit(ctx, cfg, map[string]any{"forward_zones": zones})
}

// zoneKeyEditable reports whether key is a setting of a forward zone (or,
// with reverse, of the reverse zones).
func zoneKeyEditable(key string, reverse bool) bool {
	return slices.Contains(zoneKeyNames(reverse), key)
}

// zoneKeyNames is the settings cnsadm zones edits, zone=NEW included for
// forward zones.
func zoneKeyNames(reverse bool) []string {
	var names []string
	for _, zk := range config.ZoneKeys {
		if zk.Reverse || !reverse {
			names = append(names, zk.Name)
		}
	}
	if !reverse {
		names = append(names, "zone")
	}
	return names
}

// Commit validates the whole new configuration cfg, saves the changed
// keys and asks the server to reload (file stores; SAPI stores reload
// through config-agent).
func (e *Editor) Commit(ctx context.Context, cfg *config.JSONObject, changes map[string]any) error {
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if _, err := config.Parse(data, e.File); err != nil {
		return fmt.Errorf("not saved: %w", err)
	}
	if err := e.Store.Save(changes); err != nil {
		return err
	}
	if _, isFile := e.Store.(FileStore); isFile && e.Reload != nil {
		if err := e.Reload(ctx); err != nil {
			return fmt.Errorf("saved to %s, but the server did not reload: %w", e.Store.Describe(), err)
		}
	}
	return nil
}

// IsNothingToDo reports a zones -a without modifiers.
func IsNothingToDo(err error) bool { return errors.Is(err, errNothingToDo) }
