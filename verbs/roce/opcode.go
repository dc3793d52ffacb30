package roce

import (
	"strconv"

	"github.com/rdma-appliance/appliance/dpdk/header"
)

// Opcode is the BTH opcode: three bits of transport and five of operation.
type Opcode uint8

// RC opcodes.
const (
	RCSendFirst          Opcode = 0x00
	RCSendMiddle         Opcode = 0x01
	RCSendLast           Opcode = 0x02
	RCSendLastImm        Opcode = 0x03
	RCSendOnly           Opcode = 0x04
	RCSendOnlyImm        Opcode = 0x05
	RCWriteFirst         Opcode = 0x06
	RCWriteMiddle        Opcode = 0x07
	RCWriteLast          Opcode = 0x08
	RCWriteLastImm       Opcode = 0x09
	RCWriteOnly          Opcode = 0x0a
	RCWriteOnlyImm       Opcode = 0x0b
	RCReadRequest        Opcode = 0x0c
	RCReadResponseFirst  Opcode = 0x0d
	RCReadResponseMiddle Opcode = 0x0e
	RCReadResponseLast   Opcode = 0x0f
	RCReadResponseOnly   Opcode = 0x10
	RCAck                Opcode = 0x11
	RCAtomicAck          Opcode = 0x12
	RCCompareSwap        Opcode = 0x13
	RCFetchAdd           Opcode = 0x14
	RCSendLastInv        Opcode = 0x16
	RCSendOnlyInv        Opcode = 0x17
	RCFlush              Opcode = 0x1c // IBTA 1.5 memory placement extensions
	RCAtomicWrite        Opcode = 0x1d // IBTA 1.5 memory placement extensions
)

// UC opcodes: SEND and RDMA WRITE only, no responses.
const (
	UCSendFirst    Opcode = 0x20
	UCSendMiddle   Opcode = 0x21
	UCSendLast     Opcode = 0x22
	UCSendLastImm  Opcode = 0x23
	UCSendOnly     Opcode = 0x24
	UCSendOnlyImm  Opcode = 0x25
	UCWriteFirst   Opcode = 0x26
	UCWriteMiddle  Opcode = 0x27
	UCWriteLast    Opcode = 0x28
	UCWriteLastImm Opcode = 0x29
	UCWriteOnly    Opcode = 0x2a
	UCWriteOnlyImm Opcode = 0x2b
)

// UD opcodes, CNP and the one RD-only opcode. The other RD and XRC opcodes
// are the RC codes in their transport's range: MakeOpcode(TransportRD,
// RCWriteOnly) is 0x4a.
const (
	RDResync      Opcode = 0x55
	UDSendOnly    Opcode = 0x64
	UDSendOnlyImm Opcode = 0x65
	// OpCNP is the congestion notification packet of RoCEv2 (annex A17).
	OpCNP Opcode = 0x81
)

const opcodeCodeMask Opcode = 0x1f

// transportShift is untyped: it is a shift count.
const transportShift = 5

// MaxExtHeaders is the most extended headers an opcode carries (RD RDMA
// WRITE Only with Immediate: RDETH, DETH, RETH, ImmDt).
const MaxExtHeaders = 4

// MaxExtHeaderLen is the longest run of extended headers, in bytes (RD
// CmpSwap: RDETH, DETH, AtomicETH).
const MaxExtHeaderLen = 40

// MakeOpcode returns the opcode of transport t with the operation code of the
// RC opcode rc (its low five bits).
func MakeOpcode(t Transport, rc Opcode) Opcode {
	return Opcode(t&7)<<transportShift | rc&opcodeCodeMask
}

// Code returns the operation code, the low five bits.
func (op Opcode) Code() Opcode { return op & opcodeCodeMask }

// Transport is the transport service of an opcode: its top three bits.
type Transport uint8

