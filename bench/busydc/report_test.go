package busydc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The busy data center's targets.
const (
	targetAnswerP99    = time.Millisecond
	targetCNSChange    = 100 * time.Millisecond
	targetSecondaryP99 = time.Second
)

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
func us(d time.Duration) float64 { return float64(d) / 1e3 }

// quantile of durations (sorted in place); 0 when empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// servers lists "cns" and the secondaries, in order.
func (r *run) servers() []string {
	out := []string{"cns"}
	for _, s := range r.secs {
		out = append(out, string(s.Kind()))
	}
	return out
}

// report writes busydc.tsv (one row a second over both phases),
// busydc-probes.tsv (every change → answer) and busydc.md (the summary
// and the targets), and fails the benchmark for every target missed.
func (r *run) report(b *testing.B) {
	if err := r.writeTimeline(filepath.Join(r.k.out, "busydc.tsv")); err != nil {
		b.Error(err)
	}
	if err := r.writeProbes(filepath.Join(r.k.out, "busydc-probes.tsv")); err != nil {
		b.Error(err)
	}
	md, missed := r.summary()
	if err := os.WriteFile(filepath.Join(r.k.out, "busydc.md"), []byte(md), 0o644); err != nil {
		b.Error(err)
	}
	b.Log("\n" + md)
	for _, m := range missed {
		b.Error("target missed: " + m)
	}
	q, c := total(r.quiet.secs), total(r.busy.secs)
	b.ReportMetric(us(c.lat.quantile(0.99)), "us-p99-churn")
	b.ReportMetric(us(q.lat.quantile(0.99)), "us-p99-quiet")
	b.ReportMetric(float64(c.lost), "lost-churn")
}

