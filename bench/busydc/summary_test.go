package busydc

import (
	"fmt"
	"strings"
	"time"
)

// summary is the run's figures as Markdown, and the targets missed.
func (r *run) summary() (string, []string) {
	var sb strings.Builder
	var missed []string
	check := func(ok bool, what string) string {
		if ok {
			return "met"
		}
		missed = append(missed, what)
		return "**MISSED**"
	}
	k := r.k
	fmt.Fprintf(&sb, "busy data center: %d VMs, %d changes/s for %v (every %dth visible change probed), secondaries %v\n\n",
		k.vms, k.churnRate, k.duration, k.sample, r.servers()[1:])
	fmt.Fprintf(&sb, "cns: batch_window_ms %q, min_notify_interval %q, reverse_v4_prefix %q (empty: cns's defaults, 25, 500 and 24)\n\n",
		k.batchWindow, k.minNotify, k.reversePrefix)
	fmt.Fprintf(&sb, "saturation probe: %.0f qps answered (cns CPU %.0f %%); load %.0f qps (%.0f %% of it); load average at the end %s\n\n",
		r.capacity, 100*r.probeCPU, r.rate, 100*r.rate/max(r.capacity, 1), loadAvg())

	sb.WriteString("| phase | sent | answered | lost | errors | p50 | p99 | p999 | cns CPU | periods throttled | sent late |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range []*phaseResult{r.quiet, r.busy} {
		t := total(p.secs)
		cpu, throttled := p.cpuShareUntil(k.duration)
		fmt.Fprintf(&sb, "| %s | %d | %d | %d | %d | %.0f µs | %.0f µs | %.0f µs | %.0f %% | %.0f %% | %.2f %% |\n", p.name, t.sent, t.answered, t.lost, t.errors,
			us(t.lat.quantile(0.5)), us(t.lat.quantile(0.99)), us(t.lat.quantile(0.999)), 100*cpu, 100*throttled,
			100*float64(t.late)/float64(max(t.sent, 1)))
	}
	sb.WriteString("\n(sent late: queries the generator sent over 100 µs behind its schedule; latency runs from the actual send to the kernel's arrival stamp on the answer, so a late receiver thread does not count)\n\n")
	sb.WriteString("| phase | RT probe: sent | lost | p50 | p99 | p999 | probe CPU |\n|---|---|---|---|---|---|---|\n")
	for _, p := range []*phaseResult{r.quiet, r.busy} {
		if p.rt == nil {
			fmt.Fprintf(&sb, "| %s | failed: %v | | | | | |\n", p.name, p.rtErr)
			continue
		}
		fmt.Fprintf(&sb, "| %s | %d | %d | %.0f µs | %.0f µs | %.0f µs | %v |\n", p.name, p.rt.sent, p.rt.lost,
			us(p.rt.lat.quantile(0.5)), us(p.rt.lat.quantile(0.99)), us(p.rt.lat.quantile(0.999)), p.rt.cpu.Round(time.Millisecond))
	}
	sb.WriteString("\n(RT probe: one query every 5 ms from a real-time thread of the driver, each after the last was answered: a stall of cns delays one probe, not every query sent during it, so these bound cns's own answer latency from below; bench/busydc/rtprobe_test.go)\n")
	for _, p := range []*phaseResult{r.quiet, r.busy} {
		if p.rt != nil && p.rt.realtime != nil {
			fmt.Fprintf(&sb, "\n**RT probe not real-time** in the %s phase: %v\n", p.name, p.rt.realtime)
		}
	}
	sb.WriteString("\n")
	for _, p := range []*phaseResult{r.quiet, r.busy} {
		fmt.Fprintf(&sb, "%s: the kernel dropped %d queries at cns's full receive buffer and %d answers at the load generator's; "+
			"the driver (load generator, simulator, probes) used %.0f %% of a CPU\n", p.name, p.serverDrops, p.clientDrops, 100*p.driverCPU)
	}
	// The figures are cns's only if the client side kept its schedule.
	for _, p := range []*phaseResult{r.quiet, r.busy} {
		t := total(p.secs)
		if late := float64(t.late) / float64(max(t.sent, 1)); late > 0.05 || p.churnBehin > 100*time.Millisecond || p.clientDrops > 0 {
			fmt.Fprintf(&sb, "\n**CLIENT SHORT OF CPU** in the %s phase: %.0f %% of queries sent late, the churn up to %v behind, %d answers dropped at the generator: "+
				"the client CPU was short, so the generator's figures bound cns's from above (the RT probe's bound them from below)\n", p.name, 100*late, p.churnBehin.Round(time.Millisecond), p.clientDrops)
		}
	}

	sb.WriteString("\n| change → answer | probes | answered | p50 | p99 | max |\n|---|---|---|---|---|---|\n")
	c2a := map[string]time.Duration{}
	fails := map[string]int{}
	for _, srv := range r.servers() {
		ds := r.busy.latencies(srv, -1)
		n := 0
		for _, pr := range r.busy.probes {
			if pr.server == srv {
				n++
			}
		}
		fails[srv] = n - len(ds)
		c2a[srv] = quantile(ds, 0.99)
		fmt.Fprintf(&sb, "| %s | %d | %d | %.1f ms | %.1f ms | %.1f ms |\n", srv, n, len(ds),
			ms(quantile(ds, 0.5)), ms(c2a[srv]), ms(quantile(ds, 1)))
	}
	// cns's own share of change → answer, by its /metrics; the rest is
	// the simulator publishing the change and the probe seeing the answer.
	d, l := r.busy.delay, r.busy.latency
	fmt.Fprintf(&sb, "\ninside cns (its /metrics over the churn, interpolated in buckets): changefeed item → updater "+
		"p50 %.1f / p99 %.1f ms (%.0f changes); updater → served p50 %.1f / p99 %.1f ms (%.0f VM changes)\n",
		ms(d.quantile(0.5)), ms(d.quantile(0.99)), d.total, ms(l.quantile(0.5)), ms(l.quantile(0.99)), l.total)
	growth, peak := r.busy.pendingGrowth(k.duration)
	fmt.Fprintf(&sb, "\nbacklog (cns_pending_vms) during the churn: peak %.0f, growth over the phase (least squares) %+.1f, "+
		"drained %v after the last change (%v); %d changes made (%d errors), churn at worst %v behind its schedule\n\n",
		peak, growth, r.busy.drain.Round(time.Millisecond), r.busy.drained, r.busy.changes, r.busy.churnErrs, r.busy.churnBehin.Round(time.Millisecond))

	q, c := total(r.quiet.secs), total(r.busy.secs)
	sb.WriteString("| target | figure | |\n|---|---|---|\n")
	fmt.Fprintf(&sb, "| no lost queries | %d lost quiet, %d lost churn | %s |\n", q.lost, c.lost,
		check(q.lost == 0 && c.lost == 0, fmt.Sprintf("%d queries lost", q.lost+c.lost)))
	p99 := c.lat.quantile(0.99)
	fmt.Fprintf(&sb, "| answer p99 ≤ 1 ms under churn | %.0f µs (quiet %.0f µs) | %s |\n", us(p99), us(q.lat.quantile(0.99)),
		check(p99 <= targetAnswerP99, fmt.Sprintf("answer p99 %.0f µs", us(p99))))
	fmt.Fprintf(&sb, "| change → answer p99 ≤ 100 ms on cns | %.1f ms, %d unanswered | %s |\n", ms(c2a["cns"]), fails["cns"],
		check(c2a["cns"] <= targetCNSChange && fails["cns"] == 0, fmt.Sprintf("cns change → answer p99 %.1f ms (%d unanswered)", ms(c2a["cns"]), fails["cns"])))
	for _, srv := range r.servers()[1:] {
		fmt.Fprintf(&sb, "| change → answer p99 ≤ 1 s on %s | %.1f ms, %d unanswered | %s |\n", srv, ms(c2a[srv]), fails[srv],
			check(c2a[srv] <= targetSecondaryP99 && fails[srv] == 0, fmt.Sprintf("%s change → answer p99 %.1f ms (%d unanswered)", srv, ms(c2a[srv]), fails[srv])))
	}
	bounded := growth < float64(k.churnRate)/10 && r.busy.drained && r.busy.drain < 2*time.Second
	fmt.Fprintf(&sb, "| backlog does not grow | growth %+.1f VMs over the phase, drained in %v | %s |\n", growth, r.busy.drain.Round(time.Millisecond),
		check(bounded, fmt.Sprintf("backlog grew by %.0f or drained in %v", growth, r.busy.drain)))
	return sb.String(), missed
}

// cpuShareUntil is cns's CPU share over the phase's first d, and the
// share of its quota's periods in which it was throttled.
func (p *phaseResult) cpuShareUntil(d time.Duration) (cpu, throttled float64) {
	var first, last *sample
	for i := range p.samples {
		if p.samples[i].t <= d {
			if first == nil {
				first = &p.samples[i]
			}
			last = &p.samples[i]
		}
	}
	if first == nil || last.t == first.t {
		return 0, 0
	}
	if n := last.periods - first.periods; n > 0 {
		throttled = (last.throttled - first.throttled) / n
	}
	return (last.cpu - first.cpu) / (last.t - first.t).Seconds(), throttled
}
