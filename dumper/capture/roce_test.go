package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/filter"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// frameSpec describes a test frame; buildFrame makes it with verbs/roce.
type frameSpec struct {
	op       roce.Opcode
	qpn, psn uint32
	ecn      uint8
	src, dst string
	syndrome roce.Syndrome
	seq      uint32 // written at the start of the payload
	vlan     bool
	badICRC  bool
	port     uint16
}

func buildFrame(t testing.TB, s frameSpec) []byte {
	t.Helper()
	if s.src == "" {
		s.src = "10.0.0.1"
	}
	if s.dst == "" {
		s.dst = "10.0.0.2"
	}
	b := roce.Builder{SrcGID: roce.GIDFromAddr(netip.MustParseAddr(s.src)), DstGID: roce.GIDFromAddr(netip.MustParseAddr(s.dst)),
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, HopLimit: 64,
		TrafficClass: s.ecn, Opcode: s.op, DestQP: s.qpn, PSN: s.psn, Syndrome: s.syndrome, VLAN: s.vlan, TCI: 100,
		SrcPort: 49152, DstPort: s.port}
	var payload []byte
	if s.op.HasPayload() {
		payload = make([]byte, 32)
		binary.BigEndian.PutUint32(payload, s.seq)
	}
	buf := make([]byte, 256)
	n, err := b.Build(buf, payload)
	if err != nil {
		t.Fatalf("%+v: %v", s, err)
	}
	f := buf[:n]
	if s.badICRC {
		f[n-1] ^= 0xff
	}
	return f
}

