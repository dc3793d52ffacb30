package capture

import (
	"encoding/binary"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/afpacket"
	"github.com/rdma-appliance/appliance/dumper/pcap"
)

// The records path is the capture's common case on AF_PACKET: every frame
// of a kernel block that passes the RoCE filter goes to a pcapng file as it
// is (no count to stop at). It writes the Enhanced Packet Blocks straight
// into the writer's buffer in one loop over the block, with the per-QP
// counters, and settles the file's bookkeeping (records, size, write
// errors) once per run of records instead of once per frame: the general
// path's per-frame checks cost as much as the record itself. Frames that
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

// records writes block b's frames, f being the worker's frame view.
func (w *worker) records(b *afpacket.Block, f *dpdk.Frame) {
	sk := w.sink
	snap := w.s.cfg.SnapLen
	rf := w.s.rf
	match := w.s.cfg.RoCE != ""
	var buf []byte
	pos, n := 0, uint64(0) // bytes and records written into buf, not committed
	for b.Next(f) {
		caplen := min(len(f.Data), snap)
		blen := 32 + (caplen+3)&^3
		if f.VLAN != 0 || blen > maxFastRecord || sk.errp.Load() != nil ||
			sk.cur.Packets+n > 0 && (sk.recBytes+int64(pos) >= sk.rotBytes || f.Timestamp-sk.firstTS >= sk.rotAge) {
			w.commitRecords(buf[:pos], n)
			buf, pos, n = nil, 0, 0
			w.frameLocked(f)
			continue
		}
		if pos+blen > len(buf) {
			w.commitRecords(buf[:pos], n)
			buf, pos, n = nil, 0, 0
			var err error
			if sk.errp.Load() == nil {
				if buf, err = sk.w.Tail(recordChunk); err != nil {
					sk.fail(err)
				}
			}
			if sk.errp.Load() != nil {
				w.frameLocked(f) // which counts what it cannot save
				continue
			}
			buf = buf[:recordChunk]
		}
		w.nrecv++
		w.nbytes += uint64(f.WireLen)
		if f.HWTimestamp {
			w.nhw++
		}
		if match && !rf.Match(f.Data, &w.pkt) {
			w.nrej++
			continue
		}
		if sk.cur.Packets+n == 0 {
			sk.firstTS = f.Timestamp
		}
		r := buf[pos : pos+blen : pos+blen]
		p := blen - 4
		binary.LittleEndian.PutUint32(r[p-4:], 0) // the padding, before the data overwrites what it covers
		binary.LittleEndian.PutUint32(r[0:], 6)   // Enhanced Packet Block
		binary.LittleEndian.PutUint32(r[4:], uint32(blen))
		binary.LittleEndian.PutUint32(r[8:], 0) // interface 0
		binary.LittleEndian.PutUint32(r[12:], uint32(uint64(f.Timestamp)>>32))
		binary.LittleEndian.PutUint32(r[16:], uint32(f.Timestamp))
		binary.LittleEndian.PutUint32(r[20:], uint32(caplen))
		binary.LittleEndian.PutUint32(r[24:], uint32(max(f.WireLen, len(f.Data))))
		copy(r[28:p], f.Data[:caplen])
		binary.LittleEndian.PutUint32(r[p:], uint32(blen))
		pos += blen
		n++
		if quickRoCE(f.Data, rf.Port, &w.quick) {
			w.qps.count(&w.quick, f.WireLen)
		}
	}
	w.commitRecords(buf[:pos], n)
}

// commitRecords adds n records written by records, recs, to the file.
func (w *worker) commitRecords(recs []byte, n uint64) {
	if n == 0 {
		return
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
