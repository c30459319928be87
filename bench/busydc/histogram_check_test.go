package busydc

import (
	"testing"
	"time"
)

// TestHistogramDiff reads two /metrics samplings of a histogram and
// estimates quantiles as Prometheus's histogram_quantile does.
func TestHistogramDiff(t *testing.T) {
	const name = "cns_change_latency_seconds"
	bucket := func(le string) string { return name + `_bucket{le="` + le + `"}` }
	before := map[string]float64{bucket("0.01"): 5, bucket("0.05"): 5, bucket("0.1"): 5, bucket("+Inf"): 5}
	after := map[string]float64{bucket("0.01"): 5, bucket("0.05"): 55, bucket("0.1"): 103, bucket("+Inf"): 105,
		"cns_other_bucket{le=\"0.01\"}": 7}
	h := histogramDiff(before, after, name)
	if h.total != 100 || len(h.bounds) != 3 || h.counts[1] != 50 {
		t.Fatalf("diff: %+v", h)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 50 * time.Millisecond},  // the 50th of 100 ends the (0.01, 0.05] bucket
		{0.25, 30 * time.Millisecond}, // halfway through it
		{0.99, 100 * time.Millisecond},
		{1, 100 * time.Millisecond}, // beyond the last bound: that bound
	} {
		if got := h.quantile(c.q); got.Round(time.Microsecond) != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := histogramDiff(before, before, name).quantile(0.99); got != 0 {
		t.Errorf("an empty histogram's p99: %v", got)
	}
}
