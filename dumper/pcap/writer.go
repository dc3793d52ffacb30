package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"unsafe"

	"github.com/klauspost/compress/zstd"
)

const (
	// DefaultBufferSize is the Writer's output buffer when
	// WriterOptions.BufferSize is 0. Large writes keep syscalls (or zstd
	// encoder calls) rare relative to packets: at 128-byte snaps a 1 MiB
	// buffer is one write per ~7000 packets.
	DefaultBufferSize = 1 << 20
	// minBufferSize guarantees that any single record (MaxSnapLen of data
	// plus a maximal 64 KiB comment and the block framing) fits in the
	// buffer, so WritePacket never needs a slow path for big records.
	minBufferSize = 512 << 10
	// writerBufInitial is the Writer's first buffer; it doubles up to
	// BufferSize as the trace grows.
	writerBufInitial = 32 << 10
	// createBufSize buffers the file under the zstd encoder in Create: the
	// encoder emits one write per compressed block (a few KiB to 64 KiB).
	createBufSize = 1 << 20
)

// WriterOptions configures a Writer. The zero value writes an uncompressed
// nanosecond pcap with link type LinkTypeNull and snap length
// DefaultSnapLen; set LinkType (normally LinkTypeEthernet).
type WriterOptions struct {
	Format Format
	// LinkType of the capture (interface 0 for pcapng). It is written as
	// given; the zero value is LinkTypeNull, not Ethernet.
	LinkType LinkType
	// SnapLen truncates captured data; 0 means DefaultSnapLen. Must not
	// exceed MaxSnapLen. The original length is kept in each record.
	SnapLen int
	// Timestamps are recorded with nanosecond resolution (pcap magic
	// 0xa1b23c4d, pcapng if_tsresol=9) unless Microsecond is set. Nanosecond
	// only exists so call sites can state the default explicitly; setting
	// both is an error.
	Nanosecond  bool
	Microsecond bool
	Compress    Compression
	// ZstdLevel is a zstd command-line level (1 = `zstd -1`); 0 means 1.
	// It is mapped to the nearest level of the Go encoder:
	// 1-2 fastest, 3-5 default, 6-9 better, 10+ best.
	ZstdLevel int
	// ZstdConcurrency is the number of goroutines the zstd encoder may use;
	// 0 means 1. With 1 the encoder runs synchronously inside Write/Flush
	// and WritePacket allocates nothing; with more, compression overlaps
	// with the caller but each 64 KiB block costs a few goroutine
	// allocations. Dumpers run one writer per capture queue, so 1 is the
	// right default: parallelism comes from the queues.
	ZstdConcurrency int
	// BufferSize of the Writer's output buffer; 0 means DefaultBufferSize.
	// Values below 512 KiB are raised to 512 KiB.
	BufferSize int
	// FlushSize, when set, writes the buffer out whenever it holds that
	// many bytes, and allocates (and touches) the buffer up front: a
	// capture loop keeps its output in the CPU cache that way, and never
	// takes a page fault on it mid-capture.
	FlushSize int
	// InterfaceName is the pcapng if_name of interface 0 (optional).
	InterfaceName string
	// InterfaceFilter is the pcapng if_filter of interface 0: the capture
	// filter, as a libpcap expression (optional).
	InterfaceFilter string
	// InterfaceDescription is if_description of interface 0 (optional).
	InterfaceDescription string
	// Application is the pcapng shb_userappl option (optional).
	Application string
	// DirectIO (Create only, uncompressed only) writes the file with
	// O_DIRECT: the kernel moves the buffer to the disk without copying it
	// into the page cache, which on this project's machines is most of the
	// CPU a buffered write of a capture costs (measured: 2 s of system
	// time per GiB buffered, 0.16 s direct). Every write but the last is a
	// whole number of aligned blocks from an aligned buffer; the tail goes
	// out at Flush or Close through the page cache, after which the file
	// is written normally. Where the filesystem refuses O_DIRECT (tmpfs,
	// some FUSE and network filesystems) the file is written normally.
	DirectIO bool
}

