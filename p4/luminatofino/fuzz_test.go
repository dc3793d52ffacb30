package luminatofino

import (
	"strings"
	"testing"
)

// FuzzParseCounters: bfshell's output (the switch's word) parses or is
// refused without panicking.
func FuzzParseCounters(f *testing.F) {
	f.Add(bfshellOutput)
	f.Add(CounterPrefix + `{"kind":"register","name":"mirror_seq_lo","values":[1,2]}` + "\n")
	f.Add(CounterPrefix + `{"kind":"counter","name":"rx","port":"p1","packets":-1}` + "\n" + CounterPrefix + `{"kind":"end","count":99}` + "\n")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseCounters(strings.NewReader(s))
	})
}
