package trace

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Source is the output of one dumper: a file (Path), or one file per
// worker (Paths), in any format the pcap package reads (pcap, pcapng,
// zstd-compressed). Several Sources may carry the same Name; their files
// count as one dumper's. Each file is expected in mirror sequence order.
type Source struct {
	Name  string   `json:"name"`
	Path  string   `json:"path,omitempty"`
	Paths []string `json:"paths,omitempty"`
}

func (s Source) paths() []string {
	if s.Path == "" {
		return s.Paths
	}
	return append([]string{s.Path}, s.Paths...)
}

// Unknown is the counter value that leaves conditions 3 and 4 unchecked.
const Unknown int64 = -1

// Options configure Merge. Note that the counters' zero value is a known
// count of zero: set them to Unknown when they are not known.
type Options struct {
	// Mirrored is the injector's mirrored-copy counter (mirror.InjectorStats.
	// Mirrored, the last mirror sequence number), RxRoCE the RoCE packets
	// it received (mirror.InjectorStats.RxRoCE). Conditions 3 and 4 compare the
	// trace's packet count with them; a negative value means unknown and
	// leaves the condition not checked.
	Mirrored int64
	RxRoCE   int64
	// FirstSeq is the sequence number of the injector's first copy (1 for
	// inject.Injector); 0 means unknown, and the range starts at the
	// lowest number in the trace. When it is set, copies missing before the
	// first one in the trace are a gap, and so, with Mirrored known, are
	// copies missing after the last one (up to FirstSeq+Mirrored-1).
	FirstSeq uint64
	// Assign, when set, names the dumper the injector sent sequence number
	// seq to (its round-robin schedule; see ScheduleAssign): the missing
	// numbers are then attributed to dumpers in the report.
	Assign func(seq uint64) string
	// StrictTimestamps makes equal consecutive timestamps a violation of
	// conditions 2 and 5. By default only a step back is: two ports can
	// stamp the same nanosecond.
	StrictTimestamps bool
	// RewritePort is the UDP destination port of copies the dumper did not
	// restore; Merge restores them (mirror.Restore) before writing.
	// 0 means mirror.DefaultRewritePort.
	RewritePort uint16
	// MaxListed bounds the offenders listed per violation (gaps,
	// duplicates, ...); 0 means 10.
	MaxListed int
}

// openTrace opens a dumper's file; tests replace it to inject read errors.
var openTrace = pcap.Open

// stream is one file being read.
type stream struct {
	idx       int // position in the source list: breaks ties between equal sequence numbers
	src, file int // indexes into Report.Sources and its Files
	name      string
	path      string
	r         *pcap.Reader
	rec       pcap.Record
	np        header.Parsed
	meta      mirror.Meta
	dir       dirKey
	data      []byte // the current copy: rec.Data, or buf once restored
	buf       []byte
	lastSeq   uint64
}

func (s *stream) close() {
	if s.r != nil {
		s.r.Close()
		s.r = nil
	}
}

// streamHeap orders the streams by their current sequence number.
type streamHeap []*stream

func (h streamHeap) Len() int { return len(h) }
func (h streamHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	return a.meta.Seq < b.meta.Seq || a.meta.Seq == b.meta.Seq && a.idx < b.idx
}
func (h streamHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)   { *h = append(*h, x.(*stream)) }
func (h *streamHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return s
}

type merger struct {
	opts      Options
	rep       *Report
	chk       *checker
	streams   []*stream
	h         streamHeap
	malformed map[string]uint64
}

// Merge merges the dumpers' files by mirror sequence number, writes the
// merged trace to out (when not nil) and checks its integrity.
//
// Each record is written with its mirror timestamp, extended past the
// 48-bit wraparound, as its timestamp (out should be a nanosecond
// writer); Merge neither flushes nor closes out. Records that are not
// mirrored copies are counted and left out.
//
// The report is returned in every case but a bad argument. When the trace
// fails the integrity check, the error is an *InvalidTestError (a dumper
// whose file is missing, unreadable or truncated is condition 7, not an
// I/O error). Other errors end the merge early, the report then covering
// what was read: a read error below the trace format (wrapped, naming the
// dumper and the file), a write error on out, or the end of ctx.
func Merge(ctx context.Context, sources []Source, out *pcap.Writer, opts Options) (*Report, error) {
	if len(sources) == 0 {
		return nil, errors.New("trace: no sources")
	}
	if opts.RewritePort == 0 {
		opts.RewritePort = mirror.DefaultRewritePort
	}
	if opts.MaxListed <= 0 {
		opts.MaxListed = 10
	}
	m := &merger{opts: opts, chk: newChecker(opts), malformed: make(map[string]uint64),
		rep: &Report{Mirrored: opts.Mirrored, RxRoCE: opts.RxRoCE}}
	byName := make(map[string]int)
	for i, src := range sources {
		paths := src.paths()
		if len(paths) == 0 {
			return nil, fmt.Errorf("trace: source %d (%q) has no path", i, src.Name)
		}
		name := src.Name
		if name == "" {
			name = paths[0]
		}
		si, ok := byName[name]
		if !ok {
			si = len(m.rep.Sources)
			byName[name] = si
			m.rep.Sources = append(m.rep.Sources, SourceStats{Name: name})
		}
		for _, p := range paths {
			st := &m.rep.Sources[si]
			st.Files = append(st.Files, FileStats{Path: p})
			m.streams = append(m.streams, &stream{idx: len(m.streams), src: si, file: len(st.Files) - 1, name: name, path: p})
		}
	}
	defer func() {
		for _, s := range m.streams {
			s.close()
		}
	}()

	for _, s := range m.streams {
		r, err := openTrace(s.path)
		if err != nil {
			m.fail(s, err.Error())
			continue
		}
		s.r = r
		if r.Format() == pcap.FormatPcap && r.LinkType() != pcap.LinkTypeEthernet {
			m.fail(s, fmt.Sprintf("link type %d, not Ethernet", r.LinkType()))
			s.close()
			continue
		}
		ok, err := m.advance(s)
		if err != nil {
			return m.finish(), err
		}
		if ok {
			m.h = append(m.h, s)
		}
	}
	heap.Init(&m.h)

	for n := 0; len(m.h) > 0; n++ {
		if n&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return m.finish(), fmt.Errorf("trace: merge: %w", err)
			}
		}
		s := m.h[0]
		m.rep.Sources[s.src].Packets++
		ts := m.chk.packet(&s.meta, s.dir, s.rec.Timestamp)
		if out != nil {
			if err := out.WritePacket(max(ts, 0), s.data, s.rec.OrigLen); err != nil {
				return m.finish(), fmt.Errorf("trace: writing the merged trace: %w", err)
			}
		}
		ok, err := m.advance(s)
		if err != nil {
			return m.finish(), err
		}
		if ok {
			heap.Fix(&m.h, 0)
		} else {
			heap.Pop(&m.h)
		}
	}

	rep := m.finish()
	if !rep.Valid {
		return rep, &InvalidTestError{Violations: rep.Violations}
	}
	return rep, nil
}

