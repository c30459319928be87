package busydc

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tritondatacenter/cns/serve/secondarytest"
)

// run holds one benchmark's setting and its two phases.
type run struct {
	k           knobs
	c           *cnsProc
	secs        []*secondarytest.Secondary
	rate        float64
	capacity    float64
	probeCPU    float64 // cns's CPU share during the saturation probe
	quiet, busy *phaseResult
}

// sample is cns's state at one moment of a phase.
type sample struct {
	t            time.Duration // since the phase began
	pending      float64       // cns_pending_vms
	commits      float64       // cns_commit_duration_seconds_count
	commitSecs   float64       // cns_commit_duration_seconds_sum
	cpu          float64       // cns's CPU seconds
	changesSoFar int
	// cns's quota: CFS periods and those in which it was throttled
	periods, throttled float64
}

// probeResult is one sampled change's change → answer on one server.
type probeResult struct {
	at      time.Duration // when the change was made, since the phase began
	kind    string
	server  string
	latency time.Duration
	ok      bool
}

type phaseResult struct {
	name      string
	secs      []second // the load generator's, per second of sending
	samples   []sample
	probes    []probeResult
	changes   int
	churnErrs int
	firstErr  error
	drain     time.Duration // from the last change until nothing was pending
	drained   bool
	// datagrams the kernel dropped for a full receive buffer during the
	// phase: on cns's DNS socket(s), on the load generator's
	serverDrops, clientDrops uint64
	driverCPU                float64  // this process's CPU share (load generator, simulator, probes)
	rt                       *rtProbe // cns's answers to the real-time probe (nil: it failed, see rtErr)
	rtErr                    error
	churnBehin               time.Duration // how far the churn fell behind its schedule at worst
	// cns's own timing of the phase's changes (its /metrics at the start
	// and once drained): changefeed item → updater, updater → served
	delay, latency cnsHistogram
}

// phase answers at r.rate for the run's duration; with ch, it also makes
// the changes.
func (r *run) phase(b *testing.B, g *loadGen, ch *churn) *phaseResult {
	p := &phaseResult{name: "quiet"}
	if ch != nil {
		p.name = "churn"
	}
	start := time.Now()
	var mu sync.Mutex // guards p.samples, p.probes, p.changes
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			m, err := r.c.metrics()
			if err == nil {
				cg := cgroupStat(r.k.cgroup)
				mu.Lock()
				p.samples = append(p.samples, sample{t: time.Since(start), pending: m["cns_pending_vms"],
					commits: m["cns_commit_duration_seconds_count"], commitSecs: m["cns_commit_duration_seconds_sum"],
					cpu: r.c.cpuSeconds(), changesSoFar: p.changes, periods: cg["nr_periods"], throttled: cg["nr_throttled"]})
				mu.Unlock()
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	})

	var churning, probes sync.WaitGroup
	if ch != nil {
		churning.Go(func() { r.churn(ch, p, &mu, start, &probes) })
		if r.k.profile > 0 {
			churning.Go(func() { r.c.profile(b, filepath.Join(r.k.out, "cns-churn.pprof"), r.k.duration/4, r.k.profile) })
		}
	}
	before, _ := r.c.metrics()
	serverDrops, clientDrops := udpDrops(int(r.c.dns.Port())), udpDrops(g.ports()...)
	self0, t0 := procCPU(os.Getpid()), time.Now()
	var rt sync.WaitGroup
	rt.Go(func() { p.rt, p.rtErr = runRTProbe(r.c.dns, g.pkts[0], r.k.duration) })
	p.secs = g.run(r.rate, r.k.duration)
	rt.Wait()
	p.driverCPU = (procCPU(os.Getpid()) - self0) / time.Since(t0).Seconds()
	p.serverDrops, p.clientDrops = udpDrops(int(r.c.dns.Port()))-serverDrops, udpDrops(g.ports()...)-clientDrops
	churning.Wait()
	probes.Wait()
	// The backlog must drain once the changes stop.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if m, err := r.c.metrics(); err == nil && m["cns_pending_vms"] == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling cns's metrics
	}
	close(stopSampling)
	sampler.Wait()
	if after, err := r.c.metrics(); err == nil && before != nil {
		p.delay = histogramDiff(before, after, "cns_changefeed_delay_seconds")
		p.latency = histogramDiff(before, after, "cns_change_latency_seconds")
	}
	// Drained: the first sample after the last change with nothing pending.
	for _, s := range p.samples {
		if s.t >= r.k.duration && s.pending == 0 {
			p.drain, p.drained = s.t-r.k.duration, true
			break
		}
	}
	b.Logf("phase %s: %d changes (%d errors), %d probes, drained %v after the last change",
		p.name, p.changes, p.churnErrs, len(p.probes), p.drain.Round(time.Millisecond))
	if p.firstErr != nil {
		b.Logf("first churn error: %v", p.firstErr)
	}
	return p
}

