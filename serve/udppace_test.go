package serve

import (
	"testing"
	"time"
)

// A reader sleeps before its next read only while the datagrams come fast
// enough for the sleep to gather udpGatherMin of them, and never after a
// full batch.
func TestBatchPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	us := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }
	type read struct {
		n    int       // datagrams returned
		at   time.Time // when the read returned
		want time.Duration
	}
	for _, tc := range []struct {
		name  string
		reads []read
	}{
		{"the first datagram after a quiet spell is answered at once", []read{
			{1, us(0), 0}}},
		{"sparse datagrams (5k qps): no sleep", []read{
			{1, us(0), 0}, {1, us(200), 0}, {1, us(400), 0}}},
		{"20k qps: a datagram 50 µs after the last, then batches", []read{
			{1, us(0), 0}, {1, us(50), udpGather}, {5, us(300), udpGather}, {4, us(550), udpGather}}},
		{"a sleep that gathered one: back to waiting on the socket", []read{
			{1, us(0), 0}, {1, us(50), udpGather}, {1, us(300), 0}}},
		{"two at once after a quiet spell: not yet a rate", []read{
			{2, us(0), 0}}},
		{"a full batch is read again at once", []read{
			{1, us(0), 0}, {1, us(50), udpGather}, {udpBatch, us(300), 0}, {udpBatch, us(310), 0}, {7, us(320), udpGather}}},
		{"the rate falls below the line", []read{
			{1, us(0), 0}, {1, us(60), udpGather}, {3, us(300), udpGather}, {2, us(540), 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := batchPacer{last: t0.Add(-time.Second)}
			for i, r := range tc.reads {
				if got := p.next(r.n, r.at); got != r.want {
					t.Fatalf("read %d (%d datagrams at %v): sleep %v, want %v", i, r.n, r.at.Sub(t0), got, r.want)
				}
			}
		})
	}
}
