package capture

import (
	"encoding/binary"
	"sync"

	"github.com/rdma-appliance/appliance/verbs/roce"
)

// The per-QP counters see every RoCE frame a capture writes, so they read
// only the fields they count, at fixed offsets, instead of parsing the
// frame with verbs/roce (which checks the whole layout and costs as much
// as the rest of the capture path): one optional VLAN tag, IPv4 (any
// header length, no fragments) or IPv6 (UDP as the next header), UDP to
// the RoCE port, the BTH and, for the opcodes that carry one, the AETH.

// aethOff is where each opcode's AETH starts after the BTH, or -1.
var aethOff [256]int8

// isResponse marks the opcodes a responder sends, whose PSNs echo the
// requester's and are not retransmissions.
var isResponse [256]bool

func init() {
	for op := 0; op < 256; op++ {
		info := roce.OpcodeInfo(roce.Opcode(op))
		aethOff[op] = int8(info.Offset(roce.HeaderAETH))
		isResponse[op] = info.Valid && info.IsResponse()
	}
}

// quickPkt holds the fields quickRoCE reads. The destination GID is kept
// as two words (big-endian halves), written and compared whole: built
// byte by byte, the 16-byte compare that follows stalled on store
// forwarding and cost a third of the frame path.
type quickPkt struct {
	dst gidKey
	qpn uint32
	psn uint32
	op  uint8
	ecn uint8
	nak bool
}

// quickRoCE reads the counted fields of frame, or reports that it is not
// RoCEv2 to port.
func quickRoCE(f []byte, port uint16, q *quickPkt) bool {
	if len(f) >= 54 {
		// The common layout first, at constant offsets: untagged IPv4
		// without options or fragments, UDP to the port, the BTH at 42.
		h := (*[54]byte)(f)
		// EtherType IPv4 and version 4 with a 20-byte header in one
		// word; then UDP, no fragment, the port.
		if binary.BigEndian.Uint32(h[12:])&0xffffff00 == 0x08004500 && h[23] == 17 &&
			binary.BigEndian.Uint16(h[20:])&0x3fff == 0 && binary.BigEndian.Uint16(h[36:]) == port {
			q.ecn = h[15] & 3
			q.dst = gidKey{0, 0xffff<<32 | uint64(binary.BigEndian.Uint32(h[30:]))}
			q.op = h[42]
			q.qpn = binary.BigEndian.Uint32(h[46:]) & roce.QPNMask
			q.psn = binary.BigEndian.Uint32(h[50:]) & roce.PSNMask
			q.nak = false
			if a := int(aethOff[q.op]); a >= 0 && len(f) > 54+a {
				q.nak = roce.Syndrome(f[54+a]).IsNAK()
			}
			return true
		}
	}
	return quickRoCEAny(f, port, q)
}

// quickRoCEAny is quickRoCE for every layout it reads.
func quickRoCEAny(f []byte, port uint16, q *quickPkt) bool {
	if len(f) < 14 {
		return false
	}
	off := 12
	et := binary.BigEndian.Uint16(f[off:])
	if et == 0x8100 || et == 0x88a8 {
		off += 4
		if len(f) < off+2 {
			return false
		}
		et = binary.BigEndian.Uint16(f[off:])
	}
	l3 := off + 2
	var l4 int
	switch et {
	case 0x0800:
		if len(f) < l3+20 || f[l3]>>4 != 4 || f[l3+9] != 17 || binary.BigEndian.Uint16(f[l3+6:])&0x3fff != 0 {
			return false
		}
		l4 = l3 + int(f[l3]&0xf)*4
		q.ecn = f[l3+1] & 3
		q.dst = gidKey{0, 0xffff<<32 | uint64(binary.BigEndian.Uint32(f[l3+16:]))}
	case 0x86dd:
		if len(f) < l3+40 || f[l3+6] != 17 {
			return false
		}
		l4 = l3 + 40
		q.ecn = f[l3+1] >> 4 & 3
		q.dst = gidKey{binary.BigEndian.Uint64(f[l3+24:]), binary.BigEndian.Uint64(f[l3+32:])}
	default:
		return false
	}
	bth := l4 + 8
	if len(f) < bth+12 || binary.BigEndian.Uint16(f[l4+2:]) != port {
		return false
	}
	q.op = f[bth]
	q.qpn = binary.BigEndian.Uint32(f[bth+4:]) & roce.QPNMask
	q.psn = binary.BigEndian.Uint32(f[bth+8:]) & roce.PSNMask
	q.nak = false
	if a := aethOff[q.op]; a >= 0 && len(f) > bth+12+int(a) {
		q.nak = roce.Syndrome(f[bth+12+int(a)]).IsNAK()
	}
	return true
}

// qpCounts are one queue pair's counters.
type qpCounts struct {
	packets, bytes, retrans, naks, cnps, ecn uint64
	last                                     uint32
}

// qpEntry is one queue pair: counters the worker updates without
// synchronisation, and a copy of them that publish makes under the
// table's lock for readers.
type qpEntry struct {
	dst   gidKey
	qpn   uint32
	first uint32
	next  *qpEntry // another destination with the same QPN
	live  qpCounts
	dirty bool
	pub   qpCounts // under qpTable.mu
}

