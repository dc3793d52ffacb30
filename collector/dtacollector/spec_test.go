package dtacollector

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	if s.Exchange != "127.0.0.1:40050" || s.Redundancy != 2 || s.KeyWrite.DataWidth != 4 || s.Append.Lists[1].Pollers != 1 ||
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
	s, err = DecodeSpec("min.yml", []byte("exchange: 127.0.0.1:40050\nkey-increment: {slots: 1024}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "collector" || s.Listen != DefaultListen || s.MTU != 1024 || s.MaxAtomic != 16 || s.RecvDepth != 256 ||
		s.MaxTranslators != DefaultMaxTranslators || s.Key != nil {
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
		// The exchange hands out remote access to memory: not on every
		// interface unless asked, never off loopback without a key.
		{"wildcard", "exchange: \":40050\"\nkey-increment: {slots: 2}\n", []string{
			`bad.yml:1: exchange: ":40050" listens on every interface`,
		}},
		{"wildcard v4", "exchange: 0.0.0.0:40050\nexchange-wildcard: true\nkey-increment: {slots: 2}\n", []string{
			`bad.yml:1: exchange: "0.0.0.0:40050" is reachable off this host: set key-file`,
		}},
		{"no key", "exchange: 10.9.0.1:40050\nkey-increment: {slots: 2}\n", []string{
			`bad.yml:1: exchange: "10.9.0.1:40050" is reachable off this host: set key-file`,
		}},
		{"default exchange", "key-increment: {slots: 2}\n", []string{
			"bad.yml: exchange: the default exchange (the RDMA address) is reachable off this host",
		}},
		{"key file", "key-file: /nonexistent/dta.key\nkey-increment: {slots: 2}\n", []string{
			"bad.yml:1: key-file: stat /nonexistent/dta.key: no such file",
		}},
		{"translators", `exchange: 127.0.0.1:40050
translators:
  - {name: "t 0", ip: 10.0.0.1}
  - {name: t1, ip: nowhere}
  - {name: t1, ip: 10.0.0.2}
max-translators: 5000
key-increment: {slots: 2}
`, []string{"bad.yml:3: translators[0].name", "bad.yml:4: translators[1].ip", "bad.yml:5: translators[2].name: \"t1\" named twice",
			"bad.yml:6: max-translators: 5000: want 1..4096"}},
		{"nothing", "name: c\nexchange: 127.0.0.1:1\n", []string{"no primitive"}},
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

// TestSpecKeyFile: the key is read from a file relative to the spec's,
// which may not be readable by every user nor too short.
func TestSpecKeyFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yml")
	yml := "exchange: 10.9.0.1:40050\nkey-file: k\nkey-increment: {slots: 2}\n"
	if err := os.WriteFile(file, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		mode os.FileMode
		want string
	}{
		{"short\n", 0o600, "c.yml:2: key-file: " + filepath.Join(dir, "k") + ": key of 5 bytes, want at least 16"},
		{"0123456789abcdef\n", 0o644, "lets every user read the key"},
		{"0123456789abcdef\n", 0o640, ""},
	} {
		k := filepath.Join(dir, "k")
		os.Remove(k)
		if err := os.WriteFile(k, []byte(tc.key), tc.mode); err != nil {
			t.Fatal(err)
		}
		s, err := LoadSpec(file)
		if tc.want == "" {
			if err != nil || string(s.Key) != "0123456789abcdef" {
				t.Fatalf("key %q: %v", s.Key, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("key %q mode %v: %v, want %q", tc.key, tc.mode, err, tc.want)
		}
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
			if err := spec.CheckRefusal(err, "fuzz.yml"); err != nil {
				t.Fatal(err)
			}
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
