package hawkeyeeval

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// Options are an evaluation's.
type Options struct {
	Topologies []Topology
	Anomalies  []Anomaly
	Methods    []Method
	// Traces per topology and anomaly type: seeds Seed+1 .. Seed+Traces.
	Traces int
	Seed   uint64
	Params Params
	Shard  Shard
	// Workers run traces at once (0: one per CPU). The results do not
	// depend on it.
	Workers int
	// Progress is called after each trace; OnTrace sees each trace's
	// result. Both are called from one goroutine, in trace order.
	Progress func(done, total int)
	OnTrace  func(*TraceResult)
	// Keep keeps each method's telemetry in the results OnTrace sees.
	Keep bool
}

// Shard is part I of N of an evaluation: the traces whose number (over
// the topologies, then the anomaly types, then the seeds, in order) is I
// modulo N. Shards of one evaluation run anywhere (a batch system's
// array jobs) and Merge adds their scores up to the whole evaluation's.
type Shard struct{ I, N int }

// Validate checks the options.
func (o *Options) Validate() error {
	switch {
	case len(o.Topologies) == 0 || len(o.Anomalies) == 0 || len(o.Methods) == 0:
		return fmt.Errorf("hawkeyeeval: no topology, anomaly type or method to evaluate")
	case o.Traces < 1:
		return fmt.Errorf("hawkeyeeval: %d traces", o.Traces)
	case o.Shard.N < 1 || o.Shard.I < 0 || o.Shard.I >= o.Shard.N:
		return fmt.Errorf("hawkeyeeval: shard %d/%d", o.Shard.I, o.Shard.N)
	}
	return o.Params.Validate()
}

type job struct {
	tp   Topology
	a    Anomaly
	seed uint64
}

// Evaluate runs the evaluation's traces (its shard's) and scores every
// method.
func Evaluate(ctx context.Context, o Options) (Scores, error) {
	if o.Shard.N == 0 {
		o.Shard.N = 1
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var jobs []job
	k := -1
	for _, tp := range o.Topologies {
		for _, a := range o.Anomalies {
			for i := 1; i <= o.Traces; i++ {
				if k++; k%o.Shard.N == o.Shard.I {
					jobs = append(jobs, job{tp, a, o.Seed + uint64(i)})
				}
			}
		}
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(jobs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type done struct {
		i   int
		res *TraceResult
		err error
	}
	next := make(chan int)
	out := make(chan done)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := runJob(ctx, jobs[i], o)
				out <- done{i, res, err}
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range jobs {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(out) }()
	scores := Scores{}
	held := map[int]*TraceResult{}
	flushed := 0
	var first error
	for d := range out {
		if d.err != nil {
			if first == nil {
				first = d.err
				cancel()
			}
			continue
		}
		held[d.i] = d.res
		for first == nil && held[flushed] != nil {
			r := held[flushed]
			delete(held, flushed)
			scores.Tally(o.Params, r, o.Methods)
			if o.OnTrace != nil {
				o.OnTrace(r)
			}
			flushed++
			if o.Progress != nil {
				o.Progress(flushed, len(jobs))
			}
		}
	}
	if first != nil {
		return scores, first
	}
	return scores, ctx.Err()
}

func runJob(ctx context.Context, j job, o Options) (*TraceResult, error) {
	tr, err := Generate(j.tp, j.a, j.seed)
	if err != nil {
		return nil, err
	}
	res, err := Run(ctx, tr, RunOptions{Params: o.Params, Methods: o.Methods, Keep: o.Keep})
	if err != nil {
		return nil, fmt.Errorf("%v %v seed %d: %w", j.tp, j.a, j.seed, err)
	}
	return res, nil
}