// churn makes k.churnRate changes a second on a fixed schedule (caught up
// every 5 ms) and probes every k.sample-th change that has a visible
// effect.
func (r *run) churn(ch *churn, p *phaseResult, mu *sync.Mutex, start time.Time, probes *sync.WaitGroup) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	made, visible := 0, 0
	for {
		el := time.Since(start)
		if el >= r.k.duration {
			return
		}
		due := int(el.Seconds() * float64(r.k.churnRate))
		if behind := time.Duration(float64(due-made) / float64(r.k.churnRate) * float64(time.Second)); behind > p.churnBehin {
			p.churnBehin = behind
		}
		for ; made < due; made++ {
			c, err := ch.next(visible%r.k.sample == 0)
			if err != nil {
				mu.Lock()
				p.churnErrs++
				if p.firstErr == nil {
					p.firstErr = err
				}
				mu.Unlock()
			}
			if c.visible {
				visible++
			}
			mu.Lock()
			p.changes++
			mu.Unlock()
			if c.probe != nil {
				pr := c.probe
				probes.Go(func() { r.probeAll(ch, pr, p, mu, start) })
			}
		}
		<-t.C
	}
}

// probeAll times one change to its answer on cns and on every secondary.
func (r *run) probeAll(ch *churn, pr *probe, p *phaseResult, mu *sync.Mutex, start time.Time) {
	defer ch.done(pr)
	var wg sync.WaitGroup
	record := func(server string, lat time.Duration, ok bool) {
		mu.Lock()
		p.probes = append(p.probes, probeResult{at: pr.at.Sub(start), kind: pr.kind, server: server, latency: lat, ok: ok})
		mu.Unlock()
	}
	wg.Go(func() {
		lat, ok := poll(r.c.dns.String(), pr, r.k.probePoll, r.k.changeTimeout)
		record("cns", lat, ok)
	})
	for _, s := range r.secs {
		wg.Go(func() {
			lat, ok := poll(s.Addr(), pr, r.k.secondaryPoll, r.k.secondaryMax)
			record(string(s.Kind()), lat, ok)
		})
	}
	wg.Wait()
}

// poll asks server until the answer shows the change, and returns the
// time from the change to that answer. It asks every interval at first,
// then every twentieth of the time gone by (a 5 % resolution), so that
// when a server falls behind, the probes waiting on it do not become a
// load of their own.
func poll(server string, pr *probe, interval, timeout time.Duration) (time.Duration, bool) {
	m := new(dns.Msg)
	m.SetQuestion(pr.name, pr.qtype)
	// A service's A set outgrows 512 bytes: ask with EDNS and over TCP
	// when truncated, or a member left out would never be seen.
	m.SetEdns0(4096, false)
	// A long timeout: a server whose answers queue for half a second
	// still answers the probe, and that answer counts.
	cl := &dns.Client{Timeout: 3 * time.Second}
	tcp := &dns.Client{Net: "tcp", Timeout: 3 * time.Second}
	for {
		r, _, err := cl.Exchange(m, server)
		if err == nil && r.Truncated {
			r, _, err = tcp.Exchange(m, server)
		}
		gone := time.Since(pr.at)
		if err == nil && pr.want(r) {
			return gone, true
		}
		if gone > timeout {
			return gone, false
		}
		time.Sleep(max(interval, gone/20)) // the probe's polling period: the answer has no signal
	}
}
