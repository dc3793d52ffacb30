package hawkeyeagent

import (
	"testing"
	"time"
)

// FuzzAgentInput: any line of the agent's input (text RTT samples or a
// Hostmesh batch) is taken or refused with an error; nothing panics.
func FuzzAgentInput(f *testing.F) {
	for _, s := range []string{
		"10.0.0.1 10.0.0.9 17 49153 4791 5000",
		"10.0.0.1:49153 10.0.0.9:4791 20000",
		`{"host":"h1","results":[{"src_ip":"10.1.0.1","dst_ip":"10.1.1.1","sport":49200,"network_ns":3000}]}`,
		`{"host":"h1","results":[{"src_ip":"fe80::1","dst_ip":"10.1.1.1","network_ns":5}]}`,
		`{"results":[{"timeout":true}]}`, "{", "1 2 3", "10.0.0.1 10.0.0.9 300 1 1 1", "::1:1 ::2:2 5",
	} {
		f.Add(s)
	}
	a := New(Config{Threshold: 300, Interval: time.Second})
	f.Fuzz(func(t *testing.T, line string) {
		if len(line) > 0 && line[0] == '{' {
			_ = a.Batch(line)
			return
		}
		if k, rtt, err := ParseRTTLine(line); err == nil {
			if rtt <= 0 {
				t.Fatalf("%q: rtt %d", line, rtt)
			}
			_ = a.Observe(k, rtt)
		}
	})
}