// PacketOptions carries the per-packet metadata only pcapng can store.
type PacketOptions struct {
	// Interface is the pcapng interface ID: 0, or a value returned by
	// Writer.AddInterface.
	Interface int
	// Flags is written as epb_flags when non-zero (direction, reception
	// type, FCS length, link-layer errors; see the pcapng spec).
	Flags uint32
	// Comment is written as opt_comment when non-empty (at most 65535
	// bytes).
	Comment string
}

// Writer writes packets to a pcap or pcapng trace, optionally
// zstd-compressed. It holds at most BufferSize bytes of output plus the
// zstd encoder's window, however long the trace.
type Writer struct {
	dst    io.Writer // receives buf: the zstd encoder or the caller's writer
	zw     *zstd.Encoder
	bw     *bufio.Writer // Create with compression: between encoder and file
	file   *os.File      // Create only
	buf    []byte
	bufMax int // the buffer grows on demand up to this size
	format Format
	nano   bool
	snap   []int // per-interface snap length (one entry for pcap)
	err    error // sticky write error
	closed bool
	// flushAt is the buffered size at which WritePacket writes out.
	flushAt int
	// align is the O_DIRECT block size while the file is open for direct
	// I/O (0 otherwise): flushBuf then writes whole blocks and keeps the
	// rest at the buffer's (aligned) start.
	align int
}

// NewWriter writes the file header(s) for opts to an internal buffer and
// returns a Writer that sends the trace to w. Nothing reaches w until the
// buffer fills or Flush/Close is called. Close does not close w.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	if opts.Format != FormatPcap && opts.Format != FormatPcapNG {
		return nil, fmt.Errorf("pcap: unknown format %d", opts.Format)
	}
	if opts.Nanosecond && opts.Microsecond {
		return nil, errors.New("pcap: both Nanosecond and Microsecond set")
	}
	if opts.SnapLen == 0 {
		opts.SnapLen = DefaultSnapLen
	}
	if opts.SnapLen < 0 || opts.SnapLen > MaxSnapLen {
		return nil, fmt.Errorf("pcap: snap length %d outside [1, %d]", opts.SnapLen, MaxSnapLen)
	}
	if opts.Format == FormatPcapNG && opts.LinkType > math.MaxUint16 {
		return nil, fmt.Errorf("pcap: link type %d does not fit pcapng's 16 bits", opts.LinkType)
	}
	if len(opts.Application) > math.MaxUint16 || len(opts.InterfaceName) > math.MaxUint16 ||
		len(opts.InterfaceFilter) >= math.MaxUint16 || len(opts.InterfaceDescription) > math.MaxUint16 {
		return nil, errors.New("pcap: pcapng option longer than 65535 bytes")
	}
	bufSize := opts.BufferSize
	if bufSize == 0 {
		bufSize = DefaultBufferSize
	}
	bufSize = max(bufSize, minBufferSize)

	wr := &Writer{
		dst:     w,
		buf:     make([]byte, 0, min(bufSize, writerBufInitial)),
		bufMax:  bufSize,
		format:  opts.Format,
		nano:    !opts.Microsecond,
		flushAt: math.MaxInt,
	}
	if opts.FlushSize > 0 {
		wr.flushAt = min(opts.FlushSize, bufSize/2)
		wr.buf = make([]byte, bufSize)
		for i := 0; i < len(wr.buf); i += 4096 {
			wr.buf[i] = 0
		}
		wr.buf = wr.buf[:0]
	}
	switch opts.Compress {
	case CompressNone:
	case CompressZstd:
		zw, err := newZstdEncoder(w, opts)
		if err != nil {
			return nil, err
		}
		wr.zw, wr.dst = zw, zw
	default:
		return nil, fmt.Errorf("pcap: unknown compression %d", opts.Compress)
	}

	if opts.Format == FormatPcap {
		wr.snap = []int{opts.SnapLen}
		magic := uint32(magicNanos)
		if !wr.nano {
			magic = magicMicros
		}
		b := wr.reserve(pcapFileHeaderLen)
		le.PutUint32(b[0:], magic)
		le.PutUint16(b[4:], 2) // version 2.4
		le.PutUint16(b[6:], 4)
		le.PutUint32(b[8:], 0)  // thiszone: timestamps are UTC
		le.PutUint32(b[12:], 0) // sigfigs
		le.PutUint32(b[16:], uint32(opts.SnapLen))
		le.PutUint32(b[20:], uint32(opts.LinkType))
		return wr, nil
	}
	wr.writeSHB(opts.Application)
	if _, err := wr.AddInterface(Interface{LinkType: opts.LinkType, SnapLen: opts.SnapLen, Name: opts.InterfaceName,
		Filter: opts.InterfaceFilter, Description: opts.InterfaceDescription}); err != nil {
		return nil, err
	}
	return wr, nil
}

