package dtatofino

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/p4/internal/p4test"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// pipeConn is rdma_conn's entry for a collector, as the script installs it.
type pipeConn struct {
	dmac, smac header.MAC
	src, dst   [4]byte
	dscp       uint8
	sport      uint16
	qpn        uint32
	icrc       [len(icrcShapes)]uint32
}

// pipeRegion is a set_region entry.
type pipeRegion struct{ hi, lo, rkey, mask uint32 }

// pipeModel is a model of translator.p4's egress for reports that reach
// it: what the tables the script fills, the registers and the hashes the
// program declares make of a report, packet by packet. The control plane
// values come from the script's text (set_conn, set_region, the register
// initial values), the hashes are the CRCPolynomials of translator.p4 over
// the field lists TestICRCFieldLists holds the source to.
type pipeModel struct {
	ps *p4test.Source
	// batch is the build's Append batch B (-DDTA_APPEND_BATCH).
	batch int
	conns map[int]pipeConn
	// batchICRC is batch_icrc's prefix state per collector (B > 1).
	batchICRC map[int]uint32
	regions   map[string]map[int]pipeRegion // table -> collector or list index
	lists     map[[2]uint32]int             // (collector, list id) -> list index
	psn       map[int]uint32
	ack       map[int]uint32
	head      map[int]uint32
	seq       map[int]uint32
	// seqs[i] is list_seq<i>, the sequence of the last batch's entry i
	// (seqs[0] is list_seq); fill and gathered are the ingress's
	// batch_fill and batch_data<i> (B > 1).
	seqs     [4]map[int]uint32
	fill     map[int]uint32
	gathered map[int]*[3]uint32
	pcKey    [PostcardCache]uint32
	pcMask   [PostcardCache]uint32
	pcHops   [PostcardCache][PostcardHops]uint32
	// Sketch-Merge, in the build with -DDTA_SKETCH_MERGE: the ingress's
	// sketch and sketch_reporter entries and its sketch_next, sketch_mask
	// and sketch_c<i> registers; the egress's sketch_region.
	sketch     bool
	sketches   map[[2]uint32]pipeSketch         // (collector, sketch id)
	sketchReps map[[3]uint32]pipeSketchReporter // (collector, sketch id, reporter id)
	skNext     map[int]uint32
	skMask     [SketchCells]uint32
	skCount    [SketchCells][SketchRows]uint32
}

// pipeSketch is a sketch's set_sketch entry (the column's ternary mask,
// its first cell, its last column) and its sketch_region.
type pipeSketch struct {
	kind       uint8
	columnMask uint32
	base, last uint32
	region     pipeRegion
}

// pipeSketchReporter is a set_sketch_reporter entry.
type pipeSketchReporter struct{ slot, bit, rest uint32 }

var (
	setConnRE = regexp.MustCompile(`rdma_conn\.add_with_set_conn\(collector=(\d+), dmac=mac\('([^']+)'\), smac=mac\('([^']+)'\), ` +
		`src_addr=ip\('([^']+)'\), dst_addr=ip\('([^']+)'\), dscp=(\d+), udp_src_port=(\d+), dst_qpn=(0x[0-9a-f]+), ` +
		`icrc_write8=(0x[0-9a-f]+), icrc_atomic=(0x[0-9a-f]+), icrc_record=(0x[0-9a-f]+)\)`)
	setRegionRE = regexp.MustCompile(`Egress\.(\w+_region)\.add_with_set_region\((?:collector|list)=(\d+), base_hi=(0x[0-9a-f]+), ` +
		`base_lo=(0x[0-9a-f]+), rkey=(0x[0-9a-f]+), slot_mask=(0x[0-9a-f]+)\)`)
	setListRE   = regexp.MustCompile(`append_list\.add_with_set_list\(collector=(\d+), list_id=(\d+), idx=(\d+)\)`)
	registerRE  = regexp.MustCompile(`(?:Ingress|Egress)\.(psn|ack_phase|list_head|list_seq\d?|batch_fill|sketch_next)\.mod\(REGISTER_INDEX=(\d+), f1=(\d+)\)`)
	setSketchRE = regexp.MustCompile(`Ingress\.sketch\.add_with_set_sketch\(collector=(\d+), sketch_id=(\d+), kind=(\d+), column=0, ` +
		`column_mask=(0x[0-9a-f]+), MATCH_PRIORITY=0, base=(\d+), last=(\d+)\)`)
	sketchRegionRE = regexp.MustCompile(`sketch_region\.add_with_set_region\(collector=(\d+), sketch_id=(\d+), base_hi=(0x[0-9a-f]+), ` +
		`base_lo=(0x[0-9a-f]+), rkey=(0x[0-9a-f]+), slot_mask=(0x[0-9a-f]+)\)`)
	sketchReporterRE = regexp.MustCompile(`sketch_reporter\.add_with_set_sketch_reporter\(collector=(\d+), sketch_id=(\d+), ` +
		`reporter_id=(\d+), slot=(\d+), bit_of=(0x[0-9a-f]+), rest=(0x[0-9a-f]+)\)`)
	batchICRCRE  = regexp.MustCompile(`batch_icrc\.add_with_set_batch_icrc\(collector=(\d+), icrc_batch=(0x[0-9a-f]+)\)`)
	batchBuildRE = regexp.MustCompile(`-DDTA_APPEND_BATCH=(\d+)`)
)

