package sdcsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// NAPI: networks, network pools and NICs (sdc-apis §4). NICs are derived
// from the VMs' nics, as vmadm and NAPI agree on them in a healthy DC.

func (s *Sim) routeNAPI(hs *httpService) {
	// ListNetworks (sdc-napi lib/models/network.js LIST_SCHEMA, strict):
	// the filters, uuid order, limit 1..1000 (default 1000) and offset,
	// 422 InvalidParameters for a bad value or an unknown parameter.
	s.handle(hs, "/networks", RouteListNetworks, s.listNetworks)
	// GetNetwork: the network as serialize() renders it, 404
	// ResourceNotFound for an unknown uuid, 422 for one that is not a UUID.
	s.handle(hs, "/networks/{uuid}", RouteGetNetwork, s.getNetwork)
	// ListNetworkPools (lib/models/network-pool.js LIST_SCHEMA, strict).
	s.handle(hs, "/network_pools", RouteListNetworkPools, s.listNetworkPools)
	// GetNetworkPool (lib/endpoints/network-pools.js): the pool as the
	// list renders it, 404 ResourceNotFound for an unknown uuid, 422 for
	// one that is not a UUID.
	s.handle(hs, "/network_pools/{uuid}", RouteGetNetworkPool, s.getNetworkPool)
	// GetNic (lib/endpoints/nics.js): the MAC with or without colons
	// (older NAPIs took it only without), 404 for an unknown NIC.
	s.handle(hs, "/nics/{mac}", RouteGetNIC, s.getNIC)
}

// The parameters of NAPI's strict list schemas.
var (
	networkListParams = []string{"uuid", "fabric", "family", "limit", "name", "nic_tag", "offset",
		"owner_uuid", "provisionable_by", "vlan_id"}
	poolListParams = []string{"uuid", "limit", "offset", "name", "family", "networks", "provisionable_by"}
)

// napiUnknown answers a request with parameters a strict NAPI schema does
// not know, as sdc-napi lib/util/errors.js unknownParams does: one error
// whose field is the list of names. It reports whether it answered.
func napiUnknown(w http.ResponseWriter, q map[string][]string, known []string) bool {
	var unknown []string
	for k := range q {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return false
	}
	slices.Sort(unknown)
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"code": "InvalidParameters", "message": "Invalid parameters",
		"errors": []map[string]any{{"code": "UnknownParameters", "field": unknown,
			"message": "Unknown parameters: " + strings.Join(unknown, ", ")}},
	})
	return true
}

func napiInvalid(w http.ResponseWriter, errs []fieldError) {
	writeError(w, http.StatusUnprocessableEntity, restError{
		Code: "InvalidParameters", Message: "Invalid parameters", Errors: errs,
	})
}

func napiParam(field, msg string) fieldError {
	return fieldError{Field: field, Code: "InvalidParameter", Message: msg}
}

func napiNotFound(w http.ResponseWriter, what string) {
	writeError(w, http.StatusNotFound, restError{Code: "ResourceNotFound", Message: what + " not found"})
}

// napiPage reads NAPI's limit (1..1000, default 1000) and offset.
func napiPage(q map[string][]string) (limit, offset int, errs []fieldError) {
	limit = 1000
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > 1000 {
			errs = append(errs, napiParam("limit", "invalid limit, must be an integer greater than 0 or less than or equal to 1000"))
		}
		limit = n
	}
	if v, ok := q["offset"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 0 {
			errs = append(errs, napiParam("offset", "invalid value, must be a positive integer"))
		}
		offset = n
	}
	return limit, offset, errs
}

func networkFamily(n *dc.Network) string {
	if n.Family != "" {
		return n.Family
	}
	if strings.Contains(n.Subnet, ":") {
		return "ipv6"
	}
	return "ipv4"
}

// renderNetwork is NAPI's serialization (sdc-napi lib/models/network.js
// serialize; sdc-apis §4), key by key rather than from dc.Network's JSON
// tags: vlan_id and family always, a netmask for IPv4 subnets,
// owner_uuids and fabric only when set.
func renderNetwork(n *dc.Network) map[string]any {
	doc := map[string]any{
		"uuid":    n.UUID,
		"name":    n.Name,
		"family":  networkFamily(n),
		"vlan_id": 0,
	}
	if n.Subnet != "" {
		doc["subnet"] = n.Subnet
	}
	if n.NICTag != "" {
		doc["nic_tag"] = n.NICTag
	}
	if n.VLANID != nil {
		doc["vlan_id"] = *n.VLANID
	}
	if n.OwnerUUIDs != nil {
		doc["owner_uuids"] = n.OwnerUUIDs
	}
	if n.Fabric {
		doc["fabric"] = true
	}
	if p, err := netip.ParsePrefix(n.Subnet); err == nil && p.Addr().Is4() {
		m := uint32(0xffffffff) << (32 - p.Bits())
		if p.Bits() == 0 {
			m = 0
		}
		doc["netmask"] = netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}).String()
	}
	return doc
}

