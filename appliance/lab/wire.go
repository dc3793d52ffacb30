package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/spec"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// WireSpec configures the wire stage.
type WireSpec struct {
	Enabled  bool `yaml:"enabled"`
	Rounds   int  `yaml:"rounds"`
	Payload  int  `yaml:"payload"`
	Queues   int  `yaml:"queues"`
	SnapLen  int  `yaml:"snap-len"`
	Compress bool `yaml:"compress"`
}

func (w *WireSpec) validate(d *spec.Doc) {
	if !w.Enabled {
		return
	}
	if w.Rounds < 1 || w.Rounds > 1_000_000 {
		d.Errorf("wire.rounds", "must be 1..1000000, got %d", w.Rounds)
	}
	if w.Payload < 0 || w.Payload > 4096 {
		d.Errorf("wire.payload", "must be 0..4096 bytes (the largest RoCE path MTU), got %d", w.Payload)
	}
	if w.Queues < 1 || w.Queues > 16 {
		d.Errorf("wire.queues", "must be 1..16, got %d", w.Queues)
	}
	if w.SnapLen < 0 {
		d.Errorf("wire.snap-len", "must be >= 0, got %d", w.SnapLen)
	}
}

// wireOpcodes is every opcode the RoCEv2 table defines for the transports a
// RoCE NIC puts on the wire (RC, UC, UD, and CNP).
func wireOpcodes() []roce.Opcode {
	var ops []roce.Opcode
	for i := 0; i < 256; i++ {
		op := roce.Opcode(i)
		if !op.Valid() {
			continue
		}
		switch op.Transport() {
		case roce.TransportRC, roce.TransportUC, roce.TransportUD, roce.TransportCNP:
			ops = append(ops, op)
		}
	}
	return ops
}

// wireTemplates builds one Builder per (opcode, IP version).
func wireTemplates(ops []roce.Opcode) []roce.Builder {
	v4a, v4b := netip.MustParseAddr("192.168.10.1"), netip.MustParseAddr("192.168.10.2")
	v6a, v6b := netip.MustParseAddr("fd00:10::1"), netip.MustParseAddr("fd00:10::2")
	var out []roce.Builder
	for _, v6 := range []bool{false, true} {
		for i, op := range ops {
			b := roce.Builder{
				SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 1}, DstMAC: [6]byte{0x02, 0, 0, 0, 0, 2},
				SrcGID: roce.GIDFromAddr(v4a), DstGID: roce.GIDFromAddr(v4b),
				TrafficClass: 0x6a, // DSCP 26 (a common RoCE class), ECT(0)
				FlowLabel:    uint32(0x1000 + i), DontFragment: true,
				Opcode: op, PKey: 0xffff, DestQP: 0x11 + uint32(i), AckReq: true,
				VA: 0x7f0000001000, RKey: 0x1234, DMALen: 4096,
				Syndrome: roce.ACKSyndrome(31), MSN: 1, SwapAdd: 1, Compare: 0,
				QKey: 0x11111111, SrcQP: 0x77, Imm: 0xdeadbeef, InvRKey: 0x4321,
			}
			if op.Transport() == roce.TransportCNP {
				b.TrafficClass = 0x6b // CNPs go out ECN-CE
			}
			if v6 {
				b.SrcGID, b.DstGID = roce.GIDFromAddr(v6a), roce.GIDFromAddr(v6b)
			}
			out = append(out, b)
		}
	}
	return out
}

type wireKey struct {
	op  roce.Opcode
	qp  uint32
	psn uint32
}

// wireRun is one run of the wire stage: the link and captures the queues'
// workers share, and what the receivers counted.
type wireRun struct {
	l        *Lab
	ws       WireSpec
	ops      []roce.Opcode
	tmpl     []roce.Builder
	pool     *dpdk.Pool
	link     *ring.Link
	w, zw    *pcap.Writer // the capture and its zstd copy (nil without)
	payload  []byte
	perQueue []int // packets each queue carries
	total    int
	cores    []int
	cancel   context.CancelFunc

	capMu             sync.Mutex
	capErr            error
	received, badICRC atomic.Int64
	parseErrs         atomic.Int64
	counts            [256]atomic.Int64
	firstKeys         []wireKey // capture order, for the tshark cross-check
	buildErr          atomic.Value
}

// wireKeysKept bounds the keys kept for the tshark cross-check.
const wireKeysKept = 4000

