package perftest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
)

// protocolVersion is the first line's version; both sides must agree.
const protocolVersion = 1

// Timeouts of the out-of-band exchange and of a stalled run.
var (
	SetupTimeout = 30 * time.Second
	// StallTimeout ends a run in which no completion arrived for this long.
	StallTimeout = 10 * time.Second
)

// Result is one message size's figures on one side.
type Result struct {
	Test  string `json:"test"`
	Side  string `json:"side"` // "client" or "server"
	Bytes int    `json:"bytes"`
	Iters int    `json:"iterations"`
	// Bandwidth tests: bytes per second and messages per second.
	PeakBps float64 `json:"bw_peak_bytes_per_sec,omitempty"`
	AvgBps  float64 `json:"bw_average_bytes_per_sec,omitempty"`
	MsgRate float64 `json:"msg_rate_per_sec,omitempty"`
	// Latency tests, in microseconds.
	Lat *LatStats `json:"latency_usec,omitempty"`
}

// RunClient connects to a server over conn (perftest's client: the side
// given the server's address) and runs the test p, printing perftest's
// report to out (nil for none).
func RunClient(ctx context.Context, conn io.ReadWriter, cfg Config, p Params, out io.Writer) ([]Result, error) {
	s, err := startClient(ctx, conn, cfg, p, out)
	if err != nil {
		return nil, err
	}
	defer s.e.close()
	res, err := s.run()
	if err != nil {
		s.pr.fail(err)
		return res, err
	}
	return res, s.pr.send("BYE")
}

// startClient announces test p to the server and sets up this side's
// endpoint, connected to the server's.
func startClient(ctx context.Context, conn io.ReadWriter, cfg Config, p Params, out io.Writer) (*side, error) {
	p = p.Defaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	pr := newPeer(conn)
	enc, err := p.encode()
	if err != nil {
		return nil, err
	}
	if err := pr.send("PERFTEST %d %s", protocolVersion, enc); err != nil {
		return nil, err
	}
	if _, _, err := pr.wait(ctx, nil, SetupTimeout, "OK"); err != nil {
		return nil, err
	}
	s, err := newSide(ctx, pr, cfg, p, true, out)
	if err != nil {
		pr.fail(err)
		return nil, err
	}
	return s, nil
}

// RunServer serves one client over conn: it adopts the client's parameters
// and runs the test with it.
func RunServer(ctx context.Context, conn io.ReadWriter, cfg Config, out io.Writer) ([]Result, error) {
	pr := newPeer(conn)
	_, rest, err := pr.wait(ctx, nil, SetupTimeout, "PERFTEST")
	if err != nil {
		return nil, err
	}
	p, err := parseHello(rest)
	if err != nil {
		pr.fail(err)
		return nil, err
	}
	s, err := newSide(ctx, pr, cfg, p, false, out)
	if err != nil {
		pr.fail(err)
		return nil, err
	}
	defer s.e.close()
	res, err := s.run()
	if err != nil {
		pr.fail(err)
	}
	return res, err
}

func parseHello(rest string) (Params, error) {
	var p Params
	v, js, _ := strings.Cut(rest, " ")
	if n, err := strconv.Atoi(v); err != nil || n != protocolVersion {
		return p, fmt.Errorf("perftest: the client speaks protocol %q, this side %d", v, protocolVersion)
	}
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		return p, fmt.Errorf("perftest: the client's parameters: %w", err)
	}
	p = p.Defaults()
	return p, p.Validate()
}

// side is one end of a running test.
type side struct {
	ctx    context.Context
	pr     *peer
	cfg    Config
	p      Params
	client bool
	out    io.Writer
	e      *endpoint
	remote []QPInfo

	// Per-run scratch, allocated once for the largest run.
	wrs     []verbs.SendWR
	sges    []verbs.SGE
	rwrs    []verbs.RecvWR
	rsges   []verbs.SGE
	wcs     []verbs.WC
	tposted []int64
	tcompl  []int64
	gidx    []int32 // per (QP, message): index in post order
	lat     []int64
}

