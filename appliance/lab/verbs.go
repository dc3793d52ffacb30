package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/bench/perftest"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/spec"
	"github.com/rdma-appliance/appliance/verbs/roce"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// VerbsSpec configures the verbs stage.
type VerbsSpec struct {
	Enabled bool `yaml:"enabled"`
	// Iters are the messages of the 64-byte WRITE bandwidth run; the
	// 64 KiB run sends a tenth as many.
	Iters    int `yaml:"iters"`
	LatIters int `yaml:"lat-iters"`
	// CaptureIters are the messages per verb of the captured exchange.
	CaptureIters int `yaml:"capture-iters"`
	// DropEvery drops one frame in DropEvery, at pseudo-random places, in both directions of a lossy
	// WRITE run (0 skips it).
	DropEvery int    `yaml:"drop-every"`
	Profile   string `yaml:"profile"`
}

func (v *VerbsSpec) validate(d *spec.Doc) {
	if !v.Enabled {
		return
	}
	if v.Iters < 50 || v.Iters > 10_000_000 {
		d.Errorf("verbs.iters", "must be 50..10000000, got %d", v.Iters)
	}
	if v.LatIters < 5 || v.LatIters > 1_000_000 {
		d.Errorf("verbs.lat-iters", "must be 5..1000000, got %d", v.LatIters)
	}
	if v.CaptureIters < 5 || v.CaptureIters > 10_000 {
		d.Errorf("verbs.capture-iters", "must be 5..10000, got %d", v.CaptureIters)
	}
	if v.DropEvery != 0 && (v.DropEvery < 2 || v.DropEvery > 1_000_000) {
		d.Errorf("verbs.drop-every", "must be 0 (no lossy run) or 2..1000000, got %d", v.DropEvery)
	}
	if _, err := soft.ProfileByName(v.Profile); err != nil {
		d.Errorf("verbs.profile", "%v", err)
	}
}

