package fabric

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// A sweep runs one scenario over every combination of some of its keys'
// values and of several seeds: the grid a watermark study or a load curve
// needs. Each point is an independent run, so a sweep splits into shards
// (point k belongs to shard k mod n) that batch systems run anywhere, and
// MergeSweep puts the shards' rows back together.

// SweepParam is one swept key: a path into the scenario file (dotted keys,
// [i] for list items, e.g. switch.ecn.kmin or workload[0].load) and the
// values it takes, as they would be written in the file.
type SweepParam struct {
	Key    string
	Values []string
}

// ParseSweepParam reads KEY=V1,V2,...
func ParseSweepParam(s string) (SweepParam, error) {
	k, vs, ok := strings.Cut(s, "=")
	k = strings.TrimSpace(k)
	if !ok || k == "" || strings.TrimSpace(vs) == "" {
		return SweepParam{}, fmt.Errorf("sweep %q: want KEY=V1,V2 (a scenario key, then its values separated by commas)", s)
	}
	p := SweepParam{Key: k}
	for _, v := range strings.Split(vs, ",") {
		if v = strings.TrimSpace(v); v == "" {
			return SweepParam{}, fmt.Errorf("sweep %q: an empty value", s)
		}
		p.Values = append(p.Values, v)
	}
	return p, nil
}

// SweepPoint is one run of a sweep: the values set and the seed.
type SweepPoint struct {
	Index int               `json:"index"`
	Set   map[string]string `json:"set"`
	Seed  uint64            `json:"seed"`
}

// SweepPoints is the grid: every combination of the parameters' values
// (the last parameter varying fastest), each with seeds 1..seeds.
func SweepPoints(params []SweepParam, seeds int) []SweepPoint {
	seeds = max(seeds, 1)
	var out []SweepPoint
	idx := make([]int, len(params))
	for {
		for s := 1; s <= seeds; s++ {
			set := make(map[string]string, len(params))
			for i, p := range params {
				set[p.Key] = p.Values[idx[i]]
			}
			out = append(out, SweepPoint{Index: len(out), Set: set, Seed: uint64(s)})
		}
		i := len(params) - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < len(params[i].Values) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out
		}
	}
}

// SweepRow is one point's outcome.
type SweepRow struct {
	SweepPoint
	Flows     int     `json:"flows"`
	Completed int     `json:"completed"`
	FCTp50Ns  int64   `json:"fct_p50_ns"`
	FCTp99Ns  int64   `json:"fct_p99_ns"`
	Goodput   float64 `json:"goodput_gbps"` // mean of the finished flows'
	Stats     Stats   `json:"stats"`
	SimNs     int64   `json:"sim_ns"`
	WallMs    int64   `json:"wall_ms"`
	Err       string  `json:"error,omitempty"`
}

// Shard is part I of N of a sweep's points.
type Shard struct{ I, N int }

// RunSweep runs the points of shard sh of a sweep of the scenario file
// data (name is used in errors). A point whose scenario does not build
// (a value the key does not take) is an error before anything runs;
// progress, when set, is called after each run.
func RunSweep(ctx context.Context, name string, data []byte, points []SweepPoint, sh Shard,
	progress func(done, total int)) ([]SweepRow, error) {
	if sh.N < 1 || sh.I < 0 || sh.I >= sh.N {
		return nil, fmt.Errorf("fabric: shard %d/%d", sh.I, sh.N)
	}
	var mine []SweepPoint
	var scens []Scenario
	for _, p := range points {
		if p.Index%sh.N != sh.I {
			continue
		}
		sc, err := sweepScenario(name, data, p)
		if err != nil {
			return nil, err
		}
		mine, scens = append(mine, p), append(scens, sc)
	}
	var rows []SweepRow
	for i, p := range mine {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		row := SweepRow{SweepPoint: p}
		s, dur, err := scens[i].Build()
		if err != nil {
			return rows, fmt.Errorf("%s, point %d %v: %w", name, p.Index, p.Set, err)
		}
		t0 := time.Now()
		res, err := s.Run(ctx, dur)
		row.WallMs = time.Since(t0).Milliseconds()
		if err != nil {
			if errors.Is(err, ErrCanceled) {
				return rows, ctx.Err()
			}
			row.Err = err.Error()
		}
		if res != nil {
			row.summarize(res)
		}
		rows = append(rows, row)
		if progress != nil {
			progress(len(rows), len(mine))
		}
	}
	return rows, nil
}

func (r *SweepRow) summarize(res *Results) {
	r.Flows, r.Stats, r.SimNs = len(res.Flows), res.Stats, res.SimNs
	var gbps float64
	for _, f := range res.Flows {
		if f.Done {
			r.Completed++
			gbps += f.Gbps
		}
	}
	if r.Completed > 0 {
		r.Goodput = gbps / float64(r.Completed)
	}
	r.FCTp50Ns, r.FCTp99Ns = res.FCTPercentile(50), res.FCTPercentile(99)
}

