package lumina

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParsePortSpeed: a switch.port-speed is one of Lumina's speeds or
// refused, never a panic, and what is accepted is a positive rate that
// the value names in gigabits.
func FuzzParsePortSpeed(f *testing.F) {
	for _, s := range []string{"100G", "25g", " 400G ", "", "G", "100", "1e3G", "-100G", "100GG", "０G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mbps, err := ParsePortSpeed(s)
		if err != nil {
			if mbps != 0 {
				t.Fatalf("%q refused with a rate %d", s, mbps)
			}
			return
		}
		if mbps < 10000 || mbps > 400000 || mbps%1000 != 0 {
			t.Fatalf("%q: rate %d Mbit/s", s, mbps)
		}
		if !strings.Contains(strings.ToUpper(s), strconv.Itoa(mbps/1000)+"G") {
			t.Fatalf("%q accepted as %d Mbit/s", s, mbps)
		}
	})
}