// newPipeModel is the model of the build the script loads: the Append
// batch its header names (the default build's when it names none).
func newPipeModel(t *testing.T, script string) *pipeModel {
	t.Helper()
	m := &pipeModel{ps: p4test.Parse(t, translatorP4), conns: map[int]pipeConn{}, batchICRC: map[int]uint32{},
		regions: map[string]map[int]pipeRegion{}, lists: map[[2]uint32]int{}, psn: map[int]uint32{}, ack: map[int]uint32{},
		head: map[int]uint32{}, seq: map[int]uint32{}, fill: map[int]uint32{}, gathered: map[int]*[3]uint32{},
		sketches: map[[2]uint32]pipeSketch{}, sketchReps: map[[3]uint32]pipeSketchReporter{}, skNext: map[int]uint32{}}
	m.seqs[0] = m.seq
	for i := 1; i < len(m.seqs); i++ {
		m.seqs[i] = map[int]uint32{}
	}
	num := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("script: %q: %v", s, err)
		}
		return v
	}
	for _, l := range setConnRE.FindAllStringSubmatch(script, -1) {
		c := pipeConn{dmac: p4test.MAC(t, l[2]), smac: p4test.MAC(t, l[3]), src: netip.MustParseAddr(l[4]).As4(),
			dst: netip.MustParseAddr(l[5]).As4(), dscp: uint8(num(l[6])), sport: uint16(num(l[7])), qpn: uint32(num(l[8]))}
		for i := range c.icrc {
			c.icrc[i] = uint32(num(l[9+i]))
		}
		m.conns[int(num(l[1]))] = c
	}
	for _, l := range setRegionRE.FindAllStringSubmatch(script, -1) {
		if m.regions[l[1]] == nil {
			m.regions[l[1]] = map[int]pipeRegion{}
		}
		m.regions[l[1]][int(num(l[2]))] = pipeRegion{uint32(num(l[3])), uint32(num(l[4])), uint32(num(l[5])), uint32(num(l[6]))}
	}
	for _, l := range setListRE.FindAllStringSubmatch(script, -1) {
		m.lists[[2]uint32{uint32(num(l[1])), uint32(num(l[2]))}] = int(num(l[3]))
	}
	m.batch = DefaultAppendBatch
	if b := batchBuildRE.FindStringSubmatch(script); b != nil {
		m.batch = int(num(b[1]))
	}
	for _, l := range batchICRCRE.FindAllStringSubmatch(script, -1) {
		m.batchICRC[int(num(l[1]))] = uint32(num(l[2]))
	}
	m.sketch = strings.Contains(script, "-DDTA_SKETCH_MERGE")
	for _, l := range setSketchRE.FindAllStringSubmatch(script, -1) {
		m.sketches[[2]uint32{uint32(num(l[1])), uint32(num(l[2]))}] = pipeSketch{kind: uint8(num(l[3])),
			columnMask: uint32(num(l[4])), base: uint32(num(l[5])), last: uint32(num(l[6]))}
	}
	for _, l := range sketchRegionRE.FindAllStringSubmatch(script, -1) {
		key := [2]uint32{uint32(num(l[1])), uint32(num(l[2]))}
		k, ok := m.sketches[key]
		if !ok {
			t.Fatalf("script: sketch_region entry for a sketch without a sketch entry: %s", l[0])
		}
		k.region = pipeRegion{uint32(num(l[3])), uint32(num(l[4])), uint32(num(l[5])), uint32(num(l[6]))}
		m.sketches[key] = k
	}
	for _, l := range sketchReporterRE.FindAllStringSubmatch(script, -1) {
		m.sketchReps[[3]uint32{uint32(num(l[1])), uint32(num(l[2])), uint32(num(l[3]))}] = pipeSketchReporter{
			slot: uint32(num(l[4])), bit: uint32(num(l[5])), rest: uint32(num(l[6]))}
	}
	regs := map[string]map[int]uint32{"psn": m.psn, "ack_phase": m.ack, "list_head": m.head, "list_seq": m.seq,
		"list_seq1": m.seqs[1], "list_seq2": m.seqs[2], "list_seq3": m.seqs[3], "batch_fill": m.fill, "sketch_next": m.skNext}
	for _, l := range registerRE.FindAllStringSubmatch(script, -1) {
		i, v := int(num(l[2])), uint32(num(l[3]))
		regs[l[1]][i] = v
	}
	if len(m.conns) == 0 {
		t.Fatal("the script installs no rdma_conn entry the model can read")
	}
	return m
}

func (m *pipeModel) poly(t *testing.T, name string) p4test.CRCPoly {
	p, ok := m.ps.Polys[name]
	if !ok {
		t.Fatalf("%s declares no %s", translatorP4, name)
	}
	return p
}

func be32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

// report runs one report for collector coll through the model and returns
// the RDMA packets the switch sends, in order (the multicast copies of a
// Key-Write or Key-Increment by replication id).
func (m *pipeModel) report(t *testing.T, coll int, r *dtawire.Report) [][]byte {
	var out [][]byte
	slot := func(n int, key uint32) uint32 {
		return m.poly(t, fmt.Sprintf("poly_slot%d", n)).Sum([]byte{byte(key >> 24), byte(key >> 16), byte(key >> 8), byte(key), byte(n)})
	}
	checksum := func(key uint32) uint32 { return m.poly(t, "poly_checksum").Sum(be32(nil, key)) }
	switch r.Opcode {
	case dtawire.OpKeyWrite:
		rg, ok := m.regions["key_write_region"][coll]
		if !ok {
			return nil // no region, no WRITE
		}
		for n := range int(r.Redundancy) {
			va := rg.lo + (slot(n, r.Key)&rg.mask)<<3
			out = append(out, m.packet(t, coll, 0, rg.hi, va, rg.rkey, be32(be32(nil, checksum(r.Key)), r.Data32()), 0))
		}
	case dtawire.OpKeyIncrement:
		rg, ok := m.regions["key_increment_region"][coll]
		if !ok {
			return nil
		}
		for n := range int(r.Redundancy) {
			va := rg.lo + (slot(n, r.Key)&rg.mask)<<3
			out = append(out, m.packet(t, coll, 1, rg.hi, va, rg.rkey, nil, r.Counter))
		}
	case dtawire.OpAppend:
		idx, ok := m.lists[[2]uint32{uint32(coll), r.ListID}]
		if !ok {
			return nil
		}
		if m.batch > 1 {
			return m.batchEntry(t, coll, idx, r.Data32())
		}
		rg := m.regions["list_region"][idx]
		head := m.head[idx]
		m.head[idx]++
		if m.seq[idx] == 0xffffffff {
			m.seq[idx] = 1
		} else {
			m.seq[idx]++
		}
		va := rg.lo + (head&rg.mask)<<3
		out = append(out, m.packet(t, coll, 0, rg.hi, va, rg.rkey, be32(be32(nil, r.Data32()), m.seq[idx]), 0))
	case dtawire.OpPostcarder:
		rg, ok := m.regions["postcard_region"][coll]
		if !ok || int(r.Hop) >= PostcardHops {
			return nil // no region: neither cached nor written
		}
		bit := uint32(1) << r.Hop
		rest := uint32(postcardFull) &^ bit
		c := m.poly(t, "poly_cache").Sum(be32(nil, r.Key)) & (PostcardCache - 1)
		old := m.pcKey[c]
		m.pcKey[c] = r.Key
		m.pcHops[c][r.Hop] = r.Data32()
		if old != r.Key {
			m.pcMask[c] = bit
			return nil
		}
		if m.pcMask[c] != rest {
			m.pcMask[c] |= bit
			return nil
		}
		m.pcMask[c] = 0
		s := slot(0, r.Key) & rg.mask
		va := rg.lo + s<<5 - s<<2
		rec := be32(be32(nil, checksum(r.Key)), postcardFull)
		for h := range PostcardHops {
			rec = be32(rec, m.pcHops[c][h])
		}
		out = append(out, m.packet(t, coll, 2, rg.hi, va, rg.rkey, rec, 0))
	case dtawire.OpSketchMerge:
		return m.sketchColumn(t, coll, r)
	}
	return out
}

