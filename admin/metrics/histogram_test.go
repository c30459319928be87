package metrics

import (
	"slices"
	"testing"
)

func TestHistogram(t *testing.T) {
	h := NewHistogram([]float64{0.1, 1, 10})
	for _, v := range []float64{0.05, 0.1, 0.5, 20} {
		h.Observe(v)
	}
	if !slices.Equal(h.Counts, []uint64{2, 3, 3}) || h.Count != 4 || h.Sum != 20.65 {
		t.Fatalf("%+v", h)
	}
	c := h.Clone()
	h.Observe(0.01)
	if !slices.Equal(c.Counts, []uint64{2, 3, 3}) || c.Count != 4 {
		t.Fatalf("the clone changed with the original: %+v", c)
	}
	if !slices.Equal(h.Counts, []uint64{3, 4, 4}) || h.Count != 5 {
		t.Fatalf("%+v", h)
	}
}
