package roce

import (
	"encoding/binary"
	"strconv"
	"time"
)

// Header sizes in bytes.
const (
	BTHLen          = 12
	RETHLen         = 16
	AETHLen         = 4
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
	DETHLen         = 8
	ImmDtLen        = 4
	IETHLen         = 4
	RDETHLen        = 4
	XRCETHLen       = 4
	FETHLen         = 4
	CNPReservedLen  = 16
	ICRCLen         = 4
)

// Field masks and defaults.
const (
	QPNMask = 0xffffff // QP numbers are 24 bits
	PSNMask = 0xffffff // packet sequence numbers are 24 bits
	MSNMask = 0xffffff
	// DefaultPKey is the full-membership default partition, what RoCE NICs send.
	DefaultPKey = 0xffff
	// BTHVersion is the only transport header version (TVer) defined.
	BTHVersion = 0
)

// BTH is a view of the 12-byte base transport header:
//
//	opcode(8) | SE(1) M(1) PadCnt(2) TVer(4) | P_Key(16)
//	F(1) B(1) resv(6) | DestQP(24)
//	A(1) resv(7) | PSN(24)
//
// F and B are the FECN and BECN bits of the InfiniBand link layer; RoCEv2
// uses IP ECN and CNPs instead and leaves them zero. The ICRC covers byte 4
// as all ones, whatever it holds.
type BTH []byte

// IsValid reports whether the view holds a whole BTH.
func (h BTH) IsValid() bool { return len(h) >= BTHLen }

// Opcode returns the opcode.
func (h BTH) Opcode() Opcode { return Opcode((*[BTHLen]byte)(h)[0]) }

// SE reports the solicited event bit.
func (h BTH) SE() bool { return (*[BTHLen]byte)(h)[1]&0x80 != 0 }

// MigReq reports the migration request bit (M).
func (h BTH) MigReq() bool { return (*[BTHLen]byte)(h)[1]&0x40 != 0 }

// PadCount returns the number of pad bytes (0-3) after the payload.
func (h BTH) PadCount() uint8 { return (*[BTHLen]byte)(h)[1] >> 4 & 3 }

// TVer returns the transport header version.
func (h BTH) TVer() uint8 { return (*[BTHLen]byte)(h)[1] & 0x0f }

// PKey returns the partition key.
func (h BTH) PKey() uint16 { return binary.BigEndian.Uint16((*[BTHLen]byte)(h)[2:4]) }

// FECN reports the F bit.
func (h BTH) FECN() bool { return (*[BTHLen]byte)(h)[4]&0x80 != 0 }

// BECN reports the B bit.
func (h BTH) BECN() bool { return (*[BTHLen]byte)(h)[4]&0x40 != 0 }

// Resv8 returns the whole byte before DestQP (F, B and six reserved bits).
func (h BTH) Resv8() uint8 { return (*[BTHLen]byte)(h)[4] }

// DestQP returns the 24-bit destination QP number.
func (h BTH) DestQP() uint32 { return binary.BigEndian.Uint32((*[BTHLen]byte)(h)[4:8]) & QPNMask }

// AckReq reports the acknowledge request bit (A).
func (h BTH) AckReq() bool { return (*[BTHLen]byte)(h)[8]&0x80 != 0 }

// PSN returns the 24-bit packet sequence number.
func (h BTH) PSN() uint32 { return binary.BigEndian.Uint32((*[BTHLen]byte)(h)[8:12]) & PSNMask }

// SetOpcode sets the opcode.
func (h BTH) SetOpcode(op Opcode) { (*[BTHLen]byte)(h)[0] = uint8(op) }

// SetSE sets the solicited event bit.
func (h BTH) SetSE(v bool) { setBit(&(*[BTHLen]byte)(h)[1], 0x80, v) }

// SetMigReq sets the migration request bit.
func (h BTH) SetMigReq(v bool) { setBit(&(*[BTHLen]byte)(h)[1], 0x40, v) }

