// Package metrics is the histogram the program keeps in memory and the
// admin API renders as Prometheus text: the updater's commit durations and
// the DNS server's propagation times per secondary.
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
