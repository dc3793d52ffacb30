package perftest

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseHello: a client's PERFTEST line (the network's word) gives
// valid parameters or an error naming perftest, never a panic; the
// parameters adopted read back the same when sent again.
func FuzzParseHello(f *testing.F) {
	v := strconv.Itoa(protocolVersion)
	f.Add(v + " {}")
	f.Add(v + ` {"verb":"write","size":65536,"iters":1000}`)
	f.Add(v + ` {"verb":"atomic","atomic_op":"fetch-add","qps":4}`)
	f.Add("2 {}")
	f.Add(v + ` {"size":-1}`)
	f.Fuzz(func(t *testing.T, rest string) {
		p, err := parseHello(rest)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "perftest: ") {
				t.Fatalf("error names not perftest: %v", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("adopted invalid parameters: %v", err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseHello(v + " " + string(b))
		if err != nil || !reflect.DeepEqual(back, p) {
			t.Fatalf("%+v sent again: %+v, %v", p, back, err)
		}
	})
}
