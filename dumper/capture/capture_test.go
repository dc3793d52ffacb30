package capture

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// sender puts frames on one end of an in-process link.
type sender struct {
	t    testing.TB
	port dpdk.Port
	pool *dpdk.Pool
}

func newRingSession(t *testing.T, name string, queues int, cfg Config) (*Session, *sender) {
	t.Helper()
	link := ring.NewLink(name, ring.Config{Queues: queues, RingSize: 4096})
	cfg.Port = "ring:" + name + ".b"
	cfg.Queues = queues
	cfg.OpenPort = func(string, dpdk.Config) (dpdk.Port, error) { return link.B(), nil }
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := dpdk.NewPool(name+"-tx", 16384, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return s, &sender{t: t, port: link.A(), pool: pool}
}

// send transmits frames on queue q, stamped ts, ts+step, ...
func (sd *sender) send(q int, frames [][]byte, ts, step int64) {
	for _, f := range frames {
		p := sd.pool.Get()
		if p == nil {
			sd.t.Fatal("sender pool empty")
		}
		p.CopyFrom(f)
		p.Timestamp = ts
		ts += step
		for tries := 0; sd.port.TxBurst(q, []*dpdk.Packet{p}) == 0; tries++ {
			if tries == 500 {
				p.Free() // the capture stopped reading
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func waitWritten(t *testing.T, s *Session, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Written+s.Stats().Filtered+s.Stats().RoCERejected < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %+v of %d frames after 10 s", s.Stats(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// seqs reads the sequence numbers of the frames in the files, in order.
func seqs(t *testing.T, paths ...string) []uint32 {
	t.Helper()
	var out []uint32
	for _, path := range paths {
		r, err := pcap.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var rec pcap.Record
		var p roce.Packet
		for {
			err := r.Next(&rec)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if roce.ParseTruncated(rec.Data, roce.UDPPort, &p) != nil {
				t.Fatalf("%s: a frame that is not RoCE: % x", path, rec.Data)
			}
			if pl := p.Payload(rec.Data); len(pl) >= 4 {
				out = append(out, binary.BigEndian.Uint32(pl))
			}
		}
		r.Close()
	}
	return out
}

// TestSessionRing captures from two queues of an in-process link through
// the user-space filter and the RoCE filter into one file, and checks the
// frames and the per-QP counters.
func TestSessionRing(t *testing.T) {
	dir := t.TempDir()
	s, sd := newRingSession(t, "capring", 2, Config{Filter: "udp dst port 4791", RoCE: "qpn 17-18",
		Output: Output{Path: filepath.Join(dir, "cap.pcapng"), Format: pcap.FormatPcapNG}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	var q0, q1 [][]byte
	want := map[uint32]bool{}
	for i := uint32(0); i < 400; i++ {
		qpn := 16 + i%4
		f := buildFrame(t, frameSpec{op: roce.RCWriteOnly, qpn: qpn, psn: i / 4, seq: i, ecn: uint8(i % 4)})
		if qpn == 17 || qpn == 18 {
			want[i] = true
		}
		if i%2 == 0 {
			q0 = append(q0, f)
		} else {
			q1 = append(q1, f)
		}
	}
	// A retransmission, a NAK and a CNP for QP 17, and frames the
	// tcpdump filter drops.
	extra := [][]byte{
		buildFrame(t, frameSpec{op: roce.RCWriteOnly, qpn: 17, psn: 3, seq: 1000}),
		buildFrame(t, frameSpec{op: roce.RCAck, qpn: 17, psn: 3, syndrome: roce.NAKSyndrome(0)}),
		buildFrame(t, frameSpec{op: roce.OpCNP, qpn: 17}),
		buildFrame(t, frameSpec{op: roce.RCWriteOnly, qpn: 17, port: 9741, seq: 2000}),
	}
	want[1000] = true
	now := time.Now().UnixNano()
	sd.send(0, q0, now, 1000)
	sd.send(1, q1, now, 1000)
	// On QP 17's queue, as RSS or fanout keep a flow on one queue: the
	// retransmission counter compares PSNs within a queue.
	sd.send(1, extra, now+1e6, 1000)
	waitWritten(t, s, 404)
	res, err := s.Close()
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats
	// The ring port cannot filter in a kernel: the filter and the RoCE
	// filter's BPF run in the loop, which leaves the RoCE filter nothing
	// to reject here.
	if st.Received != 203 || st.Filtered != 201 || st.Written != 203 || st.RoCERejected != 0 {
		t.Errorf("stats %+v, want 203 received, 201 filtered, 203 written", st)
	}
	if len(res.Files) != 1 {
		t.Fatalf("files %+v", res.Files)
	}
	got := map[uint32]bool{}
	for _, q := range seqs(t, res.Files[0].Path) {
		if got[q] {
			t.Errorf("frame %d written twice", q)
		}
		got[q] = true
	}
	for q := range want {
		if !got[q] {
			t.Errorf("frame %d not written", q)
		}
	}
	var qp17 QPStats
	for _, q := range res.QPs {
		if q.QPN == 17 {
			qp17 = q
		}
		if q.QPN != 17 && q.QPN != 18 {
			t.Errorf("counters for QP %d, which the filter drops", q.QPN)
		}
	}
	if qp17.Packets != 103 || qp17.Retransmissions != 1 || qp17.NAKs != 1 || qp17.CNPs != 1 || qp17.ECNMarked != 0 ||
		qp17.FirstPSN != 0 || qp17.LastPSN != 99 {
		t.Errorf("QP 17: %+v", qp17)
	}
}

// TestRotationRing rotates by size, then by time with a ring of files,
// and checks that every frame is in exactly one file, in order.
func TestRotationRing(t *testing.T) {
	const n = 3000
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = buildFrame(t, frameSpec{op: roce.RCSendOnly, qpn: 5, psn: uint32(i), seq: uint32(i)})
	}
	for _, c := range []struct {
		name string
		out  Output
	}{
		{"size-pcapng", Output{FileSize: 20000, Format: pcap.FormatPcapNG}},
		{"size-pcap-zstd", Output{FileSize: 20000, Format: pcap.FormatPcap, Zstd: true}},
		{"time", Output{FileDuration: 50 * time.Millisecond, Format: pcap.FormatPcapNG}},
		{"time-ring", Output{FileDuration: 50 * time.Millisecond, Files: 4, Format: pcap.FormatPcapNG}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.out.Path = filepath.Join(dir, "rot.pcapng")
			if c.out.Zstd {
				c.out.Path += ".zst"
			}
			s, sd := newRingSession(t, "caprot-"+c.name, 1, Config{Output: c.out, Count: n})
			res, err := runUntil(t, s, func() { sd.send(0, frames, 1e18, int64(time.Millisecond)/10) })
			if err != nil {
				t.Fatal(err)
			}
			if res.Stopped != "count" {
				t.Errorf("stopped by %q, want count", res.Stopped)
			}
			var live []string
			for _, f := range res.Files {
				if !f.Removed {
					live = append(live, f.Path)
				}
			}
			onDisk, _ := filepath.Glob(filepath.Join(dir, "rot_*"))
			sort.Strings(onDisk)
			if strings.Join(onDisk, " ") != strings.Join(live, " ") {
				t.Errorf("on disk %v, result says %v", onDisk, live)
			}
			if len(res.Files) < 4 {
				t.Errorf("only %d files", len(res.Files))
			}
			got := seqs(t, live...)
			first := uint32(0)
			if c.out.Files > 0 {
				if len(live) != c.out.Files {
					t.Errorf("%d files kept, want %d", len(live), c.out.Files)
				}
				first = n - uint32(len(got))
			}
			for i, q := range got {
				if q != first+uint32(i) {
					t.Fatalf("frame %d of the files is %d, want %d (lost or duplicated across a rotation)", i, q, first+uint32(i))
				}
			}
			if c.out.Files == 0 && len(got) != n {
				t.Errorf("%d frames in the files, want %d", len(got), n)
			}
			// tshark takes most of a second to start: the first, a middle
			// and the last file.
			tsharkClean(t, live[0], live[len(live)/2], live[len(live)-1])
		})
	}
}

// runUntil starts s, runs send and returns when the session stops itself.
func runUntil(t *testing.T, s *Session, send func()) (*Result, error) {
	t.Helper()
	type ret struct {
		r   *Result
		err error
	}
	done := make(chan ret, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := s.Run(ctx, nil)
		done <- ret{r, err}
	}()
	<-s.Running()
	send()
	r := <-done
	return r.r, r.err
}

// tsharkClean wants tshark to read every file without a word on stderr
// (but its notice about running as root).
func tsharkClean(t *testing.T, paths ...string) {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Log("tshark not installed: files not checked with it")
		return
	}
	for _, p := range paths {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(tshark, "-r", p, "-T", "fields", "-e", "frame.number")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		msg := tsharkWarnings(stderr.String())
		if err != nil || msg != "" {
			t.Errorf("tshark -r %s: %v\n%s", p, err, msg)
		}
	}
}

func tsharkWarnings(stderr string) string {
	var keep []string
	for _, l := range strings.Split(stderr, "\n") {
		if l == "" || strings.HasPrefix(l, "Running as user \"root\"") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// TestOutputErrors: bad output settings are refused before capturing.
func TestOutputErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Port: "ring:x.b"},
		{Port: "ring:x.b", Output: Output{Path: "-", FileSize: 10}},
		{Port: "ring:x.b", Queues: 2, Cores: []int{0}, Output: Output{Path: "x"}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v: accepted", cfg)
		}
	}
	_, err := New(Config{Port: "nosuch:dev", Output: Output{Path: filepath.Join(t.TempDir(), "x")}})
	if err == nil || !strings.Contains(err.Error(), "cannot open nosuch:dev") {
		t.Errorf("a port that does not open: %v", err)
	}
	_, err = New(Config{Port: "ring:y.b", Filter: "hots 1", Output: Output{Path: filepath.Join(t.TempDir(), "x")}})
	if err == nil || !strings.Contains(err.Error(), "column 1") {
		t.Errorf("a bad filter: %v", err)
	}
}

// TestWriterFull: when the output cannot be written (a full device), the
// session stops with the error, counts what it could not save, and the
// files before stay readable.
func TestWriterFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	s, sd := newRingSession(t, "capfull", 1, Config{Output: Output{Path: "/dev/full", Format: pcap.FormatPcapNG}})
	frames := make([][]byte, 20000)
	for i := range frames {
		frames[i] = buildFrame(t, frameSpec{op: roce.RCSendOnly, qpn: 5, psn: uint32(i), seq: uint32(i)})
	}
	res, err := runUntil(t, s, func() { sd.send(0, frames, 1e18, 1000) })
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("writing to /dev/full: %v", err)
	}
	if res.Stopped != "error" || res.Stats.WriterDrops == 0 {
		t.Errorf("stopped by %q with %d writer drops", res.Stopped, res.Stats.WriterDrops)
	}
}

func BenchmarkSessionRing(b *testing.B) {
	link := ring.NewLink("capbench", ring.Config{RingSize: 4096})
	s, err := New(Config{Port: "ring:capbench.b", SnapLen: 128, OpenPort: func(string, dpdk.Config) (dpdk.Port, error) { return link.B(), nil },
		Output: Output{Path: os.DevNull, Format: pcap.FormatPcapNG}})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	pool, _ := dpdk.NewPool("capbench-tx", 8192, 0)
	frame := buildFrame(b, frameSpec{op: roce.RCSendOnly, qpn: 5})
	burst := make([]*dpdk.Packet, 32)
	b.ReportAllocs()
	start := time.Now()
	sent := 0
	for b.Loop() {
		n := pool.GetBulk(burst)
		for _, p := range burst[:n] {
			p.CopyFrom(frame)
		}
		m := link.A().TxBurst(0, burst[:n])
		dpdk.FreeBulk(burst[m:n])
		sent += m
	}
	for s.Stats().Written < uint64(sent) && time.Since(start) < time.Minute {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(s.Stats().Written)/time.Since(start).Seconds()/1e6, "Mpkt/s")
	if _, err := s.Close(); err != nil {
		b.Fatal(err)
	}
	pool.Close()
}

// BenchmarkFramePath is the per-frame work of a capture worker after the
// port: the per-QP counters and a pcapng record into the file buffer.
func BenchmarkFramePath(b *testing.B) {
	out := Output{Path: os.DevNull, Format: pcap.FormatPcapNG, SnapLen: 128}
	s := &Session{cfg: Config{Output: out}, rf: &RoCEFilter{Port: roce.UDPPort}}
	sk := &sink{out: &s.cfg.Output}
	if err := sk.open(time.Now()); err != nil {
		b.Fatal(err)
	}
	w := &worker{s: s, sink: sk}
	s.workers = []*worker{w}
	var frames [64][]byte
	for i := range frames {
		frames[i] = buildFrame(b, frameSpec{op: roce.RCSendMiddle, qpn: uint32(16 + i), psn: uint32(i)})
	}
	f := dpdk.Frame{Timestamp: time.Now().UnixNano()}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		f.Data = frames[i&63]
		f.WireLen = len(f.Data)
		w.frame(&f)
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpkt/s")
	sk.closeFile(0)
}

// epbPort is a ring port that writes its frames as pcapng records itself,
// as the eal driver's ReadEPB does from the mbufs: the capture's path for a
// port that is an EPBReader, in a test with no DPDK.
type epbPort struct {
	dpdk.Port
	pkts [64]*dpdk.Packet
}

func (p *epbPort) ReadEPB(q int, buf []byte, snap int) (n, used int) {
	rec := pcap.EPBLen(snap) // the longest record
	k := p.RxBurst(q, p.pkts[:min(len(buf)/rec, len(p.pkts))])
	for _, pkt := range p.pkts[:k] {
		d := pkt.Data()
		c := min(len(d), snap)
		blen := pcap.EPBLen(c)
		pcap.PutEPB(buf[used:used+blen], uint64(pkt.Timestamp), d[:c], pkt.OrigLen())
		used += blen
		pkt.Free()
	}
	return k, used
}

var _ EPBReader = (*epbPort)(nil)

// TestEPBPath captures the same frames through a port that writes the
// records itself and through the general path: the same frames in the
// files, the same per-QP counters and byte counts.
func TestEPBPath(t *testing.T) {
	var frames [][]byte
	for i := uint32(0); i < 700; i++ {
		s := frameSpec{op: roce.RCWriteOnly, qpn: 16 + i%5, psn: i / 2 % 61, seq: i, ecn: uint8(i % 4)}
		switch i % 9 {
		case 2:
			s.src, s.dst = "fe80::1", "fe80::2"
		case 4:
			s.port = 9741
		case 6:
			s.op, s.psn = roce.OpCNP, 0
		case 8:
			s.op, s.syndrome = roce.RCAck, roce.Syndrome(0x60)
		}
		frames = append(frames, buildFrame(t, s))
	}
	run := func(name string, epb bool) (*Result, []string) {
		dir := t.TempDir()
		link := ring.NewLink(name, ring.Config{Queues: 1, RingSize: 4096})
		cfg := Config{Port: "ring:" + name + ".b", Queues: 1, SnapLen: 96,
			Output: Output{Path: filepath.Join(dir, "cap.pcapng"), Format: pcap.FormatPcapNG}}
		cfg.OpenPort = func(string, dpdk.Config) (dpdk.Port, error) {
			if epb {
				return &epbPort{Port: link.B()}, nil
			}
			return link.B(), nil
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := dpdk.NewPool(name+"-tx", 4096, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pool.Close() })
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.epbReader(s.workers[0]); ok != epb {
			t.Fatalf("%s: the EPB path is %v", name, ok)
		}
		sd := &sender{t: t, port: link.A(), pool: pool}
		sd.send(0, frames, 1e18, 1000)
		waitWritten(t, s, uint64(len(frames)))
		res, err := s.Close()
		if err != nil {
			t.Fatal(err)
		}
		return res, readFrames(t, cfg.Output.Path)
	}
	a, fa := run("capepb", true)
	b, fb := run("capgen", false)
	if len(fa) != len(frames) || fmt.Sprint(fa) != fmt.Sprint(fb) {
		t.Fatalf("%d frames through the port's records, %d through the general path (want %d, the same)", len(fa), len(fb), len(frames))
	}
	if a.Stats.Bytes != b.Stats.Bytes || fmt.Sprint(a.QPs) != fmt.Sprint(b.QPs) || len(a.QPs) == 0 {
		t.Fatalf("bytes %d and %d; per-QP counters\n%+v\n%+v", a.Stats.Bytes, b.Stats.Bytes, a.QPs, b.QPs)
	}
	t.Logf("%d frames, %d bytes; QPs %+v", len(fa), a.Stats.Bytes, a.QPs)
}

// readFrames reads the frames of a capture file, in order.
func readFrames(t *testing.T, path string) []string {
	t.Helper()
	r, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	var rec pcap.Record
	for r.Next(&rec) == nil {
		out = append(out, string(rec.Data))
	}
	return out
}
