// Package pcap reads and writes packet trace files: classic libpcap
// ("pcap") and pcapng, optionally wrapped in a zstd stream.
//
// It exists so that the appliance's packet dumpers (Lumina-style RoCEv2
// mirrors) can write line-rate traces that standard tools such as
// Wireshark/tshark, tcpdump and zstd open directly, and so that test and
// analysis code can read them back without pulling in libpcap or a full
// packet-decoding library.
//
// Two properties drive the design:
//
//   - Streaming. Neither the Reader nor the Writer ever holds more than a
//     bounded buffer (about a megabyte plus the zstd window) of the trace,
//     so a 10 GB capture is processed in constant memory.
//   - No per-packet allocation. Writer.WritePacket encodes records straight
//     into a reusable output buffer, and Reader.Next hands out packet bytes
//     that alias the reader's internal buffer. A dumper running at tens of
//     millions of packets per second cannot afford GC pressure proportional
//     to packet rate.
//
// Reading auto-detects the container: NewReader accepts classic pcap
// (microsecond or nanosecond magic, either byte order), pcapng (any number
// of sections of either byte order, any number of interfaces with their own
// timestamp resolution and offset; Enhanced, Simple and obsolete Packet
// Blocks) and a zstd stream containing either.
//
// Malformed input never panics and never makes the reader allocate in
// proportion to a length field it has not yet validated: every problem is
// reported as a *FormatError wrapping one of the sentinel errors
// (ErrBadMagic, ErrTruncated, ErrBadLength, ...) together with the byte
// offset, in the decompressed stream, of the offending structure.
//
// Readers and Writers are not safe for concurrent use.
package pcap
