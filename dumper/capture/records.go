package capture

import (
	"math"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/afpacket"
	"github.com/rdma-appliance/appliance/dumper/pcap"
)

// The records path is the capture's common case on AF_PACKET: every frame
// of a kernel block that passes the RoCE filter goes to a pcapng file as it
// is (no count to stop at). It writes the Enhanced Packet Blocks straight
// into the writer's buffer, in afpacket's loop over the block
// (Block.WriteEPB) when no RoCE filter decides per frame; the per-QP
// counters read the records back when they are committed
// (qpTable.countRecords), or, when a RoCE filter runs the per-frame loop,
// count each record's bytes as it is written, while the frame is in the
// cache; and the file's bookkeeping (records, size, write
// errors) is settled once per run of records instead of once per frame: the
// general path's per-frame checks cost as much as the record itself. Frames that
// need the general path (a VLAN tag to put back, a file to rotate, a record
// too long for one buffer, a failed file) go through frameLocked, with the
// records before them committed first so the order holds. The files are
// the same as the general path writes (TestRecordsPath).

// recordsPath says whether w's frames may take the records path.
func (s *Session) recordsPath() bool {
	return s.cfg.Output.Format == pcap.FormatPcapNG && s.cfg.Count == 0
}

// recordChunk is how many bytes of records the loop writes before it
// commits them: the writer's flush size, so the buffer is written out as
// often as on the general path.
const recordChunk = 64 << 10

// maxFastRecord is the longest record the loop writes itself (a jumbo
// frame's); longer ones take the general path.
const maxFastRecord = 32 + 9216 + 4

// records writes block b's frames, f being the worker's frame view. The
// loop keeps the counters and the file's limits in locals and goes to the
// sink and the worker only when a run of records ends.
func (w *worker) records(b *afpacket.Block, f *dpdk.Frame) {
	sk := w.sink
	snap := w.s.cfg.SnapLen
	rf := w.s.rf
	match := w.s.cfg.RoCE != ""
	var buf []byte
	pos, n := 0, uint64(0) // bytes and records written into buf, not committed
	sizeLeft, ageLimit := sk.limits()
	nrecv, nbytes, nhw, nrej := w.nrecv, w.nbytes, w.nhw, w.nrej
	for {
		if !match && n+sk.cur.Packets > 0 {
			// The block's writer takes every frame it can up to the
			// next that needs more than a record (a VLAN tag, a full
			// buffer, a limit); the loop below handles that one.
			k, used, wire, hw := b.WriteEPB(buf[pos:], snap, sizeLeft-pos, ageLimit)
			pos += used
			n += uint64(k)
			nrecv += uint64(k)
			nbytes += wire
			nhw += uint64(hw)
		}
		if !b.Next(f) {
			break
		}
		caplen := min(len(f.Data), snap)
		blen := pcap.EPBLen(caplen)
		if f.VLAN != 0 || blen > maxFastRecord || pos >= sizeLeft || f.Timestamp >= ageLimit || pos+blen > len(buf) {
			w.commitRecords(buf[:pos], n, match)
			buf, pos, n = nil, 0, 0
			if f.VLAN == 0 && blen <= maxFastRecord && sk.errp.Load() == nil {
				// Only the buffer was full, or the run ended at a limit
				// that commitRecords moved: take more room.
				sizeLeft, ageLimit = sk.limits()
				if f.Timestamp < ageLimit && sizeLeft > 0 {
					var err error
					if buf, err = sk.w.Tail(recordChunk); err != nil {
						sk.fail(err)
						buf = nil
					} else {
						buf = buf[:recordChunk]
					}
				}
			}
			if buf == nil {
				w.nrecv, w.nbytes, w.nhw, w.nrej = nrecv, nbytes, nhw, nrej
				w.frameLocked(f) // rotates, puts a tag back, or counts what a failed file cannot save
				nrecv, nbytes, nhw, nrej = w.nrecv, w.nbytes, w.nhw, w.nrej
				sizeLeft, ageLimit = sk.limits()
				continue
			}
		}
		nrecv++
		nbytes += uint64(f.WireLen)
		if f.HWTimestamp {
			nhw++
		}
		if match && !rf.Match(f.Data, &w.pkt) {
			nrej++
			continue
		}
		if sk.cur.Packets+n == 0 {
			// The file's first record: from here on its limits count.
			sk.firstTS = f.Timestamp
			sizeLeft, ageLimit = sk.limitsAfterFirst()
		}
		wire := max(f.WireLen, len(f.Data))
		pcap.PutEPB(buf[pos:pos+blen:pos+blen], uint64(f.Timestamp), f.Data[:caplen], wire)
		if match && quickRoCE(f.Data[:caplen], rf.Port, &w.quick) {
			// Counted here, from the bytes the record holds, while the
			// frame is in the cache: commitRecords need not read the
			// records back.
			w.qps.count(&w.quick, wire)
		}
		pos += blen
		n++
	}
	w.nrecv, w.nbytes, w.nhw, w.nrej = nrecv, nbytes, nhw, nrej
	w.commitRecords(buf[:pos], n, match)
}

// commitRecords adds n records written by records, recs, to the file,
// counting them per QP unless records did as it wrote them (counted).
func (w *worker) commitRecords(recs []byte, n uint64, counted bool) {
	if n == 0 {
		return
	}
	if !counted {
		_ = w.qps.countRecords(recs, w.s.rf.Port, &w.quick) // (their bytes were counted as they were written)
	}
	sk := w.sink
	sk.cur.Packets += n
	sk.written += n
	sk.recBytes += int64(len(recs))
	if err := sk.w.Commit(len(recs)); err != nil {
		sk.fail(err)
		w.s.halt("error")
	}
}

// limits returns how many more bytes of records the sink's file takes
// before it rotates and the timestamp from which a frame rotates it: none
// while the file is empty, and -1 bytes once the sink failed (every frame
// then takes the general path, which counts what it cannot save).
func (sk *sink) limits() (sizeLeft int, ageLimit int64) {
	if sk.errp.Load() != nil {
		return -1, math.MinInt64
	}
	if sk.cur.Packets == 0 {
		return math.MaxInt, math.MaxInt64
	}
	return sk.limitsAfterFirst()
}

// limitsAfterFirst is limits for a file that holds a record.
func (sk *sink) limitsAfterFirst() (sizeLeft int, ageLimit int64) {
	sizeLeft = int(max(sk.rotBytes-sk.recBytes, 0))
	ageLimit = int64(math.MaxInt64)
	if sk.rotAge != math.MaxInt64 {
		ageLimit = sk.firstTS + sk.rotAge
	}
	return sizeLeft, ageLimit
}
