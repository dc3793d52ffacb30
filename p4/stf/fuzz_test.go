package stf

import (
	"strings"
	"testing"
)

// checkTest is what a parsed test must hold whatever text it came from:
// ports a switch has, an expectation as long as its mask, keys of bits
// and wildcards whose values, masks and prefix lengths fit their width;
// and the helpers the adapters call on it (FixLengths, Match) do not
// panic.
func checkTest(t *testing.T, tc *Test) {
	t.Helper()
	if tc.InPort < 0 {
		t.Fatalf("%s: input port %d", tc.Name, tc.InPort)
	}
	if e := tc.Expect; e != nil {
		if e.Port < 0 || len(e.Care) != len(e.Data) {
			t.Fatalf("%s: expected port %d, %d bytes, a mask of %d", tc.Name, e.Port, len(e.Data), len(e.Care))
		}
		_ = e.String()
		_ = e.Match(e.Port, append([]byte(nil), e.Data...))
		_ = e.Match(e.Port, nil)
	}
	for _, e := range append(append([]Entry(nil), tc.Adds...), tc.Defaults...) {
		if e.Table == "" || e.Action == "" {
			t.Fatalf("%s: entry %+v", tc.Name, e)
		}
		for _, k := range e.Keys {
			if strings.Trim(k.Bits, "01*") != "" {
				t.Fatalf("%s: key %s bits %q", tc.Name, k.Name, k.Bits)
			}
			w := (k.Width() + 7) / 8
			if len(k.Value()) != w || len(k.Mask()) != w {
				t.Fatalf("%s: key %s of %d bits: value %d bytes, mask %d", tc.Name, k.Name, k.Width(), len(k.Value()), len(k.Mask()))
			}
			if n, _ := k.PrefixLen(); n < 0 || n > k.Width() {
				t.Fatalf("%s: key %s: prefix %d of %d bits", tc.Name, k.Name, n, k.Width())
			}
		}
		for _, p := range e.Params {
			if p.Value == nil || p.Value.Sign() < 0 {
				t.Fatalf("%s: parameter %s = %v", tc.Name, p.Name, p.Value)
			}
		}
	}
	tc.FixLengths()
}

// FuzzParse: an STF file (P4Testgen's output) is read or refused with an
// error naming the line, never a panic.
func FuzzParse(f *testing.F) {
	f.Add(stfSample)
	f.Add("packet 0 00\nexpect 1 0*$\n")
	f.Add("packet -1 00\n")
	f.Add("add t 99999999999999999999 k:0x1 a(p:-1)\npacket 0 00\n")
	f.Add("packet 2 " + strings.Repeat("00", 14) + "0800" + strings.Repeat("45", 20) + "\nexpect 2 " + strings.Repeat("**", 40) + "\n")
	f.Fuzz(func(t *testing.T, src string) {
		tc, err := Parse("x_1", src)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") && err.Error() != "no packet line" {
				t.Fatalf("error names no line: %v", err)
			}
			return
		}
		checkTest(t, tc)
	})
}

// FuzzParsePTF: a PTF file (P4Testgen's Python) is read or refused
// naming the test, never a panic.
func FuzzParsePTF(f *testing.F) {
	f.Add(ptfSample)
	f.Add(ptfSample + "\n" + strings.Replace(ptfSample, "Test7", "Test8", 1))
	f.Add(strings.Replace(ptfSample, "prefix_len=4", "prefix_len=99", 1))
	f.Add(strings.Replace(ptfSample, "set_do_not_care(16, 8)", "set_do_not_care(9223372036854775807, 99)", 1))
	f.Fuzz(func(t *testing.T, src string) {
		tcs, err := ParsePTF("x_ptf", src)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "x_ptf_") {
				t.Fatalf("error names no test: %v", err)
			}
			return
		}
		for _, tc := range tcs {
			checkTest(t, tc)
		}
	})
}
