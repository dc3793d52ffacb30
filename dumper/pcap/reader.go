package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

// Magic numbers, as read in little-endian order from the first four bytes.
const (
	magicMicros        = 0xa1b2c3d4
	magicNanos         = 0xa1b23c4d
	magicMicrosSwapped = 0xd4c3b2a1
	magicNanosSwapped  = 0x4d3cb2a1
	magicZstd          = 0xfd2fb528 // bytes 28 b5 2f fd
	magicZstdSkipMask  = 0xfffffff0 // skippable frames 0x184d2a50..5f
	magicZstdSkip      = 0x184d2a50
	blockTypeSHB       = 0x0a0d0d0a // palindromic, so byte order does not matter
	pcapngBOM          = 0x1a2b3c4d
)

const (
	// maxBlockLen bounds the Reader's buffer. Every block the reader has
	// to look inside (packets, interface and section headers) must fit in
	// it, which is what bounds memory against hostile length fields; blocks
	// the reader skips may be of any size. 1 MiB leaves room for a
	// MaxSnapLen packet plus generous options. The buffer starts far
	// smaller and grows only when the data needs it (see bufReader).
	maxBlockLen = 1 << 20

	// maxInterfaces bounds the per-section interface table so that a file
	// made of millions of tiny IDBs cannot grow memory without bound.
	maxInterfaces = 1 << 16
	// maxIfNameLen bounds each retained if_name for the same reason.
	maxIfNameLen = 256

	// zstdMaxWindow bounds the decoder's history buffer. It covers every
	// standard zstd level (level 19 uses 8 MiB); frames asking for more
	// (zstd --long=26 and up, --ultra) are rejected rather than allowed to
	// make a 20-byte file allocate hundreds of megabytes.
	zstdMaxWindow = 32 << 20
)

// Reader reads packets from a pcap or pcapng trace, optionally
// zstd-compressed. Create one with NewReader or Open.
//
// The Reader never buffers more than 1 MiB of the trace (typically 256
// KiB, plus the zstd window for compressed input), whatever the trace's
// size.
type Reader struct {
	br         *bufReader
	zr         *zstd.Decoder
	file       *os.File // set by Open
	format     Format
	compressed bool
	off        int64 // offset of the next unread byte of the decompressed trace
	err        error // sticky: once set, returned by every call

	be bool // current file/section is big-endian

	// classic pcap
	nano     bool
	linkType LinkType
	snapLen  uint32

	// pcapng, current section
	ifaces   []Interface
	conv     []tsConv
	sections int
}

// NewReader detects the trace format of src and reads its file header (the
// pcap global header or the first pcapng Section Header Block).
//
// The Reader reads src through its own buffer; src is not closed by
// Reader.Close.
func NewReader(src io.Reader) (*Reader, error) {
	// Read the magic first: compressed input gets the decoder between src
	// and our buffer.
	var m [4]byte
	n, err := io.ReadFull(src, m[:])
	if err != nil {
		if n == 0 && err == io.EOF {
			return nil, formatErr(ErrTruncated, 0, "empty input")
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, formatErr(ErrTruncated, 0, "input shorter than a magic number")
		}
		return nil, fmt.Errorf("pcap: reading magic: %w", err)
	}
	src = io.MultiReader(&prefixReader{b: m[:]}, src)

	r := &Reader{}
	if magic := binary.LittleEndian.Uint32(m[:]); magic == magicZstd || magic&magicZstdSkipMask == magicZstdSkip {
		zr, err := zstd.NewReader(src,
			// Synchronous decoding: no goroutines left behind by a caller
			// that forgets Close, and no per-block allocations (see
			// TestReadZeroAlloc).
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(false),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
		)
		if err != nil {
			return nil, fmt.Errorf("pcap: zstd: %w", err)
		}
		r.zr = zr
		r.compressed = true
		src = zr
	}
	r.br = newBufReader(src)
	if err := r.readFileHeader(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Open opens the trace file at path. Closing the Reader closes the file.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.file = f
	return r, nil
}

// prefixReader replays bytes already consumed during format detection.
type prefixReader struct{ b []byte }

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.b)
	p.b = p.b[n:]
	return n, nil
}

