package trafficgen

import (
	"net"
	"testing"
	"time"
)

// FuzzMessage: the exchange read from a hostile peer yields messages or
// an error, never a panic; parameters it carries validate or are refused.
func FuzzMessage(f *testing.F) {
	f.Add([]byte(`{"params":{"Verb":"write","NumQPs":2,"MsgsPerQP":3,"MessageSize":4096,"MTU":1024,"TxDepth":1}}` + "\n" + `{"qps":[{"qpn":5,"psn":7}]}` + "\n"))
	f.Add([]byte(`{"done":true,"bytes":[1,2,-3]}` + "\n" + `{"error":"gave up"}` + "\n"))
	f.Add([]byte(`{"params":{"Verb":"send_read","SendQPs":5,"NumQPs":-1,"MessageSize":9223372036854775807,"MTU":3,"Rate":-1}}` + "\n"))
	f.Add([]byte("{\"params\":\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			_, _ = b.Write(data)
			b.Close()
		}()
		p := newPeer(a)
		for range 16 {
			m, err := p.recv(time.Second)
			if err != nil {
				return
			}
			if m.Params != nil {
				_ = m.Params.Defaults().Validate()
			}
		}
	})
}