// runVerbs measures two soft RNICs on an in-process link with perftest's
// tests, captures a WRITE/READ/ATOMIC/SEND exchange and checks every frame
// of it (and tshark's reading of it), and recovers from a lossy link.
func runVerbs(ctx context.Context, l *Lab, row *Row) error {
	vs := l.Spec.Verbs
	prof, _ := soft.ProfileByName(vs.Profile)
	row.Ran = fmt.Sprintf("two soft RNICs (%s) on a ring link: perftest WRITE BW 64 B/64 KiB, SEND and READ latency; "+
		"WRITE/READ/ATOMIC/SEND exchange captured to verbs.pcap", prof.Name)
	if vs.DropEvery > 0 {
		row.Ran += fmt.Sprintf("; WRITE with one frame in %d dropped", vs.DropEvery)
	}
	var problems []string

	// The captured exchange.
	capt, err := newCapture(l.Path("verbs.pcap"))
	if err != nil {
		return err
	}
	exchange := []perftest.Params{
		{Verb: perftest.Write, Size: 3000, MTU: 1024, Iters: vs.CaptureIters, TxDepth: 16, CQMod: 4},
		{Verb: perftest.Read, Size: 3000, MTU: 1024, Iters: vs.CaptureIters, TxDepth: 16, CQMod: 4},
		{Verb: perftest.Atomic, Iters: vs.CaptureIters, TxDepth: 16, CQMod: 4},
		{Verb: perftest.Atomic, Atomic: perftest.CmpSwap, Iters: vs.CaptureIters, TxDepth: 16, CQMod: 4},
		{Verb: perftest.Send, Size: 3000, MTU: 1024, Iters: vs.CaptureIters, TxDepth: 16, CQMod: 4},
		{Verb: perftest.Send, Size: 100, Iters: vs.CaptureIters, Inline: 128, TxDepth: 16, CQMod: 4},
	}
	for _, p := range exchange {
		_, _, err := perftest.Loopback(ctx, p, perftest.LoopbackOptions{Profile: prof,
			Capture: func(_ int, port dpdk.Port) dpdk.Port { return &tapPort{Port: port, c: capt} }})
		if err != nil {
			capt.close()
			return fmt.Errorf("captured %v exchange: %w", p.Verb, err)
		}
	}
	if err := capt.close(); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	row.Figure("captured", "%d", capt.frames)
	row.Figure("icrc_bad", "%d", capt.badICRC)
	if capt.badICRC > 0 || capt.unparsed > 0 {
		problems = append(problems, fmt.Sprintf("%d captured frames had a bad ICRC, %d did not parse", capt.badICRC, capt.unparsed))
	}
	wantOps := []roce.Opcode{roce.RCWriteFirst, roce.RCWriteMiddle, roce.RCWriteLast, roce.RCReadRequest,
		roce.RCReadResponseFirst, roce.RCReadResponseMiddle, roce.RCReadResponseLast, roce.RCFetchAdd,
		roce.RCCompareSwap, roce.RCAtomicAck, roce.RCSendFirst, roce.RCSendMiddle, roce.RCSendLast,
		roce.RCSendOnly, roce.RCAck}
	var missing []string
	for _, op := range wantOps {
		if capt.ops[op] == 0 {
			missing = append(missing, op.String())
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "the exchange lacks "+strings.Join(missing, ", "))
	}
	verdict, err := tsharkAgrees(l.Path("verbs.pcap"), capt.keys)
	row.Figure("tshark", "%s", verdict)
	if err != nil {
		problems = append(problems, err.Error())
	}

	// perftest figures.
	runs := []struct {
		name string
		p    perftest.Params
		fig  func(perftest.Result) string
	}{
		{"write_64B", perftest.Params{Verb: perftest.Write, Size: 64, Iters: vs.Iters},
			func(r perftest.Result) string { return fmt.Sprintf("%.2fMmsg/s", r.MsgRate/1e6) }},
		{"write_64KiB", perftest.Params{Verb: perftest.Write, Size: 65536, Iters: max(vs.Iters/10, 5), MTU: 4096},
			func(r perftest.Result) string { return fmt.Sprintf("%.1fGbit/s", perftest.BWIn(r.AvgBps, true)) }},
		{"send_lat", perftest.Params{Verb: perftest.Send, Latency: true, Iters: vs.LatIters, Inline: -1},
			func(r perftest.Result) string { return fmt.Sprintf("%.2fus", r.Lat.Typical) }},
		{"read_lat", perftest.Params{Verb: perftest.Read, Latency: true, Iters: vs.LatIters},
			func(r perftest.Result) string { return fmt.Sprintf("%.2fus", r.Lat.Typical) }},
	}
	for _, run := range runs {
		c, _, err := perftest.Loopback(ctx, run.p, perftest.LoopbackOptions{Profile: prof})
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", run.name, err))
			continue
		}
		row.Figure(run.name, "%s", run.fig(c[0]))
	}

	// Loss: go-back-N must bring every message through.
	if vs.DropEvery > 0 {
		var drops atomic.Int64
		var server, client *soft.Device
		p := perftest.Params{Verb: perftest.Write, Size: 4096, MTU: 1024, Iters: max(vs.Iters/10, 5)}
		_, _, err := perftest.Loopback(ctx, p, perftest.LoopbackOptions{Profile: prof,
			Devices: func(s, c *soft.Device) { server, client = s, c },
			Capture: func(_ int, port dpdk.Port) dpdk.Port {
				return &dropPort{Port: port, every: int64(vs.DropEvery), dropped: &drops}
			}})
		if err != nil {
			problems = append(problems, fmt.Sprintf("lossy WRITE: %v", err))
		} else {
			oos := server.Counter(soft.CntOutOfSequence)
			retx := client.Counter(soft.CntTxRetransmits)
			row.Figure("lossy_dropped", "%d", drops.Load())
			row.Figure("out_of_sequence", "%d", oos)
			row.Figure("retransmitted", "%d", retx)
			if drops.Load() == 0 || retx == 0 {
				problems = append(problems, fmt.Sprintf("lossy WRITE dropped %d frames and retransmitted %d", drops.Load(), retx))
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	row.Pass = true
	return nil
}

// capture writes every frame both RNICs transmit into one pcap and checks
// each on the way: it parses as RoCEv2 and its ICRC verifies.
type capture struct {
	mu       sync.Mutex
	w        *pcap.Writer
	err      error
	frames   int
	badICRC  int
	unparsed int
	ops      [256]int
	keys     []wireKey
	p        roce.Packet
}

func newCapture(path string) (*capture, error) {
	w, err := pcap.Create(path, pcap.WriterOptions{Format: pcap.FormatPcap, LinkType: pcap.LinkTypeEthernet, Nanosecond: true})
	if err != nil {
		return nil, err
	}
	return &capture{w: w}, nil
}

// copyFrames copies frames about to be transmitted: once the port took them they
// belong to the peer. The lab's captured exchange is small, so copies are
// fine here.
func copyFrames(pkts []*dpdk.Packet) [][]byte {
	out := make([][]byte, len(pkts))
	for i, pkt := range pkts {
		out[i] = append([]byte(nil), pkt.Data()...)
	}
	return out
}

// record checks and writes the frames a port accepted.
func (c *capture) record(frames [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := dpdk.Nanotime()
	for _, f := range frames {
		c.frames++
		if err := roce.Parse(f, &c.p); err != nil {
			c.unparsed++
		} else {
			c.ops[c.p.Opcode]++
			if c.p.VerifyICRC(f) != nil {
				c.badICRC++
			}
			c.keys = append(c.keys, wireKey{c.p.Opcode, c.p.DestQP, c.p.PSN})
		}
		if err := c.w.WritePacket(now, f, len(f)); err != nil && c.err == nil {
			c.err = err
		}
	}
}

func (c *capture) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.err, c.w.Close())
}

// tapPort records what a port transmits.
type tapPort struct {
	dpdk.Port
	c *capture
}

func (t *tapPort) TxBurst(q int, pkts []*dpdk.Packet) int {
	frames := copyFrames(pkts)
	n := t.Port.TxBurst(q, pkts)
	t.c.record(frames[:n])
	return n
}

// dropPort drops one frame in every (on average) frames it is asked to
// transmit, at pseudo-random places: a strictly periodic pattern can lock
// onto go-back-N's retransmission windows and drop the same packet on
// every retry.
type dropPort struct {
	dpdk.Port
	every   int64
	seen    int64
	dropped *atomic.Int64
}

func (d *dropPort) TxBurst(q int, pkts []*dpdk.Packet) int {
	k := 0
	for _, pkt := range pkts {
		d.seen++
		// splitmix64 of the frame count: deterministic, not periodic.
		z := uint64(d.seen) * 0x9e3779b97f4a7c15
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		if (z^z>>31)%uint64(d.every) == 0 {
			pkt.Free()
			d.dropped.Add(1)
			continue
		}
		pkts[k] = pkt
		k++
	}
	n := d.Port.TxBurst(q, pkts[:k])
	if n < k {
		// The caller keeps what was not taken; report the dropped ones as
		// taken. Move the leftovers to the end where the caller looks.
		left := k - n
		copy(pkts[len(pkts)-left:], pkts[n:k])
		return len(pkts) - left
	}
	return len(pkts)
}
