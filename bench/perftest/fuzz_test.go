package perftest

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

// FuzzParseQPInfo: a key message from the peer parses or is refused,
// and one that parses prints back to itself.
func FuzzParseQPInfo(f *testing.F) {
	f.Add(QPInfo{LID: 1, OutReads: 16, QPN: 0x123, PSN: 0xabcdef, RKey: 0xdeadbeef, VAddr: 0x7f0000001000}.String())
	f.Add("0000:0000:000000:000000:00000000:0000000000000000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01")
	f.Add("::::::::::::::::::::::")
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQPInfo(s)
		if err != nil {
			return
		}
		r, err := ParseQPInfo(q.String())
		if err != nil || r != q {
			t.Fatalf("%q parsed as %+v, printed as %q, parsed back as %+v %v", s, q, q.String(), r, err)
		}
	})
}

// FuzzPeer: the out-of-band stream from a hostile peer yields lines of
// at most MaxLine bytes, or an error, never a panic or a hang.
func FuzzPeer(f *testing.F) {
	f.Add([]byte("PARAMS write 65536 1000\nQP 0000:0010:000123:abcdef:deadbeef:00007f0000001000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01\nDONE\n"))
	f.Add([]byte("ERR it broke\r\n"))
	f.Add(bytes.Repeat([]byte("x"), 5000))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := newPeer(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(data), io.Discard})
		for range 64 {
			_, rest, err := p.wait(context.Background(), nil, time.Second, "PARAMS", "QP", "DONE", "ERR", "READY")
			if err != nil {
				return
			}
			if len(rest) > MaxLine {
				t.Fatalf("a line of %d bytes", len(rest))
			}
			_, _ = ParseQPInfo(rest)
		}
	})
}
