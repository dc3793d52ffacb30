// Package dtawire is Direct Telemetry Access on the wire between reporters
// (switches, or the emulator) and the translator: the reports that switches (reporters) send to UDP port
// 40040 and the ACK/NACK the translator returns on 40044. Neither side owns
// it: the Go translator parses it, the Tofino programs (p4/dtatofino) and
// the reporter emulator write it.
//
// The report formats are the public DTA generators', byte for byte: a
// 3-byte base header {opcode, seqnum, immediate|retransmitable|reserved}
// (or the 2-byte form without seqnum when NACK tracking is compiled out)
// followed by the primitive's header, every field big-endian:
//
//	0x01 Key-Write      redundancy 8 | key 32 | data 32 (wider by configuration)
//	0x02 Append         list id 32   | data 32
//	0x03 Key-Increment  redundancy 8 | key 32 | counter 64
//	0x04 Postcarder     key 32       | hop 8  | data 32
//	0x05 Sketch-Merge   sketch id 16 | reporter id 16 | column 32 | kind 8 | count 8 | count x counter 32
//
// Sketch-Merge has no public format; this one carries one column of a
// reporter's sketch (kind 0 Count-Min, summed; kind 1 HyperLogLog
// registers, maxed) so the translator can merge columns from every
// reporter before writing them.
package dtawire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// UDP ports.
const (
	ReportPort    = 40040 // reports, reporter -> translator
	GeneratorPort = 40041 // the public generators' source port
	AckPort       = 40044 // ACK/NACK, translator -> reporter
)

// Opcode is a report's primitive.
type Opcode uint8

// Primitives.
const (
	OpKeyWrite     Opcode = 0x01
	OpAppend       Opcode = 0x02
	OpKeyIncrement Opcode = 0x03
	OpPostcarder   Opcode = 0x04
	OpSketchMerge  Opcode = 0x05
)

func (o Opcode) String() string {
	switch o {
	case OpKeyWrite:
		return "key-write"
	case OpAppend:
		return "append"
	case OpKeyIncrement:
		return "key-increment"
	case OpPostcarder:
		return "postcarder"
	case OpSketchMerge:
		return "sketch-merge"
	}
	return fmt.Sprintf("opcode(%#02x)", uint8(o))
}

// Sketch kinds of Sketch-Merge.
const (
	SketchCountMin    = 0 // counters summed across reporters
	SketchHyperLogLog = 1 // registers maxed across reporters
)

// Limits.
const (
	// MaxRedundancy bounds N of Key-Write and Key-Increment: the
	// translator emits N RDMA operations per report.
	MaxRedundancy = 8
	// MaxDataWidth bounds Key-Write's data (by configuration).
	MaxDataWidth = 64
	// MaxSketchCounters bounds one Sketch-Merge report's column.
	MaxSketchCounters = 255
)

// Format is the configuration both ends agree on.
type Format struct {
	// NoSeqnum selects the 2-byte base header (NACK tracking compiled
	// out): opcode | immediate|retransmitable|reserved.
	NoSeqnum bool
	// DataWidth is Key-Write's data size in bytes: 4 (the default), or a
	// larger multiple of 4 up to MaxDataWidth.
	DataWidth int
}

// Width is Key-Write's data size in bytes, the default applied.
func (f Format) Width() int {
	if f.DataWidth == 0 {
		return 4
	}
	return f.DataWidth
}

// BaseLen is the base header's length.
func (f Format) BaseLen() int {
	if f.NoSeqnum {
		return 2
	}
	return 3
}

// Validate checks the configuration.
func (f Format) Validate() error {
	if w := f.Width(); w < 4 || w > MaxDataWidth || w%4 != 0 {
		return fmt.Errorf("dta: Key-Write data width %d: a multiple of 4 up to %d", w, MaxDataWidth)
	}
	return nil
}

// Report is a decoded report. Data and Counters alias the frame it was
// parsed from.
type Report struct {
	Opcode          Opcode
	Seq             uint8
	Immediate       bool // the translator writes with immediate: the collector is notified
	Retransmittable bool // the reporter keeps it for a NACK

	Redundancy uint8  // Key-Write, Key-Increment
	Key        uint32 // Key-Write, Key-Increment, Postcarder
	Data       []byte // Key-Write (DataWidth bytes), Append and Postcarder (4 bytes)
	ListID     uint32 // Append
	Counter    uint64 // Key-Increment
	Hop        uint8  // Postcarder

	SketchID   uint16 // Sketch-Merge
	ReporterID uint16
	Column     uint32
	Kind       uint8
	Counters   []byte // count x 4 bytes, big-endian
}

// NumCounters is the number of Sketch-Merge counters.
func (r *Report) NumCounters() int { return len(r.Counters) / 4 }

// CounterAt returns Sketch-Merge counter i.
func (r *Report) CounterAt(i int) uint32 { return binary.BigEndian.Uint32(r.Counters[4*i:]) }

// Data32 is a 4-byte Data as a number.
func (r *Report) Data32() uint32 {
	if len(r.Data) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(r.Data)
}

// Errors Parse returns; callers count drops by them.
var (
	ErrTruncated  = errors.New("dta: report cut short")
	ErrOpcode     = errors.New("dta: unknown opcode")
	ErrRedundancy = errors.New("dta: redundancy out of range")
	ErrSketch     = errors.New("dta: bad sketch-merge header")
)

// Len is the length of the primitive header after the base header, for
// opcodes of fixed length (Sketch-Merge: the header without counters).
func (f Format) Len(op Opcode) (int, error) {
	switch op {
	case OpKeyWrite:
		return 5 + f.Width(), nil
	case OpAppend:
		return 8, nil
	case OpKeyIncrement:
		return 13, nil
	case OpPostcarder:
		return 9, nil
	case OpSketchMerge:
		return 10, nil
	}
	return 0, ErrOpcode
}

