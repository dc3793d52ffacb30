package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

func assign(t testing.TB, n int, weights []int) func(uint64) string {
	t.Helper()
	a, err := ScheduleAssign(names(n), weights, 1)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func counted(n int) Options {
	return Options{Mirrored: int64(n), RxRoCE: int64(n), FirstSeq: 1}
}

func conds(vs []Violation) []Condition {
	var c []Condition
	for _, v := range vs {
		c = append(c, v.Condition)
	}
	return c
}

// invalid asserts err is an invalid test violating exactly want.
func invalid(t *testing.T, rep *Report, err error, want ...Condition) *InvalidTestError {
	t.Helper()
	if !errors.Is(err, ErrInvalidTest) {
		t.Fatalf("err = %v, want an invalid test", err)
	}
	var ite *InvalidTestError
	if !errors.As(err, &ite) {
		t.Fatalf("err %T is not an *InvalidTestError", err)
	}
	if got := conds(ite.Violations); !slices.Equal(got, want) {
		t.Fatalf("violated %v, want %v: %v", got, want, err)
	}
	if !strings.HasPrefix(err.Error(), "invalid test: ") {
		t.Fatalf("error %q", err)
	}
	if rep == nil || rep.Valid || !reflect.DeepEqual(rep.Violations, ite.Violations) {
		t.Fatalf("report does not carry the violations: %+v", rep)
	}
	for _, c := range rep.Conditions {
		if failed := c.Status == StatusFail; failed != slices.Contains(want, c.Condition) {
			t.Fatalf("condition %d status %q", c.Condition, c.Status)
		}
	}
	return ite
}

// TestMergeClean: a 3-dumper WRR split (weights 2:1:1; d0 with two worker
// files split by RSS, d1 pcapng, d2 zstd) merges back into the original
// trace, record for record, and passes every condition.
func TestMergeClean(t *testing.T) {
	const n = 2000
	pkts := newGen().trace(n)
	parts := split(t, pkts, []int{2, 1, 1})
	dir := t.TempDir()
	var w0, w1 []pkt // two workers: split by seq parity, each file still in order
	for _, p := range parts[0] {
		if p.seq%2 == 0 {
			w0 = append(w0, p)
		} else {
			w1 = append(w1, p)
		}
	}
	p0 := writeFile(t, filepath.Join(dir, "d0-w0.pcap"), w0, pcap.WriterOptions{})
	p1 := writeFile(t, filepath.Join(dir, "d0-w1.pcap"), w1, pcap.WriterOptions{})
	p2 := writeFile(t, filepath.Join(dir, "d1.pcapng"), parts[1], pcap.WriterOptions{Format: pcap.FormatPcapNG})
	p3 := writeFile(t, filepath.Join(dir, "d2.pcap.zst"), parts[2], pcap.WriterOptions{Compress: pcap.CompressZstd})

	for _, tc := range []struct {
		name string
		srcs []Source
	}{
		{"paths", []Source{{Name: "d0", Paths: []string{p0, p1}}, {Name: "d1", Path: p2}, {Name: "d2", Path: p3}}},
		{"same-name", []Source{{Name: "d0", Path: p0}, {Name: "d1", Path: p2}, {Name: "d0", Path: p1}, {Name: "d2", Path: p3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outPath := filepath.Join(t.TempDir(), "merged.pcap")
			out, err := pcap.Create(outPath, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet, Nanosecond: true})
			if err != nil {
				t.Fatal(err)
			}
			opts := counted(n)
			opts.Assign = assign(t, 3, []int{2, 1, 1})
			rep, err := Merge(context.Background(), tc.srcs, out, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			recs := readAll(t, outPath)
			if len(recs) != n {
				t.Fatalf("%d records merged, want %d", len(recs), n)
			}
			for i, r := range recs {
				p := pkts[i]
				if !bytes.Equal(r.Data, p.data) || r.OrigLen != p.orig || r.Timestamp != p.ts {
					t.Fatalf("record %d: seq %d ts %d len %d/%d, want seq %d ts %d len %d/%d",
						i, seqOf(r.Data), r.Timestamp, r.CapLen, r.OrigLen, p.seq, p.ts, len(p.data), p.orig)
				}
			}

			if !rep.Valid || rep.Packets != n || rep.FirstSeq != 1 || rep.LastSeq != n || rep.Missing != 0 ||
				rep.Gaps != 0 || rep.Duplicates != 0 || rep.Malformed != 0 || rep.TimestampWraps != 0 || rep.Restored != 0 {
				t.Fatalf("report %+v", rep)
			}
			if rep.FirstTimestamp != 1_000_000_000 || rep.LastTimestamp != 1_000_000_000+(n-1)*1000 {
				t.Fatalf("timestamps %d..%d", rep.FirstTimestamp, rep.LastTimestamp)
			}
			if len(rep.Sources) != 3 {
				t.Fatalf("sources %+v", rep.Sources)
			}
			for i, want := range []uint64{1000, 500, 500} {
				s := rep.Sources[i]
				if s.Name != dumperName(i) || s.Packets != want || s.Failed || s.Missing != 0 {
					t.Fatalf("source %d: %+v", i, s)
				}
			}
			d0 := rep.Source("d0")
			if len(d0.Files) != 2 || d0.Files[0].Packets+d0.Files[1].Packets != 1000 ||
				d0.Files[0].Path != p0 || d0.Files[1].Path != p1 || d0.Files[0].FirstSeq != 4 || d0.Files[1].FirstSeq != 1 {
				t.Fatalf("d0 files %+v", d0.Files)
			}
			// Events: multiples of 50 drop, of 70 (not 50) ECN, of 90 (not 50, 70) bit error.
			wantEv := map[string]uint64{"none": 1922, "drop": 40, "ecn": 23, "bit-error": 15}
			if !reflect.DeepEqual(rep.Events, wantEv) {
				t.Fatalf("events %v, want %v", rep.Events, wantEv)
			}
			wantDirs := []DirectionStats{
				{Src: addrA, Dst: addrB, Packets: 1000, FirstSeq: 1, LastSeq: 1998, FirstTimestamp: 1_000_000_000, LastTimestamp: 1_000_000_000 + 1997*1000},
				{Src: addrB, Dst: addrA, Packets: 500, FirstSeq: 3, LastSeq: 1999, FirstTimestamp: 1_000_002_000, LastTimestamp: 1_000_000_000 + 1998*1000},
				{Src: addrC, Dst: addrD, Packets: 500, FirstSeq: 4, LastSeq: 2000, FirstTimestamp: 1_000_003_000, LastTimestamp: 1_000_000_000 + 1999*1000},
			}
			if !reflect.DeepEqual(rep.Directions, wantDirs) {
				t.Fatalf("directions\n%+v\nwant\n%+v", rep.Directions, wantDirs)
			}
			for i, c := range rep.Conditions {
				if c.Condition != Condition(i+1) || c.Status != StatusPass {
					t.Fatalf("condition %+v", c)
				}
			}

			// The report serialises to JSON and back.
			js, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			var back Report
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&back, rep) {
				t.Fatalf("JSON round trip differs:\n%s", js)
			}
			if !bytes.Contains(js, []byte(`"src":"fd00::1","dst":"fd00::2","packets":500`)) {
				t.Fatalf("JSON %s", js)
			}
		})
	}
}

// TestMergeGapAttributed: copies removed from the trace are condition 1
// with the exact ranges, attributed to dumpers by the WRR schedule; the
// counters no longer match (3, 4).
func TestMergeGapAttributed(t *testing.T) {
	const n = 999
	pkts := newGen().trace(n)
	parts := split(t, pkts, []int{1, 1, 1})
	// d2 (seq%3 == 0) loses its copies 102..120; every dumper loses 500..509.
	parts[2] = without(parts[2], func(p pkt) bool { return p.seq >= 100 && p.seq <= 120 })
	for i := range parts {
		parts[i] = without(parts[i], func(p pkt) bool { return p.seq >= 500 && p.seq <= 509 })
	}
	srcs := writeDumpers(t, t.TempDir(), parts)
	opts := counted(n)
	opts.Assign = assign(t, 3, []int{1, 1, 1})
	rep, err := Merge(context.Background(), srcs, nil, opts)
	ite := invalid(t, rep, err, CondConsecutive, CondMirrored, CondRxRoCE)

	wantGaps := []SeqRange{{102, 102, 1}, {105, 105, 1}, {108, 108, 1}, {111, 111, 1}, {114, 114, 1},
		{117, 117, 1}, {120, 120, 1}, {500, 509, 10}}
	if rep.Missing != 17 || rep.Gaps != 8 || !reflect.DeepEqual(rep.FirstGaps, wantGaps) || rep.Packets != n-17 {
		t.Fatalf("missing %d gaps %d %v packets %d", rep.Missing, rep.Gaps, rep.FirstGaps, rep.Packets)
	}
	// 500..509 went to d1 d2 d0 d1 d2 d0 d1 d2 d0 d1.
	wantBy := map[string]uint64{"d0": 3, "d1": 4, "d2": 7 + 3}
	if !reflect.DeepEqual(rep.MissingByDumper, wantBy) {
		t.Fatalf("missing by dumper %v, want %v", rep.MissingByDumper, wantBy)
	}
	if rep.Source("d0").Missing != 3 || rep.Source("d1").Missing != 4 || rep.Source("d2").Missing != 10 {
		t.Fatalf("sources %+v", rep.Sources)
	}
	v := ite.Violations[0]
	wantDetail := "8 gaps, 17 missing: 102 (1), 105 (1), 108 (1), 111 (1), 114 (1), 117 (1), 120 (1), 500-509 (10); " +
		"missing by dumper: d0 3 d1 4 d2 10"
	if v.Detail != wantDetail || !slices.Equal(v.Seqs, []uint64{102, 105, 108, 111, 114, 117, 120, 500}) ||
		!slices.Equal(v.Sources, []string{"d0", "d1", "d2"}) {
		t.Fatalf("violation %+v", v)
	}
	wantErr := "invalid test: (1) mirror sequence numbers not consecutive: " + wantDetail +
		"; (3) packet count differs from the injector's mirrored count: the trace has 982 packets, the injector mirrored 999" +
		"; (4) packet count differs from the injector's received RoCE count: the trace has 982 packets, the injector received 999 RoCE packets"
	if err.Error() != wantErr {
		t.Fatalf("error\n%s\nwant\n%s", err, wantErr)
	}

	// Fewer listed: the rest are counted.
	opts.MaxListed = 3
	_, err = Merge(context.Background(), srcs, nil, opts)
	if !strings.Contains(err.Error(), "8 gaps, 17 missing: 102 (1), 105 (1), 108 (1) and 5 more; missing by dumper") {
		t.Fatalf("error %v", err)
	}
}

// TestMergeDeadDumper: a dumper whose file is missing, truncated mid-record,
// not a trace or of another link type is named (condition 7), and what it
// lost is attributed to it.
func TestMergeDeadDumper(t *testing.T) {
	const n = 300
	pkts := newGen().trace(n)
	parts := split(t, pkts, []int{1, 1, 1}) // d0 1,4,..; d1 2,5,..; d2 3,6,..,300
	opts := counted(n)
	opts.Assign = assign(t, 3, []int{1, 1, 1})

	t.Run("missing", func(t *testing.T) {
		dir := t.TempDir()
		srcs := writeDumpers(t, dir, parts)
		if err := os.Remove(srcs[1].Path); err != nil {
			t.Fatal(err)
		}
		rep, err := Merge(context.Background(), srcs, nil, opts)
		ite := invalid(t, rep, err, CondConsecutive, CondMirrored, CondRxRoCE, CondDumpers)
		v := ite.Violations[3]
		if !slices.Equal(v.Sources, []string{"d1"}) || !strings.HasPrefix(v.Detail, "d1 ("+srcs[1].Path+"): open ") ||
			!strings.Contains(v.Detail, "no such file") || len(v.Seqs) != 0 {
			t.Fatalf("violation %+v", v)
		}
		d1 := rep.Source("d1")
		if !d1.Failed || d1.Packets != 0 || d1.Missing != 100 || d1.Files[0].Error == "" {
			t.Fatalf("d1 %+v", d1)
		}
		if rep.Missing != 100 || rep.Gaps != 100 || !reflect.DeepEqual(rep.MissingByDumper, map[string]uint64{"d1": 100}) ||
			rep.FirstGaps[0] != (SeqRange{2, 2, 1}) || rep.Packets != 200 || rep.Source("d0").Failed {
			t.Fatalf("report %+v", rep)
		}
	})

	t.Run("truncated", func(t *testing.T) {
		dir := t.TempDir()
		srcs := writeDumpers(t, dir, parts)
		st, err := os.Stat(srcs[2].Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(srcs[2].Path, st.Size()-10); err != nil { // cuts seq 300
			t.Fatal(err)
		}
		rep, err := Merge(context.Background(), srcs, nil, opts)
		ite := invalid(t, rep, err, CondConsecutive, CondMirrored, CondRxRoCE, CondDumpers)
		v := ite.Violations[3]
		if !slices.Equal(v.Sources, []string{"d2"}) || !slices.Equal(v.Seqs, []uint64{297}) ||
			!strings.HasPrefix(v.Detail, "d2 ("+srcs[2].Path+"): pcap: truncated input") ||
			!strings.HasSuffix(v.Detail, "after 99 packets (last seq 297)") {
			t.Fatalf("violation %+v", v)
		}
		// Seq 300 is missing after the last copy in the trace: a trailing gap.
		if rep.Packets != 299 || rep.LastSeq != 299 || rep.Missing != 1 ||
			!reflect.DeepEqual(rep.FirstGaps, []SeqRange{{300, 300, 1}}) ||
			!reflect.DeepEqual(rep.MissingByDumper, map[string]uint64{"d2": 1}) {
			t.Fatalf("report %+v", rep)
		}
	})

	t.Run("not-a-trace", func(t *testing.T) {
		dir := t.TempDir()
		srcs := writeDumpers(t, dir, parts)
		if err := os.WriteFile(srcs[0].Path, []byte("core dumped\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		raw := filepath.Join(dir, "raw.pcap")
		w, err := pcap.Create(raw, pcap.WriterOptions{LinkType: pcap.LinkTypeRaw})
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		srcs = append(srcs, Source{Name: "d3", Path: raw})
		rep, err := Merge(context.Background(), srcs, nil, opts)
		ite := invalid(t, rep, err, CondConsecutive, CondMirrored, CondRxRoCE, CondDumpers)
		v := ite.Violations[3]
		if !slices.Equal(v.Sources, []string{"d0", "d3"}) || !strings.Contains(v.Detail, "bad magic") ||
			!strings.Contains(v.Detail, "d3 ("+raw+"): link type 101, not Ethernet") {
			t.Fatalf("violation %+v", v)
		}
		if rep.Missing != 100 || rep.MissingByDumper["d0"] != 100 {
			t.Fatalf("report %+v", rep)
		}
	})
}

// TestMergeCounters: conditions 3 and 4 compare the packet count with the
// injector's counters, each optional.
func TestMergeCounters(t *testing.T) {
	const n = 100
	srcs := writeDumpers(t, t.TempDir(), split(t, newGen().trace(n), []int{1, 1}))
	for _, tc := range []struct {
		mirrored, rx int64
		want         []Condition
		status       [2]string
	}{
		{n, n, nil, [2]string{StatusPass, StatusPass}},
		{101, 102, []Condition{CondMirrored, CondRxRoCE}, [2]string{StatusFail, StatusFail}},
		{n, 103, []Condition{CondRxRoCE}, [2]string{StatusPass, StatusFail}},
		{99, Unknown, []Condition{CondMirrored}, [2]string{StatusFail, StatusNotChecked}},
		{Unknown, Unknown, nil, [2]string{StatusNotChecked, StatusNotChecked}},
	} {
		rep, err := Merge(context.Background(), srcs, nil, Options{Mirrored: tc.mirrored, RxRoCE: tc.rx})
		if tc.want == nil {
			if err != nil || !rep.Valid {
				t.Fatalf("%d/%d: %v", tc.mirrored, tc.rx, err)
			}
		} else {
			invalid(t, rep, err, tc.want...)
		}
		if got := [2]string{rep.Conditions[2].Status, rep.Conditions[3].Status}; got != tc.status {
			t.Fatalf("%d/%d: statuses %v, want %v", tc.mirrored, tc.rx, got, tc.status)
		}
		if rep.Mirrored != tc.mirrored || rep.RxRoCE != tc.rx {
			t.Fatalf("report counters %d %d", rep.Mirrored, rep.RxRoCE)
		}
		if tc.mirrored == 101 {
			want := "invalid test: (3) packet count differs from the injector's mirrored count: the trace has 100 packets, the injector mirrored 101; " +
				"(4) packet count differs from the injector's received RoCE count: the trace has 100 packets, the injector received 102 RoCE packets"
			if err.Error() != want {
				t.Fatalf("error %q", err)
			}
		}
	}
}

// retime sets the mirror timestamp of copy seq (in pkts[seq-1]).
func retime(pkts []pkt, seq uint64, ts int64) {
	p := &pkts[seq-1]
	p.ts = ts & mirror.Mask48
	mac := header.MACFromUint64(uint64(p.ts))
	copy(p.data[0:6], mac[:])
}

// TestMergeTimestampBack: a timestamp below the previous packet's is
// condition 2; when it is also below the previous packet of its direction,
// condition 5 names that direction.
func TestMergeTimestampBack(t *testing.T) {
	const n = 100
	base := int64(1_000_000_000)
	tsOf := func(seq uint64) int64 { return base + int64(seq-1)*1000 }
	pkts := newGen().trace(n)
	// Seq 40 (C -> D) goes 500 ns below seq 39 (B -> A) but stays above seq
	// 36, the C -> D packet before it. Seq 60 (C -> D) goes 100 ns below
	// seq 56, the C -> D packet before it.
	retime(pkts, 40, tsOf(39)-500)
	retime(pkts, 60, tsOf(56)-100)
	srcs := writeDumpers(t, t.TempDir(), split(t, pkts, []int{1, 1}))
	outPath := filepath.Join(t.TempDir(), "m.pcap")
	out, _ := pcap.Create(outPath, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet})
	rep, err := Merge(context.Background(), srcs, out, counted(n))
	out.Close()
	ite := invalid(t, rep, err, CondTimestamps, CondDirection)
	if v := ite.Violations[0]; !slices.Equal(v.Seqs, []uint64{40, 60}) ||
		v.Detail != "2 times: seq 40 (-500 ns after seq 39), seq 60 (-3100 ns after seq 59)" {
		t.Fatalf("condition 2: %+v", v)
	}
	if v := ite.Violations[1]; !slices.Equal(v.Seqs, []uint64{60}) ||
		v.Detail != "1 time: seq 60 (fd00::1 > fd00::2, -100 ns after seq 56)" {
		t.Fatalf("condition 5: %+v", v)
	}
	if rep.TimestampsBack != 2 || rep.Directions[2].Backwards != 1 || rep.Directions[0].Backwards != 0 {
		t.Fatalf("report %+v", rep)
	}
	// The merged trace carries the timestamps as they are.
	recs := readAll(t, outPath)
	if recs[39].Timestamp != tsOf(39)-500 || recs[59].Timestamp != tsOf(56)-100 || recs[60].Timestamp != tsOf(61) {
		t.Fatalf("timestamps %d %d %d", recs[39].Timestamp, recs[59].Timestamp, recs[60].Timestamp)
	}

	// Equal timestamps pass unless StrictTimestamps.
	pkts = newGen().trace(n)
	retime(pkts, 21, tsOf(20))
	srcs = writeDumpers(t, t.TempDir(), split(t, pkts, []int{1, 1}))
	if _, err := Merge(context.Background(), srcs, nil, counted(n)); err != nil {
		t.Fatal(err)
	}
	opts := counted(n)
	opts.StrictTimestamps = true
	rep, err = Merge(context.Background(), srcs, nil, opts)
	ite = invalid(t, rep, err, CondTimestamps)
	if !slices.Equal(ite.Violations[0].Seqs, []uint64{21}) {
		t.Fatalf("violation %+v", ite.Violations[0])
	}
}

// TestMergeTimestampWrap: the 48-bit timestamp wrapping around is no
// violation; the merged trace's timestamps carry on past 2^48.
func TestMergeTimestampWrap(t *testing.T) {
	const n = 100
	g := newGen()
	g.ts0 = 1<<48 - 50_500 // wraps between seq 51 and 52
	pkts := g.trace(n)
	if pkts[50].ts != 1<<48-500 || pkts[51].ts != 500 {
		t.Fatalf("test traffic: %d %d", pkts[50].ts, pkts[51].ts)
	}
	srcs := writeDumpers(t, t.TempDir(), split(t, pkts, []int{1, 1, 1}))
	outPath := filepath.Join(t.TempDir(), "m.pcap")
	out, _ := pcap.Create(outPath, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet})
	rep, err := Merge(context.Background(), srcs, out, counted(n))
	out.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rep.TimestampWraps != 1 || rep.FirstTimestamp != 1<<48-50_500 || rep.LastTimestamp != 1<<48+48_500 {
		t.Fatalf("report %+v", rep)
	}
	for i, r := range readAll(t, outPath) {
		if want := int64(1<<48 - 50_500 + i*1000); r.Timestamp != want {
			t.Fatalf("record %d: ts %d, want %d", i, r.Timestamp, want)
		}
	}
	if d := rep.Directions[0]; d.LastTimestamp != 1<<48+46_500 || d.Backwards != 0 {
		t.Fatalf("direction %+v", d)
	}

	// A step back across the wrap is still a step back. Seq 53 (A -> B)
	// stays above seq 50, the A -> B packet before it.
	pkts = g.trace(n)
	retime(pkts, 53, 1<<48-1000) // after seq 52 at 500
	srcs = writeDumpers(t, t.TempDir(), split(t, pkts, []int{1, 1, 1}))
	rep, err = Merge(context.Background(), srcs, nil, counted(n))
	ite := invalid(t, rep, err, CondTimestamps)
	if !slices.Equal(ite.Violations[0].Seqs, []uint64{53}) || ite.Violations[0].Detail != "1 time: seq 53 (-1500 ns after seq 52)" {
		t.Fatalf("violation %+v", ite.Violations[0])
	}
	// Across 2^48 at 52, back at 53, forward again at 54: one wrap net.
	if rep.TimestampWraps != 1 || rep.LastTimestamp != 1<<48+48_500 {
		t.Fatalf("wraps %d last %d", rep.TimestampWraps, rep.LastTimestamp)
	}
}

// TestMergeDuplicate: a sequence number present twice (in two dumpers, or
// twice in one file) is condition 1 and inflates the count (3, 4).
func TestMergeDuplicate(t *testing.T) {
	const n = 100
	pkts := newGen().trace(n)
	parts := split(t, pkts, []int{1, 1}) // d0 odd, d1 even
	// d1 also got seq 11; d0 wrote seq 31 twice.
	parts[1] = slices.Insert(parts[1], 5, pkts[10]) // after seq 10
	parts[0] = slices.Insert(parts[0], 16, pkts[30])
	if parts[1][4].seq != 10 || parts[1][6].seq != 12 || parts[0][15].seq != 31 || parts[0][17].seq != 33 {
		t.Fatal("test setup")
	}
	srcs := writeDumpers(t, t.TempDir(), parts)
	rep, err := Merge(context.Background(), srcs, nil, counted(n))
	ite := invalid(t, rep, err, CondConsecutive, CondMirrored, CondRxRoCE)
	if v := ite.Violations[0]; v.Detail != "2 duplicates: seq 11, 31" || !slices.Equal(v.Seqs, []uint64{11, 31}) || v.Gaps != nil {
		t.Fatalf("violation %+v", v)
	}
	if rep.Duplicates != 2 || rep.Missing != 0 || rep.Packets != n+2 || rep.Source("d0").OutOfOrder != 0 {
		t.Fatalf("report %+v", rep)
	}
}

// TestMergeSourceOutOfOrder: a file whose records are not in sequence order
// is condition 6, naming the dumper; the record that comes late fills its
// gap, and its timestamp going back is condition 2.
func TestMergeSourceOutOfOrder(t *testing.T) {
	const n = 60
	pkts := newGen().trace(n)
	parts := split(t, pkts, []int{1, 1, 1}) // d0: 1, 4, 7, 10, 13...
	parts[0][2], parts[0][3] = parts[0][3], parts[0][2]
	dir := t.TempDir()
	srcs := writeDumpers(t, dir, parts)
	outPath := filepath.Join(dir, "m.pcap")
	out, _ := pcap.Create(outPath, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet})
	rep, err := Merge(context.Background(), srcs, out, counted(n))
	out.Close()
	ite := invalid(t, rep, err, CondTimestamps, CondSourceOrder)
	v := ite.Violations[1]
	if v.Detail != "1 record: d0 ("+srcs[0].Path+"): seq 7 after 10" || !slices.Equal(v.Seqs, []uint64{7}) ||
		!slices.Equal(v.Sources, []string{"d0"}) {
		t.Fatalf("violation %+v", v)
	}
	if !slices.Equal(ite.Violations[0].Seqs, []uint64{7}) {
		t.Fatalf("condition 2 %+v", ite.Violations[0])
	}
	if rep.Late != 1 || rep.Missing != 0 || rep.Gaps != 0 || rep.Duplicates != 0 || rep.Source("d0").OutOfOrder != 1 ||
		rep.Source("d0").Files[0].OutOfOrder != 1 {
		t.Fatalf("report %+v", rep)
	}
	var seqs []uint64
	for _, r := range readAll(t, outPath)[:12] {
		seqs = append(seqs, seqOf(r.Data))
	}
	if want := []uint64{1, 2, 3, 4, 5, 6, 8, 9, 10, 7, 11, 12}; !slices.Equal(seqs, want) {
		t.Fatalf("merged order %v, want %v", seqs, want)
	}
}

// junk frames that are not mirrored RoCE copies, with the reason each is
// counted under.
func junk(t testing.TB) map[string][]byte {
	base := newGen().make(1).data // a restored IPv4 copy
	v6 := newGen().make(4).data   // a restored IPv6 copy
	arp := make([]byte, 64)
	k, err := header.WriteARPRequest(arp, header.MAC{2, 0, 0, 0, 0, 9}, addrA.As4(), addrB.As4())
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f []byte, fn func(f []byte)) []byte {
		f = append([]byte(nil), f...)
		fn(f)
		return f
	}
	return map[string][]byte{
		"ethernet header: truncated": base[:10],
		"not IP":                     arp[:k],
		"ethertype: unsupported":     mod(base, func(f []byte) { f[12], f[13] = 0x88, 0xcc }),
		"ipv4 header: truncated":     base[:14+12],
		"not UDP":                    mod(base, func(f []byte) { f[14+9] = 6; f[14+32] = 0x50 }), // TCP
		"IP fragment":                mod(base, func(f []byte) { f[14+6] = 0x20 }),               // MF, offset 0
		"udp header: truncated":      base[:14+20+4],
		reasonPort:                   mod(base, func(f []byte) { f[14+20+2], f[14+20+3] = 0, 53 }),
		"ipv6 version: malformed":    mod(v6, func(f []byte) { f[14] = 0x40 }),
	}
}

