package capture

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

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

// quickPkt holds the fields quickRoCE reads.
type quickPkt struct {
	dst    roce.GID
	qpn    uint32
	psn    uint32
	op     uint8
	ecn    uint8
	nak    bool
	isRoCE bool
}

// quickRoCE reads the counted fields of frame, or reports that it is not
// RoCEv2 to port.
func quickRoCE(f []byte, port uint16, q *quickPkt) bool {
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
		q.dst = roce.GIDFromIPv4([4]byte(f[l3+16 : l3+20]))
	case 0x86dd:
		if len(f) < l3+40 || f[l3+6] != 17 {
			return false
		}
		l4 = l3 + 40
		q.ecn = f[l3+1] >> 4 & 3
		q.dst = roce.GID(f[l3+24 : l3+40])
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

// qpEntry is one queue pair's counters: written by one worker, read by
// anyone.
type qpEntry struct {
	dst     roce.GID
	qpn     uint32
	next    *qpEntry // another destination with the same QPN
	packets atomic.Uint64
	bytes   atomic.Uint64
	retrans atomic.Uint64
	naks    atomic.Uint64
	cnps    atomic.Uint64
	ecn     atomic.Uint64
	first   uint32 // set before the entry is published
	last    atomic.Uint32
}

// qpTable is a worker's queue pairs. The worker looks entries up without
// a lock (it is the only writer) and takes mu to insert; readers take it
// to walk the map.
type qpTable struct {
	mu sync.RWMutex
	m  map[uint32]*qpEntry
}

func (t *qpTable) count(q *quickPkt, wireLen int) {
	e := t.m[q.qpn]
	for e != nil && e.dst != q.dst {
		e = e.next
	}
	if e == nil {
		e = &qpEntry{dst: q.dst, qpn: q.qpn, first: q.psn}
		e.last.Store(q.psn)
		t.mu.Lock()
		if t.m == nil {
			t.m = map[uint32]*qpEntry{}
		}
		e.next = t.m[q.qpn]
		t.m[q.qpn] = e
		t.mu.Unlock()
	} else if q.op != uint8(roce.OpCNP) && !isResponse[q.op] {
		// A request at or behind the last PSN seen is sent again.
		if roce.ComparePSN(q.psn, e.last.Load()) <= 0 {
			e.retrans.Add(1)
		} else {
			e.last.Store(q.psn)
		}
	}
	e.packets.Add(1)
	e.bytes.Add(uint64(wireLen))
	switch {
	case q.op == uint8(roce.OpCNP):
		e.cnps.Add(1)
	case q.nak:
		e.naks.Add(1)
	}
	if q.ecn == 3 {
		e.ecn.Add(1)
	}
}

// snapshot adds the table's counters to merged.
func (t *qpTable) snapshot(merged map[qpKey]*QPStats) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, head := range t.m {
		for e := head; e != nil; e = e.next {
			k := qpKey{dst: e.dst, qpn: e.qpn}
			m := merged[k]
			if m == nil {
				m = &QPStats{DstGID: e.dst.String(), QPN: e.qpn, FirstPSN: e.first, LastPSN: e.last.Load()}
				merged[k] = m
			} else if last := e.last.Load(); roce.ComparePSN(last, m.LastPSN) > 0 {
				m.LastPSN = last
			}
			m.Packets += e.packets.Load()
			m.Bytes += e.bytes.Load()
			m.Retransmissions += e.retrans.Load()
			m.NAKs += e.naks.Load()
			m.CNPs += e.cnps.Load()
			m.ECNMarked += e.ecn.Load()
		}
	}
}
