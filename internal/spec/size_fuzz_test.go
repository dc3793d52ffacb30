package spec

import (
	"strconv"
	"testing"
)

// FuzzParseSize: a size in a spec parses to a byte count that is never
// negative, which reads back the same as a plain number, or is refused.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1500", "64KB", "16MB", "1GiB", " 2 K", "0.5", "-1", "NaN", "Inf", "1e30GB", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("%q = %d", s, v)
		}
		if back, err := ParseSize(strconv.FormatInt(v, 10)); err != nil || back != v {
			// float64 holds integers exactly up to 2^53 only.
			if v <= 1<<53 {
				t.Fatalf("%d reads back as %d, %v", v, back, err)
			}
		}
	})
}

// TestParseSizeNeverNegative: NaN, infinities and counts past int64 (which
// converted to negative sizes) are refused.
func TestParseSizeNeverNegative(t *testing.T) {
	for _, s := range []string{"NaN", "Inf", "+Inf", "1e30GB", "9223372036854775807", "8EiB"} {
		if v, err := ParseSize(s); err == nil {
			t.Errorf("%q = %d", s, v)
		}
	}
}