// Transports, numbered as the opcode's top three bits.
const (
	TransportRC  Transport = 0
	TransportUC  Transport = 1
	TransportRD  Transport = 2
	TransportUD  Transport = 3
	TransportCNP Transport = 4
	TransportXRC Transport = 5
)

var transportNames = [8]string{"RC", "UC", "RD", "UD", "CNP", "XRC", "MFR6", "MFR7"}

// String returns "RC", "UC", "RD", "UD", "CNP" or "XRC" ("MFR6"/"MFR7" for the
// manufacturer-specific ranges).
func (t Transport) String() string { return transportNames[t&7] }

// Kind is the operation an opcode belongs to, whatever its position and
// transport.
type Kind uint8

// Operation kinds.
const (
	KindNone Kind = iota
	KindSend
	KindWrite
	KindReadRequest
	KindReadResponse
	KindAck
	KindAtomicAck
	KindCompareSwap
	KindFetchAdd
	KindResync
	KindFlush
	KindAtomicWrite
	KindCNP
)

var kindNames = [...]string{"none", "SEND", "RDMA WRITE", "RDMA READ Request", "RDMA READ Response",
	"Acknowledge", "ATOMIC Acknowledge", "CmpSwap", "FetchAdd", "RESYNC", "FLUSH", "ATOMIC WRITE", "CNP"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Position is where a packet sits in its message.
type Position uint8

// Positions. Single-packet operations (requests without payload, ACKs,
// atomics, CNP) are Only.
const (
	PositionNone Position = iota
	PositionFirst
	PositionMiddle
	PositionLast
	PositionOnly
)

var positionNames = [...]string{"none", "First", "Middle", "Last", "Only"}

func (p Position) String() string {
	if int(p) < len(positionNames) {
		return positionNames[p]
	}
	return "position(" + strconv.Itoa(int(p)) + ")"
}

// IsStart reports whether the position starts a message (First or Only).
func (p Position) IsStart() bool { return p == PositionFirst || p == PositionOnly }

// IsEnd reports whether the position ends a message (Last or Only).
func (p Position) IsEnd() bool { return p == PositionLast || p == PositionOnly }

// Header identifies an extended transport header.
type Header uint8

// Extended headers, in the order they appear after the BTH.
const (
	HeaderRDETH        Header = iota // RD: EE context (4 B)
	HeaderDETH                       // RD, UD: Q_Key and source QP (8 B)
	HeaderXRCETH                     // XRC requests: XRC SRQ number (4 B)
	HeaderFETH                       // FLUSH: selectivity and placement type (4 B)
	HeaderRETH                       // RDMA: VA, R_Key, DMA length (16 B)
	HeaderAtomicETH                  // atomics: VA, R_Key, swap/add, compare (28 B)
	HeaderAETH                       // responses: syndrome and MSN (4 B)
	HeaderAtomicAckETH               // atomic response: original data (8 B)
	HeaderImmDt                      // immediate data (4 B)
	HeaderIETH                       // invalidated R_Key (4 B)
	HeaderCNPReserved                // the 16 reserved bytes of a CNP
	numHeaders
)

var headerLens = [numHeaders]uint8{
	HeaderRDETH: RDETHLen, HeaderDETH: DETHLen, HeaderXRCETH: XRCETHLen, HeaderFETH: FETHLen,
	HeaderRETH: RETHLen, HeaderAtomicETH: AtomicETHLen, HeaderAETH: AETHLen,
	HeaderAtomicAckETH: AtomicAckETHLen, HeaderImmDt: ImmDtLen, HeaderIETH: IETHLen,
	HeaderCNPReserved: CNPReservedLen,
}

var headerNames = [numHeaders]string{"RDETH", "DETH", "XRCETH", "FETH", "RETH", "AtomicETH", "AETH",
	"AtomicAckETH", "ImmDt", "IETH", "CNP reserved"}

// Len returns the header's size in bytes (0 for an unknown header).
func (h Header) Len() int {
	if h < numHeaders {
		return int(headerLens[h])
	}
	return 0
}

func (h Header) String() string {
	if h < numHeaders {
		return headerNames[h]
	}
	return "header(" + strconv.Itoa(int(h)) + ")"
}

// OpInfo describes an opcode.
type OpInfo struct {
	// Name is the opcode's name in the style of Wireshark and the IBTA
	// tables, such as "RC RDMA WRITE Only with Immediate".
	Name      string
	Opcode    Opcode
	Valid     bool // false for reserved opcodes; the other fields are then zero
	Transport Transport
	Kind      Kind
	Position  Position
	// Payload reports whether the opcode carries payload (and so may have a
	// nonzero pad count).
	Payload bool
	// Headers lists the extended headers after the BTH, in wire order;
	// NumHeaders of them are used.
	Headers    [MaxExtHeaders]Header
	NumHeaders int
	// HeaderLen is the total size of the extended headers.
	HeaderLen int
	// offsets[h] is the offset of header h from the end of the BTH, or
	// noHeader.
	offsets [numHeaders]uint8
}

// Offset returns the offset of header h from the end of the BTH, or -1 if the
// opcode does not carry it.
func (i OpInfo) Offset(h Header) int {
	if h >= numHeaders {
		return -1
	}
	if i.offsets[h] == noHeader {
		return -1
	}
	return int(i.offsets[h])
}

// Has reports whether the opcode carries header h.
func (i OpInfo) Has(h Header) bool { return i.Offset(h) >= 0 }

// IsResponse reports whether the opcode is sent by a responder (READ
// responses, ACKs, atomic ACKs).
func (i OpInfo) IsResponse() bool {
	return i.Kind == KindReadResponse || i.Kind == KindAck || i.Kind == KindAtomicAck
}

// noHeader is the offset of a header an opcode does not carry.
const noHeader = 0xff

// opTable is indexed by opcode; it is filled once by init and read-only after.
var opTable [256]OpInfo

// opFastInfo is what parse's one pass needs of an opcode, packed in one
// word so that it takes one load (as a struct of four bytes it took four
// loads and four address computations) from a 2 KB table indexed by a
// shift (an OpInfo is 64 bytes):
//
//	bits 0-31   the data mask: payload plus pad, masked, must be zero: all
//	            ones for opcodes without payload (none at all), 3
//	            otherwise (a multiple of four)
//	bits 32-39  the mask of BTH byte 1 (SE, M, pad count, TVer) whose bits
//	            must be zero: the version always (0x0f, BTHVersion is 0),
//	            the pad count too (0x30) for First and Middle packets,
//	            never padded
//	bits 40-47  the mask of the opcode: all ones for a reserved opcode
//	            (opcode 0 is defined, so a reserved one has a bit set), 0
//	            for the others
//	bits 48-63  the shortest UDP length the opcode allows: UDP header,
//	            BTH, extended headers (OpInfo.HeaderLen) and ICRC
//
// Bits 0-47 are one mask for three of parseTransport's checks, which the
// pass makes in one test, of a word laid out alike: the data length in
// bits 0-31 (less than 65536 once the payload is known not negative), BTH
// bytes 1 and 0 in bits 32-47, and zeros above, where the shortest UDP
// length sits.
type opFastInfo uint64

// opFastFixed is the part of the shortest UDP length every opcode has.
const opFastFixed = header.UDPHeaderLen + BTHLen + ICRCLen

// opFastReserved is opFast's word for a reserved opcode.
const opFastReserved = opFastInfo(0xff) << 40

func makeOpFastInfo(hdrLen int, dataMask int32, padMask uint8) opFastInfo {
	return opFastInfo(uint32(dataMask)) | opFastInfo(0x0f|padMask<<4)<<32 |
		opFastInfo(opFastFixed+hdrLen)<<48
}

// opFastWord is the word parse tests against an opcode's opFastInfo: the
// data length data (payload plus pad) and BTH bytes 0 and 1 (b0 is the
// BTH's first eight bytes, big-endian).
func opFastWord(data int, b0 uint64) uint64 { return uint64(data) | b0>>48<<32 }

func (f opFastInfo) minUDPLen() int   { return int(f >> 48) }
func (f opFastInfo) hdrLen() int      { return f.minUDPLen() - opFastFixed }
func (f opFastInfo) byte1Mask() uint8 { return uint8(f >> 32) }
func (f opFastInfo) dataMask() int    { return int(int32(f)) }
func (f opFastInfo) valid() bool      { return uint8(f>>40) == 0 }

// BTHVersion must be 0 for byte1Mask's test of it.
var _ = [1]struct{}{}[BTHVersion]

// opFast is opTable in opFastInfo form, filled by init from opTable.
var opFast [256]opFastInfo

// OpcodeInfo returns the description of op. Reserved opcodes have Valid false
// and a Name of the form "reserved (0xNN)".
func OpcodeInfo(op Opcode) OpInfo { return opTable[op] }

// Valid reports whether op is a defined opcode.
func (op Opcode) Valid() bool { return opTable[op].Valid }

// Transport returns the opcode's transport.
func (op Opcode) Transport() Transport { return Transport(op >> transportShift) }

// HasPayload reports whether op carries payload.
func (op Opcode) HasPayload() bool { return opTable[op].Payload }

// HeaderLen returns the size of op's extended headers.
func (op Opcode) HeaderLen() int { return opTable[op].HeaderLen }

// String returns the opcode's name.
func (op Opcode) String() string { return opTable[op].Name }

// baseOp describes an operation code (the low five opcode bits) as RC uses it;
// the other transports add their own headers in front.
type baseOp struct {
	name     string
	kind     Kind
	pos      Position
	payload  bool
	response bool
	headers  []Header
}

var baseOps = map[Opcode]baseOp{ // used only by init, never on a hot path
	0x00: {"SEND First", KindSend, PositionFirst, true, false, nil},
	0x01: {"SEND Middle", KindSend, PositionMiddle, true, false, nil},
	0x02: {"SEND Last", KindSend, PositionLast, true, false, nil},
	0x03: {"SEND Last with Immediate", KindSend, PositionLast, true, false, []Header{HeaderImmDt}},
	0x04: {"SEND Only", KindSend, PositionOnly, true, false, nil},
	0x05: {"SEND Only with Immediate", KindSend, PositionOnly, true, false, []Header{HeaderImmDt}},
	0x06: {"RDMA WRITE First", KindWrite, PositionFirst, true, false, []Header{HeaderRETH}},
	0x07: {"RDMA WRITE Middle", KindWrite, PositionMiddle, true, false, nil},
	0x08: {"RDMA WRITE Last", KindWrite, PositionLast, true, false, nil},
	0x09: {"RDMA WRITE Last with Immediate", KindWrite, PositionLast, true, false, []Header{HeaderImmDt}},
	0x0a: {"RDMA WRITE Only", KindWrite, PositionOnly, true, false, []Header{HeaderRETH}},
	0x0b: {"RDMA WRITE Only with Immediate", KindWrite, PositionOnly, true, false, []Header{HeaderRETH, HeaderImmDt}},
	0x0c: {"RDMA READ Request", KindReadRequest, PositionOnly, false, false, []Header{HeaderRETH}},
	0x0d: {"RDMA READ Response First", KindReadResponse, PositionFirst, true, true, []Header{HeaderAETH}},
	0x0e: {"RDMA READ Response Middle", KindReadResponse, PositionMiddle, true, true, nil},
	0x0f: {"RDMA READ Response Last", KindReadResponse, PositionLast, true, true, []Header{HeaderAETH}},
	0x10: {"RDMA READ Response Only", KindReadResponse, PositionOnly, true, true, []Header{HeaderAETH}},
	0x11: {"Acknowledge", KindAck, PositionOnly, false, true, []Header{HeaderAETH}},
	0x12: {"ATOMIC Acknowledge", KindAtomicAck, PositionOnly, false, true, []Header{HeaderAETH, HeaderAtomicAckETH}},
	0x13: {"CmpSwap", KindCompareSwap, PositionOnly, false, false, []Header{HeaderAtomicETH}},
	0x14: {"FetchAdd", KindFetchAdd, PositionOnly, false, false, []Header{HeaderAtomicETH}},
	0x15: {"RESYNC", KindResync, PositionOnly, false, false, nil},
	0x16: {"SEND Last with Invalidate", KindSend, PositionLast, true, false, []Header{HeaderIETH}},
	0x17: {"SEND Only with Invalidate", KindSend, PositionOnly, true, false, []Header{HeaderIETH}},
	0x1c: {"FLUSH", KindFlush, PositionOnly, false, false, []Header{HeaderFETH, HeaderRETH}},
	0x1d: {"ATOMIC WRITE", KindAtomicWrite, PositionOnly, true, false, []Header{HeaderRETH}},
}

func init() {
	for i := range opTable {
		opTable[i] = OpInfo{Name: "reserved (0x" + strconv.FormatUint(uint64(i), 16) + ")", Opcode: Opcode(i)}
		for h := range opTable[i].offsets {
			opTable[i].offsets[h] = noHeader
		}
	}
	codes := func(lo, hi Opcode, extra ...Opcode) []Opcode {
		var c []Opcode
		for o := lo; o <= hi; o++ {
			c = append(c, o)
		}
		return append(c, extra...)
	}
	define := func(t Transport, code Opcode, b baseOp, prefix []Header) {
		op := MakeOpcode(t, code)
		info := OpInfo{Name: t.String() + " " + b.name, Opcode: op, Valid: true, Transport: t, Kind: b.kind,
			Position: b.pos, Payload: b.payload}
		for h := range info.offsets {
			info.offsets[h] = noHeader
		}
		for _, h := range append(append([]Header(nil), prefix...), b.headers...) {
			info.offsets[h] = uint8(info.HeaderLen)
			info.Headers[info.NumHeaders] = h
			info.NumHeaders++
			info.HeaderLen += h.Len()
		}
		opTable[op] = info
	}
	for _, c := range codes(0x00, 0x14, 0x16, 0x17, 0x1c, 0x1d) {
		define(TransportRC, c, baseOps[c], nil)
	}
	for _, c := range codes(0x00, 0x0b) {
		define(TransportUC, c, baseOps[c], nil)
	}
	// RD: every packet carries the RDETH; requests also carry the DETH.
	for _, c := range codes(0x00, 0x15) {
		b := baseOps[c]
		prefix := []Header{HeaderRDETH, HeaderDETH}
		if b.response {
			prefix = prefix[:1]
		}
		define(TransportRD, c, b, prefix)
	}
	for _, c := range codes(0x04, 0x05) {
		define(TransportUD, c, baseOps[c], []Header{HeaderDETH})
	}
	// XRC: requests carry the XRCETH, responses travel on the initiator's QP
	// without it.
	for _, c := range codes(0x00, 0x14, 0x16, 0x17) {
		b := baseOps[c]
		var prefix []Header
		if !b.response {
			prefix = []Header{HeaderXRCETH}
		}
		define(TransportXRC, c, b, prefix)
	}
	define(TransportCNP, OpCNP&opcodeCodeMask, baseOp{"", KindCNP, PositionOnly, false, false,
		[]Header{HeaderCNPReserved}}, nil)
	opTable[OpCNP].Name = "CNP"
	for i, info := range opTable {
		if !info.Valid {
			opFast[i] = opFastReserved
			continue
		}
		dataMask, padMask := int32(-1), uint8(0)
		if info.Payload {
			dataMask = 3
			if info.Position == PositionFirst || info.Position == PositionMiddle {
				padMask = 3
			}
		}
		f := makeOpFastInfo(info.HeaderLen, dataMask, padMask)
		opFast[i] = f
	}
}
