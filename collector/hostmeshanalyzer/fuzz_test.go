package hostmeshanalyzer

import (
	"encoding/json"
	"testing"
)

// FuzzBatch: whatever an agent (or a peer with the token) posts to
// /v1/results, decoding, adding and analysing it does not panic.
func FuzzBatch(f *testing.F) {
	f.Add([]byte(`{"host":"h1","results":[{"host":"h1","src":"r0","dst":"r1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","sport":49152,"seq":1,"at_ns":1000,"network_ns":5000,"processing_ns":2000}]}`))
	f.Add([]byte(`{"host":"h1","results":[{"host":"h1","src":"r0","dst":"r1","at_ns":-9223372036854775808,"timeout":true}],"paths":[{"src_ip":"a","dst_ip":"b","sport":1,"hops":["s1","s1"]}],"down":["r0"],"counters":{"x":18446744073709551615}}`))
	f.Add([]byte(`{"results":[{"at_ns":9223372036854775807,"network_ns":-1,"processing_ns":9223372036854775807}]}`))
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
