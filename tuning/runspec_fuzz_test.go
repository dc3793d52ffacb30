package tuning

import (
	"testing"

	"github.com/rdma-appliance/appliance/internal/spec"
)

// FuzzDecodeRunSpec: a tuning run file decodes or is refused with a
// positioned error, never a panic.
func FuzzDecodeRunSpec(f *testing.F) {
	for _, c := range []string{
		"target: {kind: fluid}\nspace: {pmax: {min: 1, max: 150, step: 10}}\n",
		"target: {kind: switches, known-hosts: insecure, switches: [{name: leaf7, address: a:22, user: u, dialect: nxos, ports: [Ethernet1/1]}]}\n",
		"target: {kind: fluid}\nalgorithm: {C: 1.5, method: anneal}\nbudget: 0\n",
		"target: {kind: fluid}\nalgorithm: {reheat: 0.01, reheat-sigma: 3, reheat-after: 2, samples: 3, aggregate: median}\n",
		"target: {kind: fluid}\nalgorithm: {reheat-sigma: .nan, reheat-after: 99, samples: -2, aggregate: mode}\n",
	} {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := DecodeRunSpec("fuzz.yml", data, nil); err != nil {
			if err := spec.CheckRefusal(err, "fuzz.yml"); err != nil {
				t.Fatal(err)
			}
		}
	})
}