// Parse decodes a report from b, the UDP payload, without allocating.
// Bytes after the report (padding to the Ethernet minimum) are ignored.
func (f Format) Parse(b []byte, r *Report) error {
	bl := f.BaseLen()
	if len(b) < bl {
		return ErrTruncated
	}
	*r = Report{Opcode: Opcode(b[0])}
	flags := b[bl-1]
	if !f.NoSeqnum {
		r.Seq = b[1]
	}
	r.Immediate, r.Retransmittable = flags&0x80 != 0, flags&0x40 != 0
	n, err := f.Len(r.Opcode)
	if err != nil {
		return err
	}
	p := b[bl:]
	if len(p) < n {
		return ErrTruncated
	}
	switch r.Opcode {
	case OpKeyWrite, OpKeyIncrement:
		r.Redundancy = p[0]
		if r.Redundancy == 0 || r.Redundancy > MaxRedundancy {
			return ErrRedundancy
		}
		r.Key = binary.BigEndian.Uint32(p[1:5])
		if r.Opcode == OpKeyWrite {
			r.Data = p[5:n:n]
		} else {
			r.Counter = binary.BigEndian.Uint64(p[5:13])
		}
	case OpAppend:
		r.ListID = binary.BigEndian.Uint32(p[0:4])
		r.Data = p[4:8:8]
	case OpPostcarder:
		r.Key = binary.BigEndian.Uint32(p[0:4])
		r.Hop = p[4]
		r.Data = p[5:9:9]
	case OpSketchMerge:
		r.SketchID = binary.BigEndian.Uint16(p[0:2])
		r.ReporterID = binary.BigEndian.Uint16(p[2:4])
		r.Column = binary.BigEndian.Uint32(p[4:8])
		r.Kind = p[8]
		cnt := int(p[9])
		if r.Kind > SketchHyperLogLog || cnt == 0 {
			return ErrSketch
		}
		if len(p) < n+4*cnt {
			return ErrTruncated
		}
		r.Counters = p[n : n+4*cnt : n+4*cnt]
	}
	return nil
}

// EncodedLen is the length Encode writes for r.
func (f Format) EncodedLen(r *Report) (int, error) {
	n, err := f.Len(r.Opcode)
	if err != nil {
		return 0, err
	}
	if r.Opcode == OpSketchMerge {
		n += len(r.Counters)
	}
	return f.BaseLen() + n, nil
}

// Encode writes r into b and returns its length: what a reporter sends.
func (f Format) Encode(b []byte, r *Report) (int, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	total, err := f.EncodedLen(r)
	if err != nil {
		return 0, err
	}
	if len(b) < total {
		return 0, ErrTruncated
	}
	b[0] = byte(r.Opcode)
	var flags byte
	if r.Immediate {
		flags |= 0x80
	}
	if r.Retransmittable {
		flags |= 0x40
	}
	bl := f.BaseLen()
	if !f.NoSeqnum {
		b[1] = r.Seq
	}
	b[bl-1] = flags
	p := b[bl:total]
	clear(p)
	switch r.Opcode {
	case OpKeyWrite, OpKeyIncrement:
		if r.Redundancy == 0 || r.Redundancy > MaxRedundancy {
			return 0, ErrRedundancy
		}
		p[0] = r.Redundancy
		binary.BigEndian.PutUint32(p[1:5], r.Key)
		if r.Opcode == OpKeyWrite {
			copy(p[5:], r.Data)
		} else {
			binary.BigEndian.PutUint64(p[5:13], r.Counter)
		}
	case OpAppend:
		binary.BigEndian.PutUint32(p[0:4], r.ListID)
		copy(p[4:8], r.Data)
	case OpPostcarder:
		binary.BigEndian.PutUint32(p[0:4], r.Key)
		p[4] = r.Hop
		copy(p[5:9], r.Data)
	case OpSketchMerge:
		cnt := len(r.Counters) / 4
		if r.Kind > SketchHyperLogLog || cnt == 0 || cnt > MaxSketchCounters || len(r.Counters)%4 != 0 {
			return 0, ErrSketch
		}
		binary.BigEndian.PutUint16(p[0:2], r.SketchID)
		binary.BigEndian.PutUint16(p[2:4], r.ReporterID)
		binary.BigEndian.PutUint32(p[4:8], r.Column)
		p[8], p[9] = r.Kind, byte(cnt)
		copy(p[10:], r.Counters)
	}
	return total, nil
}

// Ack is the translator's answer to a retransmittable report: seqnum 8 |
// nack 1 | reserved 7, to UDP port 40044 of the reporter. The first
// reserved bit is ours: a congestion notice (the translator is metering
// its RDMA rate and dropping or queueing reports), which the public
// reporters ignore as reserved.
type Ack struct {
	Seq       uint8
	NACK      bool // the translator missed reports before Seq: resend from Seq
	Congested bool // slow down
}

// Ack flags beyond the public format: bit 6 of the second byte (the
// first reserved bit) tells the reporter the translator is congested.
const ackCongested = 0x40

// AckLen is an Ack's length on the wire.
const AckLen = 2

// Encode writes the ACK.
func (a Ack) Encode(b []byte) int {
	b[0] = a.Seq
	b[1] = 0
	if a.NACK {
		b[1] |= 0x80
	}
	if a.Congested {
		b[1] |= ackCongested
	}
	return AckLen
}

// ParseAck reads an ACK/NACK.
func ParseAck(b []byte) (Ack, error) {
	if len(b) < AckLen {
		return Ack{}, ErrTruncated
	}
	return Ack{Seq: b[0], NACK: b[1]&0x80 != 0, Congested: b[1]&ackCongested != 0}, nil
}