// SetPadCount sets the pad count (0-3).
func (h BTH) SetPadCount(n uint8) { (*[BTHLen]byte)(h)[1] = (*[BTHLen]byte)(h)[1]&^0x30 | n&3<<4 }

// SetTVer sets the transport header version.
func (h BTH) SetTVer(v uint8) { (*[BTHLen]byte)(h)[1] = (*[BTHLen]byte)(h)[1]&^0x0f | v&0x0f }

// SetPKey sets the partition key.
func (h BTH) SetPKey(k uint16) { binary.BigEndian.PutUint16((*[BTHLen]byte)(h)[2:4], k) }

// SetFECN sets the F bit.
func (h BTH) SetFECN(v bool) { setBit(&(*[BTHLen]byte)(h)[4], 0x80, v) }

// SetBECN sets the B bit.
func (h BTH) SetBECN(v bool) { setBit(&(*[BTHLen]byte)(h)[4], 0x40, v) }

// SetDestQP sets the destination QP number (24 bits), keeping F, B and resv.
func (h BTH) SetDestQP(qpn uint32) { put24((*[BTHLen]byte)(h)[5:8], qpn) }

// SetAckReq sets the acknowledge request bit.
func (h BTH) SetAckReq(v bool) { setBit(&(*[BTHLen]byte)(h)[8], 0x80, v) }

// SetPSN sets the packet sequence number (24 bits), keeping the A bit.
func (h BTH) SetPSN(psn uint32) { put24((*[BTHLen]byte)(h)[9:12], psn) }

func setBit(b *byte, mask byte, v bool) {
	if v {
		*b |= mask
	} else {
		*b &^= mask
	}
}

func put24(b []byte, v uint32) {
	_ = b[2]
	b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v)
}

// ComparePSN compares two 24-bit PSNs in the circular sequence space, as
// rxe's psn_compare does: it returns the signed distance a - b, negative when
// a is before b, in the range [-2^23, 2^23).
func ComparePSN(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }

// AddPSN returns psn + n modulo 2^24.
func AddPSN(psn uint32, n int) uint32 { return (psn + uint32(n)) & PSNMask }

// RETH is a view of the RDMA extended transport header: virtual address 64,
// R_Key 32, DMA length 32.
type RETH []byte

// IsValid reports whether the view holds a whole RETH.
func (h RETH) IsValid() bool { return len(h) >= RETHLen }

// VA returns the remote virtual address.
func (h RETH) VA() uint64 { return binary.BigEndian.Uint64((*[RETHLen]byte)(h)[0:8]) }

// RKey returns the remote key.
func (h RETH) RKey() uint32 { return binary.BigEndian.Uint32((*[RETHLen]byte)(h)[8:12]) }

// DMALen returns the length of the whole RDMA operation.
func (h RETH) DMALen() uint32 { return binary.BigEndian.Uint32((*[RETHLen]byte)(h)[12:16]) }

// SetVA sets the remote virtual address.
func (h RETH) SetVA(va uint64) { binary.BigEndian.PutUint64((*[RETHLen]byte)(h)[0:8], va) }

// SetRKey sets the remote key.
func (h RETH) SetRKey(k uint32) { binary.BigEndian.PutUint32((*[RETHLen]byte)(h)[8:12], k) }

// SetDMALen sets the DMA length.
func (h RETH) SetDMALen(n uint32) { binary.BigEndian.PutUint32((*[RETHLen]byte)(h)[12:16], n) }

// AckType is the kind of an AETH syndrome.
type AckType uint8

// Syndrome kinds (bits 6-5 of the syndrome).
const (
	AckTypeACK      AckType = 0
	AckTypeRNRNAK   AckType = 1
	AckTypeReserved AckType = 2
	AckTypeNAK      AckType = 3
)

func (t AckType) String() string {
	return [...]string{"ACK", "RNR NAK", "reserved", "NAK"}[t&3]
}

// NAKCode is the reason carried by a NAK syndrome.
type NAKCode uint8

// NAK codes (IBTA table 44).
const (
	NAKPSNSequenceError       NAKCode = 0
	NAKInvalidRequest         NAKCode = 1
	NAKRemoteAccessError      NAKCode = 2
	NAKRemoteOperationalError NAKCode = 3
	NAKInvalidRDRequest       NAKCode = 4
)

