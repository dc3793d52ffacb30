package fabric

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// RunFileOptions run a scenario file (`appliance sim run`).
type RunFileOptions struct {
	File string
	// Out is the directory for results.json, flows.csv, series.csv and
	// report.html.
	Out string
	// Progress, when set, sees the simulated time and the duration about
	// every fiftieth of the run.
	Progress func(now, total int64)
}

// RunFile simulates a scenario file and writes its results to o.Out. It
// returns the results and the wall time; a run canceled through ctx still
// writes and returns what it simulated, with ErrCanceled.
func RunFile(ctx context.Context, o RunFileOptions) (*Results, time.Duration, error) {
	sc, err := LoadScenario(o.File)
	if err != nil {
		return nil, 0, err
	}
	s, dur, err := sc.Build()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", o.File, err)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, 0, err
	}
	series, err := os.Create(filepath.Join(o.Out, "series.csv"))
	if err != nil {
		return nil, 0, err
	}
	defer series.Close()
	s.SetSeries(series)
	if o.Progress != nil {
		s.ProgressEvery = max(dur/50, 1)
		s.Progress = func(now int64) { o.Progress(now, dur) }
	}
	t0 := time.Now()
	res, err := s.Run(ctx, dur)
	wall := time.Since(t0)
	if err != nil && !errors.Is(err, ErrCanceled) {
		return nil, wall, err
	}
	if werr := writeResults(o.Out, o.File, res, series); werr != nil {
		return nil, wall, werr
	}
	return res, wall, err
}

// writeResults writes results.json, flows.csv and report.html (with the
// queue series read back from series) into dir.
func writeResults(dir, file string, res *Results, series io.ReadSeeker) error {
	for name, write := range map[string]func(io.Writer) error{"results.json": res.WriteJSON, "flows.csv": res.WriteFlowsCSV} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		werr := write(f)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return werr
		}
	}
	if _, err := series.Seek(0, io.SeekStart); err != nil {
		return err
	}
	page, err := Report("Fabric simulation: "+filepath.Base(file), res, series)
	if err != nil {
		return err
	}
	return page.WriteFile(filepath.Join(dir, "report.html"))
}
