package dtatofino

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// The ICRC of translator.p4's RDMA packets. A packet's ICRC covers (with
// the fields routers change masked) its IPv4 and UDP headers, the BTH and
// what follows. Of these, everything up to the BTH's destination QP is the
// same in every packet of one shape (WRITE of an 8-byte entry, FETCH_ADD,
// WRITE of a postcard record) on one collector's connection: addresses,
// UDP ports, lengths, opcode, partition key, QPN. The CRC is linear, so
// the control plane runs the CRC over that invariant prefix once per
// (collector, shape), and the egress hashes only the 28-48 bytes that
// vary (AckReq and PSN, the RETH or AtomicETH, the payload), starting
// from the prefix's state. A Tofino Hash cannot start from a state given
// at run time; it can hash a 32-bit field first, so the control plane
// installs, in rdma_conn, the four bytes that lead a CRC register from 0
// to that state: hashing them and then the varying bytes with initial
// value 0 gives the ICRC of the whole packet.

// icrcShape is a packet shape translator.p4 sends: its RoCE opcode and the
// payload that makes its lengths (IP_LEN_*, UDP_LEN_*).
type icrcShape struct {
	param  string // set_conn's action parameter
	opcode roce.Opcode
	data   int // WRITE payload bytes (FETCH_ADD: 0)
}

// icrcShapes are the shapes in set_conn's parameter order.
var icrcShapes = [...]icrcShape{
	{"icrc_write8", roce.RCWriteOnly, EntryLen},
	{"icrc_atomic", roce.RCFetchAdd, 0},
	{"icrc_record", roce.RCWriteOnly, RecordLen},
}

// batchShape is the WRITE of an Append batch of b entries (builds with
// -DDTA_APPEND_BATCH=b, b > 1), whose prefix state batch_icrc installs.
func batchShape(b int) icrcShape {
	return icrcShape{"icrc_batch", roce.RCWriteOnly, b * dtamem.AppendEntryLen}
}

// roceBuilder is the builder of the packets translator.p4 sends to
// collector c (what rdma_conn's set_conn writes), but for the MACs, which
// the ICRC does not cover: DF, TTL 64, IP ID 0, the default partition
// key, no migration request, the UDP source port udpSrcPort gives, the
// translator's DSCP.
func (t *Translator) roceBuilder(c *Collector) roce.Builder {
	return roce.Builder{
		SrcGID: roce.GIDFromAddr(t.IP), DstGID: roce.GIDFromAddr(c.IP),
		TrafficClass: t.DSCP << 2, HopLimit: roce.DefaultHopLimit, DontFragment: true,
		SrcPort: t.udpSrcPort(c), PKey: roce.DefaultPKey, DestQP: c.QPN,
	}
}

// icrcPrefixes are the values of set_conn's icrc_write8, icrc_atomic and
// icrc_record for collector c.
func (t *Translator) icrcPrefixes(c *Collector) [len(icrcShapes)]uint32 {
	var out [len(icrcShapes)]uint32
	for i, sh := range icrcShapes {
		out[i] = t.icrcPrefix(c, sh)
	}
	return out
}

// icrcPrefix is the seed of shape sh's packets to collector c: the value
// whose hash leads a CRC register to its state after the invariant
// prefix.
func (t *Translator) icrcPrefix(c *Collector, sh icrcShape) uint32 {
	buf := make([]byte, 256)
	b := t.roceBuilder(c)
	b.Opcode, b.DMALen = sh.opcode, uint32(sh.data)
	n, err := b.Build(buf, make([]byte, sh.data))
	if err != nil {
		panic("dtatofino: building a packet of shape " + sh.param + ": " + err.Error())
	}
	var p roce.Packet
	if err := roce.Parse(buf[:n], &p); err != nil {
		panic("dtatofino: parsing a packet of shape " + sh.param + ": " + err.Error())
	}
	pre, err := roce.NewICRCPrefix(buf[p.Net.L3Off:n])
	if err != nil {
		panic("dtatofino: " + sh.param + ": " + err.Error())
	}
	// The BTH up to the destination QP, its reserved byte masked.
	bth := [8]byte(buf[p.BTHOff : p.BTHOff+8])
	bth[4] = 0xff
	return icrcSeedFor(crc32.Update(uint32(pre), crc32.IEEETable, bth[:]))
}

// icrcSeedFor returns the 32-bit value whose four bytes (most significant
// first, as a P4 hash takes a bit<32> field) lead a reflected CRC-32
// register from 0 to the register of state, a hash/crc32 checksum so far
// (the register inverted). Four zero bytes fed to a reflected CRC
// register r leave r multiplied by x^32; four bytes d fed to register 0
// are four zero bytes fed to register d (little-endian). So the seed is
// the register with four zero bytes taken back out, byte-swapped.
func icrcSeedFor(state uint32) uint32 {
	r := ^state
	for range 4 {
		// One step forward is r' = r>>8 ^ T[r&0xff]; the top byte of
		// T[i] tells i apart (a CRC-32 table's top bytes are a
		// permutation), so the step can be undone.
		i := crcTopByte[r>>24]
		r = (r^crc32.IEEETable[i])<<8 | uint32(i)
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], r)
	return binary.BigEndian.Uint32(b[:])
}

// crcTopByte maps the top byte of crc32.IEEETable[i] back to i.
var crcTopByte = func() (m [256]uint8) {
	for i := range 256 {
		m[crc32.IEEETable[i]>>24] = uint8(i)
	}
	return m
}()

// ackPhase is ack_phase's value for a connection whose next PSN is psn:
// the previous PSN mod 64, which the next packet's update turns into 64
// (bit 6: the packet asks for an ACK) when psn is a multiple of 64.
func ackPhase(psn uint32) uint32 { return (psn - 1) & 63 }