func (r *Reader) readFileHeader() error {
	m, err := r.br.Peek(4)
	if err != nil {
		return r.peekErr(len(m), err, "magic number", false)
	}
	switch binary.LittleEndian.Uint32(m) {
	case magicMicros, magicNanos, magicMicrosSwapped, magicNanosSwapped:
		r.format = FormatPcap
		return r.readPcapHeader()
	case blockTypeSHB:
		r.format = FormatPcapNG
		return r.readSHB()
	case magicZstd:
		return formatErr(ErrBadMagic, 0, "nested zstd stream")
	}
	return formatErr(ErrBadMagic, 0, "not a pcap, pcapng or zstd file (magic % x)", m)
}

// peekErr converts the error of a failed Peek of a structure starting at
// r.off into the error to return. got is how many bytes were available.
// Only a clean end of input where a new record may start (eofOK) is io.EOF;
// anywhere else running out of input means the trace is truncated.
func (r *Reader) peekErr(got int, err error, what string, eofOK bool) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		if got == 0 && err == io.EOF && eofOK {
			return io.EOF
		}
		fe := &FormatError{Offset: r.off, Err: ErrTruncated,
			Detail: fmt.Sprintf("%s: have %d bytes", what, got)}
		if err != io.EOF {
			fe.Cause = err
		}
		return fe
	}
	if err == errBufferLimit {
		// Callers bound sizes below the buffer size; keep this defensive.
		return formatErr(ErrBadLength, r.off, "%s larger than read buffer", what)
	}
	if r.compressed {
		return &FormatError{Offset: r.off, Err: ErrCorrupt, Detail: what, Cause: err}
	}
	return fmt.Errorf("pcap: reading %s at offset %d: %w", what, r.off, err)
}

