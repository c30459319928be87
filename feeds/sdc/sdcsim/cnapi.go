package sdcsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// CNAPI: GET /servers (sdc-apis §3.1).

func (s *Sim) routeCNAPI(hs *httpService) {
	// ServerList (sdc-cnapi lib/endpoints/servers.js Server.list): strict
	// parameters, uuid ASC, limit/offset, the extras rules of
	// renderServer. ServerGet (GET /servers/:uuid) is not served: cns
	// does not call it (it answers every extra, vms included).
	s.handle(hs, "/servers", RouteListServers, s.listServers)
}

var serverParams = []string{
	"uuids", "setup", "headnode", "reserved", "reservoir", "hostname",
	"extras", "fields", "limit", "offset",
}

// The regular expressions of Server.list's validation rules.
var (
	boolParam  = regexp.MustCompile(`(?i)^(true|false)$`)
	wordsParam = regexp.MustCompile(`(?i)^[a-zA-Z_]+(,[a-zA-Z_]+)*$`)
	uuidsParam = regexp.MustCompile(`(?i)^[-a-z0-9A-Z]+(,[-a-z0-9A-Z]+)*$`)
	intParam   = regexp.MustCompile(`^[-+]?[0-9]+$`)
)

// listServers filters, sorts uuid ASC and pages with limit/offset; with no
// limit moray's default cap of 1000 rows applies. Validation answers as
// CNAPI's (sdc-cnapi lib/validation/endpoints.js ensureParamsValid, strict):
// an unknown parameter is 409 InvalidArgument "<name> is not an explicitly
// defined parameter"; a value failing its rule is 500 InvalidParameters
// with errors[]; a limit outside 1..1000 is 400 InvalidParameters.
func (s *Sim) listServers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if status, e, bad := serverQueryError(q); bad {
		writeError(w, status, e)
		return
	}
	bools := map[string]*bool{}
	for _, name := range []string{"setup", "headnode", "reserved", "reservoir"} {
		if q.Has(name) {
			b := strings.EqualFold(q.Get(name), "true")
			bools[name] = &b
		}
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

// serverQueryError validates GET /servers' parameters as Server.list
// does, returning the answer to a bad request.
func serverQueryError(q url.Values) (int, restError, bool) {
	for _, name := range sortedKeys(q) {
		if !slices.Contains(serverParams, name) {
			return http.StatusConflict, restError{Code: "InvalidArgument",
				Message: name + " is not an explicitly defined parameter"}, true
		}
	}
	var errs []fieldError
	for _, name := range sortedKeys(q) {
		v := q.Get(name)
		var ok bool
		switch name {
		case "setup", "headnode", "reserved", "reservoir":
			ok = boolParam.MatchString(v)
		case "extras", "fields":
			ok = wordsParam.MatchString(v)
		case "uuids":
			ok = uuidsParam.MatchString(v)
		case "limit", "offset":
			ok = intParam.MatchString(v)
		default: // hostname: any string
			ok = true
		}
		if !ok {
			errs = append(errs, invalid(name, "Invalid parameter"))
		}
	}
	if len(errs) > 0 {
		return http.StatusInternalServerError, restError{Code: "InvalidParameters",
			Message: "Request parameters failed validation", Errors: errs}, true
	}
	if q.Has("limit") {
		if n, _ := strconv.Atoi(q.Get("limit")); n < 1 || n > 1000 {
			return http.StatusBadRequest, restError{Code: "InvalidParameters",
				Message: "Request parameters failed validation",
				Errors:  []fieldError{invalid("limit", "limit must be in the range 1-1000 (inclusive)")}}, true
		}
	}
	return 0, restError{}, false
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
