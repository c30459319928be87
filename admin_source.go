package main

import (
	"net/netip"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/serve"
)

// The one place where the DNS server's types become the API's: admin
// defines the JSON it speaks and what it needs from the server
// (admin.DNS); only main imports serve. A field renamed in serve breaks
// the build here instead of changing the API.

// apiDNS is admin.DNS over the running DNS server.
type apiDNS struct{ srv *serve.Server }

func (d apiDNS) Listening() bool                       { return d.srv.Listening() }
func (d apiDNS) Uptime() time.Duration                 { return d.srv.Uptime() }
func (d apiDNS) ZoneSerial(zone string) (uint32, bool) { return d.srv.ZoneSerial(zone) }
func (d apiDNS) DeletePeer(addr netip.Addr) bool       { return d.srv.DeletePeer(addr) }
func (d apiDNS) PeersChanged() <-chan struct{}         { return d.srv.PeersChanged() }
func (d apiDNS) ZonePeers(zone string) []netip.Addr    { return d.srv.ZonePeers(zone) }
func (d apiDNS) PropagationChanged() <-chan struct{}   { return d.srv.PropagationChanged() }
func (d apiDNS) Propagation(zone string, serial uint32) (admin.Propagation, bool) {
	p, ok := d.srv.Propagation(zone, serial)
	return apiPropagation(p), ok
}

func (d apiDNS) Zones() []admin.ZoneSummary {
	var out []admin.ZoneSummary
	for _, z := range d.srv.Zones() {
		out = append(out, admin.ZoneSummary{Name: z.Name, Serial: z.Serial})
	}
	return out
}

func (d apiDNS) Peers() []admin.Peer {
	var out []admin.Peer
	for _, p := range d.srv.Peers() {
		out = append(out, apiPeer(p))
	}
	return out
}

func (d apiDNS) AllowedPeers() []admin.AllowedPeer {
	var out []admin.AllowedPeer
	for _, a := range d.srv.AllowedPeers() {
		out = append(out, admin.AllowedPeer{Address: a.Prefix.Addr().String(), Mask: a.Prefix.Bits(), Zones: a.Zones})
	}
	return out
}

func (d apiDNS) Metrics() admin.DNSMetrics {
	qs, fs, ts := d.srv.QueryStats(), d.srv.ForwardStats(), d.srv.TransferStats()
	m := admin.DNSMetrics{AnswersByType: qs.ByType, AnswersByRcode: qs.ByRcode, Dropped: qs.Dropped,
		ClientScoped: qs.ClientScoped, ClientUnidentified: qs.Unidentified,
		ForwardHits: fs.Hits, ForwardMisses: fs.Misses, ForwardFailures: fs.Failures, ForwardCached: fs.Cached,
		RRLLimited: d.srv.RRLLimited(), AXFR: ts.AXFR, IXFR: ts.IXFR, UpToDate: ts.UpToDate, Refused: ts.Refused,
		Propagation: d.srv.PropagationHistograms()}
	for _, n := range d.srv.NotifyStatus() {
		if n.Pending {
			m.NotifyPending++
		}
	}
	return m
}

// apiPeer is a tracked peer with what the tracker knows; the read model
// (admin) derives its drift and flags.
func apiPeer(p serve.Peer) admin.Peer {
	out := admin.Peer{Address: p.Address, Version: p.Version, NotifyFailures: p.NotifyFailures, Counters: p.Counters,
		State: string(p.State), Zones: map[string]admin.PeerZone{}}
	if p.Configured {
		out.State = "configured"
	}
	for z, pz := range p.Zones {
		if pz == nil {
			continue
		}
		out.Zones[z] = admin.PeerZone{Serial: pz.Serial, LastTransfer: pz.LastTransfer, LastKind: pz.LastKind,
			AXFR: pz.AXFR, IXFR: pz.IXFR, NotifySerial: pz.NotifySerial, NotifySent: pz.NotifySent,
			NotifyAcked: pz.NotifyAcked, LastSOAQuery: pz.LastSOAQuery, Signer: pz.Signer, SignerSerial: pz.SignerSerial}
	}
	return out
}

// decodeStoredPeer reads a peer as the DNS server stores it in the db
// (serve's form), for the offline read model.
func decodeStoredPeer(raw []byte) (admin.Peer, error) {
	p, err := serve.StoredPeer(raw)
	if err != nil {
		return admin.Peer{}, err
	}
	return apiPeer(p), nil
}

// openDBModel opens a db file, read-only, as the offline read model.
func openDBModel(path string) (*admin.DBModel, error) {
	return admin.OpenDB(path, decodeStoredPeer)
}

func apiPropagation(p serve.Propagation) admin.Propagation {
	out := admin.Propagation{Zone: p.Zone, Serial: p.Serial, State: p.State, Committed: p.Committed}
	if p.Peers != nil {
		out.Peers = make([]admin.PeerPropagation, 0, len(p.Peers))
	}
	for _, pp := range p.Peers {
		out.Peers = append(out.Peers, admin.PeerPropagation{Address: pp.Address, Serial: pp.Serial, SignerSerial: pp.SignerSerial, State: pp.State,
			Seconds: pp.Seconds, Polls: pp.Polls, Error: pp.Error, Target: pp.Target})
	}
	return out
}