// sweepScenario is the scenario file with the point's values set and its
// seed.
func sweepScenario(name string, data []byte, p SweepPoint) (Scenario, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Scenario{}, fmt.Errorf("%s: %w", name, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return Scenario{}, fmt.Errorf("%s: not a YAML mapping", name)
	}
	keys := make([]string, 0, len(p.Set))
	for k := range p.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range append(keys, "seed") {
		v := p.Set[k]
		if k == "seed" {
			v = strconv.FormatUint(p.Seed, 10)
		}
		if err := setYAML(doc.Content[0], k, v); err != nil {
			return Scenario{}, fmt.Errorf("%s: sweep key %s: %w", name, k, err)
		}
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return Scenario{}, err
	}
	label := fmt.Sprintf("%s (point %d:", name, p.Index)
	for _, k := range keys {
		label += fmt.Sprintf(" %s=%s", k, p.Set[k])
	}
	return DecodeScenario(fmt.Sprintf("%s seed=%d)", label, p.Seed), out)
}

// setYAML sets the scalar at path under mapping n, creating mappings for
// missing keys; list items must exist.
func setYAML(n *yaml.Node, path, value string) error {
	for part := range strings.SplitSeq(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key == "" && rest == "" {
			return errors.New("an empty key")
		}
		if key != "" {
			if n.Kind != yaml.MappingNode {
				return fmt.Errorf("%s: not a mapping", key)
			}
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					next = n.Content[i+1]
				}
			}
			if next == nil {
				next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, next)
			}
			n = next
		}
		for rest != "" {
			is, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(is)
			if !ok || err != nil {
				return fmt.Errorf("%s: bad index", part)
			}
			if n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return fmt.Errorf("%s: no item %d", part, i)
			}
			n = n.Content[i]
			rest = strings.TrimPrefix(after, "[")
		}
	}
	// An empty mapping created for the last key becomes the scalar.
	*n = yaml.Node{Kind: yaml.ScalarNode, Value: value}
	return nil
}

// MergeSweep puts the rows of a sweep's shards back in point order; a
// point that two shards ran is an error (shards of different sweeps).
func MergeSweep(parts ...[]SweepRow) ([]SweepRow, error) {
	var all []SweepRow
	for _, p := range parts {
		all = append(all, p...)
	}
	slices.SortFunc(all, func(a, b SweepRow) int { return a.Index - b.Index })
	for i := 1; i < len(all); i++ {
		if all[i].Index == all[i-1].Index {
			return nil, fmt.Errorf("fabric: point %d is in two shards", all[i].Index)
		}
	}
	return all, nil
}

// WriteSweepCSV writes one line per row: the swept keys (in keys' order),
// the seed and the figures.
func WriteSweepCSV(w io.Writer, keys []string, rows []SweepRow) error {
	cw := csv.NewWriter(w)
	head := append([]string{"point"}, keys...)
	head = append(head, "seed", "flows", "completed", "fct_p50_ns", "fct_p99_ns", "goodput_gbps", "drops", "ecn_marks",
		"cnps", "pause_frames", "retransmits", "timeouts", "sim_ns", "wall_ms", "error")
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range rows {
		rec := []string{strconv.Itoa(r.Index)}
		for _, k := range keys {
			rec = append(rec, r.Set[k])
		}
		u := func(v uint64) string { return strconv.FormatUint(v, 10) }
		rec = append(rec, u(r.Seed), strconv.Itoa(r.Flows), strconv.Itoa(r.Completed),
			strconv.FormatInt(r.FCTp50Ns, 10), strconv.FormatInt(r.FCTp99Ns, 10), strconv.FormatFloat(r.Goodput, 'f', 3, 64),
			u(r.Stats.Drops), u(r.Stats.ECNMarks), u(r.Stats.CNPs), u(r.Stats.PauseFrames), u(r.Stats.Retransmits),
			u(r.Stats.Timeouts), strconv.FormatInt(r.SimNs, 10), strconv.FormatInt(r.WallMs, 10), r.Err)
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// SweepFile is what a sweep writes: the keys (for the CSV's columns) and
// the rows; each shard writes one, and a merge reads them back.
type SweepFile struct {
	Scenario string     `json:"scenario"`
	Keys     []string   `json:"keys"`
	Points   int        `json:"points"`
	Rows     []SweepRow `json:"rows"`
}

// MergeSweepFiles puts the shards of one sweep back together, refusing
// shards of other sweeps, a point run twice or a point missing. Each
// shard's file (named in names, for the errors) holds one SweepFile.
func MergeSweepFiles(names []string, shards [][]SweepFile) (SweepFile, error) {
	var rows [][]SweepRow
	first := shards[0][0]
	for i, p := range shards {
		if len(p) != 1 {
			return first, fmt.Errorf("%s: not a sim sweep shard", names[i])
		}
		if p[0].Scenario != first.Scenario || p[0].Points != first.Points || strings.Join(p[0].Keys, ",") != strings.Join(first.Keys, ",") {
			return first, fmt.Errorf("%s: a shard of another sweep (%s, %d points, keys %v; %s has %s, %d, %v)", names[i],
				p[0].Scenario, p[0].Points, p[0].Keys, names[0], first.Scenario, first.Points, first.Keys)
		}
		rows = append(rows, p[0].Rows)
	}
	all, err := MergeSweep(rows...)
	if err != nil {
		return first, err
	}
	if len(all) != first.Points {
		return first, fmt.Errorf("the shards hold %d of the sweep's %d points: a shard is missing", len(all), first.Points)
	}
	first.Rows = all
	return first, nil
}