// runWire sends every opcode class over a ring link between pinned workers,
// checks each received packet and captures them.
func runWire(ctx context.Context, l *Lab, row *Row) error {
	r := &wireRun{l: l, ws: l.Spec.Wire, ops: wireOpcodes()}
	r.tmpl = wireTemplates(r.ops)
	row.Ran = fmt.Sprintf("%d RoCEv2 opcodes x IPv4+IPv6 x %d rounds over a %d-queue ring link, captured to wire.pcap",
		len(r.ops), r.ws.Rounds, r.ws.Queues)

	pool, err := dpdk.NewPool("lab-wire", 4096, 4096+512+dpdk.Headroom)
	if err != nil {
		return err
	}
	r.pool = pool
	r.link = ring.NewLink("lab-wire", ring.Config{Queues: r.ws.Queues, RingSize: 512})
	defer func() {
		r.link.A().Close()
		r.link.B().Close()
		if err := pool.Close(); err != nil {
			l.Log.Warn("lab wire: pool", "err", err)
		}
	}()
	if err := r.openCaptures(); err != nil {
		return err
	}
	r.plan()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.cancel = cancel
	var wg sync.WaitGroup
	t0 := time.Now()
	for q := 0; q < r.ws.Queues; q++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			r.send(ctx, q)
		}()
		go func() {
			defer wg.Done()
			r.receive(ctx, q)
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if err := r.closeCaptures(ctx); err != nil {
		return err
	}
	r.figures(row, elapsed)
	if err := r.verdict(row); err != nil {
		return err
	}
	row.Pass = true
	return nil
}

// openCaptures creates wire.pcap and, when asked, its zstd copy.
func (r *wireRun) openCaptures() error {
	ws := r.ws
	w, err := pcap.Create(r.l.Path("wire.pcap"), pcap.WriterOptions{Format: pcap.FormatPcap, LinkType: pcap.LinkTypeEthernet,
		SnapLen: ws.SnapLen, Nanosecond: true})
	if err != nil {
		return err
	}
	r.w = w
	if ws.Compress {
		if r.zw, err = pcap.Create(r.l.Path("wire.pcap.zst"), pcap.WriterOptions{Format: pcap.FormatPcap,
			LinkType: pcap.LinkTypeEthernet, SnapLen: ws.SnapLen, Nanosecond: true, Compress: pcap.CompressZstd}); err != nil {
			w.Close()
			return err
		}
	}
	return nil
}

// plan fills the payload and spreads the rounds over the queues, so that
// each sender and receiver knows when it is done.
func (r *wireRun) plan() {
	ws := r.ws
	r.payload = make([]byte, ws.Payload)
	for i := range r.payload {
		r.payload[i] = byte(i)
	}
	r.perQueue = make([]int, ws.Queues)
	r.total = ws.Rounds * len(r.tmpl)
	for i := range r.perQueue {
		r.perQueue[i] = r.total / ws.Queues
		if i < r.total%ws.Queues {
			r.perQueue[i]++
		}
	}
	r.cores, _ = dpdk.AllowedCores()
}

// pin pins the calling worker to the core of slot i (a no-op without an
// affinity list); unpin undoes it.
func (r *wireRun) pin(i int) (unpin func()) {
	if len(r.cores) > 0 {
		if err := dpdk.Pin(r.cores[i%len(r.cores)]); err == nil {
			return runtime.UnlockOSThread
		}
	}
	return func() {}
}

// send is queue q's sender: packets q, q+Q, q+2Q... of the global
// sequence, built in place in bursts from its own cache.
func (r *wireRun) send(ctx context.Context, q int) {
	defer r.pin(2 * q)()
	cache := r.pool.NewCache(256)
	defer cache.Flush()
	var burst [32]*dpdk.Packet
	b := make([]roce.Builder, len(r.tmpl))
	copy(b, r.tmpl)
	next := q
	for sent := 0; sent < r.perQueue[q] && ctx.Err() == nil; {
		n := cache.GetBulk(burst[:min(32, r.perQueue[q]-sent)])
		if n == 0 {
			time.Sleep(10 * time.Microsecond)
			continue
		}
		for _, pkt := range burst[:n] {
			t := &b[next%len(b)]
			t.PSN = uint32(next/len(b)) & roce.PSNMask
			pl := r.payload
			if !t.Opcode.HasPayload() {
				pl = nil
			}
			m, err := t.Build(pkt.Buffer(), pl)
			if err != nil {
				r.buildErr.Store(fmt.Errorf("building %v: %w", t.Opcode, err))
				r.cancel()
				break
			}
			_ = pkt.SetLen(m)
			next += r.ws.Queues
		}
		s := 0
		for s < n && ctx.Err() == nil {
			s += r.link.A().TxBurst(q, burst[s:n])
		}
		cache.PutBulk(burst[s:n])
		sent += n
	}
}

// receive is queue q's receiver: it parses and checks every packet and
// captures it.
func (r *wireRun) receive(ctx context.Context, q int) {
	defer r.pin(2*q + 1)()
	cache := r.pool.NewCache(256)
	defer cache.Flush()
	var burst [32]*dpdk.Packet
	var p roce.Packet
	bo := dpdk.DefaultBackoff()
	for got := 0; got < r.perQueue[q] && ctx.Err() == nil; {
		n := r.link.B().RxBurst(q, burst[:])
		if n == 0 {
			bo.Idle()
			continue
		}
		bo.Busy()
		r.capture(burst[:n], &p)
		r.received.Add(int64(n))
		got += n
		cache.PutBulk(burst[:n])
	}
}