// fail records why a file ended early.
func (m *merger) fail(s *stream, why string) {
	m.rep.Sources[s.src].Files[s.file].Error = why
	m.rep.Sources[s.src].Failed = true
}

// advance reads the next mirrored copy of s, skipping (and counting) the
// records that are not. It reports false at the end of the file, and an
// error only for an I/O error below the trace format.
func (m *merger) advance(s *stream) (bool, error) {
	src := &m.rep.Sources[s.src]
	f := &src.Files[s.file]
	for {
		err := s.r.Next(&s.rec)
		if err != nil {
			s.close()
			if err == io.EOF {
				return false, nil
			}
			var fe *pcap.FormatError
			if errors.As(err, &fe) {
				m.fail(s, err.Error())
				return false, nil
			}
			return false, fmt.Errorf("trace: dumper %s: reading %s: %w", s.name, s.path, err)
		}
		s.data = s.rec.Data
		var restore bool
		var reason string
		if s.rec.LinkType != pcap.LinkTypeEthernet {
			reason = "link type not Ethernet"
		} else {
			s.meta, s.dir, restore, reason = parseCopy(s.data, &s.np, m.opts.RewritePort)
		}
		if reason != "" {
			f.Malformed++
			src.Malformed++
			m.rep.Malformed++
			m.malformed[reason]++
			continue
		}
		if restore {
			s.buf = append(s.buf[:0], s.data...)
			s.data = s.buf
			_, _ = mirror.Restore(s.data, &s.np) // parseCopy checked what it needs
			m.rep.Restored++
		}
		seq := s.meta.Seq
		if f.Packets == 0 {
			f.FirstSeq = seq
		} else if seq < s.lastSeq {
			f.OutOfOrder++
			src.OutOfOrder++
			if len(m.chk.orderBack) < m.opts.MaxListed {
				m.chk.orderBack = append(m.chk.orderBack, orderBack{source: s.name, path: s.path, seq: seq, prevSeq: s.lastSeq})
			}
		}
		s.lastSeq = seq
		f.Packets++
		f.LastSeq = seq
		return true, nil
	}
}

func (m *merger) finish() *Report {
	if len(m.malformed) > 0 {
		m.rep.MalformedReasons = m.malformed
	}
	m.chk.finish(m.rep)
	return m.rep
}

// Reasons a record is not a mirrored copy, besides the decoder's errors.
const (
	reasonNotIP     = "not IP"
	reasonNotUDP    = "not UDP"
	reasonFragment  = "IP fragment"
	reasonPort      = "UDP destination port neither RoCEv2 nor the rewrite port"
	reasonNoMetaUDP = "no UDP header for the mirror metadata"
)

// parseCopy decodes a dumped frame (cut to any snap length) and reads its
// mirror metadata and direction. restore says the copy still carries the
// rewrite port. reason is "" for a mirrored copy and says why it is not
// otherwise; the strings are constants, so counting them allocates
// nothing.
func parseCopy(frame []byte, np *header.Parsed, rewritePort uint16) (m mirror.Meta, dir dirKey, restore bool, reason string) {
	if err := header.DecodeTruncated(frame, np); err != nil {
		return m, dir, false, err.Error()
	}
	switch np.L3Proto {
	case header.EtherTypeIPv4:
		ip := frame[np.L3Off:]
		dir.src[10], dir.src[11] = 0xff, 0xff
		dir.dst[10], dir.dst[11] = 0xff, 0xff
		copy(dir.src[12:], ip[12:16])
		copy(dir.dst[12:], ip[16:20])
	case header.EtherTypeIPv6:
		ip := frame[np.L3Off:]
		copy(dir.src[:], ip[8:24])
		copy(dir.dst[:], ip[24:40])
	default:
		return m, dir, false, reasonNotIP
	}
	if np.Fragment {
		return m, dir, false, reasonFragment
	}
	if np.L4Proto != header.IPProtoUDP {
		return m, dir, false, reasonNotUDP
	}
	m, err := mirror.Read(frame, np)
	if err != nil {
		return m, dir, false, reasonNoMetaUDP
	}
	switch header.UDP(frame[np.L4Off:]).DstPort() {
	case roce.UDPPort:
	case rewritePort:
		restore = true
	default:
		return m, dir, false, reasonPort
	}
	return m, dir, restore, ""
}
