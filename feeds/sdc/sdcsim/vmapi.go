package sdcsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// VMAPI: GET /vms, GET /vms/:uuid, GET /ping (sdc-apis §1), plus the
// changefeed routes on the same port (changefeed.go).

func (s *Sim) routeVMAPI(hs *httpService) {
	// Ping (sdc-vmapi lib/endpoints/ping.js): answered even while moray
	// is down (the global fault spares it).
	s.handle(hs, "/ping", RoutePing, s.ping)
	// ListVms (lib/endpoints/vms.js, lib/common/validation.js strict
	// 409s, lib/apis/moray.js marker paging: uuid DESC, (uuid<=M) minus M,
	// limit+1 pages, x-joyent-resource-count; HEAD counts).
	s.handle(hs, "/vms", RouteListVMs, s.listVMs)
	// GetVm: destroyed VMs too, 404 ResourceNotFound, 409 for a non-UUID,
	// owner_uuid mismatch 404, fields projection.
	s.handle(hs, "/vms/{uuid}", RouteGetVM, s.getVM)
	// The changefeed publisher mounted on VMAPI (node-sdc-changefeed
	// publisher.js): GET /changefeeds (the resource list), the WebSocket
	// upgrade on any path, and GET /changefeeds/stats as 1.5.2+ answers
	// it, taking VMAPI down once a listener is registered (changefeed.go).
	s.handle(hs, "/changefeeds", RouteChangefeeds, s.changefeeds)
	s.handle(hs, "/changefeeds/stats", RouteChangefeeds, s.changefeedStats)
}

func (s *Sim) ping(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"status":   "OK",
		"healthy":  true,
		"services": map[string]string{"moray": "online", "wfapi": "online"},
	})
}

// vmStates are the values ListVms accepts for state; "active" is the
// negation of destroyed and failed.
var vmStates = []string{
	"active", "running", "stopped", "destroyed", "provisioning", "failed",
	"incomplete", "configured", "ready", "receiving", "stopping", "unknown", "down",
}

var vmBrands = []string{"bhyve", "joyent", "joyent-minimal", "kvm", "lx"}

// listParams are the ListVms parameters VMAPI knows. Those marked false are
// valid but not simulated: the simulator answers 500 rather than ignore
// them and return a wrong page.
var listParams = map[string]bool{
	"state": true, "owner_uuid": true, "server_uuid": true, "uuid": true,
	"uuids": true, "alias": true, "brand": true, "docker": true,
	"fields": true, "limit": true, "marker": true, "offset": true,
	"image_uuid": false, "billing_id": false, "predicate": false,
	"query": false, "sort": false,
}

func invalid(field, msg string) fieldError {
	return fieldError{Field: field, Code: "Invalid", Message: msg}
}

// vmQuery is a validated ListVms request.
type vmQuery struct {
	state, owner, server, uuid, alias, brand, docker string
	uuids                                            []string
	tags                                             map[string]string
	fields                                           []string
	limit, offset                                    int
	marker                                           string
	hasMarker                                        bool
}

