package luminaanalyzer

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// The synthetic traces: packets built with roce.Builder, mirrored the way
// the injector does (mirror.Write), cut to the dumpers' snap length
// and restored the way a dumper does (mirror.Restore), then written
// to a nanosecond pcap stamped with the mirror timestamp, as the merge
// writes the trace.

const testSnap = 128

// ttrace builds a trace. Connection i runs from requester 10.0.0.1 (QPN
// 0x100+i) to responder 10.0.1.1 (QPN 0x200+i) unless reqIP sets another
// requester address; the requester's initial PSN is 1000 x (i+1).
type ttrace struct {
	t      testing.TB
	m      *Meta
	seq    uint64
	now    int64
	step   int64
	frames []tframe
	buf    []byte
	rng    uint64
}

type tframe struct {
	ts   int64
	data []byte
	orig int
}

func newTrace(t testing.TB, verb intent.Verb, conns int, reqIP ...string) *ttrace {
	tr := &ttrace{t: t, now: 1_000_000_000, step: 1000, buf: make([]byte, 8192), rng: 0x9e3779b97f4a7c15,
		m: &Meta{Test: t.Name(), Trace: TraceFile, Geometry: intent.Geometry{Verb: verb, MessageSize: 4096, MTU: 1024,
			NumMessages: 4}, TxDepth: 1, Timeout: 14, RetryCnt: 7, Valid: true}}
	for i := range conns {
		ip := "10.0.0.1"
		if i < len(reqIP) {
			ip = reqIP[i]
		}
		tr.m.Conns = append(tr.m.Conns, intent.Conn{RequesterIP: netip.MustParseAddr(ip), RequesterQPN: 0x100 + uint32(i),
			RequesterIPSN: 1000 * uint32(i+1), ResponderIP: netip.MustParseAddr("10.0.1.1"),
			ResponderQPN: 0x200 + uint32(i), ResponderIPSN: 77})
	}
	return tr
}

// ipsn is connection c's initial PSN.
func (tr *ttrace) ipsn(c int) uint32 { return tr.m.Conns[c].RequesterIPSN }

// after moves the clock by d before the next packet (which otherwise
// comes one step after the previous one).
func (tr *ttrace) after(d time.Duration) *ttrace {
	tr.now += int64(d) - tr.step
	return tr
}

// pkt appends one packet of connection c: toResp says its direction.
func (tr *ttrace) pkt(c int, toResp bool, b roce.Builder, payload int, ev mirror.EventType) uint64 {
	tr.t.Helper()
	mc := tr.m.Conns[c]
	src, dst, qpn := mc.RequesterIP, mc.ResponderIP, mc.ResponderQPN
	if !toResp {
		src, dst, qpn = dst, src, mc.RequesterQPN
	}
	b.SrcGID, b.DstGID, b.DestQP = roce.GIDFromAddr(src), roce.GIDFromAddr(dst), qpn
	b.SrcMAC, b.DstMAC = header.MAC{2, 0, 0, 0, 0, 1}, header.MAC{2, 0, 0, 0, 0, 2}
	b.HopLimit, b.SrcPort, b.PKey = roce.DefaultHopLimit, 0xc000+uint16(c), roce.DefaultPKey
	var n int
	var err error
	if b.Opcode == roce.OpCNP {
		n, err = b.BuildCNP(tr.buf)
	} else {
		n, err = b.BuildInPlace(tr.buf, payload)
	}
	if err != nil {
		tr.t.Fatalf("building %v: %v", b.Opcode, err)
	}
	frame := append([]byte(nil), tr.buf[:n]...)
	var p header.Parsed
	if err := header.Decode(frame, &p); err != nil {
		tr.t.Fatal(err)
	}
	tr.seq++
	tr.now += tr.step
	tr.rng ^= tr.rng << 13
	tr.rng ^= tr.rng >> 7
	tr.rng ^= tr.rng << 17
	mm := mirror.Meta{Seq: tr.seq, Timestamp: tr.now & mirror.Mask48, Event: ev, OrigSrcPort: b.SrcPort}
	mirror.Write(frame, &p, mm, uint16(tr.rng), mirror.DefaultRewritePort)
	cut := frame[:min(n, testSnap)]
	if err := header.DecodeTruncated(cut, &p); err != nil {
		tr.t.Fatal(err)
	}
	if _, err := mirror.Restore(cut, &p); err != nil {
		tr.t.Fatal(err)
	}
	tr.frames = append(tr.frames, tframe{ts: tr.now, data: cut, orig: n})
	return tr.seq
}

// data sends request packet psn of a WRITE (or SEND) message of the
// geometry's size starting at first.
func (tr *ttrace) data(c int, first, psn uint32, ev mirror.EventType) uint64 {
	ppm := uint32(tr.m.Geometry.PacketsPerMessage())
	rel := psn - first
	send := tr.m.Geometry.Verb == intent.VerbSend
	var op roce.Opcode
	switch {
	case ppm == 1:
		op = pickOp(send, roce.RCSendOnly, roce.RCWriteOnly)
	case rel == 0:
		op = pickOp(send, roce.RCSendFirst, roce.RCWriteFirst)
	case rel == ppm-1:
		op = pickOp(send, roce.RCSendLast, roce.RCWriteLast)
	default:
		op = pickOp(send, roce.RCSendMiddle, roce.RCWriteMiddle)
	}
	b := roce.Builder{Opcode: op, PSN: psn, DMALen: uint32(tr.m.Geometry.MessageSize), VA: 0x1000, RKey: 7,
		AckReq: rel == ppm-1}
	return tr.pkt(c, true, b, tr.m.Geometry.MTU, ev)
}

