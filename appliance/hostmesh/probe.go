// Package hostmesh is Hostmesh's agent: on every host of a rail-optimized
// RoCE cluster it probes between the host's own RNICs over one UD QP each,
// reading one-way network latency and host processing delay from the
// completion timestamps without clock synchronization, traces the paths of
// the probes' 5-tuples, and uploads the results to the analyzer (package
// collector/hostmeshanalyzer) in batches. Because RNICs of one host sit on
// different rails, every probe crosses the top tier of the fabric, and
// rotating the UDP source port through the flow label covers every link.
//
// The probing logic is one transport-free Core, driven by two harnesses:
// Agent runs it on verbs devices (any provider: libibverbs or soft RNICs on
// packet ports) with a sender and a receiver loop per RNIC, and SimAgent
// runs it inside the fabric simulator (bench/fabric), where Eval and LabRun
// inject faults and check that the analyzer names them.
package hostmesh

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// ProbeSize is the probe payload: 50 bytes, as in the paper (small probes
// keep the bandwidth overhead under 20 kbit/s per RNIC and the latency
// measurement close to the wire's).
const ProbeSize = 50

// The probe payload, big-endian:
//
//	0   magic "HM"     2
//	2   version 1      1
//	3   kind           1  (1: probe)
//	4   host id        8  the sending agent (foreign probes are refused)
//	12  source RNIC    1  index on the host
//	13  target RNIC    1
//	14  UDP src port   2  the pool port it was sent with
//	16  sequence       8
//	24  T1             8  app post time, ns of the host clock
//	32  pool epoch     4
//	36  reserved      10
//	46  CRC-32C        4  of bytes 0..45
const (
	probeMagic   = 0x484d
	probeVersion = 1
	kindProbe    = 1
)

// Probe is a decoded probe payload.
type Probe struct {
	HostID   uint64
	Src, Dst uint8
	SPort    uint16
	Seq      uint64
	T1       int64
	Epoch    uint32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors of Decode.
var (
	ErrShortProbe = errors.New("hostmesh: probe shorter than 50 bytes")
	ErrNotProbe   = errors.New("hostmesh: not a Hostmesh probe")
	ErrBadCRC     = errors.New("hostmesh: probe checksum mismatch")
)

// Encode writes the probe into b (at least ProbeSize bytes).
func (p *Probe) Encode(b []byte) {
	_ = b[ProbeSize-1]
	binary.BigEndian.PutUint16(b[0:], probeMagic)
	b[2], b[3] = probeVersion, kindProbe
	binary.BigEndian.PutUint64(b[4:], p.HostID)
	b[12], b[13] = p.Src, p.Dst
	binary.BigEndian.PutUint16(b[14:], p.SPort)
	binary.BigEndian.PutUint64(b[16:], p.Seq)
	binary.BigEndian.PutUint64(b[24:], uint64(p.T1))
	binary.BigEndian.PutUint32(b[32:], p.Epoch)
	clear(b[36:46])
	binary.BigEndian.PutUint32(b[46:], crc32.Checksum(b[:46], castagnoli))
}

// Decode parses a probe payload.
func (p *Probe) Decode(b []byte) error {
	if len(b) < ProbeSize {
		return ErrShortProbe
	}
	if binary.BigEndian.Uint16(b) != probeMagic || b[2] != probeVersion || b[3] != kindProbe {
		return ErrNotProbe
	}
	if crc32.Checksum(b[:46], castagnoli) != binary.BigEndian.Uint32(b[46:]) {
		return ErrBadCRC
	}
	p.HostID = binary.BigEndian.Uint64(b[4:])
	p.Src, p.Dst = b[12], b[13]
	p.SPort = binary.BigEndian.Uint16(b[14:])
	p.Seq = binary.BigEndian.Uint64(b[16:])
	p.T1 = int64(binary.BigEndian.Uint64(b[24:]))
	p.Epoch = binary.BigEndian.Uint32(b[32:])
	return nil
}

// Timestamps are a probe's four times (Figure 3 of the paper): T1 the
// application posts the send (host clock), T2 the sender RNIC's send
// completion (RNIC clock), T3 the receiver RNIC's receive completion (RNIC
// clock), T4 the application polls that completion (host clock).
type Timestamps struct{ T1, T2, T3, T4 int64 }

// ErrTimestamps: the timestamps are inconsistent (a clock stepped, or a
// CQ without timestamps).
var ErrTimestamps = errors.New("hostmesh: inconsistent probe timestamps")

// Split turns the four timestamps into the one-way network latency and the
// host processing delay.
//
// T2 and T3 are read from the two RNICs' clocks, which share a time base
// (one host: the RNICs' clocks are kept in step with each other, or the
// soft RNICs read the host's); T1 and T4 from the host CPU's clock. The
// two clock domains are never compared with each other:
//
//	network    = T3 - T2                      (RNIC clock only)
//	processing = (T4 - T1) - (T3 - T2)        (host interval minus RNIC interval)
//
// T4-T1 is the whole probe as the application saw it; taking away the
// time on the wire leaves what the host spent: posting to the sender
// RNIC's doorbell and DMA, and receive handling and polling, i.e. what a
// loaded CPU or PCIe stretches. An offset between the host clock and the
// RNIC clocks cancels in both differences, so no synchronization is
// needed; a rate difference (ppm) only scales the result.
func (ts Timestamps) Split() (network, processing int64, err error) {
	network = ts.T3 - ts.T2
	app := ts.T4 - ts.T1
	if ts.T2 == 0 || ts.T3 == 0 || network < 0 || app < 0 || app < network {
		return 0, 0, ErrTimestamps
	}
	return network, app - network, nil
}
