package bfrt

import (
	"errors"
	"strings"
	"testing"
)

// FuzzReadRecords: bfshell's output (the switch's word) is read or
// refused with an error wrapping the sentinel, never a panic; when it is
// read, every line holding the prefix was one record, and add saw exactly
// the records the end record counts (none lost, none made up).
func FuzzReadRecords(f *testing.F) {
	f.Add("bfrt> x-counter {\"kind\": \"counter\", \"name\": \"a\"}\nnoise\nx-counter {\"kind\": \"end\", \"records\": 1}\n")
	f.Add("x-counter {\"kind\": \"counter\", \"name\": \"a\"}\n")
	f.Add("x-counter {\"kind\": \"end\", \"records\": 2}\n")
	f.Add("x-counter {\"kind\": \"end\", \"records\": 0, \"extra\": 1}\n")
	f.Add("x-counter {\"kind\": \"end\", \"records\": 0}\nx-counter {\"kind\": \"end\", \"records\": 0}\n")
	f.Add("x-counter {\"kind\": \"counter\", \"name\": \"a\"} {\"kind\": \"counter\"}\nx-counter {\"kind\": \"end\", \"records\": 1}\n")
	f.Fuzz(func(t *testing.T, out string) {
		var names []string
		err := ReadRecords(strings.NewReader(out), "x-counter ", errTest, func(ln int, rec *testRecord) error {
			if rec.Kind == "end" {
				t.Fatalf("line %d: the end record handed to add", ln)
			}
			names = append(names, rec.Name)
			return nil
		})
		if err != nil {
			if !errors.Is(err, errTest) {
				t.Fatalf("error does not wrap the sentinel: %v", err)
			}
			return
		}
		lines := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "x-counter ") {
				lines++
			}
		}
		if lines != len(names)+1 {
			t.Fatalf("%d record lines, %d records and an end read", lines, len(names))
		}
	})
}
