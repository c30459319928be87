package serve

import "time"

// udpGather is how long the reader of a busy UDP socket sleeps after
// sending a batch of answers before it reads the next batch, so that the
// datagrams arriving meanwhile come in with one wake-up and one system
// call instead of one each. It is also the most a question waits for it.
// A wake-up (the thread scheduled in and out, the system calls around
// it) costs the CPU of several answers; at 20k qps one socket woken per
// datagram spends most of its CPU being woken.
const udpGather = 200 * time.Microsecond

// udpGatherMin is how many datagrams a sleep must be expected to gather
// for the reader to take it: below that the sleep's own wake-up is not
// paid back, and the reader waits on the socket instead.
const udpGatherMin = 2

// batchPacer decides how a UDP socket's reader waits for its next batch:
// at once on the socket (woken by the next datagram), or after sleeping
// udpGather when the datagrams come fast enough for the sleep to gather
// udpGatherMin of them. The rate is the last batch's: n datagrams arrived
// between the two reads that returned them and the one before. A quiet
// socket is thus answered as soon as a question arrives, and a busy one
// in batches udpGather apart.
type batchPacer struct {
	last time.Time // when the previous read returned
}

// next takes a read that returned n datagrams at now and returns how long
// to sleep before the following read (0: read at once).
func (p *batchPacer) next(n int, now time.Time) time.Duration {
	gap := now.Sub(p.last)
	p.last = now
	if n >= udpBatch {
		return 0 // the read stopped at the batch's size: more is queued
	}
	// n arrived in gap; udpGather gathers n * udpGather / gap
	if time.Duration(n)*udpGather >= udpGatherMin*gap {
		return udpGather
	}
	return 0
}