// sketchColumn is a Sketch-Merge report in the build with
// -DDTA_SKETCH_MERGE (dropped, unknown, without it). The ingress looks the
// sketch up (its kind, a column below its columns: the ternary mask) and
// the reporter, moves the reporter's expected column on when the report
// has it, and, for that column, adds the reporter's bit to the column's
// mask (the last reporter clears it) and merges the counters; the
// column's last report takes the merged counters out (clearing the cells)
// to the egress, which writes them at the column as an 8-byte entry (the
// Key-Write shape: its lengths and ICRC prefix state).
// A report of a reporter whose bit the mask held (a round ahead) is
// dropped after its expected column moved on: the switch's order, which
// the software translator's is not (see the package doc).
func (m *pipeModel) sketchColumn(t *testing.T, coll int, r *dtawire.Report) [][]byte {
	if !m.sketch {
		return nil
	}
	k, ok := m.sketches[[2]uint32{uint32(coll), uint32(r.SketchID)}]
	if !ok || r.Kind != k.kind || r.Column&k.columnMask != 0 || r.NumCounters() != SketchRows {
		return nil
	}
	rep, ok := m.sketchReps[[3]uint32{uint32(coll), uint32(r.SketchID), uint32(r.ReporterID)}]
	if !ok {
		return nil
	}
	col := r.Column & 0xffff
	want := m.skNext[int(rep.slot)]
	if want != col {
		return nil
	}
	if want == k.last {
		m.skNext[int(rep.slot)] = 0
	} else {
		m.skNext[int(rep.slot)] = want + 1
	}
	cell := (k.base + col) & 0xffff
	old := m.skMask[cell]
	if old == rep.rest {
		m.skMask[cell] = 0
	} else {
		m.skMask[cell] = old | rep.bit
	}
	if old&rep.bit != 0 {
		return nil
	}
	complete := old == rep.rest
	cnt := &m.skCount[cell]
	var payload []byte
	for i := range SketchRows {
		v := r.CounterAt(i)
		if k.kind == dtawire.SketchCountMin {
			v += cnt[i]
		} else {
			v = max(v, cnt[i])
		}
		if complete {
			cnt[i] = 0
			payload = be32(payload, v)
		} else {
			cnt[i] = v
		}
	}
	if !complete {
		return nil
	}
	va := k.region.lo + (r.Column&k.region.mask)<<3
	return [][]byte{m.packet(t, coll, 0, k.region.hi, va, k.region.rkey, payload, 0)}
}

// batchEntry is an Append report for list idx in a build with batch B > 1:
// the ingress keeps the data of a batch's first B-1 entries (batch_fill,
// batch_data<i>) and drops the reports; the B-th goes on with them, and
// the egress moves the head by B and each entry's sequence register by B
// (seqStep), and writes the B entries with one WRITE.
func (m *pipeModel) batchEntry(t *testing.T, coll, idx int, data uint32) [][]byte {
	b := uint32(m.batch)
	g := m.gathered[idx]
	if g == nil {
		g = new([3]uint32)
		m.gathered[idx] = g
	}
	pos := m.fill[idx]
	if pos != b-1 {
		// fill_next counts on in its byte; gather<i> keeps the data at
		// place i only (a fill past the batch, which the control plane
		// never sets, keeps none).
		if pos < b-1 {
			g[pos] = data
		}
		m.fill[idx] = (pos + 1) & 0xff
		return nil
	}
	m.fill[idx] = 0
	rg := m.regions["list_region"][idx]
	head := m.head[idx]
	m.head[idx] += b
	var payload []byte
	for i := range b {
		m.seqs[i][idx] = seqStep(m.seqs[i][idx], b)
		d := data
		if i < b-1 {
			d = g[i]
		}
		payload = be32(be32(payload, d), m.seqs[i][idx])
	}
	va := rg.lo + (head&rg.mask)<<3
	return [][]byte{m.packet(t, coll, 3, rg.hi, va, rg.rkey, payload, 0)}
}

// seqStep is translator.p4's seq_next<i> in a build with batch b > 1: the
// sequence b positions on, past 2^32 - 1 to 1. The stateful ALU takes
// 32-bit signed constants, so it tests for the wrap (v > 2^32 - 1 - b)
// with v read as signed: -b <= v < 0.
func seqStep(v, b uint32) uint32 {
	if s := int32(v); s < 0 && s >= -int32(b) {
		return v + b + 1
	}
	return v + b
}

// postcardFull is translator.p4's POSTCARD_FULL (a test checks it).
const postcardFull = 1<<PostcardHops - 1

// packet builds what the egress emits for shape 0 (WRITE of an 8-byte
// entry), 1 (FETCH_ADD of add), 2 (WRITE of a record) or 3 (WRITE of an
// Append batch), taking the PSN and the ACK phase from the collector's
// registers, and the ICRC prefix state from rdma_conn (batch_icrc for
// a batch).
func (m *pipeModel) packet(t *testing.T, coll, shape int, vaHi, vaLo, rkey uint32, payload []byte, add uint64) []byte {
	c, ok := m.conns[coll]
	if !ok {
		t.Fatalf("collector %d has no rdma_conn entry", coll)
	}
	seed := uint32(0)
	if shape < len(c.icrc) {
		seed = c.icrc[shape]
	}
	if shape == 3 {
		if seed, ok = m.batchICRC[coll]; !ok {
			t.Fatalf("collector %d has no batch_icrc entry", coll)
		}
	}
	psn := m.psn[coll]
	m.psn[coll]++
	m.ack[coll] = ackStep(m.ack[coll])
	ack := m.ack[coll] >> 6 & 1
	opcode := byte(roce.RCWriteOnly)
	ipLen, udpLen := m.ps.Consts["IP_LEN_WRITE8"], m.ps.Consts["UDP_LEN_WRITE8"]
	var ext []byte
	switch shape {
	case 0, 2, 3:
		switch shape {
		case 2:
			ipLen, udpLen = m.ps.Consts["IP_LEN_RECORD"], m.ps.Consts["UDP_LEN_RECORD"]
		case 3:
			// IP_LEN_BATCH and UDP_LEN_BATCH (TestICRCFieldLists holds
			// the source to them).
			ipLen, udpLen = uint64(60+8*m.batch), uint64(40+8*m.batch)
		}
		ext = be32(be32(be32(be32(nil, vaHi), vaLo), rkey), uint32(len(payload)))
	case 1:
		opcode = byte(roce.RCFetchAdd)
		ipLen, udpLen = m.ps.Consts["IP_LEN_ATOMIC"], m.ps.Consts["UDP_LEN_ATOMIC"]
		ext = binary.BigEndian.AppendUint64(be32(be32(be32(nil, vaHi), vaLo), rkey), add)
		ext = binary.BigEndian.AppendUint64(ext, 0)
	}
	f := append([]byte(nil), c.dmac[:]...)
	f = append(f, c.smac[:]...)
	f = append(f, 0x08, 0x00)
	ip := []byte{0x45, c.dscp << 2, byte(ipLen >> 8), byte(ipLen), 0, 0, 0x40, 0, 64, header.IPProtoUDP, 0, 0}
	ip = append(append(ip, c.src[:]...), c.dst[:]...)
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	f = append(f, ip...)
	f = binary.BigEndian.AppendUint16(f, c.sport)
	f = binary.BigEndian.AppendUint16(f, roce.UDPPort)
	f = binary.BigEndian.AppendUint16(f, uint16(udpLen))
	f = append(f, 0, 0)
	// BTH: SE, M, pad and TVer 0, the default P_Key, DestQP, AckReq, PSN.
	f = append(f, opcode, 0, 0xff, 0xff, 0, byte(c.qpn>>16), byte(c.qpn>>8), byte(c.qpn), byte(ack<<7),
		byte(psn>>16), byte(psn>>8), byte(psn))
	f = append(append(f, ext...), payload...)
	// The hash's input: the prefix state, then the fields of its list.
	in := be32(nil, seed)
	in = append(in, byte(ack<<7), byte(psn>>16), byte(psn>>8), byte(psn))
	in = append(append(in, ext...), payload...)
	crc := m.poly(t, "poly_icrc").Sum(in)
	return binary.LittleEndian.AppendUint32(f, crc)
}

