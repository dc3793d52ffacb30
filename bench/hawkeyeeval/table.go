package hawkeyeeval

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/rdma-appliance/appliance/collector/hawkeyeanalyzer"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Analyzer is the Diagnoser of collector/hawkeyeanalyzer: its types mapped to the
// injected ones, its ranked root causes.
func Analyzer(t *hawkeyewire.Telemetry) (Verdict, error) {
	d := hawkeyeanalyzer.Diagnose(t, hawkeyeanalyzer.Options{})
	v := Verdict{Anomaly: -1, Flows: d.RootFlows()}
	if hs := d.RootHosts(); len(hs) > 0 {
		v.Host = hs[0]
	}
	switch d.Type {
	case hawkeyeanalyzer.Incast:
		v.Anomaly = Incast
	case hawkeyeanalyzer.Storm:
		v.Anomaly = Storm
	case hawkeyeanalyzer.DeadlockInLoop:
		v.Anomaly = InLoopDeadlock
	case hawkeyeanalyzer.DeadlockOutOfLoopContention:
		v.Anomaly = OutLoopContention
	case hawkeyeanalyzer.DeadlockOutOfLoopInjection:
		v.Anomaly = OutLoopInjection
	case hawkeyeanalyzer.Contention:
		v.Anomaly = Contention
	}
	return v, nil
}

// Score is one method's figures on one anomaly type.
type Score struct {
	Anomaly    Anomaly
	Method     Method
	Traces     int // generated
	Manifested int // whose anomaly showed in the fabric: the scored ones
	Detected   int
	TP         int // right type and root cause
	Claimed    int // traces of any type this method diagnosed as this type
	Bytes      int // telemetry bytes over the scored traces
	Switches   int // switches polled over the scored traces
}

// Precision is TP over the traces diagnosed as this type.
func (s *Score) Precision() float64 { return ratio(s.TP, s.Claimed) }

// Recall is TP over the scored traces of this type.
func (s *Score) Recall() float64 { return ratio(s.TP, s.Manifested) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Evaluate runs traces per anomaly type and scores every method.
// progress, when set, is called after each trace.
func Evaluate(ctx context.Context, traces int, anomalies []Anomaly, methods []Method, diag Diagnoser,
	progress func(done, total int)) (map[Anomaly]map[Method]*Score, error) {
	return EvaluateShard(ctx, Shard{I: 0, N: 1}, traces, anomalies, methods, diag, progress)
}

// Shard is part I of N of an evaluation: the traces whose number (over
// every anomaly type, in order) is I modulo N. Shards of one evaluation
// run anywhere (a batch system's array jobs) and Merge adds their scores
// up to the whole evaluation's.
type Shard struct{ I, N int }

// EvaluateShard is Evaluate on one shard of the traces.
func EvaluateShard(ctx context.Context, sh Shard, traces int, anomalies []Anomaly, methods []Method, diag Diagnoser,
	progress func(done, total int)) (map[Anomaly]map[Method]*Score, error) {
	if sh.N < 1 || sh.I < 0 || sh.I >= sh.N {
		return nil, fmt.Errorf("shard %d/%d", sh.I, sh.N)
	}
	scores := map[Anomaly]map[Method]*Score{}
	for _, a := range anomalies {
		scores[a] = map[Method]*Score{}
		for _, m := range methods {
			scores[a][m] = &Score{Anomaly: a, Method: m}
		}
	}
	done, total := 0, 0
	for k := range traces * len(anomalies) {
		if k%sh.N == sh.I {
			total++
		}
	}
	k := -1
	for _, a := range anomalies {
		for seed := 1; seed <= traces; seed++ {
			if k++; k%sh.N != sh.I {
				continue
			}
			tr, err := Generate(a, uint64(seed))
			if err != nil {
				return nil, err
			}
			outs, err := Run(ctx, tr, methods, diag)
			if err != nil {
				return nil, fmt.Errorf("%v seed %d: %w", a, seed, err)
			}
			for _, o := range outs {
				s := scores[a][o.Method]
				s.Traces++
				if !o.Manifested {
					continue
				}
				s.Manifested++
				s.Bytes += o.Bytes
				s.Switches += o.Switches
				if o.Detected {
					s.Detected++
				}
				if o.Correct {
					s.TP++
				}
				if c, ok := scores[o.Verdict.Anomaly]; ok {
					c[o.Method].Claimed++
				}
			}
			done++
			if progress != nil {
				progress(done, total)
			}
			if ctx.Err() != nil {
				return scores, ctx.Err()
			}
		}
	}
	return scores, nil
}

// WriteTable prints precision and recall per type and method, and the
// telemetry each method collected.
func WriteTable(w io.Writer, scores map[Anomaly]map[Method]*Score, anomalies []Anomaly, methods []Method) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	head := []string{"ANOMALY", "TRACES"}
	for _, m := range methods {
		head = append(head, strings.ToUpper(m.String())+" P/R")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, a := range anomalies {
		row := []string{a.String()}
		first := scores[a][methods[0]]
		row = append(row, fmt.Sprintf("%d/%d", first.Manifested, first.Traces))
		for _, m := range methods {
			s := scores[a][m]
			row = append(row, fmt.Sprintf("%.0f%%/%.0f%%", 100*s.Precision(), 100*s.Recall()))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "METHOD\tTELEMETRY BYTES/INCIDENT\tSWITCHES POLLED/INCIDENT\tVS FULL POLLING")
	per := func(m Method) (float64, float64) {
		var b, sw, n int
		for _, a := range anomalies {
			if s := scores[a][m]; s != nil {
				b, sw, n = b+s.Bytes, sw+s.Switches, n+s.Manifested
			}
		}
		return ratio(b, n), ratio(sw, n)
	}
	fb, _ := per(FullPolling)
	for _, m := range methods {
		b, sw := per(m)
		vs := "-"
		if fb > 0 {
			vs = fmt.Sprintf("%.0f%%", 100*b/fb)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%s\n", m, b, sw, vs)
	}
	tw.Flush()
}

// Flatten lists scores for storing a shard's results (JSON).
func Flatten(scores map[Anomaly]map[Method]*Score) []Score {
	var out []Score
	for _, a := range Anomalies {
		for _, m := range Methods {
			if s := scores[a][m]; s != nil {
				out = append(out, *s)
			}
		}
	}
	return out
}

// Merge adds up shards' scores.
func Merge(shards ...[]Score) map[Anomaly]map[Method]*Score {
	out := map[Anomaly]map[Method]*Score{}
	for _, sh := range shards {
		for _, s := range sh {
			if out[s.Anomaly] == nil {
				out[s.Anomaly] = map[Method]*Score{}
			}
			t := out[s.Anomaly][s.Method]
			if t == nil {
				t = &Score{Anomaly: s.Anomaly, Method: s.Method}
				out[s.Anomaly][s.Method] = t
			}
			t.Traces += s.Traces
			t.Manifested += s.Manifested
			t.Detected += s.Detected
			t.TP += s.TP
			t.Claimed += s.Claimed
			t.Bytes += s.Bytes
			t.Switches += s.Switches
		}
	}
	return out
}
