package admin

import (
	"bufio"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tritondatacenter/cns/admin/metrics"
)

// getMetrics writes Prometheus text format. It is written by hand: the
// figures already exist as counters in serve and feeds, and a collector
// library would only copy them.
func (s *Server) getMetrics(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m := &metricWriter{w: bufio.NewWriter(w)}
	m.gauge("cns_build_info", "cns version.", 1, "version", s.Version)
	m.gauge("cns_uptime_seconds", "Seconds since the DNS listeners came up.", s.DNS.Uptime().Seconds())

	dm := s.DNS.Metrics()
	writeDNSMetrics(m, dm)

	m.help("cns_zone_serial", "gauge", "Serial served per zone.")
	for _, z := range s.DNS.Zones() {
		m.sample("cns_zone_serial", float64(z.Serial), "zone", z.Name)
	}
	if zones, err := s.Store.Zones(); err == nil {
		m.help("cns_zone_records", "gauge", "Records per zone, apex excluded.")
		for _, z := range zones {
			m.sample("cns_zone_records", float64(z.Records), "zone", z.Name)
		}
		m.help("cns_zone_last_change_seconds", "gauge", "Seconds since each zone last changed.")
		for _, z := range zones {
			m.sample("cns_zone_last_change_seconds", time.Since(z.LastChange).Seconds(), "zone", z.Name)
		}
	}

	peers := s.DNS.PeerStatus()
	m.help("cns_peer_serial", "gauge", "Serial each secondary is known to have, per zone.")
	for _, p := range peers {
		for _, z := range sortedKeys(p.Zones) {
			m.sample("cns_peer_serial", float64(p.Zones[z].Serial), "peer", p.Address, "zone", z)
		}
	}
	m.help("cns_peer_signer_serial", "gauge", "The serial a DNSSEC-signing secondary gives the zone (its own; cns_peer_serial is cns's serial it serves).")
	for _, p := range peers {
		for _, z := range sortedKeys(p.Zones) {
			if pz := p.Zones[z]; pz.Signer {
				m.sample("cns_peer_signer_serial", float64(pz.SignerSerial), "peer", p.Address, "zone", z)
			}
		}
	}
	m.help("cns_peer_drift_serials", "gauge", "Commits each secondary is behind, per zone.")
	m.help("cns_peer_drift_seconds", "gauge", "Seconds since the first change each secondary lacks (-1: unknown).")
	for _, p := range peers {
		for _, z := range sortedKeys(p.Zones) {
			ds, dt := drift(s.Store, z, p.Zones[z].Serial, s.zoneSerial(z), time.Now())
			m.sample("cns_peer_drift_serials", float64(ds), "peer", p.Address, "zone", z)
			m.sample("cns_peer_drift_seconds", dt, "peer", p.Address, "zone", z)
		}
	}

	if hists := dm.Propagation; len(hists) > 0 {
		m.help("cns_propagation_seconds", "histogram", "Time from commit to each secondary serving the serial (SOA polls).")
		for _, peer := range sortedKeys(hists) {
			m.histogram("cns_propagation_seconds", hists[peer], "peer", peer)
		}
	}
	if s.Updater != nil {
		s.writeFeedMetrics(m)
	}
	return m.w.Flush()
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// metricWriter writes the Prometheus text exposition format.
type metricWriter struct{ w *bufio.Writer }

func (m *metricWriter) help(name, typ, help string) {
	fmt.Fprintf(m.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (m *metricWriter) sample(name string, v float64, labels ...string) {
	m.w.WriteString(name)
	if len(labels) > 0 {
		m.w.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				m.w.WriteByte(',')
			}
			fmt.Fprintf(m.w, "%s=\"%s\"", labels[i], escapeLabel(labels[i+1]))
		}
		m.w.WriteByte('}')
	}
	m.w.WriteByte(' ')
	m.w.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
	m.w.WriteByte('\n')
}

// histogram writes h's samples (its help line is the caller's, once for
// all label sets).
func (m *metricWriter) histogram(name string, h metrics.Histogram, labels ...string) {
	for i, le := range h.Bounds {
		m.sample(name+"_bucket", float64(h.Counts[i]), append(labels[:len(labels):len(labels)], "le", fmt.Sprint(le))...)
	}
	m.sample(name+"_bucket", float64(h.Count), append(labels[:len(labels):len(labels)], "le", "+Inf")...)
	m.sample(name+"_sum", h.Sum, labels...)
	m.sample(name+"_count", float64(h.Count), labels...)
}

func (m *metricWriter) gauge(name, help string, v float64, labels ...string) {
	m.help(name, "gauge", help)
	m.sample(name, v, labels...)
}

func (m *metricWriter) counter(name, help string, v float64) {
	m.help(name, "counter", help)
	m.sample(name, v)
}

// labelEscaper applies the exposition format's only escapes.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(strings.ToValidUTF8(s, "?")) }

// writeFeedMetrics writes the updater's figures: commits and feeds.
func (s *Server) writeFeedMetrics(m *metricWriter) {
	m.help("cns_commit_duration_seconds", "histogram", "Time to commit one change set.")
	m.histogram("cns_commit_duration_seconds", s.Updater.CommitHistogram())
	m.help("cns_change_latency_seconds", "histogram", "Time from a VM change reaching the updater to the end of the commit that serves it, per VM.")
	m.histogram("cns_change_latency_seconds", s.Updater.LatencyHistogram())
	if s.Changefeed != nil {
		m.help("cns_changefeed_delay_seconds", "histogram", "Time from a VMAPI changefeed item's arrival to the VM's new state reaching the updater, per VM.")
		m.histogram("cns_changefeed_delay_seconds", s.Changefeed())
	}
	m.gauge("cns_pending_vms", "VMs waiting for the next commit.", float64(s.Updater.Pending()))
	m.help("cns_feed_healthy", "gauge", "1 when the feed's last attempt succeeded.")
	for _, f := range s.Updater.Feeds() {
		m.sample("cns_feed_healthy", b2f(f.Healthy), "feed", f.Name)
	}
	m.help("cns_feed_lag_seconds", "gauge", "Seconds since each feed last delivered good data.")
	for _, f := range s.Updater.Feeds() {
		lag := -1.0
		if !f.LastOK.IsZero() {
			lag = time.Since(f.LastOK).Seconds()
		}
		m.sample("cns_feed_lag_seconds", lag, "feed", f.Name)
	}
	m.help("cns_removals_held", "gauge", "VMs whose removal the guard on mass removals holds, by cause (they keep their names; alert on > 0).")
	held := s.Updater.HeldRemovals()
	for _, c := range sortedKeys(held) {
		m.sample("cns_removals_held", float64(held[c]), "cause", c)
	}
	if s.Sources != nil {
		writeSourceMetrics(m, s.Sources())
	}
}

// writeSourceMetrics writes an aggregator's sources (RFD 172).
func writeSourceMetrics(m *metricWriter, sources []AggregateSource) {
	m.help("cns_aggregate_source_serial", "gauge", "Serial of each aggregated source zone's copy.")
	for _, x := range sources {
		m.sample("cns_aggregate_source_serial", float64(x.Serial), "region", x.Region, "zone", x.Zone)
	}
	m.help("cns_aggregate_source_lag_seconds", "gauge", "Seconds since each source's copy was last confirmed current (-1: never).")
	for _, x := range sources {
		m.sample("cns_aggregate_source_lag_seconds", x.LagSeconds, "region", x.Region, "zone", x.Zone)
	}
	m.help("cns_aggregate_source_names", "gauge", "Names in each source's copy.")
	for _, x := range sources {
		m.sample("cns_aggregate_source_names", float64(x.Names), "region", x.Region, "zone", x.Zone)
	}
	m.help("cns_aggregate_source_state", "gauge", "1 for each source's state: ok, syncing, stale or expired.")
	for _, x := range sources {
		for _, st := range []string{"ok", "syncing", "stale", "expired"} {
			m.sample("cns_aggregate_source_state", b2f(x.State == st), "region", x.Region, "zone", x.Zone, "state", st)
		}
	}
}

// writeDNSMetrics writes the DNS server's counters.
func writeDNSMetrics(m *metricWriter, dm metrics.DNS) {
	m.help("cns_dns_answers_total", "counter", "DNS answers by transport and query type.")
	for _, proto := range sortedKeys(dm.AnswersByType) {
		for _, t := range sortedKeys(dm.AnswersByType[proto]) {
			m.sample("cns_dns_answers_total", float64(dm.AnswersByType[proto][t]), "proto", proto, "qtype", t)
		}
	}
	m.help("cns_dns_rcodes_total", "counter", "DNS answers by transport and rcode.")
	for _, proto := range sortedKeys(dm.AnswersByRcode) {
		for _, rc := range sortedKeys(dm.AnswersByRcode[proto]) {
			m.sample("cns_dns_rcodes_total", float64(dm.AnswersByRcode[proto][rc]), "proto", proto, "rcode", rc)
		}
	}
	m.counter("cns_dns_dropped_total", "Requests given no answer (too short, or a response).", float64(dm.Dropped))
	m.counter("cns_dns_client_scoped_total", "Owner-less names answered in the asking instance's scope (client_answers).", float64(dm.ClientScoped))
	m.counter("cns_dns_client_unidentified_total", "Owner-less names asked from an address that identifies no instance, or several.", float64(dm.ClientUnidentified))
	if dm.ForwardHits+dm.ForwardMisses > 0 {
		m.help("cns_forward_queries_total", "counter", "Forwarded queries by cache outcome.")
		m.sample("cns_forward_queries_total", float64(dm.ForwardHits), "cache", "hit")
		m.sample("cns_forward_queries_total", float64(dm.ForwardMisses), "cache", "miss")
		m.counter("cns_forward_failures_total", "Forwarded queries no upstream answered.", float64(dm.ForwardFailures))
		m.gauge("cns_forward_cache_entries", "Answers in the forwarding cache.", float64(dm.ForwardCached))
	}
	m.counter("cns_rrl_limited_total", "UDP answers response rate limiting dropped or truncated.", float64(dm.RRLLimited))

	m.help("cns_transfers_total", "counter", "Zone transfers served, by outcome.")
	m.sample("cns_transfers_total", float64(dm.AXFR), "kind", "axfr")
	m.sample("cns_transfers_total", float64(dm.IXFR), "kind", "ixfr")
	m.sample("cns_transfers_total", float64(dm.UpToDate), "kind", "up_to_date")
	m.sample("cns_transfers_total", float64(dm.Refused), "kind", "refused")

	m.gauge("cns_notify_pending", "NOTIFY targets that have not answered for the zone's serial.", float64(dm.NotifyPending))
}
