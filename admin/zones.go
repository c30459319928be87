package admin

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/db"
)

// The zone endpoints: GET /zones, /zones/:zone, its records and its
// history.

func (s *Server) getZones(w http.ResponseWriter, r *http.Request) error {
	out := []ZoneSummary{}
	out = append(out, s.DNS.Zones()...)
	s.inConfigOrder(out)
	return writeJSON(w, http.StatusOK, out)
}

// inConfigOrder orders zones as the reference lists them (GET /zones,
// cnsadm status): the forward zones in configuration order, the order a
// NIC's zones are tried, then the reverse zones, then the rest (the
// catalog, aggregated regions), each by name.
func (s *Server) inConfigOrder(zones []ZoneSummary) {
	var forward []string
	if s.Updater != nil {
		forward = s.Updater.ForwardZones()
	}
	rank := func(name string) int {
		if i := slices.Index(forward, name); i >= 0 {
			return i
		}
		if strings.HasSuffix(name, ".arpa") {
			return len(forward)
		}
		return len(forward) + 1
	}
	slices.SortStableFunc(zones, func(a, b ZoneSummary) int {
		return cmp.Or(cmp.Compare(rank(a.Name), rank(b.Name)), strings.Compare(a.Name, b.Name))
	})
}

// zoneName reads the {zone} path value.
func zoneName(r *http.Request) string {
	return strings.ToLower(strings.TrimSuffix(r.PathValue("zone"), "."))
}

func (s *Server) getZone(w http.ResponseWriter, r *http.Request) error {
	name := zoneName(r)
	zi, ok, err := s.Store.Zone(name)
	if err != nil {
		return err
	}
	if !ok {
		return notFound("zone " + name + " not found")
	}
	out := zoneView(zi)
	if cur, ok := s.DNS.ZoneSerial(name); ok {
		out.Serial = cur
	}
	out.Peers = s.zonePeers(name, out.Serial)
	if p, ok := s.DNS.Propagation(name, 0); ok {
		out.Propagation = &p
	}
	return writeJSON(w, http.StatusOK, out)
}

// zonePeers lists the expected secondaries of a zone with what they have.
func (s *Server) zonePeers(zone string, cur uint32) []ZonePeer {
	known := map[string]Peer{}
	for _, p := range s.DNS.PeerStatus() {
		known[p.Address] = p
	}
	out := []ZonePeer{}
	for _, a := range s.DNS.ZonePeers(zone) {
		zp := ZonePeer{Address: a.String(), DriftSeconds: -1}
		if p, ok := known[a.String()]; ok {
			zp.Version = p.Version
			if pz, ok := p.Zones[zone]; ok {
				zp.Serial = pz.Serial
				zp.DriftSerials, zp.DriftSeconds = drift(s.Store, zone, pz.Serial, cur, time.Now())
			}
		}
		out = append(out, zp)
	}
	return out
}

func (s *Server) getRecords(w http.ResponseWriter, r *http.Request) error {
	zone := zoneName(r)
	zi, ok, err := s.Store.Zone(zone)
	if err != nil {
		return err
	}
	if !ok {
		return notFound("zone " + zone + " not found")
	}
	out := Records{Zone: zone, Serial: zi.Serial, Records: []string{}}
	render := func(owner string, rrs db.RRs) error {
		list, err := rrs.ToRR(owner)
		for _, rr := range list {
			out.Records = append(out.Records, strings.ReplaceAll(rr.String(), "\t", " "))
		}
		return err
	}
	if name := r.URL.Query().Get("name"); name != "" {
		fq := dns.Fqdn(strings.ToLower(name))
		if !dns.IsSubDomain(dns.Fqdn(zone), fq) {
			fq = dns.Fqdn(strings.ToLower(name) + "." + zone) // a name relative to the zone
		}
		if fq == dns.Fqdn(zone) {
			for _, rr := range append([]dns.RR{zi.Apex.SOA(zone, zi.Serial)}, zi.Apex.NSRecords(zone)...) {
				out.Records = append(out.Records, strings.ReplaceAll(rr.String(), "\t", " "))
			}
			return writeJSON(w, http.StatusOK, out)
		}
		zw, _ := db.ZoneWire(zone)
		ow, err := db.ZoneWire(strings.TrimSuffix(fq, "."))
		if err != nil {
			return badRequest("name %q: %v", name, err)
		}
		rrs, _, err := s.Store.Lookup(zone, zw, ow)
		if err != nil {
			return badRequest("%v", err)
		}
		if err := render(fq, rrs); err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, out)
	}
	// A page of the whole zone in store order.
	limit, err := intParam(r, "limit", 1000)
	if err != nil {
		return err
	}
	after := strings.ToLower(r.URL.Query().Get("after"))
	names := 0
	started := after == ""
	errStop := errors.New("page full")
	err = s.Store.ScanZone(zone, func(owner []byte, rrs db.RRs) error {
		name := db.WireToString(owner)
		if !started {
			started = name == dns.Fqdn(after)
			return nil
		}
		if names == limit {
			out.Next = strings.TrimSuffix(out.Next, ".")
			return errStop
		}
		names++
		out.Next = name
		return render(name, rrs)
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	if !errors.Is(err, errStop) {
		out.Next = ""
	}
	return writeJSON(w, http.StatusOK, out)
}

func intParam(r *http.Request, key string, def int) (int, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("%s=%q is not a non-negative integer", key, v)
	}
	return n, nil
}

func serialParam(r *http.Request, key string) (uint32, bool, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, false, badRequest("%s=%q is not a serial", key, v)
	}
	return uint32(n), true, nil
}

func (s *Server) getHistory(w http.ResponseWriter, r *http.Request) error {
	zone := zoneName(r)
	if _, ok, err := s.Store.Zone(zone); err != nil || !ok {
		if err != nil {
			return err
		}
		return notFound("zone " + zone + " not found")
	}
	since, _, err := serialParam(r, "since")
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", 100)
	if err != nil {
		return err
	}
	entries, err := s.Store.History(zone, since, limit)
	if err != nil {
		return err
	}
	out := []Change{}
	for _, e := range entries {
		out = append(out, ChangeJSON(e))
	}
	return writeJSON(w, http.StatusOK, out)
}
