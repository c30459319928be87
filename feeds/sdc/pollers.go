package sdc

import (
	"context"
	"time"
)

// poller is one periodic refresh of a service the changefeed does not
// cover (CNAPI's compute nodes in servers.go, NAPI's networks and pools
// in networks.go).
type poller struct {
	interval time.Duration
	// kick asks for a poll sooner than the interval; gap is the least time
	// between two polls it can ask for, so that a burst of kicks asks once
	// per gap. With dropKicksInGap, kicks sent during the gap are taken as
	// answered by the poll just made.
	kick           chan struct{}
	gap            time.Duration
	dropKicksInGap bool
	// poll lists and applies, reporting the service's health itself; an
	// error makes the next poll come after a backoff (within interval).
	poll func(context.Context) error
}

// runPoller polls every p.interval, or sooner when kicked, until ctx ends.
func (f *Feed) runPoller(ctx context.Context, p poller) {
	b := backoff{min: f.cfg.RetryMin, max: f.cfg.RetryMax}
	wait := p.interval
	for {
		if !sleepUnless(ctx, wait, p.kick) {
			return
		}
		if err := p.poll(ctx); err != nil {
			wait = min(b.next(), p.interval)
			continue
		}
		b.reset()
		wait = p.interval
		if !sleep(ctx, p.gap) {
			return
		}
		if p.dropKicksInGap {
			select {
			case <-p.kick:
			default:
			}
		}
	}
}
