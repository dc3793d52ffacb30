package fabric

import (
	"os"
	"testing"

	"github.com/rdma-appliance/appliance/internal/spec"
)

// FuzzDecodeScenario: a scenario file decodes or is refused with a
// positioned error, never a panic.
func FuzzDecodeScenario(f *testing.F) {
	if b, err := os.ReadFile("testdata/incast.yml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("topology: {kind: fat-tree, k: 4}\n"))
	f.Add([]byte("duration: -1s\nflows: [{src: 0, dst: 0, size: -1}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := DecodeScenario("fuzz.yml", data); err != nil {
			if err := spec.CheckRefusal(err, "fuzz.yml"); err != nil {
				t.Fatal(err)
			}
		}
	})
}
