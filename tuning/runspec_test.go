package tuning

import (
	"strings"
	"testing"
)

func TestRunSpecErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"target: {kind: simulator, scenario: incast-2}\n", "tune.yml:1: target.kind: simulator: not available here"},
		{"target: {kind: fluid}\nspace: {pmax: {min: 1, max: 150, step: 10}}\n", "tune.yml:2: space: pmax bounds"},
		{"target: {kind: fluid}\nspace: {headroom: {values: [-1, 100]}}\n", "headroom bounds"},
		{"target: {kind: switches, known-hosts: insecure, switches: [{name: s, address: a:22, user: u, dialect: junos, ports: [e1]}]}\n", "dialect"},
		{"target: {kind: switches, known-hosts: insecure, switches: [{name: leaf7, address: a:22, user: u, dialect: nxos, ports: [Ethernet1/1, 'Ethernet1/2; reload']}]}\n",
			`target.switches[0].ports[1]: switch leaf7: port "Ethernet1/2; reload": not a NX-OS interface name`},
		{"target: {kind: switches, known-hosts: insecure, switches: [{name: s, address: a:22, user: u, dialect: vrp, ports: [100GE1/0/1]}]}\n", "queue-cells"},
		{"target: {kind: fluid}\nalgorithm: {C: 1.5, method: anneal}\nbudget: 0\n", "cooling"},
		{"target: {kind: fluid}\nspace: {kmax-offset: 500, kmaxx: 1}\n", "kmaxx"},
		{"target: {kind: fluid}\nalgorithm: {method: anneal, hold: true}\n", "tune.yml:2: algorithm.hold: an online setting"},
		{"target: {kind: fluid}\nalgorithm: {method: anneal, reheat-tem: -1}\n", "algorithm.reheat-tem: -1: not negative"},
	} {
		_, err := DecodeRunSpec("tune.yml", []byte(c.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}
