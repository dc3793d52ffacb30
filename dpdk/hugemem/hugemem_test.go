package hugemem

import "testing"

func TestMapUnmap(t *testing.T) {
	for _, huge := range []bool{false, true} {
		b, got, err := Map(3<<20+5, huge)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 3<<20+5 || (!huge && got) {
			t.Fatalf("len %d huge %v", len(b), got)
		}
		b[len(b)-1] = 7
		if err := Unmap(b); err != nil {
			t.Fatal(err)
		}
	}
}
