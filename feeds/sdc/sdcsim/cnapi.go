package sdcsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// CNAPI: GET /servers (sdc-apis §3.1).

func (s *Sim) routeCNAPI(hs *httpService) {
	s.handle(hs, "/servers", RouteListServers, s.listServers)
}

var serverParams = []string{
	"uuids", "setup", "headnode", "reserved", "reservoir", "hostname",
	"extras", "fields", "limit", "offset",
}

var serverExtras = []string{"agents", "vms", "memory", "disk", "sysinfo", "capacity", "all", "status"}

// listServers filters, sorts uuid ASC and pages with limit/offset; with no
// limit moray's default cap of 1000 rows applies. CNAPI's exact validation
// error body is not documented in the reference notes: the simulator
// answers 400 InvalidParameters with an errors[] list for any bad or
// unknown parameter.
func (s *Sim) listServers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bools, errs := serverQuery(q)
	if len(errs) > 0 {
		writeError(w, http.StatusBadRequest, restError{
			Code: "InvalidParameters", Message: "Request parameters failed validation", Errors: errs,
		})
		return
	}
	limit, offset := 1000, 0
	if q.Has("limit") {
		limit, _ = strconv.Atoi(q.Get("limit"))
	}
	if q.Has("offset") {
		offset, _ = strconv.Atoi(q.Get("offset"))
	}
	var uuids []string
	if q.Has("uuids") {
		uuids = strings.Split(q.Get("uuids"), ",")
	}
	var extras []string
	if q.Has("extras") {
		extras = strings.Split(q.Get("extras"), ",")
	}
	var fields []string
	if f := q.Get("fields"); f != "" && f != "*" {
		fields = strings.Split(f, ",")
	}

	s.mu.Lock()
	var list []dc.Server
	for _, srv := range s.servers {
		if uuids != nil && !slices.Contains(uuids, srv.UUID) {
			continue
		}
		if b := bools["setup"]; b != nil && srv.Setup != *b {
			continue
		}
		if b := bools["headnode"]; b != nil && srv.Headnode != *b {
			continue
		}
		// The simulated servers are never reserved nor in the reservoir.
		if b := bools["reserved"]; b != nil && *b {
			continue
		}
		if b := bools["reservoir"]; b != nil && *b {
			continue
		}
		if q.Has("hostname") && srv.Hostname != q.Get("hostname") {
			continue
		}
		list = append(list, copyServer(srv))
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b dc.Server) int { return strings.Compare(a.UUID, b.UUID) })
	list = list[min(offset, len(list)):]
	if len(list) > limit {
		list = list[:limit]
	}

	var buf bytes.Buffer
	buf.WriteByte('[')
	for i := range list {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, _ := json.Marshal(renderServer(&list[i], extras, fields))
		buf.Write(b)
	}
	buf.WriteByte(']')
	writeBody(w, http.StatusOK, buf.Bytes())
}

// serverQuery validates GET /servers' parameters and returns its boolean
// filters.
func serverQuery(q url.Values) (map[string]*bool, []fieldError) {
	var errs []fieldError
	bools := map[string]*bool{}
	for _, name := range sortedKeys(q) {
		v := q.Get(name)
		if !slices.Contains(serverParams, name) {
			errs = append(errs, invalid(name, "unknown parameter"))
			continue
		}
		switch name {
		case "setup", "headnode", "reserved", "reservoir":
			switch strings.ToLower(v) {
			case "true":
				b := true
				bools[name] = &b
			case "false":
				b := false
				bools[name] = &b
			default:
				errs = append(errs, invalid(name, "must be true or false"))
			}
		case "extras":
			for e := range strings.SplitSeq(v, ",") {
				if !slices.Contains(serverExtras, e) {
					errs = append(errs, invalid(name, "unknown extra "+e))
				}
			}
		case "uuids":
			for u := range strings.SplitSeq(v, ",") {
				if !dc.IsUUID(u) {
					errs = append(errs, invalid(name, "invalid UUID "+u))
				}
			}
		case "limit":
			if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 1000 {
				errs = append(errs, invalid(name, "must be an integer between 1 and 1000"))
			}
		case "offset":
			if n, err := strconv.Atoi(v); err != nil || n < 0 {
				errs = append(errs, invalid(name, "must be a non-negative integer"))
			}
		}
	}
	return bools, errs
}

// renderServer is CNAPI's server object for the given extras
// (sdc-cnapi lib/models/server.js getFinal and _addHeartbeatInfo; sdc-apis
// §3.2), key by key rather than from dc.Server's JSON tags: without
// extras only status is added; with any, status and last_heartbeat (null
// when this CNAPI has seen no heartbeat); sysinfo only when asked for. A
// status of unknown is replaced by a set transitional_status.
func renderServer(srv *dc.Server, extras, fields []string) map[string]any {
	status := srv.Status
	if status == "" {
		status = "unknown"
	}
	if status == "unknown" && srv.TransitionalStatus != "" {
		status = srv.TransitionalStatus
	}
	doc := map[string]any{
		"uuid":                srv.UUID,
		"hostname":            srv.Hostname,
		"setup":               srv.Setup,
		"status":              status,
		"transitional_status": srv.TransitionalStatus,
		"last_boot":           orNull(srv.LastBoot),
		"headnode":            srv.Headnode,
		"datacenter":          orNull(srv.Datacenter),
		"reserved":            false,
		"reservoir":           false,
		"traits":              map[string]any{},
	}
	if extras != nil {
		doc["last_heartbeat"] = srv.LastHeartbeat
	}
	if srv.Sysinfo != nil && (slices.Contains(extras, "sysinfo") || slices.Contains(extras, "all")) {
		doc["sysinfo"] = srv.Sysinfo
	}
	if fields != nil {
		out := make(map[string]any, len(fields))
		for _, f := range fields {
			if v, ok := doc[f]; ok {
				out[f] = v
			}
		}
		return out
	}
	return doc
}
