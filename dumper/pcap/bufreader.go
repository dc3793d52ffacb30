package pcap

import (
	"errors"
	"io"
)

// bufReader is a minimal bufio.Reader whose buffer grows on demand, up to
// a hard limit. bufio.Reader has a fixed size, which forces a choice
// between a buffer big enough for the largest block we accept (1 MiB, for
// every Reader, even one opened on a 100-byte file) and rejecting valid
// files. Growing is safe against hostile length fields because callers
// only Peek lengths they have already checked against the limit, and the
// buffer only grows when the data is actually being read.
type bufReader struct {
	rd    io.Reader
	buf   []byte
	r, w  int // buf[r:w] is buffered, unread data
	err   error
	fills int // refills at the current size, for the streaming heuristic
}

const (
	// bufInitial stays below the runtime's large-object threshold so that
	// opening many small traces (or fuzzing) is cheap.
	bufInitial = 32 << 10
	// bufStreaming is the size a sequentially read trace grows to: big
	// enough that read calls are rare relative to packets.
	bufStreaming = 256 << 10
)

var errNoProgress = errors.New("pcap: reader returned no data and no error")

func newBufReader(rd io.Reader) *bufReader {
	return &bufReader{rd: rd, buf: make([]byte, bufInitial)}
}

// grow reallocates the buffer to hold at least n bytes, keeping unread data.
func (b *bufReader) grow(n int) {
	nb := make([]byte, n)
	b.w = copy(nb, b.buf[b.r:b.w])
	b.r = 0
	b.buf = nb
	b.fills = 0
}

// fill reads until at least n bytes are buffered or the source fails.
// n must not exceed maxBlockLen.
func (b *bufReader) fill(n int) {
	if n > len(b.buf) {
		b.grow(min(max(n, 2*len(b.buf)), maxBlockLen))
	} else if b.fills++; b.fills > 4 && len(b.buf) < bufStreaming {
		// Several refills at this size: this is a sequential scan of a
		// real trace, so trade a one-time allocation for fewer reads.
		b.grow(2 * len(b.buf))
	}
	if b.r > 0 {
		// Slide the (fewer than n) unread bytes to the front so the read
		// below gets the whole rest of the buffer, not a sliver of it.
		b.w = copy(b.buf, b.buf[b.r:b.w])
		b.r = 0
	}
	for empty := 0; b.w-b.r < n && b.err == nil; {
		m, err := b.rd.Read(b.buf[b.w:])
		if m < 0 || m > len(b.buf)-b.w {
			b.err = errors.New("pcap: reader returned invalid count")
			return
		}
		b.w += m
		b.err = err
		if m == 0 && err == nil {
			if empty++; empty >= 100 {
				b.err = errNoProgress
			}
		}
	}
}

// Peek returns the next n bytes without consuming them; they stay valid
// until the next call. With fewer than n bytes available it returns what
// there is and the source's error (io.EOF at the end).
func (b *bufReader) Peek(n int) ([]byte, error) {
	if n > maxBlockLen {
		return nil, errBufferLimit
	}
	if b.w-b.r < n {
		b.fill(n)
		if b.w-b.r < n {
			return b.buf[b.r:b.w], b.err
		}
	}
	return b.buf[b.r : b.r+n : b.r+n], nil
}

var errBufferLimit = errors.New("pcap: request exceeds read buffer limit")

// Discard skips n bytes, reading and dropping them if they are not
// buffered, so skipping a huge block costs no memory. It returns how many
// were skipped.
func (b *bufReader) Discard(n int) (int, error) {
	done := 0
	for {
		k := min(n-done, b.w-b.r)
		b.r += k
		done += k
		if done == n {
			return done, nil
		}
		if b.err != nil {
			return done, b.err
		}
		b.r, b.w = 0, 0
		b.fill(1)
	}
}