// qpTable is a worker's queue pairs. Only the worker touches the map, the
// cache and the live counters; publish copies the counters of the entries
// changed since the last publish for readers, under mu.
type qpTable struct {
	m     map[uint32]*qpEntry
	cache [256]*qpEntry // by QPN and destination, in front of the map
	dirty []*qpEntry

	mu  sync.Mutex
	all []*qpEntry // under mu: every entry, for readers
}

// gidKey is a GID as two big-endian words.
type gidKey [2]uint64

func (k gidKey) gid() roce.GID {
	var g roce.GID
	binary.BigEndian.PutUint64(g[:8], k[0])
	binary.BigEndian.PutUint64(g[8:], k[1])
	return g
}

func cacheSlot(qpn uint32, dst *gidKey) int {
	lo := uint32(dst[1])
	return int((qpn ^ qpn>>8 ^ lo&0xff ^ (lo>>8&0xff)<<3) & 255)
}

// lookupMap finds q's entry past the cache (the map, or a new entry) and
// caches it in slot.
func (t *qpTable) lookupMap(q *quickPkt, slot int) *qpEntry {
	e := t.m[q.qpn]
	for e != nil && e.dst != q.dst {
		e = e.next
	}
	if e == nil {
		e = &qpEntry{dst: q.dst, qpn: q.qpn, first: q.psn}
		e.live.last = q.psn
		if t.m == nil {
			t.m = map[uint32]*qpEntry{}
		}
		e.next = t.m[q.qpn]
		t.m[q.qpn] = e
		t.mu.Lock()
		t.all = append(t.all, e)
		t.mu.Unlock()
	}
	t.cache[slot] = e
	return e
}

// count adds one frame to its queue pair's counters. The cache in front
// of the map is looked up here, not in a function of its own: the lookup
// is too large for the compiler to inline, and a call per frame costs as
// much as the lookup.
func (t *qpTable) count(q *quickPkt, wireLen int) {
	slot := cacheSlot(q.qpn, &q.dst)
	e := t.cache[slot]
	if e == nil || e.qpn != q.qpn || e.dst != q.dst {
		e = t.lookupMap(q, slot)
	}
	c := &e.live
	if c.packets > 0 && q.op != uint8(roce.OpCNP) && !isResponse[q.op] {
		// A request at or behind the last PSN seen is sent again.
		if roce.ComparePSN(q.psn, c.last) <= 0 {
			c.retrans++
		} else {
			c.last = q.psn
		}
	}
	c.packets++
	c.bytes += uint64(wireLen)
	switch {
	case q.op == uint8(roce.OpCNP):
		c.cnps++
	case q.nak:
		c.naks++
	}
	if q.ecn == 3 {
		c.ecn++
	}
	if !e.dirty {
		e.dirty = true
		t.dirty = append(t.dirty, e)
	}
}

// countRecords counts the frames of pcapng Enhanced Packet Blocks that
// the records path or a port wrote (recs holds whole records), reading
// them back from the file buffer, and returns their wire bytes.
func (t *qpTable) countRecords(recs []byte, port uint16, q *quickPkt) (bytes uint64) {
	for off := 0; off+28 <= len(recs); {
		rh := (*[28]byte)(recs[off:])
		blen := int(binary.LittleEndian.Uint32(rh[4:]))
		caplen := int(binary.LittleEndian.Uint32(rh[20:]))
		wire := int(binary.LittleEndian.Uint32(rh[24:]))
		if blen < 32 || blen > len(recs)-off || caplen > blen-32 {
			return bytes // never: the records path or the port wrote them
		}
		f := recs[off+28 : off+28+caplen]
		off += blen
		bytes += uint64(wire)
		if quickRoCE(f, port, q) {
			t.count(q, wire)
		}
	}
	return bytes
}

// publish hands the changed counters to readers.
func (t *qpTable) publish() {
	if len(t.dirty) == 0 {
		return
	}
	t.mu.Lock()
	for _, e := range t.dirty {
		e.pub = e.live
		e.dirty = false
	}
	t.mu.Unlock()
	clear(t.dirty)
	t.dirty = t.dirty[:0]
}

// snapshot adds the table's published counters to merged.
func (t *qpTable) snapshot(merged map[qpKey]*QPStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.all {
		k := qpKey{dst: e.dst.gid(), qpn: e.qpn}
		c := &e.pub
		m := merged[k]
		if m == nil {
			m = &QPStats{DstGID: k.dst.String(), QPN: e.qpn, FirstPSN: e.first, LastPSN: c.last}
			merged[k] = m
		} else if roce.ComparePSN(c.last, m.LastPSN) > 0 {
			m.LastPSN = c.last
		}
		m.Packets += c.packets
		m.Bytes += c.bytes
		m.Retransmissions += c.retrans
		m.NAKs += c.naks
		m.CNPs += c.cnps
		m.ECNMarked += c.ecn
	}
}
