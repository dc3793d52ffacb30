package luminaanalyzer

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/* from the current analyzers")

// TestReportGolden pins the report, JSON and text byte for byte, of the
// synthetic traces the other tests build (fast retransmission, READ, CNP
// scopes with and without NAK-triggered CNPs, counters, MCT, an invalid
// run, odd records), of the fuzz seeds and of the benchmark's generator
// (64 connections: more rows than the text shows). The analysis runs in
// memory so that no temporary path enters the output.
func TestReportGolden(t *testing.T) {
	var out bytes.Buffer
	emit := func(name string, m *Meta, frames func(a *Analyzer)) {
		a, err := NewAnalyzer(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		frames(a)
		rep := a.Report()
		fmt.Fprintf(&out, "==== %s\n", name)
		b, err := rep.MarshalIndent()
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		out.WriteString("\n")
		var txt bytes.Buffer
		if err := rep.WriteText(&txt); err != nil {
			t.Fatal(err)
		}
		out.Write(txt.Bytes())
	}
	trace := func(name string, tr *ttrace) {
		emit(name, tr.m, func(a *Analyzer) {
			for _, f := range tr.frames {
				a.Packet(f.ts, f.data)
			}
		})
	}

	for _, ev := range []mirror.EventType{drop, biterr} {
		tr, _ := writeDropNAK(t, ev)
		tr.cnp(0, true)
		trace("drop-nak "+ev.String(), tr)
	}
	{
		tr, p := readTrace(t)
		tr.resp(0, p, p+3, p, 0)
		tr.resp(0, p, p+3, p+1, drop)
		tr.resp(0, p, p+3, p+2, ecn)
		tr.cnp(0, false)
		tr.after(4 * time.Microsecond)
		tr.readReq(0, p+1, 3072)
		tr.resp(0, p+1, p+3, p+1, 0)
		tr.resp(0, p+1, p+3, p+3, 0)
		trace("read gap", tr)
	}
	three := []string{"10.0.0.11", "10.0.0.12", "10.0.0.13"}
	for _, tc := range []struct {
		name     string
		ips      []string
		answered [2][]int
		interval time.Duration
	}{
		{"per-port", three, [2][]int{{0}, {0}}, 50 * time.Microsecond},
		{"per-port, interval unknown", three, [2][]int{{0}, {0}}, 0},
		{"per-dest-ip", []string{"10.0.0.11", "10.0.0.11", "10.0.0.12", "10.0.0.13"}, [2][]int{{0, 2, 3}, {0, 2, 3}}, 50 * time.Microsecond},
		{"per-qp", []string{"10.0.0.11", "10.0.0.11", "10.0.0.12"}, [2][]int{{0, 1, 2}, {0, 1, 2}}, 50 * time.Microsecond},
		{"same grouping", []string{"10.0.0.1", "10.0.0.1", "10.0.0.1"}, [2][]int{{0}, {0}}, 50 * time.Microsecond},
		{"none consistent", three, [2][]int{{0}, {1, 2}}, 50 * time.Microsecond},
		{"interval too long", three, [2][]int{{0, 1, 2}, {0, 1, 2}}, 5 * time.Millisecond},
	} {
		tr := newTrace(t, intent.VerbWrite, len(tc.ips), tc.ips...)
		tr.m.ResponderNIC.MinTimeBetweenCNPs = int64(tc.interval)
		tr.m.RequesterNIC.MinTimeBetweenCNPs = int64(tc.interval) / 2
		cnpRounds(tr, tc.ips, tc.answered)
		if tc.name == "none consistent" {
			tr.cnp(2, true) // a CNP no trigger explains
		}
		trace("cnp "+tc.name, tr)
	}
	for _, with := range []bool{true, false} {
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.msg(0, p, map[int]mirror.EventType{1: drop})
		if with {
			tr.cnp(0, true)
		}
		tr.nak(0, p+1)
		tr.resend(0, p, p+1, p+3, nil)
		tr.ack(0, p+3)
		trace(fmt.Sprintf("nak triggers cnp %v", with), tr)
	}
	{
		tr, _ := writeDropNAK(t, biterr)
		tr.m.Requester = map[string]uint64{"packet_seq_err": 1, "local_ack_timeout_err": 1, "rp_cnp_ignored": 0}
		tr.m.Responder = map[string]uint64{"out_of_sequence": 1, "rx_icrc_encapsulated": 1, "np_cnp_sent": 0,
			"duplicate_request": 0}
		var q0 []int64
		for i := int64(100); i >= 1; i-- {
			q0 = append(q0, i*1000)
		}
		tr.m.MCT = [][]int64{q0, {5}}
		trace("counters and mct", tr)
	}
	{
		tr, _ := writeDropNAK(t, drop)
		tr.m.Valid, tr.m.IntegrityNote = false, "mirror sequence gap at 17"
		trace("invalid", tr)
	}
	{
		tr := newTrace(t, intent.VerbWrite, 1)
		p := tr.ipsn(0)
		tr.data(0, p, p, 0)
		tr.raw([]byte{1, 2, 3})
		tr.raw(make([]byte, 60))
		frame := append([]byte(nil), tr.frames[0].data...)
		frame[len(frame)-1] ^= 0xff
		tr.raw(frame)
		other := newTrace(t, intent.VerbWrite, 1, "10.9.9.9")
		other.data(0, 1000, 1000, 0)
		tr.raw(other.frames[0].data)
		tr.data(0, p, p+1, 0)
		trace("odd records", tr)
	}
	for i, seed := range fuzzSeeds(t) {
		emit(fmt.Sprintf("fuzz seed %d", i), fuzzMeta(t), func(a *Analyzer) { feed(a, seed) })
	}
	g := newBenchGen(64, true)
	emit("bench generator", g.m, func(a *Analyzer) {
		for range 64 * 64 * (benchPPM + 1) {
			ts, f, _ := g.next()
			a.Packet(ts, f)
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
	}
}

// cnpRounds is cnpTrace's traffic, without its analysis and checks.
func cnpRounds(tr *ttrace, ips []string, answered [2][]int) {
	for round := range 2 {
		for c := range ips {
			first := tr.ipsn(c) + uint32(4*round)
			tr.data(c, first, first, 0)
		}
		for c := range ips {
			first := tr.ipsn(c) + uint32(4*round)
			tr.data(c, first, first+1, ecn)
		}
		tr.after(10 * time.Microsecond)
		for _, c := range answered[round] {
			tr.cnp(c, true)
		}
		for c := range ips {
			first := tr.ipsn(c) + uint32(4*round)
			tr.resend(c, first, first+2, first+3, nil)
			tr.ack(c, first+3)
		}
		tr.after(time.Millisecond)
	}
}