func TestRoCEFilter(t *testing.T) {
	frames := map[string][]byte{
		"write17":   buildFrame(t, frameSpec{op: roce.RCWriteOnly, qpn: 17, psn: 100}),
		"write18":   buildFrame(t, frameSpec{op: roce.RCWriteOnly, qpn: 18, psn: 5000}),
		"ack17":     buildFrame(t, frameSpec{op: roce.RCAck, qpn: 17, psn: 100, syndrome: roce.ACKSyndrome(0x1f)}),
		"nak17":     buildFrame(t, frameSpec{op: roce.RCAck, qpn: 17, psn: 100, syndrome: roce.NAKSyndrome(0)}),
		"rnr17":     buildFrame(t, frameSpec{op: roce.RCAck, qpn: 17, psn: 100, syndrome: roce.RNRNAKSyndrome(3)}),
		"cnp17":     buildFrame(t, frameSpec{op: roce.OpCNP, qpn: 17, ecn: 1}),
		"ce18":      buildFrame(t, frameSpec{op: roce.RCSendOnly, qpn: 18, psn: 7, ecn: 3}),
		"bad17":     buildFrame(t, frameSpec{op: roce.RCWriteOnly, qpn: 17, psn: 101, badICRC: true}),
		"v6":        buildFrame(t, frameSpec{op: roce.RCWriteOnly, qpn: 17, psn: 100, src: "fe80::1", dst: "fe80::2"}),
		"vlan17":    buildFrame(t, frameSpec{op: roce.RCWriteOnly, qpn: 17, psn: 100, vlan: true}),
		"ud":        buildFrame(t, frameSpec{op: roce.UDSendOnly, qpn: 1, psn: 3, src: "10.0.0.9"}),
		"otherport": buildFrame(t, frameSpec{op: roce.RCWriteOnly, qpn: 17, port: 9741}),
	}
	cases := []struct {
		expr string
		want []string
	}{
		{"", []string{"write17", "write18", "ack17", "nak17", "rnr17", "cnp17", "ce18", "bad17", "v6", "vlan17", "ud"}},
		{"qpn 17", []string{"write17", "ack17", "nak17", "rnr17", "cnp17", "bad17", "v6", "vlan17"}},
		{"qpn 0x12", []string{"write18", "ce18"}},
		{"qpn 2-17 and not cnp", []string{"write17", "ack17", "nak17", "rnr17", "bad17", "v6", "vlan17"}},
		{"psn 100-101", []string{"write17", "ack17", "nak17", "rnr17", "bad17", "v6", "vlan17"}},
		{`opcode "RC RDMA WRITE Only"`, []string{"write17", "write18", "bad17", "v6", "vlan17"}},
		{`opcode 'Reliable Connection (RC) - Acknowledge'`, []string{"ack17", "nak17", "rnr17"}},
		{`opcode "unreliable datagram (ud) - send only"`, []string{"ud"}},
		{"opcode 0x0a and qpn 18", []string{"write18"}},
		{"nak", []string{"nak17"}},
		{"cnp", []string{"cnp17"}},
		{"ecn", []string{"ce18"}},
		{"ecn ect1", []string{"cnp17"}},
		{"icrc-bad", []string{"bad17"}},
		{"src-gid fe80::1", []string{"v6"}},
		{"dst-gid 10.0.0.2 and qpn 18", []string{"write18", "ce18"}},
		{"gid 10.0.0.9", []string{"ud"}},
		{"(nak || cnp) && !ecn", []string{"nak17", "cnp17"}},
	}
	for _, c := range cases {
		f, err := ParseRoCE(c.expr, 0)
		if err != nil {
			t.Fatalf("%q: %v", c.expr, err)
		}
		prog, err := filter.Compile(f.BPF(), filter.Options{})
		if err != nil {
			t.Fatalf("%q: its BPF %q does not compile: %v", c.expr, f.BPF(), err)
		}
		var p roce.Packet
		var got []string
		for name, fr := range frames {
			ok := f.Match(fr, &p)
			if ok {
				got = append(got, name)
				// The kernel must keep every frame the filter wants.
				if prog.Match(fr, len(fr)) == 0 {
					t.Errorf("%q: BPF %q drops %s, which matches", c.expr, f.BPF(), name)
				}
			}
		}
		if strings.Join(sorted(got), " ") != strings.Join(sorted(c.want), " ") {
			t.Errorf("%q matches %v, want %v", c.expr, sorted(got), sorted(c.want))
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestRoCEPrefilterNarrows: the BPF rendering of a BPF-testable filter
// accepts exactly the frames Match does on a corpus of random RoCE frames,
// so the kernel drops everything the user did not ask for.
func TestRoCEPrefilterNarrows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ops := []roce.Opcode{roce.RCWriteOnly, roce.RCSendOnly, roce.RCAck, roce.OpCNP, roce.RCReadRequest, roce.UCWriteOnly}
	var frames [][]byte
	for i := 0; i < 2000; i++ {
		s := frameSpec{op: ops[r.IntN(len(ops))], qpn: uint32(r.IntN(70)), psn: uint32(r.IntN(300)), ecn: uint8(r.IntN(4)),
			vlan: r.IntN(4) == 0}
		if s.op == roce.RCAck {
			s.syndrome = []roce.Syndrome{roce.ACKSyndrome(1), roce.NAKSyndrome(0), roce.RNRNAKSyndrome(1)}[r.IntN(3)]
		}
		if r.IntN(3) == 0 {
			s.src, s.dst = "fe80::1", "fe80::2"
		}
		frames = append(frames, buildFrame(t, s))
	}
	for _, e := range []string{"qpn 17", "qpn 10-20 and psn 0-150", "nak or cnp", "ecn and not opcode 0x0a",
		"dst-gid fe80::2 and qpn 5", `opcode "RC SEND Only" or (qpn 1 and ecn ect0)`} {
		f, err := ParseRoCE(e, 0)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := filter.Compile(f.BPF(), filter.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var p roce.Packet
		n := 0
		for _, fr := range frames {
			m, k := f.Match(fr, &p), prog.Match(fr, len(fr)) != 0
			if m != k {
				t.Fatalf("%q: Match %v, BPF %v on % x", e, m, k, fr)
			}
			if m {
				n++
			}
		}
		if n == 0 {
			t.Errorf("%q matched nothing", e)
		}
	}
}

func TestRoCEFilterErrors(t *testing.T) {
	cases := []struct {
		expr string
		pos  int
		msg  string
	}{
		{"qp 17", 0, "unknown RoCE field \"qp\"; known fields: qpn, opcode, psn, ecn, cnp, nak, icrc-bad, src-gid, dst-gid, gid"},
		{"qpn", 3, "not a number"},
		{"qpn 0x1000000", 4, "not a number of 0..16777215"},
		{"psn 10-5", 4, "runs backwards"},
		{`opcode "RC RDMA Write"`, 7, "did you mean"},
		{"opcode bogus", 7, "not a number or an opcode name"},
		{"src-gid 10.0.0", 8, "not an IPv4 or IPv6 address"},
		{"(cnp", 4, "want )"},
		{"cnp nak", 4, "unexpected"},
		{`opcode "RC`, 7, "unterminated"},
		{"cnp & nak", 4, "unexpected"},
	}
	for _, c := range cases {
		_, err := ParseRoCE(c.expr, 0)
		var re *RoCEError
		if !errors.As(err, &re) {
			t.Errorf("%q: %v, want a RoCEError", c.expr, err)
			continue
		}
		if re.Pos != c.pos || !strings.Contains(re.Msg, c.msg) {
			t.Errorf("%q: %v (at %d), want %q at %d", c.expr, err, re.Pos, c.msg, c.pos)
		}
	}
}

// TestWiresharkNames: every name Wireshark has for a defined opcode
// parses to it.
func TestWiresharkNames(t *testing.T) {
	for op, name := range wiresharkOpcodes {
		got, err := parseOpcode(name)
		if err != nil || got != roce.Opcode(op) {
			t.Errorf("%q: %v %v, want 0x%02x", name, got, err, op)
		}
	}
}

func TestRoCEMatchAllocs(t *testing.T) {
	f, err := ParseRoCE(`qpn 17 and (opcode "RC RDMA WRITE Only" or nak) and psn 0-1000 and not icrc-bad and dst-gid 10.0.0.2`, 0)
	if err != nil {
		t.Fatal(err)
	}
	fr := buildFrame(t, frameSpec{op: roce.RCWriteOnly, qpn: 17, psn: 100})
	var p roce.Packet
	if !f.Match(fr, &p) {
		t.Fatal("no match")
	}
	if n := testing.AllocsPerRun(1000, func() { f.Match(fr, &p) }); n != 0 {
		t.Errorf("Match allocates %v times per frame", n)
	}
}

func BenchmarkRoCEMatch(b *testing.B) {
	f, _ := ParseRoCE(`qpn 17 and opcode "RC RDMA WRITE Only" and psn 0-1000`, 0)
	fr := buildFrame(b, frameSpec{op: roce.RCWriteOnly, qpn: 17, psn: 100})
	var p roce.Packet
	b.ReportAllocs()
	for b.Loop() {
		f.Match(fr, &p)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpkt/s")
}

func FuzzParseRoCE(f *testing.F) {
	for _, s := range []string{"qpn 17", `opcode "RC RDMA WRITE Only" and psn 1-2`, "(nak or cnp) and not ecn ce",
		"icrc-bad || src-gid fe80::1", "gid 10.0.0.1 && !qpn 0x11", "ecn 2"} {
		f.Add(s)
	}
	fr := buildFrame(f, frameSpec{op: roce.RCAck, qpn: 17, psn: 100, syndrome: roce.NAKSyndrome(0), ecn: 3})
	f.Fuzz(func(t *testing.T, expr string) {
		rf, err := ParseRoCE(expr, 0)
		if err != nil {
			var re *RoCEError
			if !errors.As(err, &re) || re.Pos < 0 || re.Pos > len(expr) {
				t.Fatalf("%q: %v", expr, err)
			}
			return
		}
		var p roce.Packet
		m := rf.Match(fr, &p)
		prog, err := filter.Compile(rf.BPF(), filter.Options{})
		if err != nil {
			t.Fatalf("%q: BPF %q: %v", expr, rf.BPF(), err)
		}
		if m && prog.Match(fr, len(fr)) == 0 {
			t.Fatalf("%q: BPF %q drops a matching frame", expr, rf.BPF())
		}
	})
}

// FuzzQuickRoCE holds quickRoCE's constant-offset path to the general one
// on any frame, and both to verbs/roce's full parse on the frames it
// accepts as RoCEv2: the per-QP counters read the same fields either way.
func FuzzQuickRoCE(f *testing.F) {
	for _, frame := range quickSeeds(f) {
		f.Add(frame, uint16(roce.UDPPort))
	}
	f.Fuzz(func(t *testing.T, frame []byte, port uint16) {
		var fast, any quickPkt
		okFast := quickRoCE(frame, port, &fast)
		okAny := quickRoCEAny(frame, port, &any)
		if okFast != okAny || okFast && fast != any {
			t.Fatalf("quickRoCE %v %+v, general path %v %+v", okFast, fast, okAny, any)
		}
		var p roce.Packet
		if port != roce.UDPPort || roce.Parse(frame, &p) != nil || p.BTHOff > 14+4+40+8 {
			return // (quickRoCE reads one VLAN tag, verbs/roce two)
		}
		if !okFast {
			t.Fatalf("verbs/roce parses the frame, quickRoCE does not:\n% x", frame)
		}
		if fast.qpn != p.DestQP || fast.psn != p.PSN || fast.op != uint8(p.Opcode) || fast.ecn != p.ECN ||
			fast.dst.gid() != p.DstGID(frame) {
			t.Fatalf("quickRoCE %+v, verbs/roce %+v", fast, p)
		}
	})
}

// FuzzCountFrame holds the records path's per-QP counting (countRecords)
// to quickRoCE and count on the same frames: the frame, then copies with
// the PSN one ahead and one behind (a retransmission), then the frame
// again, each as a record.
func FuzzCountFrame(f *testing.F) {
	for _, frame := range quickSeeds(f) {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		seq := [][]byte{frame}
		if len(frame) >= 54 {
			for _, d := range []uint32{1, 0xffffff} {
				g := bytes.Clone(frame)
				binary.BigEndian.PutUint32(g[50:], binary.BigEndian.Uint32(g[50:])+d)
				seq = append(seq, g)
			}
		}
		seq = append(seq, frame)
		var a, b qpTable
		var qa, qb quickPkt
		for i, g := range seq {
			// One record at a time: the first frame of a queue pair
			// since the last publish goes the general way.
			a.countRecords(epbRecord(g, len(g)+i), roce.UDPPort, &qa)
			if quickRoCE(g, roce.UDPPort, &qb) {
				b.count(&qb, len(g)+i)
			}
		}
		var all []byte
		for i, g := range seq {
			all = append(all, epbRecord(g, len(g)+i)...)
		}
		a.countRecords(all, roce.UDPPort, &qa)
		for i, g := range seq {
			if quickRoCE(g, roce.UDPPort, &qb) {
				b.count(&qb, len(g)+i)
			}
		}
		a.publish()
		b.publish()
		ma, mb := map[qpKey]*QPStats{}, map[qpKey]*QPStats{}
		a.snapshot(ma)
		b.snapshot(mb)
		va, vb := map[qpKey]QPStats{}, map[qpKey]QPStats{}
		for k, v := range ma {
			va[k] = *v
		}
		for k, v := range mb {
			vb[k] = *v
		}
		if fmt.Sprint(va) != fmt.Sprint(vb) {
			t.Fatalf("countFrame %v, quickRoCE and count %v", va, vb)
		}
	})
}

// epbRecord is frame as a pcapng Enhanced Packet Block of interface 0.
func epbRecord(frame []byte, wire int) []byte {
	blen := 32 + (len(frame)+3)&^3
	r := make([]byte, blen)
	binary.LittleEndian.PutUint32(r[0:], 6)
	binary.LittleEndian.PutUint32(r[4:], uint32(blen))
	binary.LittleEndian.PutUint32(r[20:], uint32(len(frame)))
	binary.LittleEndian.PutUint32(r[24:], uint32(wire))
	copy(r[28:], frame)
	binary.LittleEndian.PutUint32(r[blen-4:], uint32(blen))
	return r
}

// quickSeeds are the per-QP fuzz tests' seed frames: a marked WRITE, a
// tagged SEND at the ends of the QPN and PSN spaces, a NAK, a CNP, a
// READ response, IPv6, and another UDP port.
func quickSeeds(f *testing.F) [][]byte {
	var out [][]byte
	for i, s := range []frameSpec{
		{op: roce.RCWriteOnly, qpn: 17, psn: 5, ecn: 3},
		{op: roce.RCSendMiddle, qpn: 0xabcdef, psn: 0xffffff, vlan: true},
		{op: roce.RCAck, qpn: 18, psn: 9, syndrome: roce.Syndrome(0x60)},
		{op: roce.OpCNP, qpn: 19},
		{op: roce.RCReadResponseOnly, qpn: 22, psn: 3},
		{op: roce.RCWriteOnly, qpn: 20, src: "fe80::1", dst: "fe80::2"},
		{op: roce.RCWriteOnly, qpn: 21, port: 9741},
	} {
		s.seq = uint32(i)
		out = append(out, buildFrame(f, s))
	}
	return out
}