func newZstdEncoder(w io.Writer, opts WriterOptions) (*zstd.Encoder, error) {
	level := opts.ZstdLevel
	if level == 0 {
		level = 1
	}
	conc := opts.ZstdConcurrency
	if conc <= 0 {
		conc = 1
	}
	zw, err := zstd.NewWriter(w,
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithEncoderConcurrency(conc),
		// Memory is not the constraint (one encoder per writer); keeping
		// the faster tables wins throughput.
		zstd.WithLowerEncoderMem(false),
	)
	if err != nil {
		return nil, fmt.Errorf("pcap: zstd: %w", err)
	}
	return zw, nil
}

// Create creates (truncating) the file at path and returns a Writer for it.
// Closing the Writer flushes everything and closes the file; it does not
// fsync.
func Create(path string, opts WriterOptions) (*Writer, error) {
	var f *os.File
	var err error
	direct := false
	if opts.DirectIO && opts.Compress == CompressNone {
		f, direct, err = createDirect(path)
	} else {
		f, err = os.Create(path)
	}
	if err != nil {
		return nil, err
	}
	dst := DirectWriter(f)
	if direct {
		// A direct write waits for the disk: the runtime's syscall path
		// lets other goroutines run meanwhile, which a raw write would not.
		dst = f
	}
	var bw *bufio.Writer
	if opts.Compress != CompressNone {
		// The Writer's own buffer already makes uncompressed writes large;
		// only the encoder's per-block output needs coalescing.
		bw = bufio.NewWriterSize(dst, createBufSize)
		dst = bw
	}
	w, err := NewWriter(dst, opts)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	w.bw, w.file = bw, f
	if direct {
		w.startDirect()
	}
	return w, nil
}

// addrMod is the address of b's first byte modulo align.
func addrMod(b []byte, align int) int {
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % uintptr(align))
}

// startDirect moves the buffer (the file header so far) into an aligned
// one of the full size, which direct writes need and which never grows.
func (w *Writer) startDirect() {
	const align = directAlign
	size := (w.bufMax + align - 1) &^ (align - 1)
	// The remainder a flush keeps (< align) plus the largest record
	// (< minBufferSize <= bufMax) must fit behind each other.
	raw := make([]byte, size+2*align)
	off := 0
	if r := addrMod(raw, align); r != 0 {
		off = align - r
	}
	nb := raw[off : off : off+size+align]
	w.buf = append(nb, w.buf...)
	w.bufMax = cap(w.buf)
	w.align = align
}

var le = binary.LittleEndian // written files use the byte order of the machines we run on

func pad4(n int) int { return (n + 3) &^ 3 }

