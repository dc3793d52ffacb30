package perftest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

// QPInfo is what one side tells the other about a QP: perftest's key message.
type QPInfo struct {
	LID      uint16
	OutReads uint16 // outstanding READs/atomics it accepts (responder resources)
	QPN      uint32
	PSN      uint32
	RKey     uint32
	VAddr    uint64 // where the peer's WRITEs, READs and atomics go
	GID      verbs.GID
}

// String formats the key message as perftest's KEY_PRINT_FMT_GID does:
// lid:out_reads:qpn:psn:rkey:vaddr: then the 16 GID bytes.
func (q QPInfo) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x", q.LID, q.OutReads, q.QPN, q.PSN, q.RKey, q.VAddr)
	for _, x := range q.GID {
		fmt.Fprintf(&b, ":%02x", x)
	}
	return b.String()
}

// ParseQPInfo parses a key message.
func ParseQPInfo(s string) (QPInfo, error) {
	var q QPInfo
	f := strings.Split(strings.TrimSpace(s), ":")
	if len(f) != 6+16 {
		return q, fmt.Errorf("perftest: key message %q: %d fields, want 22", s, len(f))
	}
	vals := make([]uint64, len(f))
	widths := [6]int{16, 16, 24, 24, 32, 64}
	for i, x := range f {
		w := 8
		if i < 6 {
			w = widths[i]
		}
		var v uint64
		if _, err := fmt.Sscanf(x, "%x", &v); err != nil || len(x) == 0 || len(x) > 16 || (w < 64 && v >= 1<<w) {
			return q, fmt.Errorf("perftest: key message field %d %q is not a %d-bit hex number", i+1, x, w)
		}
		vals[i] = v
	}
	q.LID, q.OutReads, q.QPN, q.PSN, q.RKey, q.VAddr = uint16(vals[0]), uint16(vals[1]), uint32(vals[2]),
		uint32(vals[3]), uint32(vals[4]), vals[5]
	for i := range q.GID {
		q.GID[i] = byte(vals[6+i])
	}
	return q, nil
}

// MaxLine bounds a line of the exchange; longer ones end it.
const MaxLine = 4096

// ErrPeer is wrapped by errors the other side reported or caused (it closed
// the stream, answered out of turn, or said ERR).
var ErrPeer = errors.New("perftest: peer")

// peer is the out-of-band stream to the other side. A reader goroutine
// delivers its lines, so a side can keep driving its device while it waits
// for one.
type peer struct {
	w     io.Writer
	wmu   sync.Mutex
	lines chan string
	rerr  error // set before lines closes
	// pending are lines check took off the stream during a run.
	pending []string
}

func newPeer(rw io.ReadWriter) *peer {
	p := &peer{w: rw, lines: make(chan string, 16)}
	go func() {
		// Lines are bounded by the buffer: ReadString would grow without
		// end for a peer that never sends a newline.
		r := bufio.NewReaderSize(rw, MaxLine)
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				switch {
				case errors.Is(err, bufio.ErrBufferFull):
					err = fmt.Errorf("%w: a line over %d bytes", ErrPeer, MaxLine)
				case err == io.EOF:
					err = fmt.Errorf("%w closed the connection", ErrPeer)
				}
				p.rerr = err
				close(p.lines)
				return
			}
			p.lines <- strings.TrimRight(string(line), "\r\n")
		}
	}()
	return p
}

func (p *peer) send(format string, a ...any) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := fmt.Fprintf(p.w, format+"\n", a...); err != nil {
		return fmt.Errorf("perftest: sending to the peer: %w", err)
	}
	return nil
}

// fail tells the peer why this side gives up; best effort.
func (p *peer) fail(err error) {
	if !errors.Is(err, ErrPeer) {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		if len(msg) > MaxLine/2 {
			msg = msg[:MaxLine/2] + "..."
		}
		_ = p.send("ERR %s", msg)
	}
}

// wait returns the next line, whose first word must be one of words; it
// returns that word and the rest of the line. While it waits it calls drive
// (when not nil) so the local device keeps running; it gives up when ctx
// ends or nothing arrives for timeout.
func (p *peer) wait(ctx context.Context, drive func() bool, timeout time.Duration, words ...string) (string, string, error) {
	deadline := time.Now().Add(timeout)
	want := strings.Join(words, " or ")
	var tick *time.Ticker
	if drive == nil {
		tick = time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
	}
	for spins := 0; ; spins++ {
		var line string
		var ok bool
		if len(p.pending) > 0 {
			line, ok = p.pending[0], true
			p.pending = p.pending[1:]
		} else if drive != nil {
			select {
			case line, ok = <-p.lines:
			default:
				drive()
				if spins&1023 == 0 {
					if err := ctx.Err(); err != nil {
						return "", "", err
					}
					if time.Now().After(deadline) {
						return "", "", fmt.Errorf("%w: no %s from the peer in %v", ErrPeer, want, timeout)
					}
				}
				continue
			}
		} else {
			select {
			case line, ok = <-p.lines:
			case <-ctx.Done():
				return "", "", ctx.Err()
			case <-tick.C:
				if time.Now().After(deadline) {
					return "", "", fmt.Errorf("%w: no %s from the peer in %v", ErrPeer, want, timeout)
				}
				continue
			}
		}
		if !ok {
			return "", "", p.rerr
		}
		word, rest, _ := strings.Cut(line, " ")
		if word == "ERR" {
			return "", "", fmt.Errorf("%w reports: %s", ErrPeer, rest)
		}
		for _, w := range words {
			if word == w {
				return word, rest, nil
			}
		}
		return "", "", fmt.Errorf("%w sent %q, expected %s", ErrPeer, line, want)
	}
}

// check is called from measurement loops: a line that arrives mid-run is
// kept for the next wait, unless it is the peer giving up.
func (p *peer) check() error {
	select {
	case line, ok := <-p.lines:
		if !ok {
			return p.rerr
		}
		if rest, isErr := strings.CutPrefix(line, "ERR "); isErr {
			return fmt.Errorf("%w reports: %s", ErrPeer, rest)
		}
		p.pending = append(p.pending, line)
	default:
	}
	return nil
}