func newSide(ctx context.Context, pr *peer, cfg Config, p Params, client bool, out io.Writer) (*side, error) {
	e, err := newEndpoint(cfg, p)
	if err != nil {
		return nil, err
	}
	s := &side{ctx: ctx, pr: pr, cfg: cfg, p: p, client: client, out: out, e: e}
	if !client {
		if err := pr.send("OK"); err != nil {
			e.close()
			return nil, err
		}
	}
	if err := s.exchange(); err != nil {
		e.close()
		return nil, err
	}
	n := p.Iters * p.QPs
	s.wrs = make([]verbs.SendWR, p.QPs)
	s.sges = make([]verbs.SGE, p.QPs)
	s.rwrs = make([]verbs.RecvWR, p.QPs)
	s.rsges = make([]verbs.SGE, p.QPs)
	s.wcs = make([]verbs.WC, 64)
	s.tposted = make([]int64, n)
	s.tcompl = make([]int64, n)
	s.gidx = make([]int32, n)
	s.lat = make([]int64, p.Iters)
	return s, nil
}

// exchange swaps key messages (the client speaks first) and connects.
func (s *side) exchange() error {
	sendKeys := func() error {
		for _, q := range s.e.local {
			if err := s.pr.send("KEY %s", q); err != nil {
				return err
			}
		}
		return nil
	}
	if s.client {
		if err := sendKeys(); err != nil {
			return err
		}
	}
	for range s.e.local {
		_, rest, err := s.pr.wait(s.ctx, nil, SetupTimeout, "KEY")
		if err != nil {
			return err
		}
		q, err := ParseQPInfo(rest)
		if err != nil {
			return err
		}
		s.remote = append(s.remote, q)
	}
	if !s.client {
		if err := sendKeys(); err != nil {
			return err
		}
	}
	return s.e.connect(s.remote)
}

// run runs every message size: the client announces it, the server gets
// ready (posts receives), both run their part and meet again.
func (s *side) run() ([]Result, error) {
	s.printHeader()
	var out []Result
	for _, size := range s.p.Sizes() {
		if s.client {
			if err := s.pr.send("SIZE %d", size); err != nil {
				return out, err
			}
			if _, _, err := s.pr.wait(s.ctx, s.cfg.Poll, SetupTimeout, "READY"); err != nil {
				return out, err
			}
		} else {
			w, rest, err := s.pr.wait(s.ctx, s.cfg.Poll, SetupTimeout, "SIZE", "BYE")
			if err != nil {
				return out, err
			}
			if w == "BYE" {
				return out, nil
			}
			if n, err := strconv.Atoi(rest); err != nil || n != size {
				return out, fmt.Errorf("%w announced size %q, expected %d", ErrPeer, rest, size)
			}
			if err := s.prepare(size); err != nil {
				return out, err
			}
			if err := s.pr.send("READY"); err != nil {
				return out, err
			}
		}
		if s.client && s.p.pingPong() {
			if err := s.prepare(size); err != nil {
				return out, err
			}
		}
		r, measured, err := s.measure(size)
		if err != nil {
			return out, err
		}
		// Meet again; the waits keep the device running so the other
		// side's last packets are answered.
		if s.client {
			if err := s.pr.send("DONE"); err != nil {
				return out, err
			}
			if _, _, err := s.pr.wait(s.ctx, s.cfg.Poll, StallTimeout+SetupTimeout, "DONE"); err != nil {
				return out, err
			}
		} else {
			if _, _, err := s.pr.wait(s.ctx, s.cfg.Poll, 24*time.Hour, "DONE"); err != nil {
				return out, err
			}
			if err := s.pr.send("DONE"); err != nil {
				return out, err
			}
		}
		if measured {
			if len(out) == 0 {
				s.printTitle()
			}
			s.printRow(r)
			out = append(out, r)
		}
	}
	if !s.client {
		if _, _, err := s.pr.wait(s.ctx, s.cfg.Poll, SetupTimeout, "BYE"); err != nil && !errors.Is(err, ErrPeer) {
			return out, err
		}
	}
	s.printFooter(len(out) > 0)
	return out, nil
}