// reserve returns n bytes at the end of the buffer, growing the buffer
// towards bufMax or else flushing it if they do not fit. n never exceeds
// minBufferSize (see there). On a write error it returns nil and sets w.err.
func (w *Writer) reserve(n int) []byte {
	l := len(w.buf)
	if l+n > cap(w.buf) {
		if cap(w.buf) < w.bufMax {
			// Start small and double: a Writer for a short trace (or a
			// test) never pays for the full buffer, a long one reaches it
			// after a few packets and then never allocates again.
			nb := make([]byte, l, min(max(2*cap(w.buf), l+n), w.bufMax))
			copy(nb, w.buf)
			w.buf = nb
		}
		if l+n > cap(w.buf) {
			if w.flushBuf() != nil {
				return nil
			}
			l = len(w.buf) // a direct writer keeps a partial block
		}
	}
	w.buf = w.buf[:l+n]
	return w.buf[l : l+n : l+n]
}

func (w *Writer) flushBuf() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	if w.align > 0 {
		// Whole blocks only; the rest waits at the buffer's start for
		// the next flush (or for the final one, flushAll).
		n := len(w.buf) &^ (w.align - 1)
		if n == 0 {
			return nil
		}
		_, err := w.dst.Write(w.buf[:n])
		w.buf = w.buf[:copy(w.buf, w.buf[n:])]
		if err != nil {
			w.err = fmt.Errorf("pcap: write: %w", err)
		}
		return w.err
	}
	_, err := w.dst.Write(w.buf)
	w.buf = w.buf[:0]
	if err != nil {
		w.err = fmt.Errorf("pcap: write: %w", err)
	}
	return w.err
}

// flushAll writes everything buffered, ending direct I/O first when the
// buffer holds a partial block (which only a buffered write can take).
func (w *Writer) flushAll() error {
	if err := w.flushBuf(); err != nil {
		return err
	}
	if w.align > 0 && len(w.buf) > 0 {
		if err := clearDirect(w.file); err != nil {
			w.err = fmt.Errorf("pcap: ending direct I/O: %w", err)
			return w.err
		}
		w.align = 0
		w.dst = DirectWriter(w.file)
		return w.flushBuf()
	}
	return nil
}

// putOption writes a pcapng option header and value (zero-padded) at b and
// returns the bytes used.
func putOption(b []byte, code uint16, val string) int {
	le.PutUint16(b[0:], code)
	le.PutUint16(b[2:], uint16(len(val)))
	n := copy(b[4:], val)
	end := 4 + pad4(n)
	clear(b[4+n : end])
	return end
}

func (w *Writer) writeSHB(app string) {
	optLen := 0
	if app != "" {
		optLen = 4 + pad4(len(app)) + 4
	}
	blen := shbMinLen + optLen
	b := w.reserve(blen) // the buffer is empty: cannot fail
	le.PutUint32(b[0:], blockTypeSHB)
	le.PutUint32(b[4:], uint32(blen))
	le.PutUint32(b[8:], pcapngBOM)
	le.PutUint16(b[12:], 1) // version 1.0
	le.PutUint16(b[14:], 0)
	le.PutUint64(b[16:], math.MaxUint64) // section length -1: unknown, we stream
	p := 24
	if app != "" {
		p += putOption(b[p:], optShbUserAp, app)
		p += putOption(b[p:], optEndOfOpt, "")
	}
	le.PutUint32(b[p:], uint32(blen))
}

