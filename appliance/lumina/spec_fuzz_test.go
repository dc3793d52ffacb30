package lumina

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rdma-appliance/appliance/internal/spec"
)

// FuzzDecodeTest: a Lumina test file decodes or is refused with
// positioned errors, never a panic; what it accepts has control
// addresses and device names the orchestrator may pass to ssh.
func FuzzDecodeTest(f *testing.F) {
	files, _ := filepath.Glob("testdata/tests/*.yml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tt, err := DecodeTest("fuzz.yml", data)
		if err != nil {
			if err := spec.CheckRefusal(err, "fuzz.yml"); err != nil {
				t.Fatal(err)
			}
			return
		}
		s := tt.Spec
		for _, a := range []Access{s.Requester.Access, s.Responder.Access, s.RequesterMirror.Access, s.ResponderMirror.Access} {
			if a.ControlIP != "" {
				if _, err := sshArgs(a, []string{"true"}); err != nil {
					t.Fatalf("accepted %+v that ssh refuses: %v", a, err)
				}
			}
		}
		for _, h := range []HostSpec{s.Requester, s.Responder} {
			if h.NIC.IBDevice != "" && !ValidIBDevice(h.NIC.IBDevice) {
				t.Fatalf("accepted ib-device %q", h.NIC.IBDevice)
			}
		}
	})
}
