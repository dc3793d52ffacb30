package tunesim

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/tuning"
)

// caseTarget is a paper case's simulator target under options o.
func caseTarget(t testing.TB, o PaperOptions, name string) (*SimTarget, tuning.Objective) {
	t.Helper()
	o.Defaults()
	pc, ok := PaperCases(o.Bursts)[name]
	if !ok {
		t.Fatalf("no case %s", name)
	}
	st, err := NewSimTarget(o.scenario(pc))
	if err != nil {
		t.Fatal(err)
	}
	obj := st.Sc.Objective
	obj.Norm = tuning.Fixed
	return st, obj
}

func preset(t testing.TB, st *SimTarget, name string) tuning.Config {
	t.Helper()
	c, err := tuning.BaselineConfig(name, tuning.PaperCell, st.Sc.Capacity, st.Sc.RTT, st.Sc.Scopes...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIncastFCTFromCompletions: the incast's messages are posted by QPs
// that queue a burst behind the message in flight (an RC send queue):
// every burst of every QP is a message, the same ones under every
// preset; a queued message starts when its QP's last one completes, and
// its FCT counts from its burst; every message completes after the
// drain, each FCT is at least its bytes' wire time at 25G, and the
// table's percentiles are those of the messages' FCTs.
func TestIncastFCTFromCompletions(t *testing.T) {
	for _, name := range []string{"incast2-q10-64k", "incast2-q50-64k"} {
		posted := map[string]uint64{}
		for _, ps := range []string{"dcqcn", "vendor"} {
			st, obj := caseTarget(t, PaperOptions{}, name)
			r, err := measureCase(context.Background(), st, obj, preset(t, st, ps))
			if err != nil {
				t.Fatal(err)
			}
			posted[ps] = st.Posted
			l := st.Sc.Loop
			slots := uint64(len(l.Senders) * l.QPs * 3)
			if st.Posted != slots || st.Skipped != 0 || st.Posted != uint64(len(st.Last.Flows)) || len(st.Ops) != len(st.Last.Flows) {
				t.Fatalf("%s %s: %d posted, %d skipped, %d flows, %d messages done: want %d bursts x QPs each",
					name, ps, st.Posted, st.Skipped, len(st.Last.Flows), len(st.Ops), slots)
			}
			if r.Unfinished != 0 || r.Completed != len(st.Ops) {
				t.Fatalf("%s: %d done, %d unfinished of %d", name, r.Completed, r.Unfinished, len(st.Ops))
			}
			wire := int64(float64(l.Size) * 8 / 25) // ns at 25 Gbit/s
			var fct []float64
			lastEnd := map[int]int64{}
			queued := 0
			for _, op := range st.Ops {
				if op.Latency() < wire || op.Start%int64(time.Millisecond) != 0 {
					t.Fatalf("%s: message %+v: FCT at least %d ns, counted from a burst", name, op, wire)
				}
				if e, ok := lastEnd[op.QP]; ok && op.Start < e {
					// Posted while its QP was busy: queued, so it cannot
					// have completed before the one ahead of it.
					queued++
					if op.End <= e {
						t.Fatalf("%s: QP %d's message %+v completed before the one ahead of it (%d)", name, op.QP, op, e)
					}
				}
				lastEnd[op.QP] = op.End
				fct = append(fct, float64(op.Latency()))
			}
			for _, f := range st.Last.Flows {
				if !f.Done {
					t.Fatalf("%s: message %+v not done", name, f)
				}
			}
			if r.P50 != int64(tuning.Percentile(fct, 50)) || r.P99 != int64(tuning.Percentile(fct, 99)) || r.P99 < r.P50 {
				t.Fatalf("%s: P50 %d P99 %d", name, r.P50, r.P99)
			}
			if r.Gbps <= 0 || r.Gbps > 25 || r.QueueKB < 0 {
				t.Fatalf("%s: %.2f Gbit/s to a 25G receiver, queue %.1f KB", name, r.Gbps, r.QueueKB)
			}
			if name == "incast2-q50-64k" && queued == 0 {
				t.Fatalf("%s: 6.4 MB a millisecond into a 25G port and no QP had to queue a burst", name)
			}
		}
		if posted["dcqcn"] != posted["vendor"] {
			t.Fatalf("%s: the presets were offered different traffic: %v", name, posted)
		}
	}
}

// TestIncastSkipBusy: with Skip a busy QP skips its burst (tune paper's
// earlier workload): every burst of every QP is a message or a skip, and
// every message starts on a burst.
func TestIncastSkipBusy(t *testing.T) {
	st, obj := caseTarget(t, PaperOptions{Skip: true}, "incast2-q50-64k")
	r, err := measureCase(context.Background(), st, obj, preset(t, st, "dcqcn"))
	if err != nil {
		t.Fatal(err)
	}
	l := st.Sc.Loop
	if slots := uint64(len(l.Senders) * l.QPs * 3); st.Posted+st.Skipped != slots || st.Skipped == 0 || st.Posted != uint64(len(st.Last.Flows)) {
		t.Fatalf("%d posted + %d skipped, %d flows: want %d bursts x QPs, some skipped", st.Posted, st.Skipped, len(st.Last.Flows), slots)
	}
	for _, f := range st.Last.Flows {
		if !f.Done || f.Start%int64(time.Millisecond) != 0 {
			t.Fatalf("message %+v: done and posted on a burst", f)
		}
	}
	if r.Completed != len(st.Last.Flows) {
		t.Fatalf("%d done of %d", r.Completed, len(st.Last.Flows))
	}
}

// TestWholeRunTelemetry: the tuner's telemetry covers the run up to its
// last completion, past the posting window when a burst outlasts it,
// and the posting window only with PostingWindow.
func TestWholeRunTelemetry(t *testing.T) {
	ctx := context.Background()
	for _, posting := range []bool{false, true} {
		st, _ := caseTarget(t, PaperOptions{PostingWindow: posting}, "incast2-q50-64k")
		if err := st.Apply(ctx, preset(t, st, "dcqcn")); err != nil {
			t.Fatal(err)
		}
		tel, err := st.Measure(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		var last int64
		for _, op := range st.Ops {
			last = max(last, op.End)
		}
		want := last
		if posting {
			want = int64(st.Sc.Duration)
		}
		if last <= int64(st.Sc.Duration) || tel.Duration != want {
			t.Fatalf("posting window %v: telemetry over %d ns, last completion at %d, posting for %d", posting, tel.Duration, last, st.Sc.Duration)
		}
		// The receiver's goodput over the window (packets, headers
		// included): every message's bytes over the whole run, fewer
		// in posting's 3 ms.
		var got float64
		for _, f := range tel.Flows {
			got += f.Throughput * float64(tel.Duration) / 1e9 / 8
		}
		all := float64(len(st.Ops)) * float64(st.Sc.Loop.Size)
		if !posting && (got < all || got > all*1.1) {
			t.Fatalf("whole run: %.0f bytes delivered in telemetry, the messages hold %.0f", got, all)
		}
		if posting && got >= all {
			t.Fatalf("posting window: %.0f bytes of %.0f, but the run outlasts the window", got, all)
		}
	}
}

// TestBestUnderFinalHistory: under the history normalisation the tuned
// point is the run's best against the run's whole history, not the
// first point measured (which, alone in its history, scores the most).
func TestBestUnderFinalHistory(t *testing.T) {
	o := tuning.DefaultObjective()
	tel := func(tbps, q float64) tuning.Telemetry {
		return tuning.Telemetry{Duration: 1e6, Switches: []tuning.SwitchStats{{Name: "leaf1",
			Ports: []tuning.PortStats{{Port: 0, Capacity: 25e9, Throughput: tbps, QueueMean: q}}}}}
	}
	var l telemetryLog
	ctx := context.Background()
	tg := l.wrap(&fixedTarget{})
	for i, m := range []tuning.Telemetry{tel(10e9, 500e3), tel(24e9, 2e3), tel(25e9, 900e3)} {
		c := tuning.Uniform(tuning.PaperCell, tuning.Watermark{Kmin: int64(i), Kmax: int64(i) + 500, Pmax: 10, Headroom: 100, Alpha: 1}, "leaf")
		tg.(*loggedTarget).Target.(*fixedTarget).tel = m
		if err := tg.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := tg.Measure(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	best, err := l.bestUnder(o)
	if err != nil {
		t.Fatal(err)
	}
	if best.Scopes["leaf"].Kmin != 1 || l.distinct() != 3 {
		t.Fatalf("best %v of %d: want the second (near line rate, the smallest queue)", best, l.distinct())
	}
}

// fixedTarget answers every measurement with tel.
type fixedTarget struct{ tel tuning.Telemetry }

func (f *fixedTarget) Apply(context.Context, tuning.Config) error { return nil }
func (f *fixedTarget) Measure(context.Context, time.Duration) (tuning.Telemetry, error) {
	return f.tel, nil
}

// TestRedisClosedLoop: every exchange is a SET and its reply; a thread's
// next SET is posted when its last reply completed, never before, and
// the exchange's latency covers both messages.
func TestRedisClosedLoop(t *testing.T) {
	st, obj := caseTarget(t, PaperOptions{}, "redis")
	st.Sc.Duration = 6 * time.Millisecond
	r, err := measureCase(context.Background(), st, obj, preset(t, st, "vendor"))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Ops) == 0 || r.Completed != len(st.Ops) || uint64(len(st.Ops)) != st.Posted || r.Unfinished != 0 {
		t.Fatalf("%d exchanges of %d SETs posted, %d unfinished", len(st.Ops), st.Posted, r.Unfinished)
	}
	l := st.Sc.Loop
	lastEnd := map[int]int64{}
	perQP := map[int]int{}
	for _, op := range st.Ops {
		if op.Latency() < int64(float64(l.Size+l.Resp)*8/25) {
			t.Fatalf("exchange %+v shorter than its bytes' wire time", op)
		}
		if e, ok := lastEnd[op.QP]; ok && op.Start != e {
			t.Fatalf("thread %d posted at %d, its last reply completed at %d", op.QP, op.Start, e)
		}
		lastEnd[op.QP] = op.End
		perQP[op.QP]++
	}
	if len(perQP) != len(l.Senders)*l.QPs {
		t.Fatalf("%d threads completed exchanges, want %d", len(perQP), len(l.Senders)*l.QPs)
	}
	// SETs and replies: twice the exchanges in flows.
	if len(st.Last.Flows) != 2*len(st.Ops) {
		t.Fatalf("%d flows for %d exchanges", len(st.Last.Flows), len(st.Ops))
	}
	if r.IOPS <= 0 {
		t.Fatal("no exchange completed within the posting window")
	}
}

// TestPaperCaseReproducible: a case run twice with one fabric seed gives
// the same row, method by method.
func TestPaperCaseReproducible(t *testing.T) {
	o := PaperOptions{Cases: []string{"incast2-q50-10k"}, Evals: 6, SimSeed: 3}
	a, err := PaperEval(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := PaperEval(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	a[0].Seconds, b[0].Seconds = 0, 0
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ:\n%+v\n%+v", a, b)
	}
	if n := len(a[0].Runs); n != 1+len(tuning.BaselineNames()) || a[0].Runs[0].Evals == 0 {
		t.Fatalf("%d runs, first %+v: want the tuned run and every preset", n, a[0].Runs[0])
	}
}

// TestWritePaper: the table names every method and the verdicts, the
// files are written.
func TestWritePaper(t *testing.T) {
	o := PaperOptions{Cases: []string{"incast2-q10-10k", "redis"}, Evals: 3, Bursts: 1}
	rows, err := PaperEval(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WritePaper(dir, rows, o); err != nil {
		t.Fatal(err)
	}
	txt, err := os.ReadFile(filepath.Join(dir, "paper.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append(tuning.BaselineNames(), "tuned (seed 1): P50 FCT: beats", "IOPS: beats", "== redis") {
		if !strings.Contains(string(txt), want) {
			t.Fatalf("paper.txt lacks %q:\n%s", want, txt)
		}
	}
	// Incast: 4 metrics; redis: 7.
	for _, f := range []string{"paper.json", "paper.html", "paper-1.png", "paper-11.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDCQCNKnobsReachHosts: the knobs land on every host's DCQCN over
// Table 4's other parameters, and min_time_between_cnps paces the
// receivers' CNPs: with both knobs at 0 a congested incast sends more
// CNPs than with both at 50 us.
func TestDCQCNKnobsReachHosts(t *testing.T) {
	cnps := func(k DCQCNKnobs) uint64 {
		st, obj := caseTarget(t, PaperOptions{DCQCN: &k}, "incast2-q50-64k")
		if got := st.Sc.Base.Host.Params.MinDecreaseInterval; got != k.RateReduceMonitorPeriod ||
			st.Sc.Base.Host.CNPInterval != int64(k.MinTimeBetweenCNPs) || st.Sc.Base.Host.Params.G != 1.0/256 {
			t.Fatalf("host DCQCN %+v, CNP interval %d: want the knobs on Table 4's parameters", st.Sc.Base.Host.Params, st.Sc.Base.Host.CNPInterval)
		}
		if _, err := measureCase(context.Background(), st, obj, preset(t, st, "dcqcn")); err != nil {
			t.Fatal(err)
		}
		return st.Last.Stats.CNPs
	}
	fast := cnps(DCQCNKnobs{})
	slow := cnps(DCQCNKnobs{RateReduceMonitorPeriod: 50 * time.Microsecond, MinTimeBetweenCNPs: 50 * time.Microsecond})
	if fast <= slow || slow == 0 {
		t.Fatalf("CNPs: %d with the knobs at 0, %d at 50 us", fast, slow)
	}
}

// TestFig13: one point per pair of knob values, each with a tuned and a
// vendor run under those knobs; the files are written.
func TestFig13(t *testing.T) {
	vals := []time.Duration{0, 4 * time.Microsecond}
	pts, err := Fig13(context.Background(), PaperOptions{Evals: 3, Bursts: 1}, "incast2-q10-64k", vals)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 4 || pts[3].RRMPus != 4 || pts[3].MTBCus != 4 || pts[1].RRMPus != 0 || pts[1].MTBCus != 4 {
		t.Fatalf("points %+v", pts)
	}
	for _, p := range pts {
		if p.Tuned.Evals == 0 || p.Vendor.Method != "vendor" || p.Vendor.Completed == 0 {
			t.Fatalf("point %+v", p)
		}
	}
	if err := WriteFig13(t.TempDir(), "incast2-q10-64k", pts); err != nil {
		t.Fatal(err)
	}
	if _, err := Fig13(context.Background(), PaperOptions{}, "nope", vals); err == nil {
		t.Fatal("unknown case accepted")
	}
}

// TestLoopValidate: loops that name no host, send to themselves or
// lack a reply size are refused before the fabric runs.
func TestLoopValidate(t *testing.T) {
	pc := PaperCases(1)["redis"]
	for _, bad := range []func(*Loop){
		func(l *Loop) { l.Dst = 40 }, // a switch
		func(l *Loop) { l.Senders = []int{39} },
		func(l *Loop) { l.Resp = 0 },
		func(l *Loop) { l.QPs = 0 },
	} {
		sc := pc.Scenario(time.Millisecond)
		l := *sc.Loop
		bad(&l)
		sc.Loop = &l
		if _, err := NewSimTarget(sc); err == nil {
			t.Fatalf("loop %+v accepted", l)
		}
	}
}

// BenchmarkPaperCase is one evaluation of each kind of case (the hot
// path of the tables: annealing spends its budget on these).
func BenchmarkPaperCase(b *testing.B) {
	for _, name := range []string{"incast2-q50-64k", "incast39-q10-64k", "redis"} {
		b.Run(name, func(b *testing.B) {
			st, obj := caseTarget(b, PaperOptions{}, name)
			c := preset(b, st, "experience")
			b.ReportAllocs()
			var msgs, simNs float64
			for b.Loop() {
				r, err := measureCase(context.Background(), st, obj, c)
				if err != nil {
					b.Fatal(err)
				}
				msgs += float64(r.Completed)
				simNs += float64(st.Last.SimNs)
			}
			b.ReportMetric(msgs/b.Elapsed().Seconds(), "messages/s")
			b.ReportMetric(simNs/1e6/b.Elapsed().Seconds(), "sim-ms/s")
		})
	}
}

// BenchmarkPaperEval is a case's whole default table: annealing's 40
// configurations (80 evaluations with line 7's re-scoring from the memo)
// and the presets; the rate counts the simulations run.
func BenchmarkPaperEval(b *testing.B) {
	b.ReportAllocs()
	var runs float64
	for b.Loop() {
		rows, err := PaperEval(context.Background(), PaperOptions{Cases: []string{"incast2-q50-64k"}})
		if err != nil {
			b.Fatal(err)
		}
		runs += float64(len(rows[0].Runs) + rows[0].Runs[0].Evals)
	}
	b.ReportMetric(runs/b.Elapsed().Seconds(), "evaluations/s") // simulations: memo hits not counted
}
