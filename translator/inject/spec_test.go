package inject

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/intent"
)

const goodSpec = `listen: 127.0.0.1:0
iter-mode: p4
balance: flow-hash
ports:
  - {name: req, role: traffic, port: "ring:x.a", addrs: [10.0.0.254, "fd00::fe"]}
  - {name: resp, role: traffic, port: "ring:y.a", addrs: [10.0.0.254]}
  - {name: d0, role: mirror, port: "ring:z.a", queues: 2, weight: 3}
routes:
  - {prefix: 10.0.0.1, port: req, mac: "02:00:00:00:00:01"}
  - {prefix: 10.0.0.2/32, port: resp, mac: "02:00:00:00:00:02"}
`

func TestSpecConfig(t *testing.T) {
	s, err := DecodeSpec("good.yml", []byte(goodSpec))
	if err != nil {
		t.Fatal(err)
	}
	var opened []string
	cfg, ports, err := s.Config(nil, func(p PortSpec) (dpdk.Port, error) {
		opened = append(opened, p.Port)
		return ring.NewLink(fmt.Sprintf("spec%p%d", t, len(opened)), ring.Config{Queues: max(p.Queues, 1)}).A(), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 || len(cfg.Traffic) != 2 || len(cfg.Mirrors) != 1 || cfg.Mirrors[0].Weight != 3 ||
		cfg.IterMode != intent.IterP4 || cfg.Balance != BalanceFlowHash || len(cfg.Routes) != 2 ||
		cfg.Routes[0].Prefix.String() != "10.0.0.1/32" || cfg.Routes[1].Port != 1 || len(cfg.Traffic[0].Addrs) != 2 {
		t.Fatalf("config %+v", cfg)
	}
	// A port that fails to open closes the ones opened before it.
	n := 0
	closed := 0
	_, _, err = s.Config(nil, func(p PortSpec) (dpdk.Port, error) {
		if n++; n == 3 {
			return nil, fmt.Errorf("no such device")
		}
		return closeCounter{ring.NewLink(fmt.Sprintf("specf%p%d", t, n), ring.Config{}).A(), &closed}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "port d0: no such device") || closed != 2 {
		t.Fatalf("failing open: %v, closed %d", err, closed)
	}
}

type closeCounter struct {
	dpdk.Port
	n *int
}

func (c closeCounter) Close() error { *c.n++; return c.Port.Close() }

// TestSpecErrors: every problem is reported with its line and key.
func TestSpecErrors(t *testing.T) {
	bad := `iter-mode: newest
balance: random
rewrite-udp-dst-port: 70000
mirror-snap: 10
ports:
  - {name: 1req, role: traffic, port: "ring:a.a", addrs: [10.0.0.300]}
  - {name: d0, role: dumper, port: "ring:b.a"}
  - {name: d1, role: mirror, port: "ring:c.a", weight: -1, addrs: [10.0.0.1]}
  - {name: d1, role: mirror, port: "ring:d.a"}
routes:
  - {prefix: 10.0.0/8, port: d1, mac: "zz"}
  - {prefix: 10.0.0.1, port: nope, mac: "02:00:00:00:00:01"}
`
	_, err := DecodeSpec("bad.yml", []byte(bad))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`bad.yml:1: iter-mode: "newest"`,
		`bad.yml:2: balance: "random"`,
		`bad.yml:3: rewrite-udp-dst-port: 70000`,
		`bad.yml:4: mirror-snap: 10`,
		`bad.yml:6: ports[0].name: "1req"`,
		`bad.yml:6: ports[0].addrs[0]: "10.0.0.300"`,
		`bad.yml:7: ports[1].role: "dumper"`,
		`bad.yml:8: ports[2].weight: negative`,
		`bad.yml:8: ports[2].addrs: a mirror port`,
		`bad.yml:9: ports[3].name: "d1" named twice`,
		`bad.yml:11: routes[0].prefix`,
		`bad.yml:11: routes[0].port: "d1" is a mirror port`,
		`bad.yml:11: routes[0].mac`,
		`bad.yml:12: routes[1].port: "nope": no such port`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if _, err := DecodeSpec("typo.yml", []byte("iter-mod: p4\nports: []\n")); err == nil || !strings.Contains(err.Error(), "typo.yml:1: iter-mod: unknown key") {
		t.Fatalf("typo: %v", err)
	}
	if _, err := DecodeSpec("empty.yml", []byte("listen: x\n")); err == nil || !strings.Contains(err.Error(), "no traffic port") {
		t.Fatalf("no ports: %v", err)
	}
}