func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// TestICRCFieldLists holds translator.p4's ICRC hashes to what pipeModel
// hashes: the prefix state of the shape, AckReq, the reserved bits and the
// PSN, the RETH or AtomicETH, the payload. And the polynomial is the
// RoCE ICRC's (hash/crc32's IEEE) with initial value 0.
func TestICRCFieldLists(t *testing.T) {
	src, err := os.ReadFile(translatorP4)
	if err != nil {
		t.Fatal(err)
	}
	space := regexp.MustCompile(`\s+`)
	// The batch's, in the builds with B = 4 and B = 2 (in this order in
	// the source), hashes the entries as batchEntry lays them out.
	want := map[string][]string{
		"write8": {"md.icrc_write8, md.ack[6:6], 7w0, md.psn[23:0], va_hi, md.va_lo, rkey_of, 32w8, hdr.entry.word0, hdr.entry.word1"},
		"atomic": {"md.icrc_atomic, md.ack[6:6], 7w0, md.psn[23:0], va_hi, md.va_lo, rkey_of, hdr.key_increment.counter, 64w0"},
		"record": {"md.icrc_record, md.ack[6:6], 7w0, md.psn[23:0], va_hi, md.va_lo, rkey_of, RECORD_LEN, md.checksum, " +
			"POSTCARD_FULL, md.h0, md.h1, md.h2, md.h3, md.h4"},
		"batch": {
			"md.icrc_batch, md.ack[6:6], 7w0, md.psn[23:0], va_hi, md.va_lo, rkey_of, BATCH_LEN, " +
				"hdr.gathered.d0, md.seq, hdr.gathered.d1, md.seq1, hdr.gathered.d2, md.seq2, hdr.append.data, md.seq3",
			"md.icrc_batch, md.ack[6:6], 7w0, md.psn[23:0], va_hi, md.va_lo, rkey_of, BATCH_LEN, " +
				"hdr.gathered.d0, md.seq, hdr.append.data, md.seq1",
		},
	}
	re := regexp.MustCompile(`icrc_hash_(\w+)\.get\(\{([^}]*)\}\)`)
	got := map[string][]string{}
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		got[m[1]] = append(got[m[1]], strings.TrimSpace(space.ReplaceAllString(m[2], " ")))
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("icrc_hash_%s hashes %q, the model %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d ICRC hashes in %s, the model has %d", len(got), translatorP4, len(want))
	}
	// The batch's lengths and the order of its entries' fields.
	for _, w := range []string{
		`const bit<32> BATCH_LEN\s*= 8 \* DTA_APPEND_BATCH;`,
		`const bit<16> IP_LEN_BATCH\s*= 60 \+ 8 \* DTA_APPEND_BATCH;`,
		`const bit<16> UDP_LEN_BATCH\s*= 40 \+ 8 \* DTA_APPEND_BATCH;`,
		`hdr\.entries\.d0 = hdr\.gathered\.d0;\s*hdr\.entries\.s0 = md\.seq;\s*#if DTA_APPEND_BATCH > 2\s*` +
			`hdr\.entries\.d1 = hdr\.gathered\.d1;\s*hdr\.entries\.s1 = md\.seq1;\s*` +
			`hdr\.entries\.d2 = hdr\.gathered\.d2;\s*hdr\.entries\.s2 = md\.seq2;\s*` +
			`hdr\.entries\.d3 = hdr\.append\.data;\s*hdr\.entries\.s3 = md\.seq3;\s*#else\s*` +
			`hdr\.entries\.d1 = hdr\.append\.data;\s*hdr\.entries\.s1 = md\.seq1;`,
	} {
		if !regexp.MustCompile(w).Match(src) {
			t.Errorf("%s's Append batch is not what the model sends: %q", translatorP4, w)
		}
	}
	// Each hash is chosen by the report's primitive, which drop_dta()
	// invalidates: the choice comes first (P4Testgen's coverage found a
	// version where every shape took the record's hash).
	body := string(src[strings.Index(string(src), "hdr.icrc.setValid();"):])
	for _, w := range []string{
		// The batch's hash, first in the builds that have it.
		`#if DTA_APPEND_BATCH > 1\s*if \(hdr\.append\.isValid\(\)\) \{[^}]*?#if DTA_APPEND_BATCH > 2\s*bit<32> c = icrc_hash_batch\.get` +
			`[^#]*#else\s*bit<32> c = icrc_hash_batch\.get[^#]*#endif[^}]*\}\s*else\s*#endif\s*` +
			// A merged sketch column hashes as an 8-byte entry.
			`if \(hdr\.key_write\.isValid\(\) \|\| hdr\.append\.isValid\(\) \|\| WRITE8_SKETCH\) \{\s*bit<32> c = icrc_hash_write8\.get`,
		`\} else if \(hdr\.key_increment\.isValid\(\)\) \{\s*bit<32> c = icrc_hash_atomic\.get`,
		`\} else \{\s*bit<32> c = icrc_hash_record\.get`,
	} {
		if !regexp.MustCompile(w).MatchString(body) {
			t.Errorf("%s does not choose the ICRC hash as the model does: %q", translatorP4, w)
		}
	}
	if d, h := strings.Index(body, "drop_dta();"), strings.LastIndex(body, "icrc_hash_"); d < 0 || d < h {
		t.Errorf("%s invalidates the report's headers before the ICRC hashes read which one it was", translatorP4)
	}
	ps := p4test.Parse(t, translatorP4)
	p := ps.Polys["poly_icrc"]
	if p != (p4test.CRCPoly{Coeff: 0x04c11db7, Reversed: true, Init: 0, Xor: 0xffffffff}) {
		t.Errorf("poly_icrc is %+v", p)
	}
	if ps.Consts["RECORD_LEN"] != RecordLen || ps.Consts["POSTCARD_FULL"] != postcardFull {
		t.Error("RECORD_LEN or POSTCARD_FULL differ from the model's")
	}
	if SketchColumnLen != EntryLen {
		t.Errorf("a merged sketch column is %d bytes: translator.p4 writes it as an 8-byte entry", SketchColumnLen)
	}
	// The prefix state a seed stands for: hashing the seed from register
	// 0 gives the register after the prefix.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		state := rng.Uint32()
		seed := icrcSeedFor(state)
		if got := crc32.Update(0xffffffff, crc32.IEEETable, be32(nil, seed)); got != state {
			t.Fatalf("seed %#x of state %#x leads to %#x", seed, state, got)
		}
	}
}