// AddInterface describes another capture interface (pcapng only) and
// returns its ID for PacketOptions.Interface. Interface 0 is created by
// NewWriter from WriterOptions. ifc.SnapLen 0 means DefaultSnapLen;
// ifc.TsResol and ifc.TsOffset are ignored (the writer's resolution is used
// for every interface).
func (w *Writer) AddInterface(ifc Interface) (int, error) {
	if w.closed {
		return 0, ErrClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.format != FormatPcapNG {
		return 0, errors.New("pcap: AddInterface requires FormatPcapNG")
	}
	if ifc.LinkType > math.MaxUint16 {
		return 0, fmt.Errorf("pcap: link type %d does not fit pcapng's 16 bits", ifc.LinkType)
	}
	snap := ifc.SnapLen
	if snap == 0 {
		snap = DefaultSnapLen
	}
	if snap < 0 || snap > MaxSnapLen {
		return 0, fmt.Errorf("pcap: snap length %d outside [1, %d]", snap, MaxSnapLen)
	}
	if len(ifc.Name) > math.MaxUint16 || len(ifc.Description) > math.MaxUint16 || len(ifc.Filter) >= math.MaxUint16 {
		return 0, errors.New("pcap: interface name, description or filter longer than 65535 bytes")
	}
	optLen := 8 + 4 // if_tsresol, opt_endofopt
	if ifc.Name != "" {
		optLen += 4 + pad4(len(ifc.Name))
	}
	if ifc.Description != "" {
		optLen += 4 + pad4(len(ifc.Description))
	}
	// if_filter: a type byte (0: a libpcap filter string), then the string.
	filterOpt := ""
	if ifc.Filter != "" {
		filterOpt = "\x00" + ifc.Filter
		optLen += 4 + pad4(len(filterOpt))
	}
	blen := idbMinLen + optLen
	b := w.reserve(blen)
	if b == nil {
		return 0, w.err
	}
	le.PutUint32(b[0:], blockTypeIDB)
	le.PutUint32(b[4:], uint32(blen))
	le.PutUint16(b[8:], uint16(ifc.LinkType))
	le.PutUint16(b[10:], 0)
	le.PutUint32(b[12:], uint32(snap))
	p := 16
	if ifc.Name != "" {
		p += putOption(b[p:], optIfName, ifc.Name)
	}
	if ifc.Description != "" {
		p += putOption(b[p:], optIfDescription, ifc.Description)
	}
	if filterOpt != "" {
		p += putOption(b[p:], optIfFilter, filterOpt)
	}
	resol := "\x09" // 10^-9: nanoseconds
	if !w.nano {
		resol = "\x06"
	}
	p += putOption(b[p:], optIfTsresol, resol)
	p += putOption(b[p:], optEndOfOpt, "")
	le.PutUint32(b[p:], uint32(blen))
	w.snap = append(w.snap, snap)
	return len(w.snap) - 1, nil
}

// WritePacket appends one packet captured at tsNanos (nanoseconds since the
// Unix epoch) to the trace. data is truncated to the snap length; origLen is
// the length on the wire, and values below len(data) are taken as
// len(data). data is copied before WritePacket returns. In steady state
// WritePacket does not allocate.
//
// A write error from the destination is sticky: it is returned by this and
// every later call. Invalid arguments (a negative timestamp, say) only fail
// that call.
func (w *Writer) WritePacket(tsNanos int64, data []byte, origLen int) error {
	if w.format == FormatPcapNG && w.err == nil && !w.closed && tsNanos >= 0 && uint(origLen) <= math.MaxUint32 &&
		len(w.snap) > 0 {
		// The common case of a capture loop, a pcapng record without
		// options that fits the buffer, without the general path's checks
		// and calls: a few stores and one copy.
		caplen := min(len(data), w.snap[0])
		blen := EPBLen(caplen)
		if l := len(w.buf); l+blen <= cap(w.buf) {
			units := uint64(tsNanos)
			if !w.nano {
				units /= 1e3
			}
			PutEPB(w.buf[l:l+blen:l+blen], units, data[:caplen], max(origLen, len(data)))
			w.buf = w.buf[:l+blen]
			if l+blen >= w.flushAt {
				return w.flushBuf()
			}
			return nil
		}
	}
	if w.format == FormatPcap && w.err == nil && !w.closed && uint64(tsNanos) < pcapMaxNanos && uint(origLen) <= math.MaxUint32 {
		// The same for a classic pcap record (a dumper's Stop).
		caplen := min(len(data), w.snap[0])
		n := pcapRecordHeaderLen + caplen
		if l := len(w.buf); l+n <= cap(w.buf) {
			b := w.buf[l : l+n : l+n]
			sec, frac := uint64(tsNanos)/1e9, uint64(tsNanos)%1e9
			if !w.nano {
				frac /= 1e3
			}
			le.PutUint32(b[0:], uint32(sec))
			le.PutUint32(b[4:], uint32(frac))
			le.PutUint32(b[8:], uint32(caplen))
			le.PutUint32(b[12:], uint32(max(origLen, len(data))))
			copy(b[pcapRecordHeaderLen:], data[:caplen])
			w.buf = w.buf[:l+n]
			if l+n >= w.flushAt {
				return w.flushBuf()
			}
			return nil
		}
	}
	return w.writePacket(tsNanos, data, origLen, PacketOptions{})
}

// pcapMaxNanos bounds the timestamps a classic pcap record holds: 32-bit
// seconds.
const pcapMaxNanos = (math.MaxUint32 + 1) * 1e9

// EPBLen is the length of an Enhanced Packet Block without options that
// holds caplen bytes of a packet.
func EPBLen(caplen int) int { return 32 + pad4(caplen) }

// PutEPB writes an Enhanced Packet Block of interface 0 without options
// into b, which is exactly EPBLen(len(data)) bytes: data, stamped ts in the
// file's units, with the packet's original length. Writers that fill the
// buffer Tail gives them (a capture loop over a kernel block) use it, as
// WritePacket does.
func PutEPB(b []byte, ts uint64, data []byte, origLen int) {
	blen := len(b)
	h := (*[28]byte)(b)
	// The padding (the buffer is reused) first: the data then overwrites
	// what of it it covers.
	le.PutUint32(b[blen-8:], 0)
	le.PutUint32(h[0:], blockTypeEPB)
	le.PutUint32(h[4:], uint32(blen))
	le.PutUint32(h[8:], 0)
	le.PutUint32(h[12:], uint32(ts>>32))
	le.PutUint32(h[16:], uint32(ts))
	le.PutUint32(h[20:], uint32(len(data)))
	le.PutUint32(h[24:], uint32(origLen))
	copy(b[28:blen-4], data)
	le.PutUint32(b[blen-4:], uint32(blen))
}

// WritePacketOpts is WritePacket with pcapng per-packet options. For
// FormatPcap, opts must be the zero value.
func (w *Writer) WritePacketOpts(tsNanos int64, data []byte, origLen int, opts PacketOptions) error {
	return w.writePacket(tsNanos, data, origLen, opts)
}

func (w *Writer) writePacket(ts int64, data []byte, origLen int, opts PacketOptions) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return ErrClosed
	}
	if ts < 0 {
		return fmt.Errorf("%w: %d ns before the epoch", ErrTimestampRange, ts)
	}
	origLen = max(origLen, len(data))
	if uint64(origLen) > math.MaxUint32 {
		return fmt.Errorf("%w: original length %d", ErrBadLength, origLen)
	}
	if opts.Interface < 0 || opts.Interface >= len(w.snap) {
		return fmt.Errorf("%w: interface %d of %d", ErrBadInterface, opts.Interface, len(w.snap))
	}
	caplen := min(len(data), w.snap[opts.Interface])

	if w.format == FormatPcap {
		if opts.Flags != 0 || opts.Comment != "" {
			return errors.New("pcap: packet flags and comments require FormatPcapNG")
		}
		sec, frac := ts/1e9, ts%1e9
		if sec > math.MaxUint32 {
			return fmt.Errorf("%w: %d s does not fit classic pcap", ErrTimestampRange, sec)
		}
		if !w.nano {
			frac /= 1e3
		}
		b := w.reserve(pcapRecordHeaderLen + caplen)
		if b == nil {
			return w.err
		}
		le.PutUint32(b[0:], uint32(sec))
		le.PutUint32(b[4:], uint32(frac))
		le.PutUint32(b[8:], uint32(caplen))
		le.PutUint32(b[12:], uint32(origLen))
		copy(b[pcapRecordHeaderLen:], data[:caplen])
		return w.maybeFlush()
	}

	if len(opts.Comment) > math.MaxUint16 {
		return fmt.Errorf("%w: comment of %d bytes", ErrBadLength, len(opts.Comment))
	}
	units := uint64(ts)
	if !w.nano {
		units /= 1e3
	}
	optLen := 0
	if opts.Flags != 0 {
		optLen += 8
	}
	if opts.Comment != "" {
		optLen += 4 + pad4(len(opts.Comment))
	}
	if optLen != 0 {
		optLen += 4 // opt_endofopt
	}
	dataEnd := 28 + caplen
	p := pad4(dataEnd)
	blen := p + optLen + 4
	b := w.reserve(blen)
	if b == nil {
		return w.err
	}
	le.PutUint32(b[0:], blockTypeEPB)
	le.PutUint32(b[4:], uint32(blen))
	le.PutUint32(b[8:], uint32(opts.Interface))
	le.PutUint32(b[12:], uint32(units>>32))
	le.PutUint32(b[16:], uint32(units))
	le.PutUint32(b[20:], uint32(caplen))
	le.PutUint32(b[24:], uint32(origLen))
	copy(b[28:], data[:caplen])
	clear(b[dataEnd:p]) // the buffer is reused: padding must be zeroed
	if opts.Flags != 0 {
		le.PutUint16(b[p:], optEpbFlags)
		le.PutUint16(b[p+2:], 4)
		le.PutUint32(b[p+4:], opts.Flags)
		p += 8
	}
	if opts.Comment != "" {
		p += putOption(b[p:], optComment, opts.Comment)
	}
	if optLen != 0 {
		p += putOption(b[p:], optEndOfOpt, "")
	}
	le.PutUint32(b[p:], uint32(blen))
	return w.maybeFlush()
}

