package dtatofino

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/p4/stf"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestSTFTranslator replays P4Testgen's tests of translator.p4 against
// the software translator's parts that make the same decisions
// (translator/dtatranslator): SeqTracker judges retransmittable reports
// (with the expected number the test sets in expected_seq), Translator
// refuses a report whose primitive or list the collector does not serve,
// Conn takes a collector's ACKs and NAKs, an Append's WRITE is the twin's
// on the connection the test's rdma_conn entry describes (appendModel),
// and a postcard meets the twin's flow cache holding the cell the test
// sets in the switch's (postcardModel). The -DP4TESTGEN harness's copies
// (stf_harness_test.go) are the twin's too: a mirrored ACK copy its
// tracker's ACK (ackCopyModel), copy r of a Key-Write or Key-Increment
// group its r-th WRITE or FETCH_ADD (copyModel). The replay compares
// drops, the reporters' answers, the ACKs, the Appends, the Key-Write and
// Key-Increment packets and the postcard records, and each postcard's
// outcome (held, complete, refused hop) with the switch's in the trace;
// TestICRCMatchesSoftware compares every RDMA packet the egress builds
// with the twin's, ICRC included.
func TestSTFTranslator(t *testing.T) {
	resetReplayCounts()
	rep := stf.Replay(t, "testdata/p4testgen/translator", translatorModel, stf.Known{})
	if left := appendLeft[ringElsewhere] + appendLeft[fillBeyond]; rep.Passed+left != rep.Tests {
		t.Errorf("%d of %d tests pass against the twin and %d are left to TestSTFAppendBatch: the rest were skipped",
			rep.Passed, rep.Tests, left)
	}
	t.Logf("postcard outcomes the twin and the switch agreed on: %v", postcards)
	t.Logf("forwarding compared: %v; harness inputs dropped: %v", forwarded, harnessDrops)
	requireKinds(t, forwarded, "routed", "dropped: no route")
	requireKinds(t, harnessDrops, notAnAckCopy, notACopyReport)
	t.Logf("Appends compared: %d held by both, %d completing a batch", appendCompared[true], appendCompared[false])
	t.Logf("harness copies compared: %v", harnessCompared)
	if appendCompared[true] == 0 {
		t.Error("no Append held by the switch was compared with the twin")
	}
	if len(postcards) == 0 {
		t.Error("no postcard outcome compared: were the trace patterns of switchPostcard renamed?")
	}
	for _, k := range []string{"ACK", "key-write", "key-increment"} {
		if harnessCompared[k] == 0 {
			t.Errorf("no %s copy of the -DP4TESTGEN harness compared with the twin: did the set lose the harness's ports?", k)
		}
	}
}

// TestSTFReporter replays P4Testgen's tests of reporter.p4 against the
// software reporter's reports (dtatranslator.Reporter encodes each with
// dtawire.Format.Encode and frames it with dtatranslator.WriteUDP4). The
// report is the mirrored copy's egress pass, which P4Testgen does not
// follow; its tests reach it through the -DP4TESTGEN harness (a packet on
// TESTGEN_MIRROR_PORT starts with the mirror header the first pass
// writes). The adapter builds the software reporter's report of the
// mirror header's fields with the test's reporter_cfg (addresses, MACs,
// hop index) and compares the datagram byte for byte, followed by the
// copy's bytes the egress parser did not read (a Tofino cannot cut a
// frame: they stay behind the report, outside its IP length). The rest is
// switch work a reporter host does not do: the translator's ACKs and
// NACKs to the switch's own addresses end in its ingress, and everything
// else is routed (reporterIngressModel, forwardModel).
func TestSTFReporter(t *testing.T) {
	resetReplayCounts()
	rep := stf.Replay(t, "testdata/p4testgen/reporter", reporterModel, stf.Known{})
	t.Logf("forwarding compared: %v; harness inputs dropped: %v", forwarded, harnessDrops)
	requireKinds(t, forwarded, "routed", "dropped: no route", "dropped: not IPv4", "dropped: to the switch")
	requireKinds(t, harnessDrops, notACopy)
	if rep.Passed != rep.Tests {
		t.Errorf("%d of %d tests pass against the twin", rep.Passed, rep.Tests)
	}
}

// notACopy: the -DP4TESTGEN harness drops a copy the first egress pass
// cannot write (a report type and an opcode of a rule, pad 0, a redundancy
// Reporter.Validate accepts in a rule, IPv4 behind).
const notACopy = "not a copy the first egress pass writes: the -DP4TESTGEN harness drops it"

// testgenMirrorPort is reporter.p4's TESTGEN_MIRROR_PORT.
const testgenMirrorPort = 100

// reportMirrorLen is report_mirror_h's length: type, opcode, flags,
// redundancy, then key, data, counter, list id and collector (32 bits
// each).
const reportMirrorLen = 24