// TestICRCMatchesSoftware runs the lab's report mix (Key-Write 3,
// Append 2, Key-Increment 2, Postcarder 1, N = 2, a flow's postcards in a
// row) through pipeModel, with the values the control plane's script
// installs, and through the software translator (translator/dtatranslator)
// with the same collectors, and wants the same RDMA packets byte for byte:
// headers, payload and the ICRC, which the software translator computes
// over the whole packet and the switch from the per-collector prefix. The
// collectors' first PSNs are 1 and 2^24 - 63 (through the wrap) modulo
// 64: the switch asks for an ACK at PSNs that are multiples of 64, the
// software translator every 64th packet of a connection, which agree
// from such a start. It runs each build: Append batches of 1 (the
// default), 2 and 4 entries, the software translator gathering as many
// (it is never told to flush, as the switch has no timer to); and the
// builds with Sketch-Merge (batches of 1 and 4), whose mix adds sketch
// columns from several reporters, interleaved, with duplicates, columns
// out of order and reports of the wrong kind, which neither translator
// writes (no reporter gets a round ahead: the switch and the software
// translator differ there, see the package doc).
func TestICRCMatchesSoftware(t *testing.T) {
	for _, b := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("batch%d", b), func(t *testing.T) { matchSoftware(t, b, false) })
	}
	for _, b := range []int{1, 4} {
		t.Run(fmt.Sprintf("sketch-batch%d", b), func(t *testing.T) { matchSoftware(t, b, true) })
	}
}

// sketchFeed sends a sketch's columns as its reporters would: each in
// order, round after round, interleaved, none a round ahead of the
// slowest.
type sketchFeed struct {
	coll int
	id   uint16
	reg  dtamem.SketchRegion
	pos  []uint64 // per reporter: columns sent
}

// next is a report of the sketch and whether the software translator
// refuses it (a column out of order, the wrong kind); a duplicate of the
// last column is dropped without an error by both.
func (f *sketchFeed) next(rng *rand.Rand) (r dtawire.Report, refused bool) {
	cols := uint64(f.reg.Columns)
	low := slices.Min(f.pos)
	var ok []int
	for i, p := range f.pos {
		if p < low+cols {
			ok = append(ok, i)
		}
	}
	rep := ok[rng.IntN(len(ok))]
	p := f.pos[rep]
	col := p % cols
	kind := f.reg.Kind
	switch w := rng.IntN(100); {
	case w < 7 && p > 0:
		col = (p - 1) % cols // a duplicate
	case w >= 7 && w < 12:
		col = (p + 1) % cols // a gap
		refused = true
	case w >= 12 && w < 15:
		kind ^= 1
		refused = true
	default:
		f.pos[rep]++
	}
	counters := make([]byte, 0, 4*f.reg.Rows)
	for range f.reg.Rows {
		v := rng.Uint32N(1000)
		if f.reg.Kind == dtawire.SketchHyperLogLog {
			v = rng.Uint32N(34)
		}
		counters = be32(counters, v)
	}
	return dtawire.Report{Opcode: dtawire.OpSketchMerge, SketchID: f.id, ReporterID: uint16(rep), Column: uint32(col), Kind: kind,
		Counters: counters}, refused
}

func matchSoftware(t *testing.T, batch int, sketch bool) {
	tr := appendBatch(t, batch)
	if sketch {
		tr = sketchMerge(t, batch)
	}
	tr.Collectors[0].PSN = 1
	tr.Collectors[1].PSN = 1<<24 - 63
	script, err := tr.Script()
	if err != nil {
		t.Fatal(err)
	}
	model := newPipeModel(t, script)
	soft, conns := softTranslators(t, &tr, batch)

	rng := rand.New(rand.NewPCG(1, 1))
	type mixed struct {
		coll    int
		r       dtawire.Report
		refused bool
	}
	var reports []mixed
	add := func(coll int, r dtawire.Report) { reports = append(reports, mixed{coll: coll, r: r}) }
	data := func() []byte { return be32(nil, rng.Uint32()) }
	var feeds []*sketchFeed
	for i, c := range tr.Collectors {
		for id, s := range c.Sketches {
			feeds = append(feeds, &sketchFeed{coll: i, id: id, reg: s, pos: make([]uint64, s.Reporters)})
		}
	}
	slices.SortFunc(feeds, func(a, b *sketchFeed) int { return int(a.id) - int(b.id) })
	weights := 8
	if sketch {
		weights = 10
	}
	for range 1500 {
		key := rng.Uint32N(1 << 20)
		switch w := rng.IntN(weights); {
		case w >= 8:
			f := feeds[rng.IntN(len(feeds))]
			r, refused := f.next(rng)
			reports = append(reports, mixed{coll: f.coll, r: r, refused: refused})
		case w < 3:
			add(0, dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: key, Data: data()})
		case w < 5:
			lists := []struct {
				coll int
				id   uint32
			}{{0, 7}, {0, 3}, {1, 1}}
			l := lists[rng.IntN(len(lists))]
			add(l.coll, dtawire.Report{Opcode: dtawire.OpAppend, ListID: l.id, Data: data()})
		case w < 7:
			add(0, dtawire.Report{Opcode: dtawire.OpKeyIncrement, Redundancy: 2, Key: key, Counter: rng.Uint64N(1 << 40)})
		default:
			for h := range PostcardHops {
				add(1, dtawire.Report{Opcode: dtawire.OpPostcarder, Key: key, Hop: uint8(h), Data: data()})
			}
		}
	}

	if model.batch != batch {
		t.Fatalf("the script loads the build with batch %d, want %d", model.batch, batch)
	}
	var packets, acks, records, batches, wrapped, columns, refused int
	for i, rep := range reports {
		got, err := softTranslate(t, soft, conns, &tr, rep.coll, &rep.r)
		if rep.refused {
			if !errors.Is(err, dtatranslator.ErrColumnOrder) && !errors.Is(err, dtatranslator.ErrSketchGeometry) {
				t.Fatalf("report %d (%v): the software translator took a report it should refuse: %v", i, rep.r.Opcode, err)
			}
			refused++
		} else if err != nil {
			t.Fatalf("report %d (%v): the software translator: %v", i, rep.r.Opcode, err)
		}
		want := model.report(t, rep.coll, &rep.r)
		if len(got) != len(want) {
			t.Fatalf("report %d (%v): the software translator sent %d packets, the switch %d", i, rep.r.Opcode, len(got), len(want))
		}
		for k := range got {
			var p roce.Packet
			if err := roce.Parse(got[k], &p); err != nil {
				t.Fatalf("report %d: %v", i, err)
			}
			if err := p.VerifyICRC(got[k]); err != nil {
				t.Fatalf("report %d: the software packet: %v", i, err)
			}
			if !bytes.Equal(got[k], want[k]) {
				t.Fatalf("report %d (%v) packet %d differs at byte %d:\nsoftware %s\nswitch   %s", i, rep.r.Opcode, k,
					firstDiff(got[k], want[k]), hex.EncodeToString(got[k]), hex.EncodeToString(want[k]))
			}
			packets++
			if p.AckReq {
				acks++
			}
			if p.PSN < 64 && rep.coll == 1 {
				wrapped++
			}
			switch {
			case rep.r.Opcode == dtawire.OpPostcarder:
				records++
			case rep.r.Opcode == dtawire.OpAppend:
				if len(got[k]) != header.EthernetHeaderLen+60+8*batch {
					t.Fatalf("report %d: an Append WRITE of %d bytes, want %d entries", i, len(got[k]), batch)
				}
				batches++
			case rep.r.Opcode == dtawire.OpSketchMerge:
				if len(got[k]) != header.EthernetHeaderLen+60+SketchColumnLen {
					t.Fatalf("report %d: a sketch WRITE of %d bytes, want one column", i, len(got[k]))
				}
				columns++
			}
		}
	}
	if sketch && (columns < 50 || refused < 10) {
		t.Fatalf("%d merged columns written, %d sketch reports refused: the mix misses a case", columns, refused)
	}
	// The mix covered what it is meant to.
	if acks < 10 || records < 50 || wrapped == 0 || batches < 50 {
		t.Fatalf("%d packets, %d asking for an ACK, %d postcard records, %d Append WRITEs of %d, %d after the PSN wrapped: the mix misses a case",
			packets, acks, records, batches, batch, wrapped)
	}
	t.Logf("batch %d: %d reports, %d RDMA packets alike byte for byte (%d asking for ACKs, %d postcard records, %d Append WRITEs of %d entries, "+
		"%d merged sketch columns; %d sketch reports refused by both)",
		batch, len(reports), packets, acks, records, batches, batch, columns, refused)
}