// Tail returns the free space at the end of the output buffer, at least n
// bytes (flushing first when it has less), for a caller that writes whole
// records itself (a port writing pcapng Enhanced Packet Blocks of interface
// 0 straight from its packet buffers); Commit adds them to the output.
// Records written so must match the file's format, timestamp resolution
// and snap length. n must not exceed half the buffer size.
func (w *Writer) Tail(n int) ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.closed {
		return nil, ErrClosed
	}
	if len(w.buf)+n > cap(w.buf) {
		if cap(w.buf) < w.bufMax {
			nb := make([]byte, len(w.buf), w.bufMax)
			copy(nb, w.buf)
			w.buf = nb
		}
		if len(w.buf)+n > cap(w.buf) {
			if err := w.flushBuf(); err != nil {
				return nil, err
			}
		}
	}
	return w.buf[len(w.buf):cap(w.buf)], nil
}

// Commit adds n bytes written into the slice Tail returned to the output,
// writing the buffer out once it holds FlushSize bytes.
func (w *Writer) Commit(n int) error {
	w.buf = w.buf[:len(w.buf)+n]
	return w.maybeFlush()
}

// maybeFlush writes the buffer out once it holds FlushSize bytes.
func (w *Writer) maybeFlush() error {
	if len(w.buf) < w.flushAt {
		return nil
	}
	return w.flushBuf()
}

