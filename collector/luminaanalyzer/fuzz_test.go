package luminaanalyzer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// The fuzz targets feed the packet-processing entry, Analyzer.Packet, and
// check that nothing panics, that the report can be written as JSON and
// text, and that its figures stay within what was fed.

// fuzzMeta is two connections, the first WRITE from 10.0.0.1, the second
// from 10.0.0.2 (the synthetic traces' addresses and QPNs), with a short
// timeout and known CNP intervals, so that every analyzer has work.
func fuzzMeta(tb testing.TB) *Meta {
	tr := newTrace(tb, intent.VerbWrite, 2, "10.0.0.1", "10.0.0.2")
	m := tr.m
	m.Timeout, m.RetryCnt = 10, 3
	m.ResponderNIC.MinTimeBetweenCNPs = 50_000
	m.Requester = map[string]uint64{"np_cnp_sent": 1, "packet_seq_err": 2, "local_ack_timeout_err": 3}
	m.Responder = map[string]uint64{"out_of_sequence": 4, "np_cnp_sent": 5}
	m.MCT = [][]int64{{1, 2, 3}, {}}
	return m
}

// encodeRecords packs records as the fuzz input: per record a 2-byte
// length, a 4-byte timestamp step in nanoseconds, the frame cut after its
// transport headers (the analyzers read nothing further, and the mutator
// then lands on the fields that matter more often).
func encodeRecords(frames []tframe) []byte {
	var b bytes.Buffer
	prev := int64(0)
	var p roce.Packet
	for i, f := range frames {
		if roce.ParseTruncated(f.data, roce.UDPPort, &p) == nil {
			f.data = f.data[:min(len(f.data), p.PayloadOff)]
		}
		step := uint32(1000)
		if i > 0 {
			step = uint32(min(max(f.ts-prev, 0), 1<<32-1))
		}
		prev = f.ts
		var h [6]byte
		binary.BigEndian.PutUint16(h[:2], uint16(len(f.data)))
		binary.BigEndian.PutUint32(h[2:], step)
		b.Write(h[:])
		b.Write(f.data)
	}
	return b.Bytes()
}

// feed decodes the fuzz input into records and runs them through a.
func feed(a *Analyzer, data []byte) int {
	ts := int64(1_000_000_000)
	n := 0
	for len(data) >= 6 {
		l := int(binary.BigEndian.Uint16(data[:2]))
		ts += int64(binary.BigEndian.Uint32(data[2:6]))
		data = data[6:]
		l = min(l, len(data))
		a.Packet(ts, data[:l])
		data = data[l:]
		n++
	}
	return n
}

func checkReport(t *testing.T, rep *Report, packets int) {
	if rep.Summary.Packets != int64(packets) || rep.Summary.RoCE > int64(packets) {
		t.Fatalf("summary %+v for %d packets", rep.Summary, packets)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatalf("report does not encode: %v", err)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, n := range rep.Retransmission.NACK {
		if n.GenerationNs != n.NAK.TimestampNs-n.FirstOOO.TimestampNs {
			t.Fatalf("NACK record %+v", n)
		}
	}
}

// fuzzSeeds are synthetic traces covering each analyzer.
func fuzzSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	{
		tr, _ := writeDropNAK(t, drop)
		tr.cnp(0, true)
		seeds = append(seeds, encodeRecords(tr.frames))
	}
	{
		tr := newTrace(t, intent.VerbRead, 2, "10.0.0.1", "10.0.0.2")
		p := tr.ipsn(0)
		tr.readReq(0, p, 4096)
		tr.resp(0, p, p+3, p, 0)
		tr.resp(0, p, p+3, p+1, drop)
		tr.resp(0, p, p+3, p+2, ecn)
		tr.cnp(0, false)
		tr.readReq(0, p+1, 3072)
		tr.resp(0, p+1, p+3, p+1, 0)
		tr.resp(0, p+1, p+3, p+3, 0)
		seeds = append(seeds, encodeRecords(tr.frames))
	}
	{
		tr := newTrace(t, intent.VerbWrite, 2, "10.0.0.1", "10.0.0.2")
		p := tr.ipsn(1)
		tr.data(1, p, p, ecn)
		tr.cnp(1, true)
		tr.data(1, p, p+1, 0)
		tr.data(1, p, p+2, 0)
		tr.ack(1, p+1)
		tr.data(1, p, p+3, drop)
		tr.after(5_000_000)
		tr.data(1, p, p+3, drop)
		tr.pkt(1, false, roce.Builder{Opcode: roce.RCAck, PSN: p + 3, Syndrome: roce.RNRNAKSyndrome(3)}, 0, 0)
		tr.pkt(1, false, roce.Builder{Opcode: roce.RCAck, PSN: p + 3, Syndrome: roce.NAKSyndrome(roce.NAKRemoteAccessError)}, 0, 0)
		seeds = append(seeds, encodeRecords(tr.frames))
	}
	return seeds
}