// TestMergeMalformed: records that are not mirrored copies are counted by
// reason and skipped; the rest of the trace is intact.
func TestMergeMalformed(t *testing.T) {
	const n = 40
	pkts := newGen().trace(n)
	parts := split(t, pkts, []int{1, 1})
	j := junk(t)
	var reasons []string
	for r := range j {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	var d0 []pkt
	for i, p := range parts[0] {
		d0 = append(d0, p)
		if i < len(reasons) {
			d0 = append(d0, pkt{ts: p.ts, data: j[reasons[i]], orig: len(j[reasons[i]])})
		}
	}
	dir := t.TempDir()
	p0 := writeFile(t, filepath.Join(dir, "d0.pcap"), d0, pcap.WriterOptions{})
	// d1 is pcapng with a second interface of link type raw IP.
	p1 := filepath.Join(dir, "d1.pcapng")
	w, err := pcap.Create(p1, pcap.WriterOptions{Format: pcap.FormatPcapNG, LinkType: pcap.LinkTypeEthernet})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := w.AddInterface(pcap.Interface{LinkType: pcap.LinkTypeRaw})
	for i, p := range parts[1] {
		if i == 3 {
			if err := w.WritePacketOpts(p.ts, p.data[14:], 0, pcap.PacketOptions{Interface: raw}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.WritePacket(p.ts, p.data, p.orig); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	rep, err := Merge(context.Background(), []Source{{Name: "d0", Path: p0}, {Name: "d1", Path: p1}}, nil, counted(n))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"link type not Ethernet": 1}
	for r := range j {
		want[r] = 1
	}
	if rep.Malformed != uint64(len(j)+1) || !reflect.DeepEqual(rep.MalformedReasons, want) || rep.Packets != n ||
		rep.Source("d0").Malformed != uint64(len(j)) || rep.Source("d1").Malformed != 1 || rep.Source("d0").Packets != n/2 {
		t.Fatalf("report: malformed %d %v packets %d sources %+v", rep.Malformed, rep.MalformedReasons, rep.Packets, rep.Sources)
	}
	if len(j) != 9 {
		t.Fatalf("%d junk frames", len(j))
	}
}

// TestMergeRestoresRawCopies: copies a dumper left unrestored (rewrite port,
// checksum holding the source port) are restored before being written.
func TestMergeRestoresRawCopies(t *testing.T) {
	const n = 50
	want := newGen().trace(n)
	g := newGen()
	g.raw = true
	raw := g.trace(n)
	if bytes.Equal(raw[0].data, want[0].data) {
		t.Fatal("test setup: raw copies equal restored ones")
	}
	dir := t.TempDir()
	srcs := writeDumpers(t, dir, split(t, raw, []int{1, 1}))
	outPath := filepath.Join(dir, "m.pcap")
	out, _ := pcap.Create(outPath, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet})
	rep, err := Merge(context.Background(), srcs, out, counted(n))
	out.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Restored != n {
		t.Fatalf("restored %d", rep.Restored)
	}
	for i, r := range readAll(t, outPath) {
		if !bytes.Equal(r.Data, want[i].data) {
			t.Fatalf("record %d differs from the restored copy", i)
		}
	}
}

// TestMergeFirstSeq: with FirstSeq and Mirrored known, copies missing
// before the first and after the last copy of the trace are gaps too.
func TestMergeFirstSeq(t *testing.T) {
	const n = 30
	pkts := newGen().trace(n)
	pkts = pkts[3:27] // 4..27
	srcs := writeDumpers(t, t.TempDir(), split(t, pkts, []int{1}))
	rep, err := Merge(context.Background(), srcs, nil, Options{Mirrored: n, RxRoCE: Unknown, FirstSeq: 1})
	invalid(t, rep, err, CondConsecutive, CondMirrored)
	if !reflect.DeepEqual(rep.FirstGaps, []SeqRange{{1, 3, 3}, {28, 30, 3}}) || rep.Missing != 6 {
		t.Fatalf("gaps %v", rep.FirstGaps)
	}
	// Without FirstSeq the range is what the trace holds.
	rep, err = Merge(context.Background(), srcs, nil, Options{Mirrored: Unknown, RxRoCE: Unknown})
	if err != nil || rep.FirstSeq != 4 || rep.LastSeq != 27 {
		t.Fatalf("%v %+v", err, rep)
	}
}

// TestMergeErrors: bad arguments, a failing output and a cancelled context
// are plain errors, not invalid tests.
func TestMergeErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Merge(ctx, nil, nil, Options{}); err == nil {
		t.Fatal("no sources accepted")
	}
	if _, err := Merge(ctx, []Source{{Name: "x"}}, nil, Options{}); err == nil || !strings.Contains(err.Error(), `("x") has no path`) {
		t.Fatalf("source without path: %v", err)
	}
	srcs := writeDumpers(t, t.TempDir(), split(t, newGen().trace(10), []int{1}))

	w, err := pcap.NewWriter(new(bytes.Buffer), pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	rep, err := Merge(ctx, srcs, w, counted(10))
	if !errors.Is(err, pcap.ErrClosed) || errors.Is(err, ErrInvalidTest) || !strings.HasPrefix(err.Error(), "trace: writing the merged trace") || rep == nil {
		t.Fatalf("closed output: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Merge(cctx, srcs, nil, counted(10)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// failAfter returns the bytes of b, then err.
type failAfter struct {
	b   []byte
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, f.err
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// TestMergeReadError: a read error below the trace format (the disk, not
// the dumper) ends the merge with an error naming the dumper and the file,
// not an invalid test.
func TestMergeReadError(t *testing.T) {
	srcs := writeDumpers(t, t.TempDir(), split(t, newGen().trace(20), []int{1, 1}))
	eio := errors.New("input/output error")
	openTrace = func(path string) (*pcap.Reader, error) {
		if path != srcs[1].Path {
			return pcap.Open(path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return pcap.NewReader(&failAfter{b: b[:24+3*(16+snapLen)], err: eio}) // header and 3 records
	}
	defer func() { openTrace = pcap.Open }()
	rep, err := Merge(context.Background(), srcs, nil, counted(20))
	if !errors.Is(err, eio) || errors.Is(err, ErrInvalidTest) ||
		!strings.HasPrefix(err.Error(), "trace: dumper d1: reading "+srcs[1].Path+": ") {
		t.Fatalf("error %v", err)
	}
	if rep == nil || rep.Source("d1").Packets != 3 || rep.Source("d1").Failed {
		t.Fatalf("report %+v", rep)
	}
}

// TestScheduleAssign: the schedule replays mirror.WRR from firstSeq on.
func TestScheduleAssign(t *testing.T) {
	weights := []int{3, 1, 2}
	a, err := ScheduleAssign([]string{"a", "b", "c"}, weights, 5)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := mirror.NewWRR(weights)
	for seq := uint64(5); seq < 5+60; seq++ {
		if got, want := a(seq), []string{"a", "b", "c"}[w.Next()]; got != want {
			t.Fatalf("seq %d: %q, want %q", seq, got, want)
		}
	}
	if a(4) != "" {
		t.Fatal("seq below firstSeq assigned")
	}
	if _, err := ScheduleAssign([]string{"a"}, []int{1, 1}, 1); err == nil {
		t.Fatal("names and weights of different lengths accepted")
	}
	if _, err := ScheduleAssign([]string{"a"}, []int{0}, 1); err == nil {
		t.Fatal("zero weight accepted")
	}
}

// TestParseCopy: the frame parser reads the metadata of IPv4 and IPv6
// copies, restored or not.
func TestParseCopy(t *testing.T) {
	g := newGen()
	g.raw = true
	var np header.Parsed
	for seq := uint64(1); seq <= 4; seq++ {
		p := newGen().make(seq)
		r := g.make(seq)
		for _, c := range []struct {
			data    []byte
			restore bool
		}{{p.data, false}, {r.data, true}} {
			m, dir, restore, reason := parseCopy(c.data, &np, mirror.DefaultRewritePort)
			if reason != "" || restore != c.restore || m.Seq != seq || m.Timestamp != p.ts || m.Event != eventOf(seq) {
				t.Fatalf("seq %d: %+v %v %q", seq, m, restore, reason)
			}
			src, dst := dir.addrs()
			want := [][2]netip.Addr{{addrA, addrB}, {addrA, addrB}, {addrB, addrA}, {addrC, addrD}}[seq-1]
			if src != want[0] || dst != want[1] {
				t.Fatalf("seq %d: direction %v > %v", seq, src, dst)
			}
		}
	}
}

// TestMergeKeepsDumpersDates: the dumpers write each copy at its 48-bit
// mirror timestamp extended from their clock (a Unix time); the merged
// trace starts its extended timestamps there, so it carries the same
// dates and not ones within three days of 1970 (the low 48 bits alone).
func TestMergeKeepsDumpersDates(t *testing.T) {
	const epoch = int64(1735689600) * 1e9 // 2025-01-01 UTC
	hi := epoch &^ int64(mirror.Mask48)
	g := &gen{ts0: epoch, step: 1000}
	pkts := g.trace(300)
	dated := make([]pkt, len(pkts))
	for i, p := range pkts {
		p.ts += hi // what the dumper wrote: the mirror timestamp extended
		dated[i] = p
	}
	dir := t.TempDir()
	srcs := writeDumpers(t, dir, split(t, dated, []int{1, 1}))
	outPath := filepath.Join(dir, "merged.pcap")
	out, err := pcap.Create(outPath, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet, Nanosecond: true})
	if err != nil {
		t.Fatal(err)
	}
	opts := counted(len(pkts))
	opts.Assign = assign(t, 2, []int{1, 1})
	rep, err := Merge(context.Background(), srcs, out, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if !rep.Valid || rep.FirstTimestamp != epoch || rep.LastTimestamp != epoch+299*1000 {
		t.Fatalf("valid %v, timestamps %d..%d, want %d..%d", rep.Valid, rep.FirstTimestamp, rep.LastTimestamp, epoch, epoch+299*1000)
	}
	for i, r := range readAll(t, outPath) {
		if r.Timestamp != dated[i].ts {
			t.Fatalf("record %d at %d, the dumper wrote %d", i, r.Timestamp, dated[i].ts)
		}
	}
}