// Flush writes buffered packets to the destination, emitting a zstd block
// boundary when compressing, so that everything written so far can be read
// (for a Create writer, it reaches the file). Flushing often hurts
// compression and throughput; a dumper should flush on a timer, not per
// packet. A DirectIO writer holding a partial block writes it through the
// page cache and goes on without O_DIRECT.
func (w *Writer) Flush() error {
	if w.closed {
		return ErrClosed
	}
	if err := w.flushAll(); err != nil {
		return err
	}
	if w.zw != nil {
		if err := w.zw.Flush(); err != nil {
			w.err = fmt.Errorf("pcap: zstd flush: %w", err)
			return w.err
		}
	}
	if w.bw != nil {
		if err := w.bw.Flush(); err != nil {
			w.err = fmt.Errorf("pcap: write: %w", err)
			return w.err
		}
	}
	return nil
}

// Close flushes the buffer and ends the zstd frame. A Writer made by Create
// also closes its file; otherwise the destination io.Writer is left open.
// It returns the first error encountered, including an earlier sticky write
// error (the trace is then incomplete). Calling Close again returns nil.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.flushAll()
	if w.zw != nil {
		// Close even after an error: it releases the encoder's state.
		if e := w.zw.Close(); e != nil && err == nil {
			err = fmt.Errorf("pcap: zstd close: %w", e)
		}
	}
	if w.bw != nil && err == nil {
		if e := w.bw.Flush(); e != nil {
			err = fmt.Errorf("pcap: write: %w", e)
		}
	}
	if w.file != nil {
		if e := w.file.Close(); e != nil && err == nil {
			err = e
		}
	}
	w.buf = nil
	return err
}