func writeArray[T any](w http.ResponseWriter, items []T) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, _ := json.Marshal(it)
		buf.Write(b)
	}
	buf.WriteByte(']')
	writeBody(w, http.StatusOK, buf.Bytes())
}

func (s *Sim) getNetwork(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	if !dc.IsUUID(id) {
		napiInvalid(w, []fieldError{napiParam("uuid", "invalid UUID")})
		return
	}
	s.mu.Lock()
	n, ok := s.networks[id]
	s.mu.Unlock()
	if !ok {
		napiNotFound(w, "network")
		return
	}
	writeJSON(w, http.StatusOK, renderNetwork(&n))
}

// listNetworks supports NAPI's filters fabric, family, name, vlan_id,
// nic_tag, owner_uuid and provisionable_by (uuid prefixes are refused as
// not simulated).
func (s *Sim) listNetworks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if napiUnknown(w, q, networkListParams) {
		return
	}
	if q.Has("uuid") {
		writeError(w, http.StatusInternalServerError, restError{Code: "InternalError", Message: "sdcsim: uuid filter not simulated"})
		return
	}
	limit, offset, errs := napiPage(q)
	vlan := -1
	if q.Has("vlan_id") {
		n, err := strconv.Atoi(q.Get("vlan_id"))
		if err != nil || n < 0 || n > 4094 {
			errs = append(errs, napiParam("vlan_id", "VLAN ID must be a number between 0 and 4094, and not 1"))
		}
		vlan = n
	}
	for _, p := range []string{"owner_uuid", "provisionable_by"} {
		if q.Has(p) && !dc.IsUUID(q.Get(p)) {
			errs = append(errs, napiParam(p, "invalid UUID"))
		}
	}
	if q.Has("fabric") && q.Get("fabric") != "true" && q.Get("fabric") != "false" {
		errs = append(errs, napiParam("fabric", "must be a boolean value"))
	}
	if len(errs) > 0 {
		napiInvalid(w, errs)
		return
	}
	s.mu.Lock()
	var list []dc.Network
	for _, n := range s.networks {
		v := 0
		if n.VLANID != nil {
			v = *n.VLANID
		}
		switch {
		case vlan >= 0 && v != vlan,
			q.Has("nic_tag") && n.NICTag != q.Get("nic_tag"),
			q.Has("name") && n.Name != q.Get("name"),
			q.Has("family") && networkFamily(&n) != q.Get("family"),
			q.Has("fabric") && n.Fabric != (q.Get("fabric") == "true"),
			q.Has("owner_uuid") && !slices.Contains(n.OwnerUUIDs, q.Get("owner_uuid")),
			q.Has("provisionable_by") && n.OwnerUUIDs != nil && !slices.Contains(n.OwnerUUIDs, q.Get("provisionable_by")):
			continue
		}
		list = append(list, n)
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b dc.Network) int { return strings.Compare(a.UUID, b.UUID) })
	list = list[min(offset, len(list)):]
	list = list[:min(limit, len(list))]
	out := make([]map[string]any, len(list))
	for i := range list {
		out[i] = renderNetwork(&list[i])
	}
	writeArray(w, out)
}

