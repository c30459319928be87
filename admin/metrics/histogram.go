// Package metrics is what the program counts in memory and the admin API
// renders as Prometheus text: the histogram (the updater's commit
// durations and change latencies, the SDC changefeed's delays and the DNS
// server's propagation times per secondary) and the DNS server's
// counters.
//
// It imports nothing of the project, so that feeds and serve may both keep
// one without importing each other or package admin (DESIGN's import
// rules); it sits under admin because admin owns the metrics the program
// publishes.
package metrics

import "slices"

// Histogram counts observations (seconds) into buckets, the Prometheus
// way: Counts[i] is how many were at most Bounds[i] (cumulative), Count
// and Sum cover them all (the +Inf bucket is Count).
type Histogram struct {
	Bounds []float64 // upper bounds, ascending
	Counts []uint64  // cumulative counts per bound
	Count  uint64
	Sum    float64
}

// LatencyBounds are the upper bounds, seconds, of the histograms of how
// long a change takes to be served (the updater's, the SDC changefeed's):
// fine around a batch window and a commit, up to a first load's minute.
var LatencyBounds = []float64{0.005, 0.01, 0.025, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// NewHistogram returns an empty histogram over bounds.
func NewHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds))}
}

// Observe adds one observation.
func (h *Histogram) Observe(v float64) {
	for i, b := range h.Bounds {
		if v <= b {
			h.Counts[i]++
		}
	}
	h.Count++
	h.Sum += v
}

// Clone returns a copy that later observations of h do not change.
func (h *Histogram) Clone() Histogram {
	c := *h
	c.Counts = slices.Clone(h.Counts)
	return c
}