func reporterModel(tc *stf.Test) ([]stf.Output, string, error) {
	if tc.InPort != testgenMirrorPort {
		return reporterIngressModel(tc)
	}
	in := tc.In
	if len(in) < reportMirrorLen+header.EthernetHeaderLen+header.IPv4MinHeaderLen ||
		binary.BigEndian.Uint16(in[reportMirrorLen+12:]) != header.EtherTypeIPv4 || in[reportMirrorLen+14]>>4 != 4 ||
		in[reportMirrorLen+14]&0xf < 5 || in[0] != 1 || in[1] < 1 || in[1] > 4 || in[2]&0x3f != 0 {
		return harnessDrop(notACopy)
	}
	m, orig := in[:reportMirrorLen], in[reportMirrorLen:]
	var cfg struct {
		smac, dmac header.MAC
		src        [4]byte
		hop        uint8
	}
	for _, e := range tc.Defaults {
		if e.Table != "Egress.reporter_cfg" {
			continue
		}
		for _, p := range e.Params {
			v := p.Value.Uint64()
			switch p.Name {
			case "smac", "dmac":
				var mac header.MAC
				for i := range 6 {
					mac[i] = byte(v >> (8 * (5 - i)))
				}
				if p.Name == "smac" {
					cfg.smac = mac
				} else {
					cfg.dmac = mac
				}
			case "src_addr":
				binary.BigEndian.PutUint32(cfg.src[:], uint32(v))
			case "hop":
				cfg.hop = uint8(v)
			}
		}
	}
	r := dtawire.Report{Opcode: dtawire.Opcode(m[1]), Immediate: m[2]&0x80 != 0, Retransmittable: m[2]&0x40 != 0,
		Redundancy: m[3]}
	key, data, counter, list := binary.BigEndian.Uint32(m[4:]), m[8:12], binary.BigEndian.Uint32(m[12:]), binary.BigEndian.Uint32(m[16:])
	if r.Retransmittable {
		// The sequence register (PTF tests set it; STF leaves it unknown
		// and masks the field).
		for _, reg := range tc.Registers {
			if reg.Name == "Egress.report_seq" && reg.Index == 0 {
				r.Seq = uint8(reg.Value.Uint64())
			}
		}
	}
	switch r.Opcode {
	case dtawire.OpKeyWrite:
		r.Key, r.Data = key, data
	case dtawire.OpKeyIncrement:
		r.Key, r.Counter = key, uint64(counter)
	case dtawire.OpPostcarder:
		r.Key, r.Hop, r.Data = key, cfg.hop, data
	case dtawire.OpAppend:
		// The entry is the flow key the first pass hashed.
		var d [4]byte
		binary.BigEndian.PutUint32(d[:], key)
		r.ListID, r.Data = list, d[:]
	}
	if (r.Opcode == dtawire.OpKeyWrite || r.Opcode == dtawire.OpKeyIncrement) && (r.Redundancy == 0 || r.Redundancy > MaxRedundancy) {
		return harnessDrop(notACopy)
	}
	var payload [64]byte
	n, err := dtawire.Format{}.Encode(payload[:], &r)
	if err != nil {
		return nil, "", fmt.Errorf("the software reporter cannot encode %+v: %v", r, err)
	}
	buf := make([]byte, 128)
	if _, err := dtatranslator.WriteUDP4(buf, cfg.smac, cfg.dmac, cfg.src, [4]byte(m[20:24]), dtawire.GeneratorPort,
		dtawire.ReportPort, 0, payload[:n]); err != nil {
		return nil, "", err
	}
	dgram := header.EthernetHeaderLen + header.IPv4MinHeaderLen + header.UDPHeaderLen + n
	// What the egress parser read of the copy: Ethernet, IPv4, and the
	// ports (and the rest of UDP) of an unfragmented TCP or UDP packet
	// with a 20-byte header.
	ip := orig[header.EthernetHeaderLen:]
	read := header.EthernetHeaderLen + header.IPv4MinHeaderLen
	if ip[0]&0xf == 5 && ip[6]&0x20 == 0 && binary.BigEndian.Uint16(ip[6:])&0x1fff == 0 {
		switch ip[9] {
		case 6:
			read += 4
		case 17:
			read += 8
		}
	}
	if read > len(orig) {
		return nil, "the copy ends inside a header the egress parser reads", nil
	}
	frame := append(buf[:dgram:dgram], orig[read:]...)
	return []stf.Output{{Port: testgenMirrorPort, Frame: frame}}, "", nil
}

// The -DP4TESTGEN harness's ports of translator.p4 (TESTGEN_ACK_PORT,
// TESTGEN_COPY_PORT): a packet on the first is a mirrored ACK copy, led
// by the ack_mirror_h the ingress deparser prepends; one on the second
// is a report led by the replication id of the multicast copy the test
// follows.
const (
	testgenAckPort  = 100
	testgenCopyPort = 101
	ackMirrorLen    = 3 // ack_mirror_h: type, sequence number, flags
	pktAck          = 3 // translator.p4's PKT_ACK
)

// notAnAckCopy: the harness drops a mirrored copy the ingress cannot
// write (see ackCopyModel).
const notAnAckCopy = "not an ACK copy the ingress mirrors (an in-order retransmittable report whose number ends in 15, " +
	"its ACK header of type PKT_ACK, that number and no flags): the -DP4TESTGEN harness drops it"

// translatorModel is the adapter: the harness's ACK copies go to
// ackCopyModel; a report on the copy port is replayed as any other, the
// copy of a Key-Write or Key-Increment group it names included.
func translatorModel(tc *stf.Test) ([]stf.Output, string, error) {
	switch tc.InPort {
	case testgenAckPort:
		return ackCopyModel(tc)
	case testgenCopyPort:
		c, rid, ok := copyHarness(tc)
		if !ok || !keyReport(c.In) {
			return harnessDrop(notACopyReport)
		}
		return reportModel(c, rid)
	}
	return reportModel(tc, -1)
}

// notACopyReport: the copy port takes Key-Write and Key-Increment
// reports, behind the replication id, and drops anything else.
const notACopyReport = "not a replication id and a Key-Write or Key-Increment report: the -DP4TESTGEN copy port drops it"

// keyReport says the frame is one the switch's parser takes for a
// Key-Write or Key-Increment report: IPv4 with a 20-byte header, not a
// fragment, UDP to the DTA port, that opcode.
func keyReport(f []byte) bool {
	const ip = header.EthernetHeaderLen
	if len(f) < ip+header.IPv4MinHeaderLen+header.UDPHeaderLen+1 || binary.BigEndian.Uint16(f[12:]) != header.EtherTypeIPv4 ||
		f[ip] != 0x45 || binary.BigEndian.Uint16(f[ip+6:])&0x3fff != 0 || f[ip+9] != header.IPProtoUDP {
		return false
	}
	udp := ip + header.IPv4MinHeaderLen
	op := dtawire.Opcode(f[udp+header.UDPHeaderLen])
	return binary.BigEndian.Uint16(f[udp+2:]) == dtawire.ReportPort && (op == dtawire.OpKeyWrite || op == dtawire.OpKeyIncrement)
}

// copyHarness splits a test of the copy port into the report (a shallow
// copy of tc whose packet is the frame behind the replication id) and
// the id. The copy shares tc's expectation.
func copyHarness(tc *stf.Test) (*stf.Test, int, bool) {
	if tc.InPort != testgenCopyPort || len(tc.In) < 1 {
		return tc, -1, tc.InPort != testgenCopyPort
	}
	c := *tc
	c.In = tc.In[1:]
	return &c, int(tc.In[0]), true
}

