package lab

import (
	"testing"

	"github.com/rdma-appliance/appliance/internal/spec"
)

// FuzzDecodeSpec: a lab configuration is accepted or refused with
// spec.Errors naming the file, never a panic.
func FuzzDecodeSpec(f *testing.F) {
	f.Add(defaultYAML)
	f.Add([]byte("wire: {frames: -1}\nnope: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := DecodeSpec("lab.yml", data)
		if err == nil {
			return
		}
		if err := spec.CheckRefusal(err, "lab.yml"); err != nil {
			t.Fatal(err)
		}
	})
}
