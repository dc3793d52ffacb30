package hostmeshanalyzer

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// FuzzBatch: whatever an agent (or a peer with the token) posts to
// /v1/results, decoding, adding and analysing it does not panic.
func FuzzBatch(f *testing.F) {
	f.Add([]byte(`{"host":"h1","results":[{"host":"h1","src":"r0","dst":"r1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","sport":49152,"seq":1,"at_ns":1000,"network_ns":5000,"processing_ns":2000}]}`))
	f.Add([]byte(`{"host":"h1","results":[{"host":"h1","src":"r0","dst":"r1","at_ns":-9223372036854775808,"timeout":true}],"paths":[{"src_ip":"a","dst_ip":"b","sport":1,"hops":["s1","s1"]}],"down":["r0"],"counters":{"x":18446744073709551615}}`))
	f.Add([]byte(`{"results":[{"at_ns":9223372036854775807,"network_ns":-1,"processing_ns":9223372036854775807}]}`))
	f.Add([]byte(`{"host":"poller","pg_drops":[{"switch":"rail0","port":"Ethernet8","pg":3,"from_ns":0,"to_ns":1000,"discards":7},{"switch":"","port":"x","pg":-1,"from_ns":5,"to_ns":1,"discards":18446744073709551615}],"results":[{"host":"h1","src":"r0","dst":"r1","at_ns":500,"timeout":true}],"paths":[{"host":"h1","src":"r0","dst":"r1","hops":["rail0"],"complete":true}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Batch
		if json.Unmarshal(data, &b) != nil {
			return
		}
		a := NewAnalyzer(Config{MinProbes: 1})
		a.Add(&b)
		if first, last, ok := a.Span(); ok {
			_ = a.Analyze(first)
			_ = a.Analyze(last)
		}
	})
}

// FuzzReadBatches: a recording (`mesh probe --out`, one JSON batch after
// another) is read or refused naming the batch, and its analysis ends
// with every result it took in exactly one window (a result at the
// clock's last nanosecond ends no window and is in none).
func FuzzReadBatches(f *testing.F) {
	f.Add([]byte(`{"host":"h1","results":[{"host":"h1","src":"r0","dst":"r1","at_ns":1000,"network_ns":5000}]}` + "\n" +
		`{"host":"h2","results":[{"host":"h2","src":"r1","dst":"r0","at_ns":1000000000001,"timeout":true}]}`))
	f.Add([]byte(`{"results":[{"at_ns":-9223372036854775808},{"at_ns":9223372036854775807},{"at_ns":0}]}`))
	f.Add([]byte(`{"results":[{"at_ns":0}]}{"results":[{"at_ns":999999999999999999}]}`))
	f.Add([]byte(`{"host": 3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		bs, err := ReadBatches(bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "batch ") {
				t.Fatalf("error names no batch: %v", err)
			}
			return
		}
		taken, atEnd := 0, 0
		for _, b := range bs {
			for _, r := range b.Results {
				taken++
				if r.At == math.MaxInt64 {
					atEnd++
				}
			}
		}
		probes := 0
		for _, r := range AnalyzeAll(bs, Config{Window: time.Second, MinProbes: 1}) {
			probes += r.Probes
		}
		if probes+atEnd != taken {
			t.Fatalf("%d results, %d in the windows (%d at the clock's end)", taken, probes, atEnd)
		}
	})
}