func (r *Reader) u16(b []byte) uint16 {
	if r.be {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (r *Reader) u32(b []byte) uint32 {
	if r.be {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *Reader) u64(b []byte) uint64 {
	if r.be {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

// consume advances past n bytes that have already been peeked.
func (r *Reader) consume(n int) {
	r.br.Discard(n) // cannot fail: the bytes are buffered
	r.off += int64(n)
}

// Format reports whether the trace is classic pcap or pcapng.
func (r *Reader) Format() Format { return r.format }

// Compressed reports whether the trace is zstd-compressed.
func (r *Reader) Compressed() bool { return r.compressed }

// Nanosecond reports whether a classic pcap trace uses the nanosecond magic.
// For pcapng, where resolution is per interface, it is false.
func (r *Reader) Nanosecond() bool { return r.nano }

// LinkType returns the link type of a classic pcap trace, or of interface
// 0 of the current pcapng section (LinkTypeNull if there is none yet).
func (r *Reader) LinkType() LinkType {
	if r.format == FormatPcapNG {
		if len(r.ifaces) == 0 {
			return LinkTypeNull
		}
		return r.ifaces[0].LinkType
	}
	return r.linkType
}

// SnapLen returns the snap length of a classic pcap trace, or of interface 0
// of the current pcapng section. 0 means "not limited".
func (r *Reader) SnapLen() int {
	if r.format == FormatPcapNG {
		if len(r.ifaces) == 0 {
			return 0
		}
		return r.ifaces[0].SnapLen
	}
	return int(r.snapLen)
}

// Interfaces returns the interfaces described so far in the current pcapng
// section (one synthesized entry for classic pcap). Interfaces are added as
// their description blocks are read, and the list restarts at each new
// section. The slice is owned by the Reader: do not modify it.
func (r *Reader) Interfaces() []Interface {
	if r.format == FormatPcap {
		resol := uint8(6)
		if r.nano {
			resol = 9
		}
		return []Interface{{LinkType: r.linkType, SnapLen: int(r.snapLen), TsResol: resol}}
	}
	return r.ifaces
}

// Sections returns the number of pcapng sections seen so far (0 for pcap).
func (r *Reader) Sections() int { return r.sections }

// Offset returns the number of bytes of the (decompressed) trace consumed
// so far. Error offsets use the same coordinates.
func (r *Reader) Offset() int64 { return r.off }

// Next reads the next packet into rec. rec.Data and rec.Comment alias the
// Reader's buffer and stay valid only until the next call to a Reader
// method; this is what keeps reading free of per-packet allocations. At the
// end of the trace Next returns io.EOF. Errors are sticky.
func (r *Reader) Next(rec *Record) error {
	if r.err != nil {
		return r.err
	}
	var err error
	if r.format == FormatPcap {
		err = r.nextPcap(rec)
	} else {
		err = r.nextNG(rec)
	}
	if err != nil {
		r.err = err
	}
	return err
}

// ReadPacket reads the next packet and copies its bytes into buf (reusing
// buf's storage if it is large enough, so a caller that recycles buf does
// not allocate). The returned data, also stored in the Record's Data, is
// owned by the caller; the Record's Comment still aliases the Reader's
// buffer. At the end of the trace ReadPacket returns io.EOF.
func (r *Reader) ReadPacket(buf []byte) (Record, []byte, error) {
	var rec Record
	if err := r.Next(&rec); err != nil {
		return Record{}, buf[:0], err
	}
	buf = append(buf[:0], rec.Data...)
	rec.Data = buf
	return rec, buf, nil
}

// Close releases the zstd decoder and, for a Reader made by Open, closes
// the file. It does not close the io.Reader given to NewReader.
func (r *Reader) Close() error {
	if r.zr != nil {
		r.zr.Close()
		r.zr = nil
	}
	r.err = ErrClosed
	if r.file != nil {
		err := r.file.Close()
		r.file = nil
		return err
	}
	return nil
}

// --- classic pcap ---

const (
	pcapFileHeaderLen   = 24
	pcapRecordHeaderLen = 16
)

func (r *Reader) readPcapHeader() error {
	h, err := r.br.Peek(pcapFileHeaderLen)
	if err != nil {
		return r.peekErr(len(h), err, "pcap file header", false)
	}
	switch binary.LittleEndian.Uint32(h) {
	case magicMicros:
	case magicNanos:
		r.nano = true
	case magicMicrosSwapped:
		r.be = true
	case magicNanosSwapped:
		r.be, r.nano = true, true
	}
	if major := r.u16(h[4:]); major != 2 {
		return formatErr(ErrBadVersion, 0, "pcap version %d.%d", major, r.u16(h[6:]))
	}
	r.snapLen = r.u32(h[16:])
	// The upper bits of the link type field carry FCS information
	// (LT_LINKTYPE in libpcap); only the low bits name the link type.
	r.linkType = LinkType(r.u32(h[20:]) & 0x03ffffff)
	r.consume(pcapFileHeaderLen)
	return nil
}

func (r *Reader) nextPcap(rec *Record) error {
	h, err := r.br.Peek(pcapRecordHeaderLen)
	if err != nil {
		return r.peekErr(len(h), err, "record header", true)
	}
	sec, frac := r.u32(h), r.u32(h[4:])
	caplen, origlen := r.u32(h[8:]), r.u32(h[12:])
	if caplen > MaxSnapLen {
		return formatErr(ErrBadLength, r.off, "caplen %d exceeds maximum %d", caplen, MaxSnapLen)
	}
	if r.snapLen != 0 && caplen > r.snapLen {
		return formatErr(ErrBadLength, r.off, "caplen %d exceeds snaplen %d", caplen, r.snapLen)
	}
	total := pcapRecordHeaderLen + int(caplen)
	b, err := r.br.Peek(total)
	if err != nil {
		return r.peekErr(len(b), err, "record", false)
	}
	ts := int64(sec) * 1e9
	if r.nano {
		ts += int64(frac)
	} else {
		ts += int64(frac) * 1e3
	}
	*rec = Record{
		Timestamp: ts,
		CapLen:    int(caplen),
		OrigLen:   int(origlen),
		LinkType:  r.linkType,
		// The three-index slice stops a caller's append from scribbling
		// over the next record in the buffer.
		Data: b[pcapRecordHeaderLen:total:total],
	}
	r.consume(total)
	return nil
}