func parseVMQuery(q url.Values) (vmQuery, []fieldError, string) {
	var errs []fieldError
	vq := vmQuery{limit: 1000, tags: map[string]string{}}
	for _, name := range sortedKeys(q) {
		v := q.Get(name)
		if strings.HasPrefix(name, "tag.") && len(name) > len("tag.") {
			vq.tags[name[len("tag."):]] = v
			continue
		}
		if strings.HasPrefix(name, "internal_metadata.") {
			return vq, nil, name
		}
		simulated, known := listParams[name]
		if !known {
			errs = append(errs, invalid(name, "Invalid parameter"))
			continue
		}
		if !simulated {
			return vq, nil, name
		}
		switch name {
		case "state":
			if !slices.Contains(vmStates, v) {
				errs = append(errs, invalid(name, "Invalid VM state"))
			}
			vq.state = v
		case "owner_uuid", "server_uuid", "uuid":
			if !dc.IsUUID(v) {
				errs = append(errs, invalid(name, "Invalid UUID"))
			}
			switch name {
			case "owner_uuid":
				vq.owner = v
			case "server_uuid":
				vq.server = v
			default:
				vq.uuid = v
			}
		case "uuids":
			for u := range strings.SplitSeq(v, ",") {
				if !dc.IsUUID(u) {
					errs = append(errs, invalid(name, "Invalid UUID: "+u))
					break
				}
				vq.uuids = append(vq.uuids, u)
			}
		case "alias":
			vq.alias = v
		case "brand":
			if !slices.Contains(vmBrands, v) {
				errs = append(errs, invalid(name, "Must be one of: "+strings.Join(vmBrands, ", ")))
			}
			vq.brand = v
		case "docker":
			if v != "true" && v != "false" {
				errs = append(errs, invalid(name, "Invalid boolean"))
			}
			vq.docker = v
		case "fields":
			if v != "*" {
				vq.fields = strings.Split(v, ",")
			}
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1000 {
				errs = append(errs, invalid(name, "Not a valid number: number must be >= 1 and <= 1000"))
			}
			vq.limit = n
		case "offset":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				errs = append(errs, invalid(name, "Not a valid number: number must be >= 0"))
			}
			vq.offset = n
		case "marker":
			vq.hasMarker = true
			var m map[string]any
			if err := json.Unmarshal([]byte(v), &m); err != nil || m == nil {
				errs = append(errs, invalid(name, "Invalid marker: must be a JSON object"))
				break
			}
			u, ok := m["uuid"].(string)
			if !ok {
				errs = append(errs, invalid(name, "A marker needs to have a uuid property from which to start paginating"))
				break
			}
			for k := range m {
				if k != "uuid" {
					errs = append(errs, invalid(name, "Marker key "+k+" not in sort field"))
				}
			}
			vq.marker = u
		}
	}
	if vq.hasMarker && q.Has("offset") {
		errs = append(errs, invalid("marker", "offset and marker cannot be used at the same time"))
	}
	return vq, errs, ""
}

func sortedKeys(q url.Values) []string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (vq *vmQuery) match(vm *dc.VM) bool {
	switch {
	case vq.state == "active":
		if vm.State == "destroyed" || vm.State == "failed" {
			return false
		}
	case vq.state != "" && vm.State != vq.state:
		return false
	}
	if vq.owner != "" && !strings.EqualFold(vm.OwnerUUID, vq.owner) {
		return false
	}
	if vq.server != "" && !strings.EqualFold(vm.ServerUUID, vq.server) {
		return false
	}
	if vq.uuid != "" && !strings.EqualFold(vm.UUID, vq.uuid) {
		return false
	}
	if vq.uuids != nil && !slices.ContainsFunc(vq.uuids, func(u string) bool { return strings.EqualFold(u, vm.UUID) }) {
		return false
	}
	if vq.alias != "" && !strings.HasPrefix(vm.AliasString(), vq.alias) {
		return false
	}
	if vq.brand != "" && vm.Brand != vq.brand {
		return false
	}
	if vq.docker != "" && vm.Docker != (vq.docker == "true") {
		return false
	}
	for k, want := range vq.tags {
		got, ok := vm.Tags[k]
		if !ok || (want != "*" && fmt.Sprint(got) != want) {
			return false
		}
	}
	return true
}