// softTranslators are the software translator's twins of tr's
// collectors, with Append batches of batch: the same connections (first
// PSN, headers) and regions.
func softTranslators(t *testing.T, tr *Translator, batch int) ([]*dtatranslator.Translator, []*dtatranslator.Conn) {
	t.Helper()
	soft := make([]*dtatranslator.Translator, len(tr.Collectors))
	conns := make([]*dtatranslator.Conn, len(tr.Collectors))
	for i := range tr.Collectors {
		c := &tr.Collectors[i]
		local := dtamem.Endpoint{MAC: tr.portByName(c.Port).MAC, GID: roce.GIDFromAddr(tr.IP), QPN: tr.QPN}
		remote := dtamem.Endpoint{MAC: c.MAC, GID: roce.GIDFromAddr(c.IP), QPN: c.QPN}
		conns[i] = dtatranslator.NewConnWith(local, remote, c.PSN,
			dtatranslator.ConnHeaders{UDPSrcPort: c.UDPSrcPort, DSCP: tr.DSCP})
		conns[i].MaxAtomic = 256
		rg := dtamem.Regions{KeyWrite: c.KeyWrite, KeyIncrement: c.KeyIncrement, Lists: c.Lists, Batch: batch, Sketches: c.Sketches}
		if c.Postcards != nil {
			pc := *c.Postcards
			pc.Cache = PostcardCache
			rg.Postcards = &pc
		}
		var err error
		if soft[i], err = dtatranslator.NewTranslator(conns[i], rg); err != nil {
			t.Fatal(err)
		}
	}
	return soft, conns
}

// softTranslate has the software translator of collector coll translate
// r and returns the packets it sent; a Key-Increment that finds the
// atomic window full is sent once the collector has acknowledged what it
// has (the window opens).
func softTranslate(t *testing.T, soft []*dtatranslator.Translator, conns []*dtatranslator.Conn, tr *Translator, coll int,
	r *dtawire.Report) ([][]byte, error) {
	var out [][]byte
	emit := func(f []byte) error {
		out = append(out, append([]byte(nil), f...))
		return nil
	}
	err := soft[coll].Translate(r, emit)
	if errors.Is(err, dtatranslator.ErrAtomicWindow) {
		ackAll(t, conns[coll], tr.Collectors[coll], *tr)
		err = soft[coll].Translate(r, emit)
	}
	return out, err
}

