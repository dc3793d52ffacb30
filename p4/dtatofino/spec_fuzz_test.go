package dtatofino

import (
	"errors"
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
			var es spec.Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("not spec.Errors: %v", err)
			}
			for _, e := range es {
				if e.File != "t.yml" {
					t.Fatalf("error names %q: %v", e.File, e)
				}
			}
			return
		}
		if err := s.Setup().ValidateSetup(); err != nil {
			t.Fatalf("accepted, but its translator is not: %v", err)
		}
	})
}
