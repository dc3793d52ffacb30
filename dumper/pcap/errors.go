package pcap

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of them, so test
// with errors.Is; use errors.As with *FormatError to get the offset.
var (
	// ErrBadMagic reports input that is not pcap, pcapng or zstd, or a pcapng
	// section header with an invalid byte-order magic.
	ErrBadMagic = errors.New("pcap: bad magic number")
	// ErrTruncated reports input that ends in the middle of a header,
	// record or block.
	ErrTruncated = errors.New("pcap: truncated input")
	// ErrBadLength reports a length field that is inconsistent (block
	// trailer mismatch, option overrunning its block, caplen larger than the
	// snap length or MaxSnapLen, ...), or, when writing, a length that the
	// format cannot represent.
	ErrBadLength = errors.New("pcap: bad length")
	// ErrBadVersion reports an unsupported pcap or pcapng version.
	ErrBadVersion = errors.New("pcap: unsupported version")
	// ErrBadInterface reports a pcapng packet that refers to an interface
	// that has not been described, or too many interfaces.
	ErrBadInterface = errors.New("pcap: unknown interface")
	// ErrTimestampRange reports a timestamp the output format cannot
	// represent (negative, or beyond 2106 for classic pcap).
	ErrTimestampRange = errors.New("pcap: timestamp out of range")
	// ErrCorrupt reports a zstd stream the decoder rejects (bad block,
	// checksum mismatch, window larger than the reader allows, ...). The
	// decoder's error is the FormatError's Cause.
	ErrCorrupt = errors.New("pcap: corrupt compressed stream")
	// ErrClosed is returned when a closed Writer or Reader is used.
	ErrClosed = errors.New("pcap: use of closed reader or writer")
)

// FormatError describes malformed input. Err is one of the sentinel errors
// above; Cause, if not nil, is the underlying error (for example the zstd
// decoder's) that revealed the problem.
type FormatError struct {
	Offset int64  // byte offset of the offending structure in the decompressed trace
	Err    error  // sentinel: ErrBadMagic, ErrTruncated, ErrBadLength, ...
	Detail string // human-readable specifics
	Cause  error  // optional underlying error
}

func (e *FormatError) Error() string {
	s := fmt.Sprintf("%v at offset %d", e.Err, e.Offset)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap lets errors.Is match both the sentinel and the cause.
func (e *FormatError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

func formatErr(sentinel error, off int64, format string, args ...any) error {
	return &FormatError{Offset: off, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}