func (r *run) writeTimeline(path string) error {
	var sb strings.Builder
	cols := []string{"seconds", "phase", "sent", "answered", "lost", "errors", "sent_late", "p50_us", "p99_us", "p999_us",
		"pending_max", "pending_last", "commits", "commit_ms_avg", "changes", "cns_cpu_pct", "throttled_pct"}
	for _, s := range r.servers() {
		cols = append(cols, "c2a_"+s+"_p50_ms", "c2a_"+s+"_p99_ms")
	}
	sb.WriteString(strings.Join(cols, "\t") + "\n")
	d := int(r.k.duration.Seconds())
	for pi, p := range []*phaseResult{r.quiet, r.busy} {
		for i := range d {
			row := []string{fmt.Sprint(pi*d + i), fmt.Sprint(pi)}
			var s second
			if i < len(p.secs) {
				s = p.secs[i]
			}
			row = append(row, fmt.Sprint(s.sent), fmt.Sprint(s.answered), fmt.Sprint(s.lost), fmt.Sprint(s.errors), fmt.Sprint(s.late),
				fmt.Sprintf("%.1f", us(s.lat.quantile(0.5))), fmt.Sprintf("%.1f", us(s.lat.quantile(0.99))),
				fmt.Sprintf("%.1f", us(s.lat.quantile(0.999))))
			row = append(row, p.backlogSecond(i)...)
			for _, srv := range r.servers() {
				ds := p.latencies(srv, i)
				row = append(row, fmt.Sprintf("%.1f", ms(quantile(ds, 0.5))), fmt.Sprintf("%.1f", ms(quantile(ds, 0.99))))
			}
			sb.WriteString(strings.Join(row, "\t") + "\n")
		}
	}
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

// backlogSecond is pending_max, pending_last, commits, commit_ms_avg,
// changes, cns_cpu_pct and throttled_pct (the share of the quota's
// periods in which cns was throttled) over second i of the phase.
func (p *phaseResult) backlogSecond(i int) []string {
	lo, hi := time.Duration(i)*time.Second, time.Duration(i+1)*time.Second
	var first, last *sample
	maxPending := 0.0
	for j := range p.samples {
		s := &p.samples[j]
		if s.t < lo || s.t >= hi {
			continue
		}
		if first == nil {
			first = s
		}
		last = s
		maxPending = max(maxPending, s.pending)
	}
	if first == nil {
		return []string{"0", "0", "0", "0", "0", "0", "0"}
	}
	// Deltas against the last sample before this second when there is one.
	if k := slices.IndexFunc(p.samples, func(s sample) bool { return s.t >= lo }); k > 0 {
		first = &p.samples[k-1]
	}
	commits := last.commits - first.commits
	avg := 0.0
	if commits > 0 {
		avg = 1000 * (last.commitSecs - first.commitSecs) / commits
	}
	span := (last.t - first.t).Seconds()
	cpu := 0.0
	if span > 0 {
		cpu = 100 * (last.cpu - first.cpu) / span
	}
	throttled := 0.0
	if n := last.periods - first.periods; n > 0 {
		throttled = 100 * (last.throttled - first.throttled) / n
	}
	return []string{fmt.Sprint(maxPending), fmt.Sprint(last.pending), fmt.Sprint(commits), fmt.Sprintf("%.2f", avg),
		fmt.Sprint(last.changesSoFar - first.changesSoFar), fmt.Sprintf("%.0f", cpu), fmt.Sprintf("%.0f", throttled)}
}

// latencies are the successful change → answer times on server of the
// changes made in second i (i < 0: all of them).
func (p *phaseResult) latencies(server string, i int) []time.Duration {
	var out []time.Duration
	for _, pr := range p.probes {
		if pr.server == server && pr.ok && (i < 0 || int(pr.at/time.Second) == i) {
			out = append(out, pr.latency)
		}
	}
	return out
}

func (r *run) writeProbes(path string) error {
	var sb strings.Builder
	sb.WriteString("changed_at_s\tkind\tserver\tms\tok\n")
	d := r.k.duration.Seconds()
	for _, pr := range r.busy.probes {
		fmt.Fprintf(&sb, "%.3f\t%s\t%s\t%.2f\t%v\n", d+pr.at.Seconds(), pr.kind, pr.server, ms(pr.latency), pr.ok)
	}
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

// pendingGrowth is the least-squares slope of cns_pending_vms over the
// churn phase, times its length: how much the backlog grew.
func (p *phaseResult) pendingGrowth(d time.Duration) (growth, peak float64) {
	var xs, ys []float64
	for _, s := range p.samples {
		if s.t <= d {
			xs, ys = append(xs, s.t.Seconds()), append(ys, s.pending)
			peak = max(peak, s.pending)
		}
	}
	n := float64(len(xs))
	if n < 2 {
		return 0, peak
	}
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i]/n, my+ys[i]/n
	}
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0, peak
	}
	return sxy / sxx * d.Seconds(), peak
}

// cnsHistogram is what one of cns's latency histograms counted during a
// phase: cumulative counts per upper bound (seconds), ascending.
type cnsHistogram struct {
	bounds []float64
	counts []float64
	total  float64
}

// histogramDiff is histogram name's counts in after less those in before
// (two readings of cns's /metrics).
func histogramDiff(before, after map[string]float64, name string) cnsHistogram {
	var h cnsHistogram
	prefix := name + `_bucket{le="`
	for key, v := range after {
		le, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		le = strings.TrimSuffix(le, `"}`)
		if le == "+Inf" {
			h.total = v - before[key]
			continue
		}
		b, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		h.bounds = append(h.bounds, b)
	}
	sort.Float64s(h.bounds)
	for _, b := range h.bounds {
		key := prefix + strconv.FormatFloat(b, 'f', -1, 64) + `"}`
		h.counts = append(h.counts, after[key]-before[key])
	}
	return h
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linearly within the bucket it falls in (0 when empty; the last
// bound when it falls beyond it).
func (h cnsHistogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank, lower, below := q*h.total, 0.0, 0.0
	for i, b := range h.bounds {
		if h.counts[i] >= rank {
			in := h.counts[i] - below
			frac := 1.0
			if in > 0 {
				frac = (rank - below) / in
			}
			return time.Duration((lower + (b-lower)*frac) * float64(time.Second))
		}
		lower, below = b, h.counts[i]
	}
	return time.Duration(lower * float64(time.Second))
}