// reportModel replays a packet that arrives on a port of the switch; rid
// is the replication id of the copy the test follows when the packet came
// in by the copy port (-1 otherwise: P4Testgen follows no multicast copy).
func reportModel(tc *stf.Test, rid int) ([]stf.Output, string, error) {
	// translator.p4 reads no IP or UDP length.
	tc.FixLengths()
	var np header.Parsed
	if err := header.Decode(tc.In, &np); err != nil || np.L3Proto != header.EtherTypeIPv4 ||
		np.L4Proto != header.IPProtoUDP || np.Fragment {
		return forwardModel(tc)
	}
	ip := np.IPv4(tc.In)
	udp := np.UDP(tc.In)
	type coll struct {
		idx  uint64
		port uint64
	}
	collectors := map[[4]byte]coll{}
	answers := map[[2]uint64]coll{}
	groups := map[[2]uint64]uint64{}
	lists := map[[2]uint64]uint64{} // (collector, list id) -> list index
	reporters := map[[4]byte]bool{}
	for _, e := range tc.Adds {
		switch e.Table {
		case "Ingress.collector":
			k, _ := e.Key("dst_addr")
			collectors[[4]byte(k.Value())] = coll{e.Uint("idx"), e.Uint("port")}
		case "Ingress.collector_qp":
			a, _ := e.Key("src_addr")
			q, _ := e.Key("dst_qpn")
			answers[[2]uint64{a.Uint(), q.Uint()}] = coll{e.Uint("idx"), e.Uint("port")}
		case "Ingress.redundancy_group":
			c, _ := e.Key("collector")
			n, _ := e.Key("redundancy")
			groups[[2]uint64{c.Uint(), n.Uint()}] = e.Uint("mgid")
		case "Ingress.append_list":
			c, _ := e.Key("collector")
			l, _ := e.Key("list_id")
			lists[[2]uint64{c.Uint(), l.Uint()}] = e.Uint("idx")
		case "Ingress.reporter":
			a, _ := e.Key("src_addr")
			reporters[[4]byte(a.Value())] = true
		case "Ingress.ipv4_fwd":
		case "Ingress.report_priority":
			// The -DP4TESTGEN build sees every report green and none
			// resent (P4Testgen taints a meter's colour): a report's
			// priority changes nothing there.
		default:
			if e.Table[:7] == "Egress." {
				continue // the egress only sees what ingress sends it
			}
			return nil, "", fmt.Errorf("add %s: no mapping onto the twin", e.Table)
		}
	}
	switch udp.DstPort() {
	case dtawire.ReportPort:
		c, ok := collectors[ip.Dst()]
		if !ok {
			return forwardModel(tc)
		}
		payload := np.Payload(tc.In)
		var r dtawire.Report
		if err := (dtawire.Format{}).Parse(payload, &r); err != nil {
			// The switch parses the base header alone for an opcode it
			// does not know; the software translator refuses what it
			// cannot parse. Both send nothing.
			if errors.Is(err, dtawire.ErrTruncated) {
				return nil, "a report cut short, which the switch's parser rejects", nil
			}
			if len(payload) > 2 && dtawire.Opcode(payload[0]) == dtawire.OpSketchMerge && payload[2]&0x40 != 0 &&
				reporters[ip.Src()] {
				return nil, "a retransmittable Sketch-Merge report the twin cannot parse: the switch, which does not " +
					"parse a sketch's body, judges its sequence number", nil
			}
			return nil, "", nil
		}
		if r.Retransmittable && reporters[ip.Src()] {
			seq := dtatranslator.NewSeqTracker()
			for _, reg := range tc.Registers {
				if reg.Name == "Ingress.expected_seq" {
					seq.Expect(netip.AddrFrom4(ip.Src()), uint8(reg.Value.Uint64()))
				}
			}
			if len(tc.Registers) == 0 {
				return nil, "expected_seq unknown (STF tests cannot set it)", nil
			}
			if v, ack, nack, n := seq.Check(netip.AddrFrom4(ip.Src()), r.Seq, 0); v != dtatranslator.SeqAccept {
				// The twin answers the reporter where the report came
				// from.
				if !ack {
					return nil, "", nil
				}
				buf := make([]byte, 128)
				eth := header.Ethernet(tc.In)
				k, err := dtatranslator.WriteAckFrame(buf, ownMAC(tc), eth.Src(), ip.Dst(), ip.Src(), dtawire.AckPort,
					dtawire.Ack{Seq: n, NACK: nack})
				if err != nil {
					return nil, "", err
				}
				// A Tofino cannot cut a frame: the report's bytes its
				// parser did not take stay behind the answer's datagram
				// (receivers see link padding), where the twin pads to
				// Ethernet's minimum. The datagram is compared as the
				// twin writes it.
				dgram := header.EthernetHeaderLen + header.IPv4MinHeaderLen + header.UDPHeaderLen + dtawire.AckLen
				if k < dgram {
					return nil, "", fmt.Errorf("the twin's answer is %d bytes, shorter than its datagram", k)
				}
				parsed := header.EthernetHeaderLen + header.IPv4MinHeaderLen + header.UDPHeaderLen + dtawire.Format{}.BaseLen()
				if n, err := (dtawire.Format{}).Len(r.Opcode); err == nil && r.Opcode != dtawire.OpSketchMerge {
					parsed += n // the switch parses no sketch
				}
				frame := append(buf[:dgram:dgram], tc.In[min(parsed, len(tc.In)):]...)
				return []stf.Output{{Port: tc.InPort, Frame: frame}}, "", nil
			}
		}
		regions := dtamem.Regions{}
		switch r.Opcode {
		case dtawire.OpKeyWrite, dtawire.OpKeyIncrement:
			mgid, ok := groups[[2]uint64{c.idx, uint64(r.Redundancy)}]
			switch {
			case !ok || r.Redundancy == 0 || r.Redundancy > MaxRedundancy:
			case mgid != 0 && rid < 0:
				// Its copies leave by the group alone, which
				// P4Testgen does not follow: it sees no packet. The
				// harness's copy port replays the copies.
				harnessCompared["replicated, no unicast packet"]++
				return nil, "", nil
			case mgid != 0:
				return copyModel(tc, c.idx, c.port, rid, &r)
			}
			// Group 0 replicates to nobody: as a collector without the
			// region, the report goes nowhere.
		case dtawire.OpAppend:
			if idx, ok := lists[[2]uint64{c.idx, uint64(r.ListID)}]; ok {
				return appendModel(tc, c.idx, c.port, idx, &r)
			}
		case dtawire.OpPostcarder:
			return postcardModel(tc, c.idx, c.port, &r)
		}
		conn := dtatranslator.NewConn(dtamem.Endpoint{}, dtamem.Endpoint{}, 0)
		tr, err := dtatranslator.NewTranslator(conn, regions)
		if err != nil {
			return nil, "", err
		}
		var outs []stf.Output
		err = tr.Translate(&r, func(f []byte) error {
			outs = append(outs, stf.Output{Port: int(c.port), Frame: append([]byte(nil), f...)})
			return nil
		})
		if err == nil || !errors.Is(err, dtatranslator.ErrNoRegion) {
			return nil, "", fmt.Errorf("the twin translated a report the switch has no region for (%v)", err)
		}
		return outs, "", nil
	case roce.UDPPort:
		var p roce.Packet
		if err := roce.ParseDecoded(tc.In, roce.UDPPort, &p); err != nil || p.AETH(tc.In) == nil {
			return forwardModel(tc)
		}
		if _, ok := answers[[2]uint64{uint64(ipv4(ip.Src())), uint64(p.DestQP)}]; !ok {
			return forwardModel(tc)
		}
		// An ACK or NAK of the collector: the connection takes it and
		// nothing goes out (a NAK moves the PSN, in the egress pipe on
		// the switch).
		conn := dtatranslator.NewConn(dtamem.Endpoint{}, dtamem.Endpoint{}, p.PSN)
		_, _ = conn.Input(&p, tc.In)
		return nil, "", nil
	}
	return forwardModel(tc)
}

