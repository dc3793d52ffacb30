package hawkeyewire

// Report packets. The switches' CPU pollers (the simulator's, and the
// Tofino switch CPU's in p4/hawkeyetofino) price a report as this binary
// layout puts it on the wire, record by record, so a report's Bytes and
// Packets are what a collection costs whoever made it:
//
//	frame    Ethernet 14, IPv4 20, UDP 8, report header 8, records, FCS 4
//	header   switch id 2, event 1, flags 1 (bit 0: truncated), records 2, sequence 2
//	epoch    kind 1, epoch id 4, start (48-bit ns) 6, pad 1            = 12
//	port     kind 1, port 2, packets 4, paused 4, qdepth sum 8,
//	         pause frames 4, paused-now 1, pause left (ns) 4,
//	         pause frames sent 4                                      = 32
//	meter    kind 1, in 2, out 2, bytes 8                             = 13
//	flow     kind 1, 5-tuple 13, in 2, out 2, packets 4,
//	         qdepth sum 8, paused 4                                   = 34
//	evicted  a flow record and the epoch id 4                         = 38
//
// Records never straddle packets; a packet whose first record is not an
// epoch record repeats the current epoch record, so each packet can be
// read alone. A packet holds at most MTU - 36 bytes of records (IPv4,
// UDP and the report header count against the MTU).
const (
	ReportOverhead   = 14 + 20 + 8 + ReportHeaderLen + 4
	ReportHeaderLen  = 8
	EpochRecordLen   = 12
	PortRecordLen    = 32
	MeterRecordLen   = 13
	FlowRecordLen    = 34
	EvictedRecordLen = 38
)

// Packer counts report packets as records are added.
type Packer struct {
	// Room is the record bytes a packet holds (the MTU less 36); Max the
	// packets allowed (0: any).
	Room, Max int

	used      int // in the current packet
	pkts      int
	bytes     int
	inEpoch   bool
	truncated bool
}

// NewPacker packs records into report packets of mtu IP bytes, at most
// maxPackets of them (0: any).
func NewPacker(mtu, maxPackets int) Packer {
	return Packer{Room: mtu - 20 - 8 - ReportHeaderLen, Max: maxPackets}
}

// Add places a record of n bytes, reporting false (and marking the
// report truncated) when the packet budget is spent.
func (k *Packer) Add(n int) bool {
	if k.truncated {
		return false
	}
	if k.pkts == 0 || k.used+n > k.Room {
		if k.Max > 0 && k.pkts == k.Max {
			k.truncated = true
			return false
		}
		k.Flush()
		k.pkts++
		k.used = 0
		if k.inEpoch && n != EpochRecordLen {
			k.used = EpochRecordLen
		}
	}
	k.used += n
	return true
}

// Flush adds the current packet's frame bytes (padded to MinFrame).
func (k *Packer) Flush() {
	if k.pkts > 0 && k.used > 0 {
		k.bytes += max(ReportOverhead+k.used, MinFrame)
		k.used = 0
	}
}

// Epoch starts an epoch's records.
func (k *Packer) Epoch() bool {
	k.inEpoch = false
	ok := k.Add(EpochRecordLen)
	k.inEpoch = ok
	return ok
}

// EndEpochs ends the epochs' records: what follows (evicted flows) does
// not repeat an epoch record.
func (k *Packer) EndEpochs() { k.inEpoch = false }

// Bytes and Packets are what the records added so far cost (after
// Flush); Truncated says a record did not fit the packet budget.
func (k *Packer) Bytes() int      { return k.bytes }
func (k *Packer) Packets() int    { return k.pkts }
func (k *Packer) Truncated() bool { return k.truncated }

// ReportBytes is what report r costs on the wire in this layout, in
// report packets of mtu IP bytes: an evaluation that keeps only some of a
// report's records (port-level or flow-level telemetry alone) prices what
// is left with it.
func ReportBytes(r SwitchReport, mtu int) (bytes, packets int) {
	k := NewPacker(mtu, 0)
	for _, e := range r.Epochs {
		k.Epoch()
		for range e.Ports {
			k.Add(PortRecordLen)
		}
		for range e.Meters {
			k.Add(MeterRecordLen)
		}
		for range e.Flows {
			k.Add(FlowRecordLen)
		}
	}
	k.EndEpochs()
	for range r.Evicted {
		k.Add(EvictedRecordLen)
	}
	k.Flush()
	return k.bytes, k.pkts
}

// PackedBytes is what n records of size bytes each cost on the wire in
// report packets of mtu IP bytes with this layout's framing: other
// systems' records (a baseline's per-flow telemetry) priced alike.
func PackedBytes(n, size, mtu int) (bytes, packets int) {
	k := NewPacker(mtu, 0)
	for range n {
		k.Add(size)
	}
	k.Flush()
	return k.bytes, k.pkts
}
