package dtatranslator

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// TestSeqTracker: in-order reports are taken with an ACK every AckEvery;
// a gap drops the report and NACKs the expected number once per interval;
// the resend is taken; duplicates are dropped; numbers wrap.
func TestSeqTracker(t *testing.T) {
	s := NewSeqTracker()
	s.AckEvery = 4
	a := netip.MustParseAddr("10.0.0.1")
	b := netip.MustParseAddr("10.0.0.2")
	type step struct {
		who      netip.Addr
		seq      uint8
		now      int64
		v        SeqVerdict
		ack, nak bool
		ackSeq   uint8
	}
	steps := []step{
		{a, 250, 0, SeqAccept, false, false, 0}, // the first number heard starts the sequence
		{a, 251, 0, SeqAccept, false, false, 0},
		{b, 7, 0, SeqAccept, false, false, 0}, // reporters are independent
		{a, 252, 0, SeqAccept, false, false, 0},
		{a, 253, 0, SeqAccept, true, false, 253}, // the fourth: a cumulative ACK
		{a, 0, 10, SeqGap, true, true, 254},      // 254, 255 lost (and wrapped)
		{a, 1, 20, SeqGap, false, false, 0},      // the NACK stands
		{a, 2, 2e6, SeqGap, true, true, 254},     // ...until its interval passed
		{a, 254, 2e6, SeqAccept, false, false, 0},
		{a, 255, 2e6, SeqAccept, false, false, 0},
		{a, 253, 2e6, SeqDuplicate, true, false, 255}, // a duplicate: an ACK of where the translator is
		{a, 0, 2e6, SeqAccept, false, false, 0},
		{a, 1, 2e6, SeqAccept, true, false, 1},
		{a, 1, 2e6, SeqDuplicate, true, false, 1},
	}
	for i, st := range steps {
		v, ack, nak, as := s.Check(st.who, st.seq, st.now)
		if v != st.v || ack != st.ack || nak != st.nak || (ack && as != st.ackSeq) {
			t.Fatalf("step %d (%v seq %d): verdict %d ack %v nack %v seq %d; want %+v", i, st.who, st.seq, v, ack, nak, as, st)
		}
	}
	if s.Stats.Gaps != 3 || s.Stats.NACKs != 2 || s.Stats.Duplicates != 2 || s.Reporters() != 2 {
		t.Fatalf("stats %+v", s.Stats)
	}
	// Unaccept: the report just taken becomes a gap for the next one.
	if v, _, _, _ := s.Check(b, 8, 0); v != SeqAccept {
		t.Fatal(v)
	}
	s.Unaccept(b)
	if v, _, nak, seq := s.Check(b, 9, 0); v != SeqGap || !nak || seq != 8 {
		t.Fatalf("after unaccept: %v %v %d", v, nak, seq)
	}
	s.MaxReporters = 2
	if v, _, _, _ := s.Check(netip.MustParseAddr("10.0.0.3"), 9, 0); v != SeqAccept || s.Stats.Untracked != 1 {
		t.Fatal("a reporter beyond the table is taken untracked")
	}
}

// TestMeter: the bucket starts full, refills at the rate, never beyond
// the burst; a zero rate meters nothing.
func TestMeter(t *testing.T) {
	m := Meter{Rate: 1000, Burst: 10} // one token a millisecond
	for i := 0; i < 10; i++ {
		if !m.Take(1, 1) {
			t.Fatalf("token %d of the burst refused", i)
		}
	}
	if m.Take(1, 1) {
		t.Fatal("an empty bucket gave a token")
	}
	if !m.Take(2, 1+2e6) || m.Take(1, 1+2e6) {
		t.Fatal("two tokens after two milliseconds")
	}
	if m.Take(11, 1e12) {
		t.Fatal("more than the burst")
	}
	var free Meter
	if !free.Take(1e6, 0) {
		t.Fatal("an unmetered meter refused")
	}
}

// TestReportQueue: FIFO order, bounded, slots reused.
func TestReportQueue(t *testing.T) {
	var q reportQueue
	q.init(3)
	src := netip.MustParseAddr("10.1.1.1")
	for i := 0; i < 10; i++ {
		for j := 0; j < 3; j++ {
			if !q.push([]byte{byte(i), byte(j)}, src) {
				t.Fatal("push refused")
			}
		}
		if q.push([]byte{9}, src) {
			t.Fatal("a full queue took more")
		}
		for j := 0; j < 3; j++ {
			b, s := q.peek()
			if b[0] != byte(i) || b[1] != byte(j) || s != src {
				t.Fatalf("got %v", b)
			}
			q.pop()
		}
	}
	if q.push(make([]byte, maxQueued+1), src) {
		t.Fatal("an oversize report was queued")
	}
}

// TestAckFrame: an ACK datagram decodes with valid checksums and the
// congestion bit round-trips.
func TestAckFrame(t *testing.T) {
	var buf [128]byte
	src, dst := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	n, err := WriteAckFrame(buf[:], header.MAC{2, 0, 0, 0, 0, 1}, header.MAC{2, 0, 0, 0, 0, 2}, src, dst, dtawire.AckPort,
		dtawire.Ack{Seq: 77, NACK: true, Congested: true})
	if err != nil || n != 60 {
		t.Fatalf("%d %v", n, err)
	}
	var p header.Parsed
	if err := header.Decode(buf[:n], &p); err != nil {
		t.Fatal(err)
	}
	if !p.IPv4(buf[:n]).ChecksumValid() || !p.UDP(buf[:n]).ChecksumValidIPv4(src, dst) {
		t.Fatal("bad checksum")
	}
	a, err := dtawire.ParseAck(p.Payload(buf[:n]))
	if err != nil || a != (dtawire.Ack{Seq: 77, NACK: true, Congested: true}) {
		t.Fatalf("%+v %v", a, err)
	}
}

// TestSpecErrors: the translator file's problems name their line and key.
func TestSpecErrors(t *testing.T) {
	good := "ip: 10.0.0.9\ncollectors:\n  - exchange: 127.0.0.1:40050\n"
	s, err := DecodeSpec("t.yml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if s.FlushTimeout == 0 || s.Collectors[0].Name != "collector0" || s.FlowControl.HighDSCP != 46 {
		t.Fatalf("defaults %+v", s)
	}
	for _, tc := range []struct{ yml, want string }{
		{"ip: 10.0.0.9\ncollectors:\n  - exchange: nope\n", "t.yml:3: collectors[0].exchange"},
		{"ip: fd00::1\ncollectors:\n  - exchange: a:1\n", "t.yml:1: ip"},
		{"ip: 10.0.0.9\ncolectors: []\n", "colectors"},
		{"ip: 10.0.0.9\ncollectors:\n  - exchange: a:1\nflow-control:\n  high-dscp: 99\n", "t.yml:5: flow-control.high-dscp"},
		{"ip: 10.0.0.9\ncollectors:\n  - exchange: a:1\nflush-timeout: 2ms\nreliability:\n  ack-every: 200\n", "reliability.ack-every"},
		{"ip: 10.0.0.9\nlayout: public\ncollectors:\n  - exchange: a:1\n", `t.yml:2: layout: layout "public": want per-slot-crc or dta-public`},
	} {
		_, err := DecodeSpec("t.yml", []byte(tc.yml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yml, err, tc.want)
		}
	}
}

// TestExampleSpec: the example translator file loads as written.
func TestExampleSpec(t *testing.T) {
	s, err := LoadSpec("testdata/translator.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Collectors) != 2 || s.FlushTimeout.String() != "1ms" || s.FlowControl.HighDSCP != 46 {
		t.Fatalf("%+v", s)
	}
}
