package dtatofino

import (
	"os"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/spec"
)

// FuzzDecodeSpec: a Tofino translator's file is accepted or refused with
// spec.Errors, each naming the file; the translator of what is accepted
// passes ValidateSetup (the file's check and the program's agree).
func FuzzDecodeSpec(f *testing.F) {
	good, err := os.ReadFile("testdata/translator.yml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(strings.Replace(string(good), "collectors:", "collectors: []\nx:", 1)))
	f.Add([]byte("translator: {}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSpec("t.yml", data)
		if err != nil {
			if err := spec.CheckRefusal(err, "t.yml"); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := s.Setup().ValidateSetup(); err != nil {
			t.Fatalf("accepted, but its translator is not: %v", err)
		}
	})
}
