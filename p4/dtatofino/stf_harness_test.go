package dtatofino

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/p4/stf"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

// The copies translator.p4's -DP4TESTGEN harness lets P4Testgen follow
// into egress (see TESTGEN_ACK_PORT and TESTGEN_COPY_PORT in the
// program), replayed against the software translator.

// Reasons a harness test is not replayed.
const (
	immediateCopy = "an immediate Key-Write: the switch writes it as a plain WRITE, the software translator with " +
		"immediate data (a documented difference)"
	badKeyRegion = "a Key-Write or Key-Increment region the control plane refuses to install (not a power of two of " +
		"slots, or crossing a 4 GiB boundary)"
)

// harnessCompared counts the harness tests the replay compared, by kind.
var harnessCompared = map[string]int{}

// copyModel replays copy rid of a Key-Write or Key-Increment report that
// the group of (collector, N) replicates: the twin translates the report
// into its N WRITEs or FETCH_ADDs, slot n for copy n, on the connection
// of the test's rdma_conn entry to the region of its key_write_region or
// key_increment_region entry, and its packet rid is the switch's. The
// switch's copies each take a PSN in turn; the test's registers are what
// copy rid finds, so the twin's connection starts rid PSNs earlier. The
// ICRC is not compared: the switch computes it from the prefix state the
// test's rdma_conn entry names, which is not the control plane's for the
// connection (TestICRCMatchesSoftware compares it with the control
// plane's prefixes).
func copyModel(tc *stf.Test, coll, port uint64, rid int, r *dtawire.Report) ([]stf.Output, string, error) {
	if rid >= int(r.Redundancy) {
		return nil, "", nil // the group has no such copy
	}
	if r.Opcode == dtawire.OpKeyWrite && r.Immediate {
		return nil, immediateCopy, nil
	}
	table := "Egress.key_write_region"
	if r.Opcode == dtawire.OpKeyIncrement {
		table = "Egress.key_increment_region"
	}
	regions := dtamem.Regions{}
	for i := range tc.Adds {
		e := &tc.Adds[i]
		if k, _ := e.Key("collector"); e.Table != table || k.Uint() != coll {
			continue
		}
		reg := region{e.Uint("base_hi")<<32 | e.Uint("base_lo"), uint32(e.Uint("rkey")), e.Uint("slot_mask") + 1, EntryLen}
		if reg.check(table) != nil {
			return nil, badKeyRegion, nil
		}
		if r.Opcode == dtawire.OpKeyWrite {
			regions.KeyWrite = &dtamem.KeyWriteRegion{Addr: reg.addr, RKey: reg.rkey, Slots: reg.slots, DataWidth: 4}
		} else {
			regions.KeyIncrement = &dtamem.KeyIncrementRegion{Addr: reg.addr, RKey: reg.rkey, Slots: reg.slots}
		}
	}
	c := twinConnAfter(tc, coll, uint32(rid))
	if c == nil {
		return nil, "", nil // no connection: the switch sends nothing
	}
	tr, err := dtatranslator.NewTranslator(c, regions)
	if err != nil {
		return nil, "", err
	}
	var frames [][]byte
	err = tr.Translate(r, func(f []byte) error {
		frames = append(frames, append([]byte(nil), f...))
		return nil
	})
	switch {
	case errors.Is(err, dtatranslator.ErrNoRegion) && regions.KeyWrite == nil && regions.KeyIncrement == nil:
		// The twin refuses a primitive the collector has no region for,
		// and the switch writes nothing there.
		harnessCompared["no region"]++
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("the twin does not translate copy %d of %v: %v", rid, r.Opcode, err)
	}
	if len(frames) != int(r.Redundancy) {
		return nil, "", fmt.Errorf("the twin sends %d packets for N = %d", len(frames), r.Redundancy)
	}
	f := frames[rid]
	if tc.Expect != nil && len(tc.Expect.Care) >= len(f) {
		clear(tc.Expect.Care[len(f)-4 : len(f)])
	}
	harnessCompared[r.Opcode.String()]++
	return []stf.Output{rdmaOut(tc, port, r.Opcode, f)}, "", nil
}