func (s *Sim) getNetworkPool(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	if !dc.IsUUID(id) {
		napiInvalid(w, []fieldError{napiParam("uuid", "invalid UUID")})
		return
	}
	s.mu.Lock()
	p, ok := s.pools[id]
	var doc map[string]any
	if ok {
		doc = s.renderPoolLocked(&p)
	}
	s.mu.Unlock()
	if !ok {
		napiNotFound(w, "network pool")
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// listNetworkPools supports name, family, networks and provisionable_by.
func (s *Sim) listNetworkPools(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if napiUnknown(w, q, poolListParams) {
		return
	}
	if q.Has("uuid") {
		writeError(w, http.StatusInternalServerError, restError{Code: "InternalError", Message: "sdcsim: uuid filter not simulated"})
		return
	}
	limit, offset, errs := napiPage(q)
	if q.Has("provisionable_by") && !dc.IsUUID(q.Get("provisionable_by")) {
		errs = append(errs, napiParam("provisionable_by", "invalid UUID"))
	}
	if len(errs) > 0 {
		napiInvalid(w, errs)
		return
	}
	s.mu.Lock()
	var out []map[string]any
	uuids := make([]string, 0, len(s.pools))
	for u := range s.pools {
		uuids = append(uuids, u)
	}
	slices.Sort(uuids)
	for _, u := range uuids {
		p := s.pools[u]
		if q.Has("name") && p.Name != q.Get("name") ||
			q.Has("networks") && !slices.Contains(p.Networks, q.Get("networks")) ||
			q.Has("provisionable_by") && p.OwnerUUIDs != nil && !slices.Contains(p.OwnerUUIDs, q.Get("provisionable_by")) {
			continue
		}
		doc := s.renderPoolLocked(&p)
		if q.Has("family") && doc["family"] != q.Get("family") {
			continue
		}
		out = append(out, doc)
	}
	s.mu.Unlock()
	out = out[min(offset, len(out)):]
	out = out[:min(limit, len(out))]
	writeArray(w, out)
}

// renderPoolLocked is NAPI's pool: networks sorted, nic_tags_present from
// the member networks, nic_tag its first entry, owner_uuids only when set.
func (s *Sim) renderPoolLocked(p *dc.NetworkPool) map[string]any {
	nets := slices.Clone(p.Networks)
	slices.Sort(nets)
	var tags []string
	family := p.Family
	for _, u := range nets {
		if n, ok := s.networks[u]; ok {
			if n.NICTag != "" && !slices.Contains(tags, n.NICTag) {
				tags = append(tags, n.NICTag)
			}
			if family == "" {
				family = networkFamily(&n)
			}
		}
	}
	if p.NICTag != "" && !slices.Contains(tags, p.NICTag) {
		tags = append([]string{p.NICTag}, tags...)
	}
	if family == "" {
		family = "ipv4"
	}
	doc := map[string]any{
		"uuid":     p.UUID,
		"name":     p.Name,
		"family":   family,
		"networks": nets,
	}
	if len(tags) > 0 {
		doc["nic_tags_present"] = tags
		doc["nic_tag"] = tags[0]
	}
	if p.OwnerUUIDs != nil {
		doc["owner_uuids"] = p.OwnerUUIDs
	}
	return doc
}

// normalizeMAC accepts a MAC with or without colons (CNS strips them) and
// returns its 12 lower-case hex digits.
func normalizeMAC(mac string) (string, bool) {
	m := strings.ToLower(strings.NewReplacer(":", "", "-", "").Replace(mac))
	if len(m) != 12 {
		return "", false
	}
	for _, c := range m {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return "", false
		}
	}
	return m, true
}

func (s *Sim) getNIC(w http.ResponseWriter, r *http.Request) {
	want, ok := normalizeMAC(r.PathValue("mac"))
	if !ok {
		napiInvalid(w, []fieldError{napiParam("mac", "invalid MAC address")})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.sortedVMs(true) {
		rec := s.vms[u]
		if rec.vm.State == "destroyed" {
			continue // NAPI deletes a destroyed VM's NICs
		}
		for i := range rec.vm.NICs {
			nic := &rec.vm.NICs[i]
			if m, _ := normalizeMAC(nic.MAC); m == want {
				writeJSON(w, http.StatusOK, s.renderNICLocked(&rec.vm, nic))
				return
			}
		}
	}
	napiNotFound(w, "nic")
}

// renderNICLocked is NAPI's NIC: a single ip (NAPI has no ips), the owner
// and belongs_to of the VM, and a network_uuid even for legacy vmadm NICs
// without one (NAPI always knows it: found here by subnet and nic tag).
func (s *Sim) renderNICLocked(vm *dc.VM, nic *dc.NIC) map[string]any {
	ip := nic.IP
	if ip == "" {
		for _, a := range nic.IPs {
			if a != "dhcp" && a != "addrconf" {
				ip, _, _ = strings.Cut(a, "/")
				break
			}
		}
	}
	vlan := 0
	if nic.VLANID != nil {
		vlan = *nic.VLANID
	}
	doc := map[string]any{
		"mac":                nic.MAC,
		"ip":                 ip,
		"vlan_id":            vlan,
		"nic_tag":            nic.NICTag,
		"primary":            nic.Primary,
		"owner_uuid":         vm.OwnerUUID,
		"belongs_to_uuid":    vm.UUID,
		"belongs_to_type":    "zone",
		"state":              "running",
		"created_timestamp":  vm.CreateTimestamp,
		"modified_timestamp": vm.LastModified,
	}
	if nic.Netmask != "" {
		doc["netmask"] = nic.Netmask
	}
	if nic.Gateway != "" {
		doc["gateway"] = nic.Gateway
	}
	netUUID := nic.NetworkUUID
	if netUUID == "" {
		netUUID = s.networkForLocked(ip, nic.NICTag)
	}
	if netUUID != "" {
		doc["network_uuid"] = netUUID
	}
	return doc
}

// networkForLocked finds the network whose subnet holds ip and whose nic
// tag matches (a fabric NIC's tag carries "/<vnet_id>").
func (s *Sim) networkForLocked(ip, nicTag string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	tag, _, _ := strings.Cut(nicTag, "/")
	uuids := make([]string, 0, len(s.networks))
	for u := range s.networks {
		uuids = append(uuids, u)
	}
	slices.Sort(uuids)
	for _, u := range uuids {
		n := s.networks[u]
		p, err := netip.ParsePrefix(n.Subnet)
		if err != nil || !p.Contains(addr) {
			continue
		}
		if tag == "" || n.NICTag == "" || n.NICTag == tag {
			return u
		}
	}
	return ""
}
