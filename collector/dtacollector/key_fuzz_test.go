package dtacollector

import (
	"errors"
	"net/netip"
	"strconv"
	"testing"
)

// FuzzParseKey: a key in a query (the API's caller's word) parses or is
// refused with ErrBadQuery; a key parsed reads back the same as decimal
// and as the IPv4 address it spells.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"42", "0x2a", "10.0.0.1", "255.255.255.255", "4294967296", "1.2.3", "1.2.3.4.5", "::1.2.3.4", "0b101", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			if !errors.Is(err, ErrBadQuery) {
				t.Fatalf("%q: %v does not wrap ErrBadQuery", s, err)
			}
			return
		}
		if back, err := ParseKey(strconv.FormatUint(uint64(k), 10)); err != nil || back != k {
			t.Fatalf("%d reads back as %d, %v", k, back, err)
		}
		a := netip.AddrFrom4([4]byte{byte(k >> 24), byte(k >> 16), byte(k >> 8), byte(k)})
		if back, err := ParseKey(a.String()); err != nil || back != k {
			t.Fatalf("%d as %s reads back as %d, %v", k, a, back, err)
		}
	})
}
