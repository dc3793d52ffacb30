package dpdk

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseCoreList: a core list (a flag, a spec's key, sysfs's online
// list) parses or is refused, quickly; what parses is sorted, distinct,
// within 0..MaxCore, and reads back the same from its plain form.
func FuzzParseCoreList(f *testing.F) {
	for _, s := range []string{"0-3,5", "7,1,1", " 2 - 2 ", "3-1", "-1", "1,,x", "0-65535", "0-4294967295"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cores, err := ParseCoreList(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "dpdk: core list ") {
				t.Fatalf("error names no core list: %v", err)
			}
			return
		}
		if len(cores) == 0 || cores[0] < 0 || cores[len(cores)-1] > MaxCore || !slices.IsSorted(cores) ||
			len(slices.Compact(slices.Clone(cores))) != len(cores) {
			t.Fatalf("%q: %v", s, cores)
		}
		plain := make([]string, len(cores))
		for i, c := range cores {
			plain[i] = strconv.Itoa(c)
		}
		back, err := ParseCoreList(strings.Join(plain, ","))
		if err != nil || !slices.Equal(back, cores) {
			t.Fatalf("%v reads back as %v, %v", cores, back, err)
		}
	})
}