// FuzzPacket feeds arbitrary records to Analyzer.Packet.
func FuzzPacket(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 3, 0, 0, 0, 1, 1, 2, 3})
	m := fuzzMeta(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := NewAnalyzer(m, Options{MaxRecords: 64})
		if err != nil {
			t.Fatal(err)
		}
		n := feed(a, data)
		checkReport(t, a.Report(), n)
	})
}

// FuzzEvents drives the state machines with well-formed packets in an
// arbitrary order: each 4 bytes of input choose a connection, a packet
// kind, a PSN near the connection's initial PSN, an event and a time step.
// Raw frames rarely get past the parser; these go straight to the
// machines.
func FuzzEvents(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 1, 1, 0, 0, 0, 1, 0})
	f.Add([]byte{0, 3, 0, 0, 0, 5, 0, 0, 0, 5, 1, 0, 0, 5, 2, 2, 0, 4, 1, 0, 0, 5, 1, 0, 0, 6, 3, 0})
	f.Add([]byte{1, 0, 0, 2, 1, 0, 1, 0, 1, 7, 1, 0, 1, 2, 2, 0, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4*512 {
			data = data[:4*512]
		}
		tr := newTrace(t, intent.VerbWrite, 2, "10.0.0.1", "10.0.0.2")
		tr.m.Timeout, tr.m.RetryCnt = 10, 3
		tr.m.ResponderNIC.MinTimeBetweenCNPs = 20_000
		for len(data) >= 4 {
			c := int(data[0] & 1)
			kind := data[0] >> 1 % 10
			p := tr.ipsn(c) + uint32(data[1]%16)
			ev := mirror.EventType(data[2] % 4)
			tr.now += int64(data[3]) * 10_000
			data = data[4:]
			switch kind {
			case 0, 1, 2:
				tr.data(c, tr.ipsn(c)+(p-tr.ipsn(c))/4*4, p, ev)
			case 3:
				tr.ack(c, p)
			case 4:
				tr.nak(c, p)
			case 5:
				tr.cnp(c, ev&1 == 0)
			case 6:
				tr.readReq(c, p, 1024*int(ev+1))
			case 7:
				tr.resp(c, p, p+uint32(ev), p, ev)
			case 8:
				tr.pkt(c, false, roce.Builder{Opcode: roce.RCAck, PSN: p, Syndrome: roce.RNRNAKSyndrome(1)}, 0, 0)
			default:
				tr.pkt(c, true, roce.Builder{Opcode: roce.RCFetchAdd, PSN: p, VA: 8, RKey: 1}, 0, ev)
			}
		}
		a, err := NewAnalyzer(tr.m, Options{MaxRecords: 32})
		if err != nil {
			t.Fatal(err)
		}
		for _, fr := range tr.frames {
			a.Packet(fr.ts, fr.data)
		}
		checkReport(t, a.Report(), len(tr.frames))
	})
}