// prepare posts the receives a size needs: the responder of SEND and WRITE
// with immediate tests, and both sides of ping-pongs that use them.
func (s *side) prepare(size int) error {
	if !s.p.usesRecv() || (s.client && !s.p.pingPong()) {
		return nil
	}
	// Receives are reposted as they complete until Iters were posted, so
	// none is left over for the next size.
	n := min(s.p.RxDepth, s.p.Iters)
	for q, qp := range s.e.qps {
		s.rsges[q] = verbs.SGE{Addr: s.e.mr.Addr() + uint64(s.e.region(q)+s.e.slot), Length: uint32(size), LKey: s.e.mr.LKey()}
		s.rwrs[q] = verbs.RecvWR{ID: uint64(q) << 32, SGL: s.rsges[q : q+1]}
		for i := 0; i < n; i++ {
			if err := qp.PostRecv(s.rwrs[q : q+1]); err != nil {
				return fmt.Errorf("perftest: QP %#x post receive: %w", qp.QPN(), err)
			}
		}
	}
	return nil
}

// measure runs this side's part of one size. measured is false for the
// passive side of a test (a server whose device only responds).
func (s *side) measure(size int) (r Result, measured bool, err error) {
	r = Result{Test: s.p.Title(), Side: "server", Bytes: size, Iters: s.p.Iters}
	if s.client {
		r.Side = "client"
	}
	switch {
	case s.p.pingPong():
		err = s.pingPong(size, &r)
		return r, true, err
	case s.p.Latency:
		if !s.client {
			return r, false, nil
		}
		err = s.request(size, &r)
		return r, true, err
	case s.client:
		err = s.bwPost(size, &r)
		return r, true, err
	case s.p.usesRecv():
		err = s.bwRecv(size, &r)
		return r, true, err
	}
	return r, false, nil
}

// waiter paces a measurement loop that found nothing to do: it drives the
// device, watches the peer and the context, and gives up on a stall.
type waiter struct {
	s     *side
	spins int
	last  int64
	what  func() string
}

func (s *side) newWaiter(what func() string) waiter {
	return waiter{s: s, last: dpdk.Nanotime(), what: what}
}

// progress notes that something completed.
func (w *waiter) progress(now int64) { w.last, w.spins = now, 0 }

// idle is called when a pass found nothing.
func (w *waiter) idle() error {
	if w.s.cfg.Poll != nil {
		w.s.cfg.Poll()
	}
	w.spins++
	if w.spins&255 != 0 {
		return nil
	}
	if err := w.s.ctx.Err(); err != nil {
		return err
	}
	if err := w.s.pr.check(); err != nil {
		return err
	}
	if time.Duration(dpdk.Nanotime()-w.last) > StallTimeout {
		return fmt.Errorf("perftest: no progress for %v: %s", StallTimeout, w.what())
	}
	return nil
}

func wcError(qpn uint32, wc *verbs.WC) error {
	return fmt.Errorf("perftest: QP %#x: %v completion of wr %#x: %v (vendor syndrome %#x)", qpn, wc.Opcode, wc.ID,
		wc.Status, wc.VendorErr)
}

// sendWR fills the send work request template of QP q for one size.
func (s *side) sendWR(q, size int) *verbs.SendWR {
	e := s.e
	s.sges[q] = verbs.SGE{Addr: e.mr.Addr() + uint64(e.region(q)), Length: uint32(size), LKey: e.mr.LKey()}
	wr := &s.wrs[q]
	*wr = verbs.SendWR{SGL: s.sges[q : q+1], RemoteAddr: s.remote[q].VAddr, RKey: s.remote[q].RKey}
	switch s.p.Verb {
	case Write:
		wr.Opcode = verbs.WRRDMAWrite
		if s.p.WriteImm {
			wr.Opcode = verbs.WRRDMAWriteWithImm
		}
	case Read:
		wr.Opcode = verbs.WRRDMARead
	case Send:
		wr.Opcode = verbs.WRSend
	case Atomic:
		wr.Opcode = verbs.WRAtomicFetchAndAdd
		wr.CompareAdd = 1
		if s.p.Atomic == CmpSwap {
			wr.Opcode, wr.CompareAdd, wr.Swap = verbs.WRAtomicCmpAndSwp, 0, 0
		}
	}
	if size <= e.inl && (wr.Opcode == verbs.WRSend || wr.Opcode == verbs.WRRDMAWrite || wr.Opcode == verbs.WRRDMAWriteWithImm) {
		wr.Flags |= verbs.SendInline
	}
	return wr
}
