package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/* from the current check")

// TestReportGolden pins the integrity check's report and error, byte for
// byte, on traces that fail each condition (and several at once): gaps
// attributed to dumpers, a trailing gap, duplicates, timestamps going back
// overall and within a direction, a file out of order, dumpers missing,
// truncated or not a trace, counters unknown, and fewer offenders listed
// than found. Temporary paths are written as $DIR.
func TestReportGolden(t *testing.T) {
	var out bytes.Buffer
	const n = 300
	run := func(name string, parts [][]pkt, opts Options, spoil func(srcs []Source)) {
		dir := t.TempDir()
		srcs := writeDumpers(t, dir, parts)
		if spoil != nil {
			spoil(srcs)
		}
		rep, err := Merge(context.Background(), srcs, nil, opts)
		fmt.Fprintf(&out, "==== %s\n", name)
		if err != nil {
			fmt.Fprintf(&out, "error: %s\n", strings.ReplaceAll(err.Error(), dir, "$DIR"))
		}
		b, jerr := json.MarshalIndent(rep, "", " ")
		if jerr != nil {
			t.Fatal(jerr)
		}
		out.Write(bytes.ReplaceAll(append(b, '\n'), []byte(dir), []byte("$DIR")))
	}
	opts := counted(n)
	opts.Assign = assign(t, 3, []int{1, 1, 1})
	pkts := newGen().trace(n)
	even := split(t, pkts, []int{1, 1, 1})

	run("clean", even, opts, nil)
	{
		parts := split(t, pkts, []int{1, 1, 1})
		parts[2] = without(parts[2], func(p pkt) bool { return p.seq >= 100 && p.seq <= 120 || p.seq > 290 })
		for i := range parts {
			parts[i] = without(parts[i], func(p pkt) bool { return p.seq >= 200 && p.seq <= 209 })
		}
		run("gaps attributed, trailing gap", parts, opts, nil)
		few := opts
		few.MaxListed = 3
		run("gaps, three listed", parts, few, nil)
		unknown := Options{Mirrored: -1, RxRoCE: -1}
		run("gaps, counters unknown", parts, unknown, nil)
	}
	{
		parts := split(t, pkts, []int{1, 1})
		parts[1] = slices.Insert(parts[1], 5, pkts[10])
		parts[0] = slices.Insert(parts[0], 16, pkts[30])
		run("duplicates", parts, Options{Mirrored: n, RxRoCE: n + 5, FirstSeq: 1}, nil)
	}
	{
		back := newGen().trace(n)
		tsOf := func(seq uint64) int64 { return 1_000_000_000 + int64(seq-1)*1000 }
		retime(back, 40, tsOf(39)-500)
		retime(back, 60, tsOf(56)-100)
		retime(back, 80, tsOf(76)-100)
		parts := split(t, back, []int{1, 1})
		parts[0][20], parts[0][21] = parts[0][21], parts[0][20]
		run("timestamps back, direction back, out of order", parts, counted(n), nil)
		strict := counted(n)
		strict.StrictTimestamps = true
		run("strict timestamps", parts, strict, nil)
	}
	run("dead dumpers", even, opts, func(srcs []Source) {
		if err := os.Remove(srcs[1].Path); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(srcs[2].Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(srcs[2].Path, st.Size()-10); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(srcs[0].Path, []byte("core dumped\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})

	path := filepath.Join("testdata", "golden", "reports.txt")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-golden to write it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("reports differ from %s (%d bytes, want %d)", path, out.Len(), len(want))
		if strings.Contains(out.String(), os.TempDir()) {
			t.Log("a temporary path was left in the output")
		}
	}
}