var nakNames = [...]string{"PSN sequence error", "invalid request", "remote access error",
	"remote operational error", "invalid RD request"}

func (c NAKCode) String() string {
	if int(c) < len(nakNames) {
		return nakNames[c]
	}
	return "reserved NAK code " + strconv.Itoa(int(c))
}

// Syndrome is the 8-bit AETH syndrome: 0 | type(2) | value(5), where the
// value is a credit count code for ACK, a timer code for RNR NAK and a
// NAKCode for NAK.
type Syndrome uint8

// CreditsInvalid is the credit count code an ACK carries when end-to-end
// flow control is not in use (rxe calls it AETH_ACK_UNLIMITED).
const CreditsInvalid = 31

// ACKSyndrome returns the syndrome of an ACK with credit count code credits.
func ACKSyndrome(credits uint8) Syndrome { return Syndrome(credits & 0x1f) }

// RNRNAKSyndrome returns the syndrome of an RNR NAK with timer code timer.
func RNRNAKSyndrome(timer uint8) Syndrome { return Syndrome(0x20 | timer&0x1f) }

// NAKSyndrome returns the syndrome of a NAK with the given code.
func NAKSyndrome(code NAKCode) Syndrome { return Syndrome(0x60 | uint8(code)&0x1f) }

// Type returns the syndrome type.
func (s Syndrome) Type() AckType { return AckType(s >> 5 & 3) }

// Value returns the low five bits.
func (s Syndrome) Value() uint8 { return uint8(s) & 0x1f }

// IsACK reports whether s is a positive acknowledgment.
func (s Syndrome) IsACK() bool { return s.Type() == AckTypeACK }

// IsNAK reports whether s is a NAK (not RNR NAK).
func (s Syndrome) IsNAK() bool { return s.Type() == AckTypeNAK }

// IsRNRNAK reports whether s is a receiver-not-ready NAK.
func (s Syndrome) IsRNRNAK() bool { return s.Type() == AckTypeRNRNAK }

// CreditCode returns the credit count code of an ACK.
func (s Syndrome) CreditCode() uint8 { return s.Value() }

// creditTable decodes credit count codes (IBTA table 45).
var creditTable = [32]int32{0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
	1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, -1}

// Credits returns the number of receive WQEs an ACK advertises, or -1 for
// CreditsInvalid.
func (s Syndrome) Credits() int { return int(creditTable[s.Value()]) }

// RNRTimer returns the timer code of an RNR NAK.
func (s Syndrome) RNRTimer() uint8 { return s.Value() }

// RNRDelay returns the delay an RNR NAK asks for.
func (s Syndrome) RNRDelay() time.Duration { return RNRTimerDuration(s.Value()) }

// NAKCode returns the code of a NAK.
func (s Syndrome) NAKCode() NAKCode { return NAKCode(s.Value()) }

// String describes the syndrome, e.g. "ACK credits=16", "NAK PSN sequence error".
func (s Syndrome) String() string {
	switch s.Type() {
	case AckTypeACK:
		if s.Value() == CreditsInvalid {
			return "ACK credits=invalid"
		}
		return "ACK credits=" + strconv.Itoa(s.Credits())
	case AckTypeRNRNAK:
		return "RNR NAK timer=" + s.RNRDelay().String()
	case AckTypeNAK:
		return "NAK " + s.NAKCode().String()
	}
	return "reserved syndrome 0x" + strconv.FormatUint(uint64(s), 16)
}

// rnrMicros decodes RNR NAK timer codes (IBTA table 46), in microseconds.
// (rxe's copy has 61410 for code 25; the table says 61.44 ms.)
var rnrMicros = [32]uint32{655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760,
	327680, 491520}

// RNRTimerDuration returns the minimum RNR NAK delay encoded by a timer code.
func RNRTimerDuration(code uint8) time.Duration {
	return time.Duration(rnrMicros[code&0x1f]) * time.Microsecond
}

