package capture

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/dumper/pcap"
)

// Output says where frames go and when a file ends, like dumpcap's -w and
// -b: Path "-" is standard output (one stream, never rotated); otherwise
// with FileSize or FileDuration set files are named
// BASE_NNNNN_YYYYMMDDHHMMSS.EXT and, with Files set, only the last Files of
// them are kept.
type Output struct {
	Path         string
	Format       pcap.Format
	Zstd         bool
	ZstdLevel    int
	SnapLen      int
	FileSize     int64
	FileDuration time.Duration
	Files        int
	// Interface and Filter describe the capture in the pcapng interface
	// block; Application in the section header.
	Interface   string
	Filter      string
	Application string
	// Stdout is where Path "-" writes (os.Stdout when nil).
	Stdout io.Writer
}

func (o *Output) rotating() bool { return o.Path != "-" && (o.FileSize > 0 || o.FileDuration > 0) }

// File is one written capture file.
type File struct {
	Path    string    `json:"path"`
	Packets uint64    `json:"packets"`
	Bytes   int64     `json:"bytes"`
	Opened  time.Time `json:"opened"`
	Removed bool      `json:"removed,omitempty"` // dropped from the ring of files
}

// sink writes one stream of frames (all queues', or one queue's) into its
// files, rotating between frames so that every frame is in exactly one.
type sink struct {
	mu     sync.Mutex // held by the writers when queues share the sink
	out    *Output
	suffix string // "-qN" for a per-queue sink
	stats  func() statsSnapshot

	w       *pcap.Writer
	file    *os.File
	cur     File
	seq     int
	opened  int64 // ns, wall clock
	firstTS int64
	snap0   statsSnapshot // counters when the file opened
	files   []File
	fw      *fileWriter

	// shared is set when several workers write the sink, under mu.
	shared bool
	// written counts the frames handed to the writer; published is its
	// value as Stats sees it, updated every few frames.
	written   uint64
	published atomic.Uint64
	flushed   atomic.Uint64 // of those, the ones known to be on disk
	unsaved   atomic.Uint64 // frames refused after a write error
	errp      atomic.Pointer[error]

	scratch  []byte
	recBytes int64 // file size estimate: bytes of records appended
	// rotBytes and rotAge are the size and age (ns from the first frame)
	// at which the file rotates, math.MaxInt64 for never: one comparison
	// each per frame.
	rotBytes, rotAge int64
}

// statsSnapshot is what an Interface Statistics Block reports.
type statsSnapshot struct {
	received, kernelDrops, portDrops, filtered, delivered uint64
}

// fileWriter is the file under the pcap writer. It remembers the size of
// the last complete write, so that after a failed one (a full disk) the
// file is cut back to whole records and stays readable.
type fileWriter struct {
	f      *os.File  // nil for standard output
	out    io.Writer // f, or standard output
	good   int64
	failed bool
	onOK   func()
}

func (w *fileWriter) Write(b []byte) (int, error) {
	if w.failed {
		return 0, errors.New("capture: an earlier write failed")
	}
	n, err := w.out.Write(b)
	if err != nil {
		w.failed = true
		if w.f != nil {
			_ = w.f.Truncate(w.good)
		}
		return n, err
	}
	w.good += int64(n)
	if w.onOK != nil {
		w.onOK()
	}
	return n, nil
}

func (s *sink) open(now time.Time) error {
	o := s.out
	// Write out every 64 KiB: the buffer stays in the CPU cache.
	opts := pcap.WriterOptions{Format: o.Format, LinkType: pcap.LinkTypeEthernet, SnapLen: o.SnapLen, Nanosecond: true,
		InterfaceName: o.Interface, InterfaceFilter: o.Filter, Application: o.Application, FlushSize: 64 << 10}
	if o.Zstd {
		opts.Compress, opts.ZstdLevel = pcap.CompressZstd, o.ZstdLevel
	}
	path := o.Path
	stdout := o.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	s.fw = &fileWriter{out: stdout, onOK: func() { s.flushed.Store(s.written) }}
	if path != "-" {
		if o.rotating() {
			s.seq++
			path = rotatedName(path, s.suffix, s.seq, now)
		} else if s.suffix != "" {
			ext := fullExt(path)
			path = strings.TrimSuffix(path, ext) + s.suffix + ext
		}
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		s.file = f
		s.fw.f, s.fw.out = f, pcap.DirectWriter(f) // raw write(2): see DirectWriter
	}
	w, err := pcap.NewWriter(s.fw, opts)
	if err != nil {
		if s.file != nil {
			s.file.Close()
		}
		return fmt.Errorf("capture: %w", err)
	}
	s.w = w
	s.rotBytes, s.rotAge = math.MaxInt64, math.MaxInt64
	if o.rotating() && o.FileSize > 0 {
		s.rotBytes = o.FileSize
	}
	if o.rotating() && o.FileDuration > 0 {
		s.rotAge = int64(o.FileDuration)
	}
	s.cur = File{Path: path, Opened: now}
	s.opened = now.UnixNano()
	s.firstTS = 0
	s.recBytes = 0
	if s.stats != nil {
		s.snap0 = s.stats()
	}
	return nil
}

