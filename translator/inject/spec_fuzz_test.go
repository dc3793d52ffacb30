package inject

import (
	"fmt"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/spec"
)

// FuzzDecodeSpec: an injector file is accepted or refused with
// spec.Errors naming the file; what is accepted builds its configuration
// when every port opens (the file's check and Config agree).
func FuzzDecodeSpec(f *testing.F) {
	f.Add([]byte(goodSpec))
	f.Add([]byte("iter-mod: p4\nports: []\n"))
	f.Add([]byte("iter-mode: newest\nbalance: random\nrewrite-udp-dst-port: 70000\nports:\n  - {name: 1req, role: traffic, port: \"ring:a.a\", addrs: [10.0.0.300]}\nroutes:\n  - {prefix: 10.0.0/8, port: d1, mac: \"zz\"}\n"))
	n := 0
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSpec("t.yml", data)
		if err != nil {
			if err := spec.CheckRefusal(err, "t.yml"); err != nil {
				t.Fatal(err)
			}
			return
		}
		if len(s.Ports) > 64 {
			return // each port is a ring here
		}
		_, opened, err := s.Config(nil, func(PortSpec) (dpdk.Port, error) {
			n++
			return ring.NewLink(fmt.Sprintf("fuzzspec%d", n), ring.Config{}).A(), nil
		})
		if err != nil {
			t.Fatalf("accepted, but no configuration: %v", err)
		}
		for _, p := range opened {
			p.Close()
		}
	})
}
