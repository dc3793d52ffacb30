// Package roce implements the RoCEv2 wire format: InfiniBand transport
// headers (BTH and the extended headers RETH, AETH, AtomicETH, AtomicAckETH,
// DETH, ImmDt, IETH, RDETH, XRCETH, FETH) carried in UDP on port 4791 over
// IPv4 or IPv6, the congestion notification packet (CNP), and the invariant
// CRC (ICRC) that ends every packet.
//
// It is shared by everything in the appliance that reads or writes RDMA
// packets: the software RNIC (verbs/soft), the DTA and Lumina translators,
// the Lumina dumper and analyzers, and the fabric simulator. All of them sit on
// per-packet hot paths, so:
//
//   - headers are views (named byte slices over the frame) read and written in
//     place, like the views of package dpdk/header. A view's field accessors
//     read through its whole header as an array ((*[RETHLen]byte)(h)), so
//     one length check, which the compiler shares among the accessors a
//     caller inlines, covers every field it reads; a view shorter than its
//     header (IsValid false) panics on any field;
//   - opcode properties come from a 256-entry table (OpcodeInfo), never a map;
//   - Parse, Builder.Build, the ICRC functions and BuildCNP never allocate, and
//     return preallocated sentinel errors (ErrTruncated, ErrNotRoCE,
//     ErrBadOpcode, ErrBadPad, ErrBadLength, ErrBadICRC, ...) for errors.Is;
//   - the ICRC is computed with hash/crc32's IEEE table, which on amd64 and
//     arm64 uses carry-less multiplication, over the packet in place; only the
//     masked headers are copied, to a small buffer on the stack.
//
// Parse does not verify the ICRC, so that a caller can choose: a dumper
// records packets with bad ICRCs (Lumina injects bit errors on purpose), a
// responder drops them. Call Packet.VerifyICRC when it matters. ParsePort
// accepts another UDP port (Lumina's mirrored copies) and ParseTruncated
// frames captured with a snap length.
//
// Builder writes whole frames (Ethernet, optional 802.1Q tag, IPv4 or IPv6
// chosen by the GIDs, UDP, BTH, extended headers, payload, pad, ICRC) into a
// caller's buffer; BuildCNP writes congestion notifications. The helpers
// FlowLabelToUDPSrcPort, FlowLabelFromQPNs and UDPSrcPort derive the UDP
// source port and flow label as the Linux RDMA core does.
//
// The opcode table covers RC (including SEND with Invalidate and the IBTA 1.5
// FLUSH and ATOMIC WRITE), UC, RD, UD, XRC and CNP. RD is in the table so that
// captures decode and are named, although no RoCE device implements it.
package roce
