package dtacollector

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/spec"
)

// TestLoadExample: the example file loads, defaults filled, and its
// geometry is what a translator accepts.
func TestLoadExample(t *testing.T) {
	s, err := LoadSpec("testdata/collector.yml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Exchange != ":40050" || s.Redundancy != 2 || s.KeyWrite.DataWidth != 4 || s.Append.Lists[1].Pollers != 1 ||
		s.Append.Lists[0].Recent != DefaultRecent || len(s.Sketches) != 2 {
		t.Fatalf("%+v", s)
	}
	g := s.Geometry()
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if g.Sketches[8].Kind != dtawire.SketchHyperLogLog || g.Lists[1].Entries != 65536 || g.Postcards.Hops != 5 {
		t.Fatalf("geometry %+v", g)
	}
	// Defaults for a minimal file.
	s, err = DecodeSpec("min.yml", []byte("key-increment: {slots: 1024}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "collector" || s.Listen != DefaultListen || s.MTU != 1024 || s.MaxAtomic != 16 || s.RecvDepth != 256 {
		t.Fatalf("defaults %+v", s)
	}
}

// TestSpecErrors: every problem names the file, the line and the key.
func TestSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yml string
		want      []string
	}{
		{"typo", "name: c\nkey-wrtie: {slots: 1024}\n", []string{`bad.yml:2: key-wrtie: unknown key (did you mean "key-write"?)`}},
		{"nested typo", "key-write:\n  slots: 1024\n  data-widht: 8\n", []string{`bad.yml:3: key-write.data-widht: unknown key (did you mean "data-width"?)`}},
		{"wrong type", "key-write:\n  slots: many\n", []string{"bad.yml:2"}},
		{"values", `mtu: 1000
max-atomic: 300
redundancy: 9
key-write:
  slots: 1000
  data-width: 6
key-increment: {slots: 0}
`, []string{
			"bad.yml:1: mtu: 1000: want 256, 512, 1024, 2048 or 4096",
			"bad.yml:2: max-atomic: 300",
			"bad.yml:3: redundancy: 9: want 1..8",
			"bad.yml:5: key-write.slots: 1000: a power of two",
			"bad.yml:6: key-write.data-width: 6",
			"bad.yml:7: key-increment.slots: 0",
		}},
		{"lists", `append:
  batch: 8
  lists:
    - {id: 1, entries: 1024, pollers: 2, cores: "1-3"}
    - {id: 1, entries: 4}
    - {id: 2, entries: 64, cores: "3"}
`, []string{
			"bad.yml:4: append.lists[0].cores: 3 cores for 2 pollers",
			"bad.yml:5: append.lists[1].id: list 1 defined twice",
			"bad.yml:5: append.lists[1].entries: 4: a power of two up to 2^36 and a multiple of the batch 8",
			"bad.yml:6: append.lists[2].cores: core 3 already polls list 1",
		}},
		{"sketches", `sketches:
  - {id: 1, kind: count-max, columns: 64, rows: 2, reporters: 1}
  - id: 2
    kind: count-min
    columns: 64
    rows: 9
    reporters: 1
  - {id: 2, kind: hyperloglog, columns: 100, rows: 4, reporters: 1}
  - id: 3
    kind: hyperloglog
    columns: 64
    rows: 4
    reporters: 65
`, []string{
			`bad.yml:2: sketches[0].kind: "count-max": want count-min or hyperloglog`,
			"bad.yml:6: sketches[1].rows: rows 9",
			"bad.yml:8: sketches[2].id: sketch 2 defined twice",
			"bad.yml:8: sketches[2].columns: columns 100: a power of two",
			"bad.yml:13: sketches[3].reporters: reporters 65",
		}},
		{"postcards", "postcards:\n  slots: 64\n  hops: 33\n  cache: 3\n", []string{
			"bad.yml:3: postcards.hops: 33: want 1..32",
			"bad.yml:4: postcards.cache: 3",
		}},
		{"addresses", "exchange: nowhere\nlisten: 9300\nkey-increment: {slots: 2}\n", []string{
			`bad.yml:1: exchange: "nowhere"`,
			`bad.yml:2: listen: "9300": want host:port`,
		}},
		{"nothing", "name: c\n", []string{"no primitive"}},
		{"mtu", `mtu: 256
append: {batch: 64, lists: [{id: 1, entries: 64}]}
sketches: [{id: 1, kind: count-min, columns: 64, rows: 4, reporters: 1}]
`, []string{
			"bad.yml:2: append.batch: 64 entries are 512 bytes, over the mtu 256",
			"bad.yml:3: sketches[0].group: a WRITE of 64 columns is 1024 bytes, over the mtu 256",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSpec("bad.yml", []byte(tc.yml))
			if err == nil {
				t.Fatal("no error")
			}
			var es spec.Errors
			if !errors.As(err, &es) {
				t.Fatalf("%T: %v", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in:\n%v", w, err)
				}
			}
		})
	}
}

// FuzzDecodeSpec: no input makes the loader panic, and what it accepts
// is geometry the translator accepts too.
func FuzzDecodeSpec(f *testing.F) {
	for _, s := range []string{allSpec, "key-write: {slots: 1024}\n", "append: {lists: [{id: 1, entries: 8}]}\n", publicSpec} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSpec("fuzz.yml", data)
		if err != nil {
			return
		}
		g := s.Geometry()
		if err := g.Validate(); err != nil {
			t.Fatalf("accepted a spec whose regions a translator refuses: %v\n%s", err, data)
		}
	})
}

// FuzzParsePath: no input makes the path parser panic, and a path it
// accepts has 1..MaxHops hops that print back to themselves.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"1,2,3", "0x10, 7", "", ",", "4294967296", strings.Repeat("1,", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			return
		}
		if len(p) < 1 || len(p) > dtamem.MaxHops {
			t.Fatalf("%q: %d hops", s, len(p))
		}
		again, err := ParsePath(strings.Trim(strings.ReplaceAll(fmt.Sprint(p), " ", ","), "[]"))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(p) {
			t.Fatalf("%q: %v prints to a path that reads %v %v", s, p, again, err)
		}
	})
}