// listVMs is ListVms with moray's paging (sdc-apis §1.1): uuid DESC; a
// marker adds (uuid<=M), asks for limit+1 rows and drops the row equal to
// M, so a page is limit+1 long when M itself no longer matches.
func (s *Sim) listVMs(w http.ResponseWriter, r *http.Request) {
	vq, errs, unsupported := parseVMQuery(r.URL.Query())
	if unsupported != "" {
		writeError(w, http.StatusInternalServerError, restError{
			Code:    "InternalError",
			Message: fmt.Sprintf("sdcsim: parameter %q is valid in VMAPI but not simulated", unsupported),
		})
		return
	}
	if len(errs) > 0 {
		writeError(w, http.StatusConflict, restError{Code: "ValidationFailed", Message: "Invalid Parameters", Errors: errs})
		return
	}

	// Like moray with its indexes, a page costs what it returns: the
	// marker is found by binary search in the uuid DESC order, and the
	// resource count (which ignores paging) is cached until a VM changes.
	limit := vq.limit
	m := strings.ToLower(vq.marker)
	skip := vq.offset
	want := limit
	if vq.hasMarker {
		want = limit + 1
	}
	var page []*vmRecord
	s.mu.Lock()
	order := s.sortedVMs(true)
	total := s.countLocked(&vq, countKey(r.URL.Query()))
	start := 0
	if vq.hasMarker {
		start = sort.Search(len(order), func(i int) bool { return strings.ToLower(order[i]) <= m })
	}
	for i := start; i < len(order) && len(page) < want; i++ {
		rec := s.vms[order[i]]
		switch {
		case !vq.match(&rec.vm):
		case !vq.hasMarker && skip > 0:
			skip--
		default:
			page = append(page, rec)
		}
	}
	s.mu.Unlock()
	if vq.hasMarker {
		page = slices.DeleteFunc(page, func(rec *vmRecord) bool { return strings.ToLower(rec.vm.UUID) == m })
	}

	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, rec := range page {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(projectVM(rec, vq.fields))
	}
	buf.WriteByte(']')
	w.Header().Set("x-joyent-resource-count", strconv.Itoa(total))
	writeBody(w, http.StatusOK, buf.Bytes())
}

// countKey is a ListVms query without its paging and projection: the
// part that decides the resource count.
func countKey(q url.Values) string {
	c := url.Values{}
	for k, v := range q {
		switch k {
		case "limit", "marker", "offset", "fields":
		default:
			c[k] = v
		}
	}
	return c.Encode()
}

// countLocked counts the VMs vq matches, from the cache when the world has
// not changed since the same query was counted.
func (s *Sim) countLocked(vq *vmQuery, key string) int {
	if c := &s.listCount; c.gen == s.vmGen && c.query == key && c.gen != 0 {
		return c.n
	}
	n := 0
	for _, rec := range s.vms {
		if vq.match(&rec.vm) {
			n++
		}
	}
	s.listCount.gen, s.listCount.query, s.listCount.n = s.vmGen, key, n
	return n
}

// projectVM applies ListVms/GetVm "fields": listed keys only, unknown names
// ignored.
func projectVM(rec *vmRecord, fields []string) []byte {
	if fields == nil {
		return rec.wire
	}
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		if v, ok := rec.doc[f]; ok {
			out[f] = v
		}
	}
	b, _ := json.Marshal(out)
	return b
}

var getParams = []string{"owner_uuid", "sync", "fields"}

func (s *Sim) getVM(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	q := r.URL.Query()
	var errs []fieldError
	for _, name := range sortedKeys(q) {
		if !slices.Contains(getParams, name) {
			errs = append(errs, invalid(name, "Invalid parameter"))
		}
	}
	if !dc.IsUUID(id) {
		errs = append([]fieldError{invalid("uuid", "Invalid UUID")}, errs...)
	}
	if owner := q.Get("owner_uuid"); q.Has("owner_uuid") && !dc.IsUUID(owner) {
		errs = append(errs, invalid("owner_uuid", "Invalid UUID"))
	}
	if len(errs) > 0 {
		writeError(w, http.StatusConflict, restError{Code: "ValidationFailed", Message: "Invalid Parameters", Errors: errs})
		return
	}
	s.mu.Lock()
	rec, ok := s.vms[id]
	if !ok {
		// VMAPI stores uuids lower case; look up case-insensitively.
		rec, ok = s.vms[strings.ToLower(id)]
	}
	s.mu.Unlock()
	if !ok || (q.Has("owner_uuid") && !strings.EqualFold(rec.vm.OwnerUUID, q.Get("owner_uuid"))) {
		writeError(w, http.StatusNotFound, restError{Code: "ResourceNotFound", Message: "VM not found"})
		return
	}
	var fields []string
	if f := q.Get("fields"); f != "" && f != "*" {
		fields = strings.Split(f, ",")
	}
	writeBody(w, http.StatusOK, projectVM(rec, fields))
}