// ackCopyModel replays a mirrored ACK copy: the ack_mirror_h the ingress
// prepends (PKT_ACK, the report's number, no flags: the -DP4TESTGEN build
// sees every report green, so it writes no congestion notice), then the
// report. The switch ACKs every report whose number ends in 15; the
// software translator's SeqTracker every 16th it takes, so the twin takes
// the 16 reports from a multiple of 16 (the first number the control
// plane gives a reporter, Peer.FirstSeq, is one in the lab) and must
// answer the last with this ACK, written (WriteAckFrame) from the
// address and MAC the report was sent to. A mirrored ACK carries no UDP
// checksum (0: computing it costs the egress a stage, translator.p4's
// header says), where the twin's carries one: the twin's datagram is
// compared with that field cleared. The report's bytes the egress parser
// did not take follow the datagram, as behind every answer.
func ackCopyModel(tc *stf.Test) ([]stf.Output, string, error) {
	if len(tc.In) < ackMirrorLen {
		return harnessDrop(notAnAckCopy)
	}
	m, f := tc.In[:ackMirrorLen], tc.In[ackMirrorLen:]
	c := *tc
	c.In = f
	c.FixLengths()
	var np header.Parsed
	if err := header.Decode(f, &np); err != nil || np.L3Proto != header.EtherTypeIPv4 || np.L4Proto != header.IPProtoUDP ||
		np.Fragment || np.UDP(f).DstPort() != dtawire.ReportPort || f[header.EthernetHeaderLen] != 0x45 {
		return harnessDrop(notAnAckCopy)
	}
	base := np.Payload(f)
	if len(base) < (dtawire.Format{}).BaseLen() {
		return harnessDrop(notAnAckCopy)
	}
	op, seq, retrans := dtawire.Opcode(base[0]), base[1], base[2]&0x40 != 0
	if m[0] != pktAck || m[1] != seq || m[2] != 0 || seq&15 != 15 || !retrans {
		return harnessDrop(notAnAckCopy)
	}
	ip := np.IPv4(f)
	eth := header.Ethernet(f)
	reporter := netip.AddrFrom4(ip.Src())
	st := dtatranslator.NewSeqTracker()
	first := seq - 15
	st.Expect(reporter, first)
	var ack dtawire.Ack
	for s := first; ; s++ {
		v, a, nack, n := st.Check(reporter, s, 0)
		if v != dtatranslator.SeqAccept || nack || a != (s == seq) {
			return nil, "", fmt.Errorf("the twin's tracker judges report %d of %d..%d: %v, ACK %v, NACK %v", s, first, seq, v, a, nack)
		}
		if s == seq {
			ack = dtawire.Ack{Seq: n}
			break
		}
	}
	buf := make([]byte, 128)
	if _, err := dtatranslator.WriteAckFrame(buf, eth.Dst(), eth.Src(), ip.Dst(), ip.Src(), dtawire.AckPort, ack); err != nil {
		return nil, "", err
	}
	udp := header.EthernetHeaderLen + header.IPv4MinHeaderLen
	dgram := udp + header.UDPHeaderLen + dtawire.AckLen
	binary.BigEndian.PutUint16(buf[udp+6:], 0)
	parsed := ackMirrorLen + udp + header.UDPHeaderLen + dtawire.Format{}.BaseLen()
	if n, err := (dtawire.Format{}).Len(op); err == nil && op != dtawire.OpSketchMerge {
		parsed += n // the default build parses no sketch
	}
	harnessCompared["ACK"]++
	return []stf.Output{{Port: tc.InPort, Frame: append(buf[:dgram:dgram], tc.In[min(parsed, len(tc.In)):]...)}}, "", nil
}