// AETH is a view of the ACK extended transport header: syndrome 8, MSN 24.
type AETH []byte

// IsValid reports whether the view holds a whole AETH.
func (h AETH) IsValid() bool { return len(h) >= AETHLen }

// Syndrome returns the syndrome.
func (h AETH) Syndrome() Syndrome { return Syndrome((*[AETHLen]byte)(h)[0]) }

// MSN returns the 24-bit message sequence number.
func (h AETH) MSN() uint32 { return binary.BigEndian.Uint32((*[AETHLen]byte)(h)[0:4]) & MSNMask }

// SetSyndrome sets the syndrome.
func (h AETH) SetSyndrome(s Syndrome) { (*[AETHLen]byte)(h)[0] = uint8(s) }

// SetMSN sets the message sequence number.
func (h AETH) SetMSN(msn uint32) { put24((*[AETHLen]byte)(h)[1:4], msn) }

// AtomicETH is a view of the atomic extended transport header: VA 64, R_Key
// 32, swap (CmpSwap) or add (FetchAdd) data 64, compare data 64.
type AtomicETH []byte

// IsValid reports whether the view holds a whole AtomicETH.
func (h AtomicETH) IsValid() bool { return len(h) >= AtomicETHLen }

// VA returns the remote virtual address (8-byte aligned).
func (h AtomicETH) VA() uint64 { return binary.BigEndian.Uint64((*[AtomicETHLen]byte)(h)[0:8]) }

// RKey returns the remote key.
func (h AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32((*[AtomicETHLen]byte)(h)[8:12]) }

// SwapAdd returns the swap (CmpSwap) or add (FetchAdd) operand.
func (h AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64((*[AtomicETHLen]byte)(h)[12:20]) }

// Compare returns the compare operand of CmpSwap.
func (h AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64((*[AtomicETHLen]byte)(h)[20:28]) }

// SetVA sets the remote virtual address.
func (h AtomicETH) SetVA(va uint64) { binary.BigEndian.PutUint64((*[AtomicETHLen]byte)(h)[0:8], va) }

// SetRKey sets the remote key.
func (h AtomicETH) SetRKey(k uint32) { binary.BigEndian.PutUint32((*[AtomicETHLen]byte)(h)[8:12], k) }

// SetSwapAdd sets the swap or add operand.
func (h AtomicETH) SetSwapAdd(v uint64) {
	binary.BigEndian.PutUint64((*[AtomicETHLen]byte)(h)[12:20], v)
}

// SetCompare sets the compare operand.
func (h AtomicETH) SetCompare(v uint64) {
	binary.BigEndian.PutUint64((*[AtomicETHLen]byte)(h)[20:28], v)
}

// AtomicAckETH is a view of the atomic acknowledge extended transport header:
// the original remote data, 64 bits.
type AtomicAckETH []byte

// IsValid reports whether the view holds a whole AtomicAckETH.
func (h AtomicAckETH) IsValid() bool { return len(h) >= AtomicAckETHLen }

// OrigData returns the value the target held before the atomic operation.
func (h AtomicAckETH) OrigData() uint64 {
	return binary.BigEndian.Uint64((*[AtomicAckETHLen]byte)(h)[0:8])
}

// SetOrigData sets the original data.
func (h AtomicAckETH) SetOrigData(v uint64) {
	binary.BigEndian.PutUint64((*[AtomicAckETHLen]byte)(h)[0:8], v)
}

// DETH is a view of the datagram extended transport header: Q_Key 32, resv
// 8, source QP 24.
type DETH []byte

// IsValid reports whether the view holds a whole DETH.
func (h DETH) IsValid() bool { return len(h) >= DETHLen }

// QKey returns the queue key.
func (h DETH) QKey() uint32 { return binary.BigEndian.Uint32((*[DETHLen]byte)(h)[0:4]) }

// SrcQP returns the 24-bit source QP number.
func (h DETH) SrcQP() uint32 { return binary.BigEndian.Uint32((*[DETHLen]byte)(h)[4:8]) & QPNMask }