// capture checks and writes one received burst, under the capture lock so
// that the receivers' timestamps never go back in the file.
func (r *wireRun) capture(burst []*dpdk.Packet, p *roce.Packet) {
	r.capMu.Lock()
	defer r.capMu.Unlock()
	now := dpdk.Nanotime()
	for _, pkt := range burst {
		frame := pkt.Data()
		if err := roce.Parse(frame, p); err != nil {
			r.parseErrs.Add(1)
		} else {
			r.counts[p.Opcode].Add(1)
			if p.VerifyICRC(frame) != nil {
				r.badICRC.Add(1)
			}
			if len(r.firstKeys) < wireKeysKept {
				r.firstKeys = append(r.firstKeys, wireKey{p.Opcode, p.DestQP, p.PSN})
			}
		}
		if err := r.w.WritePacket(now, frame, pkt.OrigLen()); err != nil && r.capErr == nil {
			r.capErr = err
		}
		if r.zw != nil {
			if err := r.zw.WritePacket(now, frame, pkt.OrigLen()); err != nil && r.capErr == nil {
				r.capErr = err
			}
		}
	}
}

// closeCaptures closes the captures and returns what stopped the run: a
// packet that could not be built, the context, or the capture failing.
func (r *wireRun) closeCaptures(ctx context.Context) error {
	if err := r.w.Close(); err != nil && r.capErr == nil {
		r.capErr = err
	}
	if r.zw != nil {
		if err := r.zw.Close(); err != nil && r.capErr == nil {
			r.capErr = err
		}
	}
	if e, _ := r.buildErr.Load().(error); e != nil {
		return e
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.capErr != nil {
		return fmt.Errorf("capture: %w", r.capErr)
	}
	return nil
}

// figures records the stage's key figures in the row.
func (r *wireRun) figures(row *Row, elapsed time.Duration) {
	st := r.link.B().Stats()
	row.Figure("sent", "%d", r.link.A().Stats().TxPackets)
	row.Figure("received", "%d", st.RxPackets)
	row.Figure("opcodes", "%d", len(r.ops))
	row.Figure("rx+capture", "%.2fMpps", float64(r.received.Load())/elapsed.Seconds()/1e6)
	row.Figure("parse_errors", "%d", r.parseErrs.Load())
	row.Figure("icrc_bad", "%d", r.badICRC.Load())
	if fi, err := os.Stat(r.l.Path("wire.pcap")); err == nil {
		row.Figure("pcap", "%.1fMB", float64(fi.Size())/1e6)
	}
}

// verdict passes the stage only when every packet arrived, parsed with a
// good ICRC, every opcode was seen once per round and IP version, and
// tshark (where installed) decodes the capture as we do.
func (r *wireRun) verdict(row *Row) error {
	var problems []string
	if int(r.received.Load()) != r.total {
		problems = append(problems, fmt.Sprintf("received %d of %d packets", r.received.Load(), r.total))
	}
	if r.parseErrs.Load() > 0 || r.badICRC.Load() > 0 {
		problems = append(problems, fmt.Sprintf("%d packets failed to parse, %d had a bad ICRC", r.parseErrs.Load(), r.badICRC.Load()))
	}
	for _, op := range r.ops {
		if got := r.counts[op].Load(); got != int64(2*r.ws.Rounds) {
			problems = append(problems, fmt.Sprintf("opcode %v seen %d times, want %d", op, got, 2*r.ws.Rounds))
		}
	}
	verdict, err := tsharkAgrees(r.l.Path("wire.pcap"), r.firstKeys)
	row.Figure("tshark", "%s", verdict)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// tsharkAgrees decodes the first packets of the capture with tshark and checks
// it reads the same opcode, destination QP and PSN as our parser. tshark
// calls CNP (0x81) unknown but still shows its BTH fields.
func tsharkAgrees(path string, want []wireKey) (string, error) {
	bin, err := exec.LookPath("tshark")
	if err != nil {
		return "absent", nil
	}
	out, err := exec.Command(bin, "-r", path, "-c", strconv.Itoa(len(want)), "-T", "fields",
		"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn").Output()
	if err != nil {
		return "failed", fmt.Errorf("tshark: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(want) {
		return "disagrees", fmt.Errorf("tshark decoded %d packets, we captured %d", len(lines), len(want))
	}
	bad := map[string]int{}
	for i, line := range lines {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			bad["unparsed"]++
			continue
		}
		op, err1 := strconv.ParseUint(f[0], 0, 8)
		qp, err2 := strconv.ParseUint(f[1], 0, 32)
		psn, err3 := strconv.ParseUint(f[2], 0, 32)
		if err1 != nil || err2 != nil || err3 != nil || roce.Opcode(op) != want[i].op || uint32(qp) != want[i].qp || uint32(psn) != want[i].psn {
			bad[want[i].op.String()]++
		}
	}
	if len(bad) > 0 {
		keys := make([]string, 0, len(bad))
		for k, v := range bad {
			keys = append(keys, fmt.Sprintf("%s x%d", k, v))
		}
		sort.Strings(keys)
		return "disagrees", fmt.Errorf("tshark decodes differently: %s", strings.Join(keys, ", "))
	}
	return fmt.Sprintf("agrees(%d)", len(lines)), nil
}