// ackAll has the collector acknowledge every packet the connection sent.
func ackAll(t *testing.T, c *dtatranslator.Conn, coll Collector, tr Translator) {
	t.Helper()
	b := roce.Builder{SrcGID: roce.GIDFromAddr(coll.IP), DstGID: roce.GIDFromAddr(tr.IP), HopLimit: roce.DefaultHopLimit,
		Opcode: roce.RCAck, DestQP: tr.QPN, PSN: (c.PSN() - 1) & roce.PSNMask, Syndrome: roce.ACKSyndrome(31)}
	buf := make([]byte, 128)
	n, err := b.Build(buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	var p roce.Packet
	if err := roce.Parse(buf[:n], &p); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Input(&p, buf[:n]); err != nil {
		t.Fatal(err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func (t *Translator) portByName(name string) *Port {
	for i := range t.Ports {
		if t.Ports[i].Name == name {
			return &t.Ports[i]
		}
	}
	return nil
}

// ackStep is translator.p4's ack_next: the period's next place, whose
// bit 6 is the packet's AckReq.
func ackStep(v uint32) uint32 {
	if v >= 64 {
		return 1
	}
	return v + 1
}

// TestAckPhase: from the value the script installs for a first PSN (and
// a resync writes for the PSN a NAK names), the packets that ask for an
// ACK are those whose PSN is a multiple of 64, through the 24-bit wrap.
func TestAckPhase(t *testing.T) {
	src, err := os.ReadFile(translatorP4)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		`ack_next = \{\s*void apply\(inout bit<8> value, out bit<8> rv\) \{\s*if \(value >= 64\) \{\s*value = 1;\s*\} else \{\s*` +
			`value = value \+ 1;\s*\}\s*rv = value;`,
		`md\.phase = hdr\.bth\.psn\[5:0\] - 1;\s*ack_resync\.execute`,
		`hdr\.bth\.ack_req = md\.ack\[6:6\];`,
	} {
		if !regexp.MustCompile(w).Match(src) {
			t.Errorf("%s's ACK period is not what ackStep and ackPhase model: %q", translatorP4, w)
		}
	}
	for _, first := range []uint32{0, 1, 2, 63, 64, 65, 1000, 1<<24 - 1, 1<<24 - 64, 1<<24 - 63} {
		v := ackPhase(first)
		for k := range uint32(200) {
			psn := (first + k) & roce.PSNMask
			v = ackStep(v)
			if got, want := v>>6&1 == 1, psn%64 == 0; got != want {
				t.Fatalf("first PSN %#x: PSN %#x asks for an ACK: %v, want %v", first, psn, got, want)
			}
		}
	}
}

// TestBatchSequence: the sequence registers of a build with batch b > 1,
// from the values the script installs and stepped as seq_next<i> steps
// them, number each entry as the software translator does
// (dtamem.EntrySeq of its list position), through the wrap past
// 2^32 - 1; and translator.p4's steps are seqStep.
func TestBatchSequence(t *testing.T) {
	src, err := os.ReadFile(translatorP4)
	if err != nil {
		t.Fatal(err)
	}
	step := `void apply\(inout bit<32> value, out bit<32> rv\) \{\s*` +
		`if \(\(int<32>\)value < 0 && \(int<32>\)value >= -DTA_APPEND_BATCH\) \{\s*` +
		`value = value \+ \(DTA_APPEND_BATCH \+ 1\);\s*\} else \{\s*value = value \+ DTA_APPEND_BATCH;\s*\}\s*rv = value;`
	for _, name := range []string{"seq_next", "seq_next1", "seq_next2", "seq_next3"} {
		re := regexp.MustCompile(`\(list_seq\d?\) ` + name + ` = \{\s*` + step)
		if !re.Match(src) {
			t.Errorf("%s's %s is not seqStep", translatorP4, name)
		}
	}
	if !regexp.MustCompile(`value = value \+ DTA_APPEND_BATCH;\s*\}\s*\};\s*Register<bit<32>, list_idx_t>\(LIST_SLOTS, SEQ_START0\) list_seq;`).Match(src) {
		t.Errorf("%s's head_next does not move the head by the batch", translatorP4)
	}
	// The registers' initial values are the script's (the switch's
	// before the script runs, and P4Testgen's).
	for i := range 4 {
		re := fmt.Sprintf(`#define SEQ_START%d \(32w0 - DTA_APPEND_BATCH`, i)
		if i > 0 {
			re += fmt.Sprintf(` \+ %d`, i)
		}
		if !regexp.MustCompile(re + `\)`).Match(src) {
			t.Errorf("%s: SEQ_START%d is not batchSeqStart(B, %d) = 2^32 - B + %d", translatorP4, i, i, i)
		}
		if i > 0 && !regexp.MustCompile(fmt.Sprintf(`\(LIST_SLOTS, SEQ_START%d\) list_seq%d;`, i, i)).Match(src) {
			t.Errorf("%s: list_seq%d does not start at SEQ_START%d", translatorP4, i, i)
		}
	}
	const wrap = 1<<32 - 1
	rng := rand.New(rand.NewPCG(5, 6))
	for _, b := range []int{2, 4} {
		// The script's values: the first batch's entries are 1..b.
		for i := range b {
			if got, want := seqStep(batchSeqStart(b, i), uint32(b)), dtamem.EntrySeq(uint64(i)); got != want {
				t.Errorf("batch %d, entry %d: the first sequence %d, want %d", b, i, got, want)
			}
		}
		// Batches start at multiples of b; the wrap falls anywhere in one.
		var starts []uint64
		for k := uint64(1); k <= 3; k++ {
			for d := uint64(0); d < 12; d++ {
				starts = append(starts, (k*wrap-d)&^uint64(b-1))
			}
		}
		for range 1000 {
			starts = append(starts, rng.Uint64N(1<<40)&^uint64(b-1))
		}
		for _, p := range starts {
			for i := range uint64(b) {
				if got, want := seqStep(dtamem.EntrySeq(p+i), uint32(b)), dtamem.EntrySeq(p+i+uint64(b)); got != want {
					t.Fatalf("batch %d, position %d: the next batch's sequence %d, want %d", b, p+i, got, want)
				}
			}
		}
	}
}

// TestBatchGathering holds translator.p4's ingress to batchEntry: a list's
// place in its batch counts 0..B-1 and wraps, entry i's data is kept at
// place i and read by the batch's last, which alone goes on (as a batch),
// the others ending in the ingress, counted.
func TestBatchGathering(t *testing.T) {
	src, err := os.ReadFile(translatorP4)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		`\(batch_fill\) fill_next = \{\s*void apply\(inout bit<8> value, out bit<8> rv\) \{\s*rv = value;\s*` +
			`if \(value == DTA_APPEND_BATCH - 1\) \{\s*value = 0;\s*\} else \{\s*value = value \+ 1;\s*\}`,
		`\(batch_data0\) gather0 = \{\s*void apply\(inout bit<32> value, out bit<32> rv\) \{\s*if \(md\.fill == 0\) \{\s*` +
			`value = hdr\.append\.data;\s*\}\s*rv = value;`,
		`\(batch_data1\) gather1 = \{\s*void apply\(inout bit<32> value, out bit<32> rv\) \{\s*if \(md\.fill == 1\) \{\s*` +
			`value = hdr\.append\.data;\s*\}\s*rv = value;`,
		`\(batch_data2\) gather2 = \{\s*void apply\(inout bit<32> value, out bit<32> rv\) \{\s*if \(md\.fill == 2\) \{\s*` +
			`value = hdr\.append\.data;\s*\}\s*rv = value;`,
		`md\.fill = fill_next\.execute\(hdr\.bridge\.list\);\s*hdr\.gathered\.d0 = gather0\.execute\(hdr\.bridge\.list\);\s*` +
			`#if DTA_APPEND_BATCH > 2\s*hdr\.gathered\.d1 = gather1\.execute\(hdr\.bridge\.list\);\s*` +
			`hdr\.gathered\.d2 = gather2\.execute\(hdr\.bridge\.list\);\s*#endif\s*` +
			`if \(md\.fill == DTA_APPEND_BATCH - 1\) \{\s*hdr\.bridge\.pkt_type = PKT_BATCH;\s*\} else \{\s*` +
			`append_gathered\.count\(0\);\s*discard\(\);`,
		// The egress parser takes the gathered entries after a batch's
		// bridge header only.
		`transition select\(hdr\.bridge\.pkt_type\) \{\s*PKT_REPORT: parse_report;\s*#if DTA_APPEND_BATCH > 1\s*` +
			`PKT_BATCH: parse_gathered;`,
	} {
		if !regexp.MustCompile(w).Match(src) {
			t.Errorf("%s's Append gathering is not batchEntry's: %q", translatorP4, w)
		}
	}
}

// TestSketchMergeSource holds translator.p4's Sketch-Merge to
// sketchColumn: the reporter's expected column moves on (wrapping after
// the last) only with that column; the column's mask gains the reporter's
// bit and is cleared by the last reporter, whose report is the one that
// goes on; an out-of-order report and a reporter a round ahead are told
// apart by the expected column and the mask before the update; Count-Min
// counters are summed and HyperLogLog ones maxed, the last report taking
// the merged column out and clearing it; the egress writes it at
// base + column x 16.
func TestSketchMergeSource(t *testing.T) {
	src, err := os.ReadFile(translatorP4)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`\(sketch_next\) next_column = \{\s*void apply\(inout bit<16> value, out bit<16> rv\) \{\s*rv = value;\s*` +
			`if \(value == md\.sk_column\) \{\s*if \(value == md\.sk_last\) \{\s*value = 0;\s*\} else \{\s*value = value \+ 1;`,
		`\(sketch_mask\) mask_add = \{\s*void apply\(inout bit<16> value, out bit<16> rv\) \{\s*rv = value;\s*` +
			`if \(value == md\.sk_rest\) \{\s*value = 0;\s*\} else \{\s*value = value \| md\.sk_bit;`,
		`md\.sk_column = hdr\.sketch\.column\[15:0\];\s*(/\*[^*]*\*+([^/*][^*]*\*+)*/\s*)?md\.sk_cell = hdr\.sketch\.column\[15:0\] \+ base;\s*md\.sk_last = last;`,
		`hdr\.sketch\.column\s*: ternary @name\("column"\);`,
		`md\.sk_want = next_column\.execute\(md\.sk_slot\);\s*if \(md\.sk_want != md\.sk_column\) \{\s*md\.sk_event = SK_ORDER;\s*\} else \{\s*` +
			`md\.sk_old = mask_add\.execute\(md\.sk_cell\);\s*sketch_ahead\.apply\(\);\s*` +
			`if \(md\.sk_ahead != 0\) \{\s*md\.sk_event = SK_AHEAD;\s*\} else if \(md\.sk_old == md\.sk_rest\) \{\s*md\.sk_event = SK_COMPLETE;\s*` +
			`if \(md\.sk_kind == SKETCH_COUNT_MIN\) \{\s*hdr\.sketch_col\.c0 = c0_sum_last\.execute\(md\.sk_cell\);\s*` +
			`hdr\.sketch_col\.c1 = c1_sum_last\.execute\(md\.sk_cell\);\s*\} else \{\s*md\.sk_o0 = c0_take\.execute\(md\.sk_cell\);\s*` +
			`md\.sk_o1 = c1_take\.execute\(md\.sk_cell\);\s*sketch_max\(\);\s*\}\s*\} else \{\s*if \(md\.sk_kind == SKETCH_COUNT_MIN\) \{\s*` +
			`c0_sum\.execute\(md\.sk_cell\);\s*c1_sum\.execute\(md\.sk_cell\);\s*` +
			`\} else \{\s*c0_max\.execute\(md\.sk_cell\);\s*c1_max\.execute\(md\.sk_cell\);`,
		`action sketch_and\(\) \{\s*md\.sk_ahead = md\.sk_old & md\.sk_bit;`,
		`sketch_events\.count\(md\.sk_event\);\s*if \(md\.sk_event != SK_COMPLETE\) \{\s*discard\(\);`,
		// The egress: the column is the slot, and the merged column an
		// 8-byte entry, written and hashed as one.
		`if \(hdr\.sketch_col\.isValid\(\)\) \{\s*md\.slot = hdr\.sketch\.column & md\.slot_mask;\s*\} else\s*#endif\s*` +
			`if \(md\.emit == 1 \|\| hdr\.postcard\.isValid\(\)\) \{\s*md\.slot = md\.slot & md\.slot_mask;`,
		`\} else if \(hdr\.sketch_col\.isValid\(\)\) \{\s*hdr\.entry\.setValid\(\);\s*hdr\.entry\.word0 = hdr\.sketch_col\.c0;\s*` +
			`hdr\.entry\.word1 = hdr\.sketch_col\.c1;`,
		`if \(hdr\.key_write\.isValid\(\) \|\| hdr\.append\.isValid\(\) \|\| WRITE8_SKETCH\) \{\s*write8\(\);`,
		`#define WRITE8_SKETCH hdr\.sketch_col\.isValid\(\)\s*#else\s*#define WRITE8_SKETCH false`,
		// Counters only when there are SKETCH_ROWS of them.
		`transition select\(hdr\.sketch\.count\) \{\s*SKETCH_ROWS: parse_sketch_col;`,
	}
	for i := range SketchRows {
		c := fmt.Sprintf(`hdr\.sketch_col\.c%d`, i)
		want = append(want,
			fmt.Sprintf(`c%d_sum = \{\s*void apply\(inout bit<32> value\) \{\s*value = value \+ %s;`, i, c),
			fmt.Sprintf(`c%d_sum_last = \{\s*void apply\(inout bit<32> value, out bit<32> rv\) \{\s*rv = value \+ %s;\s*value = 0;`, i, c),
			fmt.Sprintf(`c%d_max = \{\s*void apply\(inout bit<32> value\) \{\s*if \(%s > value\) \{\s*value = %s;`, i, c, c),
			fmt.Sprintf(`c%d_take = \{\s*void apply\(inout bit<32> value, out bit<32> rv\) \{\s*rv = value;\s*value = 0;`, i),
			fmt.Sprintf(`%s = \(md\.sk_o%d > %s\) \? md\.sk_o%d : %s;`, c, i, c, i, c))
	}
	for _, w := range want {
		if !regexp.MustCompile(w).Match(src) {
			t.Errorf("%s's Sketch-Merge is not sketchColumn's: %q", translatorP4, w)
		}
	}
}

// TestSketchAheadDiffers pins down the one merge difference the package
// doc states: a reporter a round ahead (it sends column 0 again while
// another reporter has not sent it yet) is refused by both translators,
// but the switch has moved its expected column on (sketch_next is read
// before sketch_mask), so the two then disagree on the reporter's next
// columns, and a later column is written by the software translator and
// held by the switch.
func TestSketchAheadDiffers(t *testing.T) {
	tr := sketchMerge(t, 1)
	tr.Collectors[1].Sketches = nil
	tr.Collectors[0].Sketches = map[uint16]dtamem.SketchRegion{
		5: {Addr: 0x7f00_3000_0000, RKey: 0x1237, Kind: dtawire.SketchCountMin, Columns: 4, Rows: SketchRows, Reporters: 2, Group: 1},
	}
	script, err := tr.Script()
	if err != nil {
		t.Fatal(err)
	}
	model := newPipeModel(t, script)
	c := &tr.Collectors[0]
	local := dtamem.Endpoint{MAC: tr.portByName(c.Port).MAC, GID: roce.GIDFromAddr(tr.IP), QPN: tr.QPN}
	remote := dtamem.Endpoint{MAC: c.MAC, GID: roce.GIDFromAddr(c.IP), QPN: c.QPN}
	conn := dtatranslator.NewConnWith(local, remote, c.PSN, dtatranslator.ConnHeaders{UDPSrcPort: c.UDPSrcPort, DSCP: tr.DSCP})
	soft, err := dtatranslator.NewTranslator(conn, dtamem.Regions{Lists: c.Lists, KeyWrite: c.KeyWrite, KeyIncrement: c.KeyIncrement,
		Sketches: c.Sketches})
	if err != nil {
		t.Fatal(err)
	}
	col := func(rep uint16, column uint32) dtawire.Report {
		return dtawire.Report{Opcode: dtawire.OpSketchMerge, SketchID: 5, ReporterID: rep, Column: column,
			Kind: dtawire.SketchCountMin, Counters: be32(be32(nil, 10+column), 20+column)}
	}
	for i, s := range []struct {
		r              dtawire.Report
		softErr        error
		softN, switchN int
	}{
		{r: col(0, 0)}, {r: col(0, 1)}, {r: col(0, 2)}, {r: col(0, 3)},
		// Reporter 0 a round ahead: refused by both.
		{r: col(0, 0), softErr: dtatranslator.ErrSketchAhead},
		// Reporter 1 completes column 0: written by both.
		{r: col(1, 0), softN: 1, switchN: 1},
		// Reporter 0's column 1: out of order for the software translator
		// (it wants column 0), a round ahead for the switch (it wanted 1).
		{r: col(0, 1), softErr: dtatranslator.ErrColumnOrder},
		// Reporter 0's column 0: merged by the software translator,
		// refused by the switch (it wants column 2 now).
		{r: col(0, 0)},
		// Reporter 1 completes columns 1 to 3 of round 1: written by both.
		{r: col(1, 1), softN: 1, switchN: 1}, {r: col(1, 2), softN: 1, switchN: 1}, {r: col(1, 3), softN: 1, switchN: 1},
		// Reporter 1's column 0 of round 2: the software translator holds
		// reporter 0's and writes the column; the switch holds none.
		{r: col(1, 0), softN: 1, switchN: 0},
	} {
		var softN int
		err := soft.Translate(&s.r, func([]byte) error { softN++; return nil })
		if s.softErr == nil && err != nil || !errors.Is(err, s.softErr) {
			t.Fatalf("step %d: the software translator: %v, want %v", i, err, s.softErr)
		}
		if switchN := len(model.report(t, 0, &s.r)); softN != s.softN || switchN != s.switchN {
			t.Fatalf("step %d: software %d packets (want %d), switch %d (want %d)", i, softN, s.softN, switchN, s.switchN)
		}
	}
	if got := model.skNext[0]; got != 2 {
		t.Errorf("the switch expects reporter 0's column %d, want 2", got)
	}
}
