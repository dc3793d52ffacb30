package dtatofino

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzParseCounters: bfshell's output of the counter script (the
// switch's word) is read or refused with ErrCounters, never a panic; what
// is read names only the translator's collectors and the counters'
// known reasons and outcomes, and a PSN within its 24 bits.
func FuzzParseCounters(f *testing.F) {
	rec := func(s string) string { return CounterPrefix + s + "\n" }
	good := "bfrt_python> \n" +
		rec(`{"kind": "counter", "name": "report_pkts", "index": 1, "collector": "", "packets": 3, "bytes": 0}`) +
		rec(`{"kind": "counter", "name": "drop_reports", "index": 2, "collector": "", "packets": 1, "bytes": 0}`) +
		rec(`{"kind": "counter", "name": "postcard_events", "index": 0, "collector": "", "packets": 5, "bytes": 0}`) +
		rec(`{"kind": "counter", "name": "postcard_evictions", "index": 0, "collector": "", "packets": 1, "bytes": 0}`) +
		rec(`{"kind": "counter", "name": "sketch_events", "index": 1, "collector": "", "packets": 1, "bytes": 0}`) +
		rec(`{"kind": "counter", "name": "rdma_pkts", "index": 0, "collector": "kv", "packets": 1000, "bytes": 64000}`) +
		rec(`{"kind": "counter", "name": "psn_resyncs", "index": 1, "collector": "paths", "packets": 2, "bytes": 0}`) +
		rec(`{"kind": "register", "name": "psn", "index": 0, "collector": "kv", "values": [1000, 1077, 1000, 1000]}`) +
		rec(`{"kind": "register", "name": "psn", "index": 1, "collector": "paths", "values": [4294967295, 16777200]}`) +
		rec(`{"kind": "end", "records": 9}`)
	f.Add(good)
	f.Add(strings.Replace(good, `"records": 9`, `"records": 8`, 1))
	f.Add(strings.Replace(good, `"index": 2`, `"index": 9`, 1))
	f.Add(strings.Replace(good, `"collector": "kv"`, `"collector": "x"`, 1))
	f.Add("bfshell> nothing\n")
	tr := twoCollectors(f)
	sm := tr
	sm.SketchMerge = true
	f.Fuzz(func(t *testing.T, out string) {
		for _, tr := range []Translator{tr, sm} {
			c, err := tr.ParseCounters(strings.NewReader(out))
			if err != nil {
				if !errors.Is(err, ErrCounters) {
					t.Fatalf("error does not wrap ErrCounters: %v", err)
				}
				continue
			}
			if len(c.Collectors) != len(tr.Collectors) {
				t.Fatalf("%d collectors read, the translator has %d", len(c.Collectors), len(tr.Collectors))
			}
			for i, cc := range c.Collectors {
				if cc.Name != tr.Collectors[i].Name || cc.PSN > 0xffffff {
					t.Fatalf("collector %d: %+v", i, cc)
				}
			}
			for k := range c.Dropped {
				if !slices.Contains(dropReasons, k) {
					t.Fatalf("drop reason %q", k)
				}
			}
			for k := range c.Postcards {
				if !slices.Contains(postcardEvents, k) && k != postcardEvicted {
					t.Fatalf("postcard outcome %q", k)
				}
			}
			if c.Sketches != nil && !tr.SketchMerge {
				t.Fatalf("sketch counters without Sketch-Merge: %v", c.Sketches)
			}
			for k := range c.Sketches {
				if !slices.Contains(sketchEvents, k) {
					t.Fatalf("sketch outcome %q", k)
				}
			}
		}
	})
}
