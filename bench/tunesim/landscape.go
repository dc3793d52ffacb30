package tunesim

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/rdma-appliance/appliance/tuning"
)

// NewLandscape is scenario sc's landscape from its whole grid's
// measurements (tune bench's, or its shards') and its baselines'.
func NewLandscape(sc SimScenario, entries []GridEntry, baselines map[string]tuning.Telemetry) (*Landscape, error) {
	l := &Landscape{Scenario: sc.Name, Space: tuning.PaperSpace(sc.Scopes...), Objective: sc.Objective, Baselines: baselines}
	l.Tel = make([]tuning.Telemetry, int(l.Space.Size()))
	seen := make([]bool, len(l.Tel))
	for _, e := range entries {
		if e.Scenario != sc.Name {
			continue
		}
		if e.Point < 0 || e.Point >= len(l.Tel) || seen[e.Point] {
			return nil, fmt.Errorf("landscape %s: point %d twice or outside the grid", sc.Name, e.Point)
		}
		seen[e.Point] = true
		l.Tel[e.Point] = e.Telemetry
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("landscape %s: point %d of %d not measured", sc.Name, i, len(seen))
		}
	}
	return l, nil
}

// MeasureBaselines simulates every preset of Tables 2 and 3 on sc.
func MeasureBaselines(ctx context.Context, sc SimScenario) (map[string]tuning.Telemetry, error) {
	st, err := NewSimTarget(sc)
	if err != nil {
		return nil, err
	}
	sp := tuning.PaperSpace(sc.Scopes...)
	out := map[string]tuning.Telemetry{}
	for _, b := range tuning.Baselines(sp.Cell, sc.Capacity, sc.RTT) {
		if err := st.Apply(ctx, tuning.Uniform(sp.Cell, b.W, sc.Scopes...)); err != nil {
			return nil, fmt.Errorf("baseline %s: %w", b.Name, err)
		}
		tel, err := st.Measure(ctx, sc.Duration)
		if err != nil {
			return nil, fmt.Errorf("baseline %s: %w", b.Name, err)
		}
		out[b.Name] = tel
	}
	return out, nil
}

// The landscape file: gzip'd CSV, one line per watched port of every grid
// point ("p" and its number) and baseline ("b" and its name), after a
// header line naming the scenario and the evaluation's duration. Only
// what the objectives read is kept (the bench's shard files hold whole
// telemetry, megabytes a scenario).
var landscapeHead = []string{"kind", "key", "switch", "layer", "port", "capacity_bps", "throughput_bps", "queue_mean", "queue_p99", "queue_max"}

// WriteLandscape writes l to w.
func WriteLandscape(w io.Writer, l *Landscape, d time.Duration) error {
	zw := gzip.NewWriter(w)
	cw := csv.NewWriter(zw)
	if err := cw.Write([]string{"#landscape", l.Scenario, d.String()}); err != nil {
		return err
	}
	if err := cw.Write(landscapeHead); err != nil {
		return err
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 7, 64) }
	put := func(kind, key string, t tuning.Telemetry) error {
		for _, sw := range t.Switches {
			for _, p := range sw.Ports {
				rec := []string{kind, key, sw.Name, sw.Layer, strconv.Itoa(p.Port), g(p.Capacity), g(p.PortThroughput(t.Duration)),
					g(p.QueueMean), g(p.QueueP99), g(p.QueueMax)}
				if err := cw.Write(rec); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for i, t := range l.Tel {
		if err := put("p", strconv.Itoa(i), t); err != nil {
			return err
		}
	}
	for _, n := range sortedNames(l.Baselines) {
		if err := put("b", n, l.Baselines[n]); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return zw.Close()
}

// sortedNames is m's keys, sorted.
func sortedNames[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ReadLandscape reads a landscape file of one of SimScenarios.
func ReadLandscape(path string) (*Landscape, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cr := csv.NewReader(zr)
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil || len(head) != 3 || head[0] != "#landscape" {
		return nil, fmt.Errorf("%s: not a landscape file", path)
	}
	sc, ok := SimScenarios()[head[1]]
	if !ok {
		return nil, fmt.Errorf("%s: scenario %q: %s", path, head[1], scenarioList())
	}
	d, err := time.ParseDuration(head[2])
	if err != nil {
		return nil, fmt.Errorf("%s: duration %q", path, head[2])
	}
	if _, err := cr.Read(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l := &Landscape{Scenario: sc.Name, Space: tuning.PaperSpace(sc.Scopes...), Objective: sc.Objective, Baselines: map[string]tuning.Telemetry{}}
	l.Tel = make([]tuning.Telemetry, int(l.Space.Size()))
	line := 2
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(rec) != len(landscapeHead) {
			return nil, fmt.Errorf("%s:%d: %d fields, want %d", path, line, len(rec), len(landscapeHead))
		}
		var v [5]float64
		for i := range v {
			if v[i], err = strconv.ParseFloat(rec[5+i], 64); err != nil {
				return nil, fmt.Errorf("%s:%d: %s: %w", path, line, landscapeHead[5+i], err)
			}
		}
		port, err := strconv.Atoi(rec[4])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: port: %w", path, line, err)
		}
		var t tuning.Telemetry
		pt := -1
		switch rec[0] {
		case "p":
			pt, err = strconv.Atoi(rec[1])
			if err != nil || pt < 0 || pt >= len(l.Tel) {
				return nil, fmt.Errorf("%s:%d: point %q outside the grid", path, line, rec[1])
			}
			t = l.Tel[pt]
		case "b":
			t = l.Baselines[rec[1]]
		default:
			return nil, fmt.Errorf("%s:%d: kind %q: p or b", path, line, rec[0])
		}
		t.Duration = int64(d)
		ps := tuning.PortStats{Port: port, Capacity: v[0], Throughput: v[1], QueueMean: v[2], QueueP99: v[3], QueueMax: v[4]}
		if n := len(t.Switches); n > 0 && t.Switches[n-1].Name == rec[2] {
			t.Switches[n-1].Ports = append(t.Switches[n-1].Ports, ps)
		} else {
			t.Switches = append(t.Switches, tuning.SwitchStats{Name: rec[2], Layer: rec[3], Ports: []tuning.PortStats{ps}})
		}
		if pt >= 0 {
			l.Tel[pt] = t
		} else {
			l.Baselines[rec[1]] = t
		}
	}
	for i, t := range l.Tel {
		if len(t.Switches) == 0 {
			return nil, fmt.Errorf("%s: grid point %d missing", path, i)
		}
	}
	return l, nil
}