// ownMAC is the translator's MAC the test sets (translator_cfg's default
// action), the source of its answers.
func ownMAC(tc *stf.Test) header.MAC {
	var m header.MAC
	for _, e := range tc.Defaults {
		if e.Table == "Ingress.translator_cfg" && e.Action == "Ingress.set_translator" {
			copy(m[:], e.Bytes("mac", 6))
		}
	}
	return m
}

func ipv4(a [4]byte) uint32 {
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

// twinConn is the twin's connection to collector coll as the test's
// rdma_conn entry installs it (MACs, addresses, DSCP, UDP source port,
// QPN), with the PSN and ACK period the registers a PTF test sets, or nil
// without an entry: the switch then sends nothing.
func twinConn(tc *stf.Test, coll uint64) *dtatranslator.Conn {
	return twinConnAfter(tc, coll, 0)
}

// twinConnAfter is twinConn for the packet that follows before others
// of one report on the connection: the registers a test sets are what
// its packet finds, so the twin's connection starts before PSNs earlier.
func twinConnAfter(tc *stf.Test, coll uint64, before uint32) *dtatranslator.Conn {
	var conn *stf.Entry
	for i := range tc.Adds {
		e := &tc.Adds[i]
		if k, _ := e.Key("collector"); e.Table == "Egress.rdma_conn" && k.Uint() == coll {
			conn = e
		}
	}
	if conn == nil {
		return nil
	}
	var psn, ackPhase uint64
	for _, reg := range tc.Registers {
		switch {
		case reg.Name == "Egress.psn" && uint64(reg.Index) == coll:
			psn = reg.Value.Uint64()
		case reg.Name == "Egress.ack_phase" && uint64(reg.Index) == coll:
			ackPhase = reg.Value.Uint64()
		}
	}
	if conn.Uint("udp_src_port") == 0 {
		// The control plane derives the port from the QPNs, as the twin
		// does for 0: never 0 (roce.FlowLabelToUDPSrcPort). The
		// -DP4TESTGEN build takes such an entry for none.
		return nil
	}
	var smac, dmac header.MAC
	copy(dmac[:], conn.Bytes("dmac", 6))
	copy(smac[:], conn.Bytes("smac", 6))
	local := dtamem.Endpoint{MAC: smac, GID: roce.GIDFromIPv4([4]byte(conn.Bytes("src_addr", 4)))}
	remote := dtamem.Endpoint{MAC: dmac, GID: roce.GIDFromIPv4([4]byte(conn.Bytes("dst_addr", 4))), QPN: uint32(conn.Uint("dst_qpn"))}
	c := dtatranslator.NewConnWith(local, remote, uint32(psn)-before,
		dtatranslator.ConnHeaders{UDPSrcPort: uint16(conn.Uint("udp_src_port")), DSCP: uint8(conn.Uint("dscp"))})
	// The switch asks for an ACK when ack_phase goes from 63 to 64 (the
	// packets before the one compared are not compared).
	if ackPhase == 63 {
		c.AckEvery = 1
	}
	return c
}

// rdmaOut is the switch's RDMA packet for the twin's frame f: a Tofino
// cannot cut a frame, so the report's bytes its parser did not take (past
// the base header and op's) follow the twin's packet.
func rdmaOut(tc *stf.Test, port uint64, op dtawire.Opcode, f []byte) stf.Output {
	parsed := header.EthernetHeaderLen + header.IPv4MinHeaderLen + header.UDPHeaderLen + dtawire.Format{}.BaseLen()
	n, _ := (dtawire.Format{}).Len(op)
	parsed += n
	return stf.Output{Port: int(port), Frame: append(append([]byte(nil), f...), tc.In[min(parsed, len(tc.In)):]...)}
}

// appendModel replays an Append of a list the switch knows, in the
// default build's batches of DefaultAppendBatch: the twin gathers first
// the entries the test's batch_fill and batch_data registers say the
// switch holds, then the report. One that does not complete a batch is
// held by both (whatever the egress has: the report does not get there).
// A batch it completes is written on twinConn's connection to the
// list_region entry's memory, and the switch sends nothing without a
// connection.
func appendModel(tc *stf.Test, coll, port, list uint64, r *dtawire.Report) ([]stf.Output, string, error) {
	const b = DefaultAppendBatch
	var fill uint64
	var gathered [b - 1]uint32
	var ringSkip string
	for _, reg := range tc.Registers {
		if uint64(reg.Index) != list {
			continue
		}
		v := reg.Value.Uint64()
		name := strings.TrimPrefix(strings.TrimPrefix(reg.Name, "Ingress."), "Egress.")
		switch {
		case name == "list_head" && v != 0:
			ringSkip = ringElsewhere
		case strings.HasPrefix(name, "list_seq"):
			i, _ := strconv.Atoi(strings.TrimPrefix(name, "list_seq"))
			if v != uint64(batchSeqStart(b, i)) {
				ringSkip = ringElsewhere
			}
		case name == "batch_fill":
			fill = v
		case strings.HasPrefix(name, "batch_data"):
			i, err := strconv.Atoi(strings.TrimPrefix(name, "batch_data"))
			if err != nil || i >= len(gathered) {
				return nil, "", fmt.Errorf("register %s: not a batch entry", reg.Name)
			}
			gathered[i] = uint32(v)
		}
	}
	if fill >= b {
		appendLeft[fillBeyond]++
		return nil, fillBeyond, nil
	}
	held := fill < b-1
	c := twinConn(tc, coll)
	switch {
	case held:
		// The connection does not matter: nothing is sent.
		c = dtatranslator.NewConn(dtamem.Endpoint{}, dtamem.Endpoint{}, 0)
	case c == nil:
		return nil, "", nil
	case ringSkip != "":
		appendLeft[ringSkip]++
		return nil, ringSkip, nil
	}
	var region *stf.Entry
	for i := range tc.Adds {
		e := &tc.Adds[i]
		if l, _ := e.Key("list"); e.Table == "Egress.list_region" && l.Uint() == list {
			region = e
		}
	}
	// Without a region the switch writes at VA 0 with rkey 0: ring 0
	// of one batch. The twin's lists have a power of two of entries;
	// the offset of the ring's first batch is 0 whatever their number.
	reg := dtamem.ListRegion{Entries: b}
	if region != nil {
		reg = dtamem.ListRegion{Addr: region.Uint("base_hi")<<32 | region.Uint("base_lo"), RKey: uint32(region.Uint("rkey")), Entries: b}
	}
	tr, err := dtatranslator.NewTranslator(c, dtamem.Regions{Lists: map[uint32]dtamem.ListRegion{r.ListID: reg}, Batch: b})
	if err != nil {
		return nil, "", err
	}
	var outs []stf.Output
	emit := func(f []byte) error {
		outs = append(outs, rdmaOut(tc, port, dtawire.OpAppend, f))
		return nil
	}
	for i := range fill {
		e := dtawire.Report{Opcode: dtawire.OpAppend, ListID: r.ListID, Data: binary.BigEndian.AppendUint32(nil, gathered[i])}
		if err := tr.Translate(&e, emit); err != nil || len(outs) != 0 {
			return nil, "", fmt.Errorf("the twin did not hold entry %d of the batch: %v", i, err)
		}
	}
	if err := tr.Translate(r, emit); err != nil {
		return nil, "", err
	}
	appendCompared[held]++
	return outs, "", nil
}

// appendCompared counts the Appends TestSTFTranslator compared, held
// (true) and completing a batch (false).
var appendCompared = map[bool]int{}

// States of a list the software translator cannot be put in, which the
// switch never holds either (the control plane starts the registers
// together and every batch moves them together): the replay leaves them
// to TestSTFAppendBatch, which runs them through pipeModel, the Go model
// of the pipeline, and counts them in appendLeft.
const (
	ringElsewhere = "a list whose ring or sequences start where the control plane never starts them (the twin's list " +
		"starts at 0): TestSTFAppendBatch replays it against the Go model of the pipeline"
	fillBeyond = "batch_fill beyond the batch's places, which the switch's register never holds: TestSTFAppendBatch " +
		"replays it against the Go model of the pipeline"
)

var appendLeft = map[string]int{}

// resetReplayCounts clears what the replays count.
func resetReplayCounts() {
	postcards = map[string]int{}
	appendCompared = map[bool]int{}
	harnessCompared = map[string]int{}
	forwarded = map[string]int{}
	harnessDrops = map[string]int{}
	appendLeft = map[string]int{}
}

// badPostcardRegion: a postcard test the replay does not run.
const badPostcardRegion = "a postcard region the control plane refuses to install (not a power of two of slots, or " +
	"crossing a 4 GiB boundary)"

// postcards counts the postcard outcomes TestSTFTranslator compared.
var postcards map[string]int

var (
	pcEventRE    = regexp.MustCompile(`postcard_events\.count\(([012])\);`)
	pcEvictionRE = regexp.MustCompile(`postcard_evictions\.count\(`)
	pcCacheRE    = regexp.MustCompile(`^\[AssignmentStatement\]: md\.cache = cache_index\.get\(.*\| Computed: md\.cache = (\d+);`)
)

// switchPostcard is what the switch did with the test's postcard,
// from P4Testgen's trace: the postcard_events index it counted
// ("held", "complete", "bad hop") or "evicted" when it also counted an
// eviction, "" when the postcard never reached the egress's cache; and
// the cache cell it read (P4Testgen computes every Hash as 0).
func switchPostcard(tc *stf.Test) (outcome string, cell int, read bool) {
	for _, l := range tc.Trace {
		if m := pcCacheRE.FindStringSubmatch(l); m != nil {
			cell, _ = strconv.Atoi(m[1])
			read = true
		}
		if pcEvictionRE.MatchString(l) {
			outcome = "evicted"
		}
		if m := pcEventRE.FindStringSubmatch(l); m != nil && outcome != "evicted" {
			outcome = [...]string{"held", "complete", "bad hop"}[m[1][0]-'0']
		}
	}
	return outcome, cell, read
}

// postcardModel replays a postcard that reaches the collector's egress.
// The twin's postcard table is the postcard_region entry (none: no
// table, and both refuse the postcard, the switch counting it with the
// bad hops), its cache the one
// the switch keeps in registers: the cell the test sets (pc_key, pc_mask,
// pc_hop0..4 at the index the packet reads) goes into the twin's slot for
// the postcard's key (HoldPostcards), since the switch and the twin index
// the cache by the same CRC32 of the key while P4Testgen computes the
// hash as 0. A bitmap of 0 is an empty cell on both: the switch tells a
// known flow by its key and the twin by its valid flag, and either way the
// postcard starts a new record. The twin's decision (held, complete,
// refused hop, eviction) must be the switch's in the trace, and a record
// it writes is the switch's WRITE, sent only with an rdma_conn entry.
func postcardModel(tc *stf.Test, coll, port uint64, r *dtawire.Report) ([]stf.Output, string, error) {
	pr := dtamem.PostcardRegion{Slots: 1, Hops: PostcardHops, Cache: PostcardCache}
	regions := dtamem.Regions{}
	for i := range tc.Adds {
		e := &tc.Adds[i]
		if k, _ := e.Key("collector"); e.Table == "Egress.postcard_region" && k.Uint() == coll {
			regions.Postcards = &pr
			pr.Addr = e.Uint("base_hi")<<32 | e.Uint("base_lo")
			pr.RKey = uint32(e.Uint("rkey"))
			pr.Slots = e.Uint("slot_mask") + 1
			if (region{pr.Addr, pr.RKey, pr.Slots, RecordLen}).check("postcard_region") != nil {
				return nil, badPostcardRegion, nil
			}
		}
	}
	c := twinConn(tc, coll)
	conn := c
	if conn == nil {
		conn = dtatranslator.NewConn(dtamem.Endpoint{}, dtamem.Endpoint{}, 0)
	}
	tr, err := dtatranslator.NewTranslator(conn, regions)
	if err != nil {
		return nil, "", err
	}
	tr.Now = func() int64 { return 0 }
	tr.DropEvicted = true // the switch's way (translator.p4's header says why)
	want, cell, read := switchPostcard(tc)
	if read && want == "" {
		return nil, "", fmt.Errorf("the trace reads postcard cache cell %d but counts no outcome: switchPostcard's patterns "+
			"no longer match the program", cell)
	}
	var held dtatranslator.PostcardFlow
	set := false
	for _, reg := range tc.Registers {
		if !read || reg.Index != cell || !strings.HasPrefix(reg.Name, "Egress.pc_") {
			continue
		}
		set = true
		v := uint32(reg.Value.Uint64())
		switch name := strings.TrimPrefix(reg.Name, "Egress.pc_"); {
		case name == "key":
			held.Key = v
		case name == "mask":
			held.Mask = v
		case strings.HasPrefix(name, "hop"):
			h, err := strconv.Atoi(strings.TrimPrefix(name, "hop"))
			if err != nil || h >= PostcardHops {
				return nil, "", fmt.Errorf("register %s: no hop of the record", reg.Name)
			}
			held.Hops[h] = v
		default:
			return nil, "", fmt.Errorf("register %s: not a postcard cache register", reg.Name)
		}
	}
	if set {
		if err := tr.HoldPostcards(r.Key, held); err != nil {
			return nil, "", err
		}
	}
	var frames [][]byte
	err = tr.Translate(r, func(f []byte) error {
		frames = append(frames, append([]byte(nil), f...))
		return nil
	})
	got := "held"
	switch {
	case errors.Is(err, dtatranslator.ErrSketchGeometry), errors.Is(err, dtatranslator.ErrNoRegion) && regions.Postcards == nil:
		// A refused hop, or no postcard region (the switch counts both
		// as bad hops).
		got = "bad hop"
	case err != nil:
		return nil, "", err
	case tr.Stats.PostcardsDropped > 0:
		got = "evicted"
	case tr.Stats.PostcardsEvicted > 0:
		return nil, "", fmt.Errorf("the twin wrote the flow it evicted, which DropEvicted says it does not")
	case tr.Stats.PostcardsComplete > 0:
		got = "complete"
	}
	if want != "" && got != want {
		return nil, "", fmt.Errorf("postcard key %#x hop %d on cell {key %#x, bitmap %#x}: the switch's outcome is %s, the twin's %s",
			r.Key, r.Hop, held.Key, held.Mask, want, got)
	}
	if want != "" {
		postcards[want]++
	}
	if c == nil {
		return nil, "", nil // the switch sends nothing without a connection
	}
	var outs []stf.Output
	for _, f := range frames {
		outs = append(outs, rdmaOut(tc, port, dtawire.OpPostcarder, f))
	}
	return outs, "", nil
}

// TestSTFPostcardRecord: the generated set has no test where a record
// completes with an rdma_conn entry (P4Testgen did not combine the two), so
// the record path of postcardModel is replayed here on the set's own
// completing tests given a connection, a postcard table and a PSN, and
// the WRITE it returns must be pipeModel's, the Go model of translator.p4's
// egress that takes the cache index, slot and checksum from the program's
// CRCPolynomials (the cell's hop data made distinct). The ICRC is left out of the comparison, as P4Testgen
// leaves it out (the test's prefix state is not the control plane's);
// TestICRCMatchesSoftware compares it.
func TestSTFPostcardRecord(t *testing.T) {
	tests, err := stf.Load("testdata/p4testgen/translator")
	if err != nil {
		t.Fatal(err)
	}
	resetReplayCounts()
	n := 0
	for _, tc := range tests {
		if out, _, _ := switchPostcard(tc); out != "complete" {
			continue
		}
		tc, rid, ok := copyHarness(tc)
		if !ok {
			t.Fatalf("%s: a completed postcard on the copy port without a replication id", tc.Name)
		}
		tc.FixLengths()
		var np header.Parsed
		if err := header.Decode(tc.In, &np); err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
		var r dtawire.Report
		if err := (dtawire.Format{}).Parse(np.Payload(tc.In), &r); err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
		dst := np.IPv4(tc.In).Dst()
		coll, port := -1, 0
		for _, e := range tc.Adds {
			if k, _ := e.Key("dst_addr"); e.Table == "Ingress.collector" && [4]byte(k.Value()) == dst {
				coll, port = int(e.Uint("idx")), int(e.Uint("port"))
			}
		}
		if coll < 0 {
			t.Fatalf("%s: a completed postcard without a collector entry", tc.Name)
		}
		key := func(v uint64) []stf.Key { return []stf.Key{{Name: "collector", Bits: fmt.Sprintf("%08b", v)}} }
		par := func(name string, v uint64) stf.Param { return stf.Param{Name: name, Value: new(big.Int).SetUint64(v)} }
		tc.Adds = append(slices.Clip(tc.Adds),
			stf.Entry{Table: "Egress.rdma_conn", Keys: key(uint64(coll)), Action: "Egress.set_conn", Params: []stf.Param{
				par("dmac", 0x020000000002), par("smac", 0x020000000001), par("src_addr", 0x0a000001),
				par("dst_addr", 0x0a000002), par("dscp", 26), par("udp_src_port", 0xc001), par("dst_qpn", 0x123),
				par("icrc_write8", 0), par("icrc_atomic", 0), par("icrc_record", 0)}},
			stf.Entry{Table: "Egress.postcard_region", Keys: key(uint64(coll)), Action: "Egress.set_region", Params: []stf.Param{
				par("base_hi", 0x7f), par("base_lo", 0x10000), par("rkey", 0x4242), par("slot_mask", 0x3ff)}})
		// The cell's hops get distinct data (P4Testgen chose zeros; no
		// decision reads them), so the record shows where each lands.
		regs := slices.Clone(tc.Registers)
		for i, reg := range regs {
			if h, ok := strings.CutPrefix(reg.Name, "Egress.pc_hop"); ok {
				regs[i].Value = big.NewInt(0xa0b0c000 + int64(h[0]))
			}
		}
		tc.Registers = append(regs,
			stf.Register{Name: "Egress.psn", Index: coll, Value: big.NewInt(0x1234)},
			stf.Register{Name: "Egress.ack_phase", Index: coll, Value: big.NewInt(5)})

		m := newPipeModel(t, fmt.Sprintf("Egress.rdma_conn.add_with_set_conn(collector=%d, dmac=mac('02:00:00:00:00:02'), "+
			"smac=mac('02:00:00:00:00:01'), src_addr=ip('10.0.0.1'), dst_addr=ip('10.0.0.2'), dscp=26, udp_src_port=49153, "+
			"dst_qpn=0x123, icrc_write8=0x0, icrc_atomic=0x0, icrc_record=0x0)\n"+
			"Egress.postcard_region.add_with_set_region(collector=%d, base_hi=0x7f, base_lo=0x10000, rkey=0x4242, slot_mask=0x3ff)\n"+
			"Egress.psn.mod(REGISTER_INDEX=%d, f1=4660)\nEgress.ack_phase.mod(REGISTER_INDEX=%d, f1=5)\n", coll, coll, coll, coll))
		cell := m.poly(t, "poly_cache").Sum(be32(nil, r.Key)) & (PostcardCache - 1)
		for _, reg := range tc.Registers {
			v := uint32(reg.Value.Uint64())
			switch reg.Name {
			case "Egress.pc_key":
				m.pcKey[cell] = v
			case "Egress.pc_mask":
				m.pcMask[cell] = v
			case "Egress.pc_hop0", "Egress.pc_hop1", "Egress.pc_hop2", "Egress.pc_hop3", "Egress.pc_hop4":
				m.pcHops[cell][reg.Name[len(reg.Name)-1]-'0'] = v
			}
		}
		frames := m.report(t, coll, &r)
		if len(frames) != 1 {
			t.Fatalf("%s: the model of translator.p4 sends %d packets, not a record", tc.Name, len(frames))
		}
		// The report's bytes past its parsed headers follow the packet.
		pcLen, _ := (dtawire.Format{}).Len(dtawire.OpPostcarder)
		parsed := header.EthernetHeaderLen + header.IPv4MinHeaderLen + header.UDPHeaderLen + dtawire.Format{}.BaseLen() + pcLen
		want := append(frames[0], tc.In[parsed:]...)
		care := bytes.Repeat([]byte{0xff}, len(want))
		clear(care[len(frames[0])-4 : len(frames[0])])
		tc.Expect = &stf.Expected{Port: port, Data: want, Care: care, Exact: true}
		outs, skip, err := reportModel(tc, rid)
		if err != nil || skip != "" {
			t.Fatalf("%s: %v %s", tc.Name, err, skip)
		}
		if err := stf.Verify(tc, outs); err != nil {
			t.Errorf("%s: the twin's record is not translator.p4's: %v", tc.Name, err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no generated test completes a postcard record: the set lost the path (see the P4Testgen coverage in the README)")
	}
	t.Logf("%d completed postcard records from the generated set, given a connection: the twin's WRITE is translator.p4's", n)
}

// TestSTFAppendBatch runs the generated tests whose Append completes a
// batch through pipeModel, the Go model of the egress that
// TestICRCMatchesSoftware holds to the software translator, with the
// switch state each test sets: the gathered entries, the list's head and
// the sequence registers (which the replay skips: the twin's list starts
// where the control plane starts it, and P4Testgen sets them anywhere,
// the sequences' wrap included). The model's WRITE must be the one
// P4Testgen expects, under its masks (it does not compute the ICRC).
func TestSTFAppendBatch(t *testing.T) {
	tests, err := stf.Load("testdata/p4testgen/translator")
	if err != nil {
		t.Fatal(err)
	}
	// What the replay leaves to this test (appendLeft), by running its
	// model on every test.
	resetReplayCounts()
	for _, tc := range tests {
		if _, _, err := translatorModel(tc); err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
	}
	n, wraps, beyond, elsewhere := 0, 0, 0, 0
	for _, tc := range tests {
		if tc.Expect != nil && tc.Expect.Odd {
			continue
		}
		tc, _, ok := copyHarness(tc)
		if !ok {
			continue
		}
		tc.FixLengths()
		var np header.Parsed
		if err := header.Decode(tc.In, &np); err != nil || np.L4Proto != header.IPProtoUDP ||
			np.UDP(tc.In).DstPort() != dtawire.ReportPort {
			continue
		}
		var r dtawire.Report
		if err := (dtawire.Format{}).Parse(np.Payload(tc.In), &r); err != nil || r.Opcode != dtawire.OpAppend {
			continue
		}
		coll, list := -1, -1
		for _, e := range tc.Adds {
			if k, _ := e.Key("dst_addr"); e.Table == "Ingress.collector" && [4]byte(k.Value()) == np.IPv4(tc.In).Dst() {
				coll = int(e.Uint("idx"))
			}
		}
		for _, e := range tc.Adds {
			c, _ := e.Key("collector")
			l, _ := e.Key("list_id")
			if e.Table == "Ingress.append_list" && int(c.Uint()) == coll && uint32(l.Uint()) == r.ListID {
				list = int(e.Uint("idx"))
			}
		}
		if coll < 0 || list < 0 {
			continue
		}
		// The script lines the test's entries stand for.
		var script strings.Builder
		fmt.Fprintf(&script, "# -DDTA_APPEND_BATCH=%d\n", DefaultAppendBatch)
		for _, e := range tc.Adds {
			k := func(name string) uint64 { v, _ := e.Key(name); return v.Uint() }
			switch e.Table {
			case "Egress.rdma_conn":
				var dmac, smac header.MAC
				copy(dmac[:], e.Bytes("dmac", 6))
				copy(smac[:], e.Bytes("smac", 6))
				fmt.Fprintf(&script, "Egress.rdma_conn.add_with_set_conn(collector=%d, dmac=mac('%v'), smac=mac('%v'), "+
					"src_addr=ip('%v'), dst_addr=ip('%v'), dscp=%d, udp_src_port=%d, dst_qpn=%#x, icrc_write8=0x0, "+
					"icrc_atomic=0x0, icrc_record=0x0)\n", k("collector"), dmac, smac,
					netip.AddrFrom4([4]byte(e.Bytes("src_addr", 4))), netip.AddrFrom4([4]byte(e.Bytes("dst_addr", 4))),
					e.Uint("dscp"), e.Uint("udp_src_port"), e.Uint("dst_qpn"))
			case "Egress.batch_icrc":
				fmt.Fprintf(&script, "Egress.batch_icrc.add_with_set_batch_icrc(collector=%d, icrc_batch=%#x)\n",
					k("collector"), e.Uint("icrc_batch"))
			case "Egress.list_region":
				fmt.Fprintf(&script, "Egress.list_region.add_with_set_region(list=%d, base_hi=%#x, base_lo=%#x, rkey=%#x, "+
					"slot_mask=%#x)\n", k("list"), e.Uint("base_hi"), e.Uint("base_lo"), e.Uint("rkey"), e.Uint("slot_mask"))
			}
		}
		fmt.Fprintf(&script, "Ingress.append_list.add_with_set_list(collector=%d, list_id=%d, idx=%d)\n", coll, r.ListID, list)
		regs := map[string]uint64{}
		for _, reg := range tc.Registers {
			if reg.Index == list || reg.Index == coll {
				regs[fmt.Sprintf("%s/%d", reg.Name, reg.Index)] = reg.Value.Uint64()
			}
		}
		fill := regs[fmt.Sprintf("Ingress.batch_fill/%d", list)]
		if fill < DefaultAppendBatch-1 || (tc.Expect == nil && fill == DefaultAppendBatch-1) {
			continue // held, or not sent: the replay compares it
		}
		if !strings.Contains(script.String(), "rdma_conn") && fill == DefaultAppendBatch-1 {
			continue // nothing sent, as the replay checks
		}
		if fill >= DefaultAppendBatch && !strings.Contains(script.String(), "rdma_conn") {
			// The entry is held whatever the connection: the model
			// needs one to be built.
			fmt.Fprintf(&script, "Egress.rdma_conn.add_with_set_conn(collector=%d, dmac=mac('02:00:00:00:00:02'), "+
				"smac=mac('02:00:00:00:00:01'), src_addr=ip('10.0.0.1'), dst_addr=ip('10.0.0.2'), dscp=26, udp_src_port=49153, "+
				"dst_qpn=0x123, icrc_write8=0x0, icrc_atomic=0x0, icrc_record=0x0)\n", coll)
		}
		m := newPipeModel(t, script.String())
		if m.batch != DefaultAppendBatch {
			t.Fatalf("%s: the model has batch %d", tc.Name, m.batch)
		}
		if _, ok := m.batchICRC[coll]; !ok {
			m.batchICRC[coll] = 0 // P4Testgen computes the ICRC as 0 or taint: masked
		}
		reg := func(name string, idx int) uint32 { return uint32(regs[fmt.Sprintf("%s/%d", name, idx)]) }
		m.psn[coll], m.ack[coll] = reg("Egress.psn", coll), reg("Egress.ack_phase", coll)
		m.head[list], m.fill[list] = reg("Egress.list_head", list), reg("Ingress.batch_fill", list)
		m.gathered[list] = &[3]uint32{reg("Ingress.batch_data0", list), reg("Ingress.batch_data1", list), reg("Ingress.batch_data2", list)}
		moved := m.head[list] != 0
		for i := range m.seqs {
			name := "Egress." + seqRegister(i)
			m.seqs[i][list] = reg(name, list)
			if s := int32(reg(name, list)); s < 0 && s >= -DefaultAppendBatch {
				wraps++
			}
			moved = moved || m.seqs[i][list] != batchSeqStart(DefaultAppendBatch, i)
		}
		if moved && fill == DefaultAppendBatch-1 {
			elsewhere++
		}
		out := m.report(t, coll, &r)
		if fill >= DefaultAppendBatch {
			// A fill the software translator's list cannot have: the
			// replay leaves it to this model, which holds the entry.
			if err := stf.Verify(tc, nil); len(out) != 0 || err != nil {
				t.Errorf("%s: batch_fill %d: the model sends %d packets (%v)", tc.Name, fill, len(out), err)
			}
			beyond++
			continue
		}
		if len(out) != 1 {
			t.Fatalf("%s: the model sends %d packets for a completed batch", tc.Name, len(out))
		}
		// A Tofino cannot cut a frame: the report's unparsed bytes follow.
		frame := rdmaOut(tc, 0, dtawire.OpAppend, out[0]).Frame
		if err := tc.Expect.Match(tc.Expect.Port, frame); err != nil {
			t.Errorf("%s: the model's batch WRITE is not the one P4Testgen expects: %v", tc.Name, err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no generated test completes an Append batch with a connection")
	}
	t.Logf("%d generated tests complete an Append batch: the model's WRITE is P4Testgen's (%d sequence registers in the wrap, "+
		"%d lists whose ring or sequences start where the control plane never starts them); %d fills past the batch held",
		n, wraps, elsewhere, beyond)
	if want := appendLeft[ringElsewhere]; elsewhere != want {
		t.Errorf("the replay left %d tests of lists started elsewhere to this one, which compared %d", want, elsewhere)
	}
	if want := appendLeft[fillBeyond]; beyond != want {
		t.Errorf("the replay left %d tests of fills past the batch to this one, which compared %d", want, beyond)
	}
}