// SetQKey sets the queue key.
func (h DETH) SetQKey(k uint32) { binary.BigEndian.PutUint32((*[DETHLen]byte)(h)[0:4], k) }

// SetSrcQP sets the source QP number, clearing the reserved byte.
func (h DETH) SetSrcQP(qpn uint32) { binary.BigEndian.PutUint32((*[DETHLen]byte)(h)[4:8], qpn&QPNMask) }

// ImmDt is a view of the 4-byte immediate data header. The value is opaque to
// the transport; Imm reads it as a big-endian integer (ibverbs hands it to the
// application as the same four bytes, typed __be32).
type ImmDt []byte

// IsValid reports whether the view holds the immediate data.
func (h ImmDt) IsValid() bool { return len(h) >= ImmDtLen }

// Imm returns the immediate data.
func (h ImmDt) Imm() uint32 { return binary.BigEndian.Uint32((*[ImmDtLen]byte)(h)[0:4]) }

// SetImm sets the immediate data.
func (h ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32((*[ImmDtLen]byte)(h)[0:4], v) }

// IETH is a view of the invalidate extended transport header: the R_Key the
// responder invalidates (SEND with Invalidate).
type IETH []byte

// IsValid reports whether the view holds a whole IETH.
func (h IETH) IsValid() bool { return len(h) >= IETHLen }

// RKey returns the R_Key to invalidate.
func (h IETH) RKey() uint32 { return binary.BigEndian.Uint32((*[IETHLen]byte)(h)[0:4]) }

// SetRKey sets the R_Key to invalidate.
func (h IETH) SetRKey(k uint32) { binary.BigEndian.PutUint32((*[IETHLen]byte)(h)[0:4], k) }

// RDETH is a view of the reliable datagram extended transport header: resv 8,
// EE context 24.
type RDETH []byte

// IsValid reports whether the view holds a whole RDETH.
func (h RDETH) IsValid() bool { return len(h) >= RDETHLen }

// EEC returns the end-to-end context number.
func (h RDETH) EEC() uint32 { return binary.BigEndian.Uint32((*[RDETHLen]byte)(h)[0:4]) & 0xffffff }

// SetEEC sets the end-to-end context, clearing the reserved byte.
func (h RDETH) SetEEC(v uint32) { binary.BigEndian.PutUint32((*[RDETHLen]byte)(h)[0:4], v&0xffffff) }

// XRCETH is a view of the XRC extended transport header: resv 8, XRC SRQ 24.
type XRCETH []byte

// IsValid reports whether the view holds a whole XRCETH.
func (h XRCETH) IsValid() bool { return len(h) >= XRCETHLen }

// XRCSRQ returns the XRC shared receive queue number.
func (h XRCETH) XRCSRQ() uint32 {
	return binary.BigEndian.Uint32((*[XRCETHLen]byte)(h)[0:4]) & 0xffffff
}

// SetXRCSRQ sets the XRC SRQ number, clearing the reserved byte.
func (h XRCETH) SetXRCSRQ(v uint32) {
	binary.BigEndian.PutUint32((*[XRCETHLen]byte)(h)[0:4], v&0xffffff)
}

// FETH is a view of the FLUSH extended transport header: reserved 26 bits,
// selectivity level 2 bits, placement type 4 bits.
type FETH []byte

// IsValid reports whether the view holds a whole FETH.
func (h FETH) IsValid() bool { return len(h) >= FETHLen }

// SelectivityLevel returns the SEL field (0: memory region range, 1: whole
// memory region).
func (h FETH) SelectivityLevel() uint8 { return (*[FETHLen]byte)(h)[3] >> 4 & 3 }

// PlacementType returns the PLT field (bit 0: global visibility, bit 1:
// persistence).
func (h FETH) PlacementType() uint8 { return (*[FETHLen]byte)(h)[3] & 0x0f }

// Set writes the whole header.
func (h FETH) Set(sel, plt uint8) {
	binary.BigEndian.PutUint32((*[FETHLen]byte)(h)[0:4], uint32(sel&3)<<4|uint32(plt&0x0f))
}