// fullExt is the file's extension with a compression suffix: ".pcapng.zst".
func fullExt(path string) string {
	base := filepath.Base(path)
	if i := strings.IndexByte(base, '.'); i > 0 {
		return base[i:]
	}
	return ""
}

func rotatedName(path, suffix string, seq int, t time.Time) string {
	ext := fullExt(path)
	return fmt.Sprintf("%s%s_%05d_%s%s", strings.TrimSuffix(path, ext), suffix, seq, t.Format("20060102150405"), ext)
}

// write appends one frame, rotating first when the file is full or old.
// A tagged frame (vlan != 0) gets its tag back after the MAC addresses.
func (s *sink) write(data []byte, vlan uint32, ts int64, wireLen int) {
	if s.errp.Load() != nil {
		s.unsaved.Add(1)
		return
	}
	o := s.out
	if s.cur.Packets > 0 && (s.recBytes >= s.rotBytes || ts-s.firstTS >= s.rotAge) {
		if err := s.rotate(time.Unix(0, ts)); err != nil {
			s.fail(err)
			s.unsaved.Add(1)
			return
		}
	}
	if vlan != 0 && len(data) >= 12 {
		s.scratch = append(s.scratch[:0], data[:12]...)
		s.scratch = append(s.scratch, byte(vlan>>24), byte(vlan>>16), byte(vlan>>8), byte(vlan))
		s.scratch = append(s.scratch, data[12:]...)
		data = s.scratch
	}
	if err := s.w.WritePacket(ts, data, wireLen); err != nil {
		s.fail(err)
		s.unsaved.Add(1)
		return
	}
	if s.cur.Packets == 0 {
		s.firstTS = ts
	}
	s.cur.Packets++
	s.written++
	caplen := min(len(data), max(o.SnapLen, 1))
	if o.Format == pcap.FormatPcapNG {
		s.recBytes += int64(32 + (caplen+3)&^3)
	} else {
		s.recBytes += int64(16 + caplen)
	}
}

// fail records a write error. Frames still in the writer's buffer are not
// on disk: lost() counts them.
func (s *sink) fail(err error) {
	e := fmt.Errorf("capture: writing %s: %w", s.cur.Path, err)
	s.errp.CompareAndSwap(nil, &e)
}

// err is the sink's first write error, or nil.
func (s *sink) err() error {
	if p := s.errp.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *sink) rotate(now time.Time) error {
	if err := s.closeFile(now.UnixNano()); err != nil {
		return err
	}
	if err := s.open(now); err != nil {
		return err
	}
	if n := s.out.Files; n > 0 {
		live := 0
		for i := len(s.files) - 1; i >= 0; i-- {
			if s.files[i].Removed {
				continue
			}
			if live++; live >= n {
				if err := os.Remove(s.files[i].Path); err == nil || os.IsNotExist(err) {
					s.files[i].Removed = true
				}
			}
		}
	}
	return nil
}

// closeFile ends the current file with an Interface Statistics Block
// (pcapng) saying what the capture saw and lost while it was open.
func (s *sink) closeFile(end int64) error {
	if s.w == nil {
		return nil
	}
	if s.out.Format == pcap.FormatPcapNG && s.stats != nil && s.err() == nil {
		now := s.stats()
		d := now.sub(s.snap0)
		st := pcap.InterfaceStats{Start: s.opened, End: end, Received: d.received, Dropped: d.kernelDrops + d.portDrops,
			FilterAccept: d.received - d.filtered, OSDropped: d.kernelDrops, Delivered: s.cur.Packets}
		if d.kernelDrops+d.portDrops > 0 {
			st.Comment = fmt.Sprintf("%d frames dropped while this file was open: %d by the kernel ring, %d by the port",
				d.kernelDrops+d.portDrops, d.kernelDrops, d.portDrops)
		}
		if err := s.w.WriteStats(0, end, st); err != nil {
			s.fail(err)
		}
	}
	err := s.w.Close()
	if err != nil {
		s.fail(err)
	}
	s.publish()
	if s.file != nil {
		if e := s.file.Close(); e != nil && err == nil {
			err = e
			s.fail(e)
		}
		if fi, e := os.Stat(s.cur.Path); e == nil {
			s.cur.Bytes = fi.Size()
		}
	}
	s.files = append(s.files, s.cur)
	s.w, s.file, s.fw = nil, nil, nil
	return s.err()
}

func (a statsSnapshot) sub(b statsSnapshot) statsSnapshot {
	return statsSnapshot{received: a.received - b.received, kernelDrops: a.kernelDrops - b.kernelDrops,
		portDrops: a.portDrops - b.portDrops, filtered: a.filtered - b.filtered, delivered: a.delivered - b.delivered}
}

// lost is how many frames the sink was given but could not save.
func (s *sink) lost() uint64 {
	if s.errp.Load() == nil {
		return 0
	}
	return s.unsaved.Load() + s.published.Load() - s.flushed.Load()
}

// publish makes the frame count visible to Stats.
func (s *sink) publish() { s.published.Store(s.written) }