func pickOp(send bool, s, w roce.Opcode) roce.Opcode {
	if send {
		return s
	}
	return w
}

// msg sends a whole message of connection c starting at first, with the
// events evs by relative PSN, and returns the sequence numbers.
func (tr *ttrace) msg(c int, first uint32, evs map[int]mirror.EventType) []uint64 {
	var seqs []uint64
	for i := range tr.m.Geometry.PacketsPerMessage() {
		seqs = append(seqs, tr.data(c, first, first+uint32(i), evs[i]))
	}
	return seqs
}

// resend sends PSNs from..to (inclusive) of the message starting at first.
func (tr *ttrace) resend(c int, first, from, to uint32, evs map[uint32]mirror.EventType) []uint64 {
	var seqs []uint64
	for p := from; p <= to; p++ {
		seqs = append(seqs, tr.data(c, first, p, evs[p]))
	}
	return seqs
}

func (tr *ttrace) ack(c int, psn uint32) uint64 {
	return tr.pkt(c, false, roce.Builder{Opcode: roce.RCAck, PSN: psn, Syndrome: roce.ACKSyndrome(roce.CreditsInvalid)}, 0, 0)
}

func (tr *ttrace) nak(c int, psn uint32) uint64 {
	return tr.pkt(c, false, roce.Builder{Opcode: roce.RCAck, PSN: psn, Syndrome: roce.NAKSyndrome(roce.NAKPSNSequenceError)}, 0, 0)
}

// readReq issues a READ of n bytes from psn.
func (tr *ttrace) readReq(c int, psn uint32, n int) uint64 {
	return tr.pkt(c, true, roce.Builder{Opcode: roce.RCReadRequest, PSN: psn, DMALen: uint32(n), VA: 0x1000, RKey: 7}, 0, 0)
}

// resp sends READ response psn; first is the PSN the response run starts
// at and last the READ's last PSN (so the opcode is First, Middle, Last or
// Only as the responder would pick it).
func (tr *ttrace) resp(c int, first, last, psn uint32, ev mirror.EventType) uint64 {
	var op roce.Opcode
	switch {
	case first == last:
		op = roce.RCReadResponseOnly
	case psn == first:
		op = roce.RCReadResponseFirst
	case psn == last:
		op = roce.RCReadResponseLast
	default:
		op = roce.RCReadResponseMiddle
	}
	return tr.pkt(c, false, roce.Builder{Opcode: op, PSN: psn, Syndrome: roce.ACKSyndrome(roce.CreditsInvalid)},
		tr.m.Geometry.MTU, ev)
}

// cnp sends a CNP of connection c: toReq says it goes to the requester.
func (tr *ttrace) cnp(c int, toReq bool) uint64 {
	return tr.pkt(c, !toReq, roce.Builder{Opcode: roce.OpCNP}, 0, 0)
}

// raw appends an arbitrary record.
func (tr *ttrace) raw(data []byte) {
	tr.now += tr.step
	tr.frames = append(tr.frames, tframe{ts: tr.now, data: data, orig: len(data)})
}

// write writes the trace file and returns its path.
func (tr *ttrace) write(dir string) string {
	tr.t.Helper()
	path := filepath.Join(dir, TraceFile)
	w, err := pcap.Create(path, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet, Nanosecond: true, SnapLen: testSnap})
	if err != nil {
		tr.t.Fatal(err)
	}
	for _, f := range tr.frames {
		if err := w.WritePacket(f.ts, f.data, f.orig); err != nil {
			tr.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tr.t.Fatal(err)
	}
	return path
}

// analyze writes the trace and analyses it.
func (tr *ttrace) analyze() *Report {
	tr.t.Helper()
	path := tr.write(tr.t.TempDir())
	rep, err := Analyze(context.Background(), path, tr.m)
	if err != nil {
		tr.t.Fatal(err)
	}
	if testing.Verbose() {
		var sb strings.Builder
		if err := rep.WriteText(&sb); err != nil {
			tr.t.Fatal(err)
		}
		tr.t.Log("\n" + sb.String())
	}
	return rep
}

// wantCompliant fails unless the report has no Go-back-N violation.
func wantCompliant(t testing.TB, rep *Report) {
	t.Helper()
	if !rep.GBN.Compliant || len(rep.GBN.Violations) > 0 {
		t.Fatalf("violations: %+v", rep.GBN.Violations)
	}
}

// wantViolation fails unless the only violation is machine's, on packet
// seq, with a reason containing substr.
func wantViolation(t testing.TB, rep *Report, machine string, seq uint64, substr string) {
	t.Helper()
	if rep.GBN.Compliant || len(rep.GBN.Violations) != 1 {
		t.Fatalf("want one violation of the %s at seq %d, got %+v", machine, seq, rep.GBN.Violations)
	}
	v := rep.GBN.Violations[0]
	if v.Machine != machine || v.Packet.Seq != seq || !strings.Contains(v.Reason, substr) {
		t.Fatalf("want the %s at seq %d (%q), got %+v", machine, seq, substr, v)
	}
	if v.Packet.Opcode == "" || v.Packet.TimestampNs == 0 {
		t.Fatalf("offending packet not named: %+v", v.Packet)
	}
}