// InterfaceStats are the counters of a pcapng Interface Statistics Block,
// which Wireshark shows in its capture file properties. A zero counter is
// written as zero; Start and End are Unix nanoseconds (0: left out).
type InterfaceStats struct {
	Start, End int64
	// Received is isb_ifrecv (frames the interface saw), Dropped
	// isb_ifdrop (lost by the interface or its ring), FilterAccept
	// isb_filteraccept, OSDropped isb_osdrop (lost by the operating
	// system), Delivered isb_usrdeliv (handed to the capturer).
	Received, Dropped, FilterAccept, OSDropped, Delivered uint64
	// Comment is written as opt_comment when not empty: where frames were
	// lost, in words.
	Comment string
}

// WriteStats appends an Interface Statistics Block for interface ifc at
// time tsNanos (pcapng only).
func (w *Writer) WriteStats(ifc int, tsNanos int64, st InterfaceStats) error {
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	if w.format != FormatPcapNG {
		return errors.New("pcap: interface statistics require FormatPcapNG")
	}
	if ifc < 0 || ifc >= len(w.snap) {
		return fmt.Errorf("%w: interface %d of %d", ErrBadInterface, ifc, len(w.snap))
	}
	if len(st.Comment) > math.MaxUint16 {
		return fmt.Errorf("%w: comment of %d bytes", ErrBadLength, len(st.Comment))
	}
	units := func(ns int64) uint64 {
		if !w.nano {
			return uint64(ns) / 1e3
		}
		return uint64(ns)
	}
	type opt struct {
		code uint16
		v    uint64
	}
	opts := []opt{{optIsbIfRecv, st.Received}, {optIsbIfDrop, st.Dropped}, {optIsbFilterAccept, st.FilterAccept},
		{optIsbOSDrop, st.OSDropped}, {optIsbUsrDeliv, st.Delivered}}
	if st.Start > 0 {
		opts = append(opts, opt{optIsbStartTime, units(st.Start)})
	}
	if st.End > 0 {
		opts = append(opts, opt{optIsbEndTime, units(st.End)})
	}
	optLen := len(opts)*12 + 4
	if st.Comment != "" {
		optLen += 4 + pad4(len(st.Comment))
	}
	blen := 24 + optLen
	b := w.reserve(blen)
	if b == nil {
		return w.err
	}
	ts := units(max(tsNanos, 0))
	le.PutUint32(b[0:], blockTypeISB)
	le.PutUint32(b[4:], uint32(blen))
	le.PutUint32(b[8:], uint32(ifc))
	le.PutUint32(b[12:], uint32(ts>>32))
	le.PutUint32(b[16:], uint32(ts))
	p := 20
	if st.Comment != "" {
		p += putOption(b[p:], optComment, st.Comment)
	}
	for _, o := range opts {
		le.PutUint16(b[p:], o.code)
		le.PutUint16(b[p+2:], 8)
		if o.code == optIsbStartTime || o.code == optIsbEndTime {
			// Timestamps are two 32-bit halves, high first, as in an EPB.
			le.PutUint32(b[p+4:], uint32(o.v>>32))
			le.PutUint32(b[p+8:], uint32(o.v))
		} else {
			le.PutUint64(b[p+4:], o.v)
		}
		p += 12
	}
	p += putOption(b[p:], optEndOfOpt, "")
	le.PutUint32(b[p:], uint32(blen))
	return nil
}

// Buffered is the number of bytes written but not yet flushed.
func (w *Writer) Buffered() int { return len(w.buf) }
