package trafficgen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/verbs"
)

// The two-host form: the responder listens on traffic.listen-port, the
// requester connects and the two exchange, one JSON message per line:
//
//	requester -> responder  {"params": ...}            the test's traffic keys
//	responder -> requester  {"qps": [...]}             its QPs (QPN, PSN, GID, region, rkey)
//	requester -> responder  {"qps": [...]}             its QPs; both move theirs to RTS
//	responder -> requester  {"ready": true}            receives posted, serving
//	requester -> responder  {"done": true, "bytes": [...]}  after the traffic
//	responder -> requester  {"data_ok": [...]}         its memory checked against the pattern
//
// Either side may send {"error": "..."} instead and close. The requester
// pushes the connections' metadata (ready hook: the injector) between
// "ready" and the traffic, as Lumina's generator does.
type message struct {
	Params *Params  `json:"params,omitempty"`
	QPs    []QPInfo `json:"qps,omitempty"`
	Ready  bool     `json:"ready,omitempty"`
	Done   bool     `json:"done,omitempty"`
	Bytes  []int64  `json:"bytes,omitempty"`
	DataOK []bool   `json:"data_ok,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// MaxMessage bounds a message of the exchange (1024 QPs' metadata fit
// many times over); a longer line ends it, as a json.Decoder would buffer
// a peer's endless object without limit.
const MaxMessage = 1 << 20

type peer struct {
	c   net.Conn
	enc *json.Encoder
	r   *bufio.Reader
}

func newPeer(c net.Conn) *peer {
	return &peer{c: c, enc: json.NewEncoder(c), r: bufio.NewReaderSize(c, MaxMessage)}
}

func (p *peer) send(m message) error {
	if err := p.enc.Encode(m); err != nil {
		return fmt.Errorf("%w: %v", ErrPeer, err)
	}
	return nil
}

// recv reads the next message, waiting at most d.
func (p *peer) recv(d time.Duration) (message, error) {
	var m message
	_ = p.c.SetReadDeadline(time.Now().Add(d))
	line, err := p.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return m, fmt.Errorf("%w: a message over %d bytes", ErrPeer, MaxMessage)
	}
	if err != nil {
		return m, fmt.Errorf("%w: %v", ErrPeer, err)
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("%w: %v", ErrPeer, err)
	}
	if m.Error != "" {
		return m, fmt.Errorf("%w gave up: %s", ErrPeer, m.Error)
	}
	return m, nil
}

func (p *peer) fail(err error) error {
	msg := err.Error()
	if len(msg) > 4096 {
		msg = msg[:4096] + "..."
	}
	_ = p.send(message{Error: msg})
	return err
}

// exchangeTimeout bounds every step of the exchange but the traffic.
const exchangeTimeout = 30 * time.Second

// DialTimeout is how long the requester keeps trying to reach the
// responder.
var DialTimeout = 10 * time.Second

// Serve is the responder: it accepts one requester on ln, sets up the QPs
// its parameters ask for on ep, serves the traffic and checks what it
// received. It returns the requester's parameters and the per-QP result
// of its own memory check.
func Serve(ctx context.Context, ln net.Listener, ep Endpoint) (*Params, []bool, error) {
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() { c, err := ln.Accept(); ch <- accepted{c, err} }()
	var a accepted
	select {
	case a = <-ch:
	case <-ctx.Done():
		ln.Close()
		return nil, nil, ctx.Err()
	}
	if a.err != nil {
		return nil, nil, a.err
	}
	defer a.c.Close()
	pr := newPeer(a.c)
	m, err := pr.recv(exchangeTimeout)
	if err != nil {
		return nil, nil, err
	}
	if m.Params == nil {
		return nil, nil, pr.fail(fmt.Errorf("%w: no parameters", ErrPeer))
	}
	p := m.Params.Defaults()
	if err := p.Validate(); err != nil {
		return &p, nil, pr.fail(err)
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0x726573706f6e64))
	s, err := newSide(ep, p, rng)
	defer s.close()
	if err != nil {
		return &p, nil, pr.fail(fmt.Errorf("trafficgen: responder: %w", err))
	}
	if err := pr.send(message{QPs: s.info(p)}); err != nil {
		return &p, nil, err
	}
	if m, err = pr.recv(exchangeTimeout); err != nil {
		return &p, nil, err
	}
	if err := s.connect(m.QPs, p); err != nil {
		return &p, nil, pr.fail(fmt.Errorf("trafficgen: responder: %w", err))
	}
	s.prepare(p, false)
	// Keep tx-depth receives posted on every SEND QP, reposting as they
	// complete, until the requester says it is done.
	post := s.postRecv(p)
	next := make([]int, p.NumQPs)
	for i := range next {
		if p.verbOf(i) != intent.VerbSend {
			continue
		}
		for next[i] < min(p.TxDepth, p.MsgsPerQP) {
			if err := post(i, next[i]); err != nil {
				return &p, nil, pr.fail(err)
			}
			next[i]++
		}
	}
	if err := pr.send(message{Ready: true}); err != nil {
		return &p, nil, err
	}
	done := make(chan message, 1)
	go func() {
		// The traffic may take long; the done message bounds it.
		m, err := pr.recv(24 * time.Hour)
		if err != nil {
			m = message{Error: err.Error()}
		}
		done <- m
	}()
	wcs := make([]verbs.WC, 64)
	for {
		select {
		case m := <-done:
			if m.Error != "" {
				return &p, nil, fmt.Errorf("%w: %s", ErrPeer, m.Error)
			}
			if len(m.Bytes) != p.NumQPs {
				return &p, nil, pr.fail(fmt.Errorf("%w: byte counts for %d QPs", ErrPeer, len(m.Bytes)))
			}
			ok := s.check(p, false, m.Bytes)
			return &p, ok, pr.send(message{DataOK: ok})
		case <-ctx.Done():
			return &p, nil, pr.fail(ctx.Err())
		default:
		}
		n, err := s.cq.Poll(wcs)
		if err != nil {
			return &p, nil, pr.fail(err)
		}
		for _, wc := range wcs[:n] {
			if wc.Opcode != verbs.WCRecv || wc.Status != verbs.WCSuccess {
				continue
			}
			i := int(wc.ID >> 32)
			if i < len(next) && next[i] < p.MsgsPerQP {
				if err := post(i, next[i]); err != nil {
					return &p, nil, pr.fail(err)
				}
				next[i]++
			}
		}
		if n == 0 {
			select {
			case <-s.cq.Notify():
			case <-time.After(time.Millisecond):
			}
		}
	}
}

// Dial is the requester: it connects to the responder at addr, sets up
// and connects the QPs on ep, hands the connections' metadata to ready
// (the injector; nil skips it), runs the traffic and gathers both sides'
// memory checks.
func Dial(ctx context.Context, addr string, ep Endpoint, p Params, ready func([]intent.Conn) error) (*Result, error) {
	p = p.Defaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	// The responder may come up a moment after the requester (both are
	// started by the orchestrator): keep trying for a while.
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, DialTimeout)
	var c net.Conn
	var err error
	for {
		if c, err = d.DialContext(dctx, "tcp", addr); err == nil || dctx.Err() != nil {
			break
		}
		select {
		case <-dctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	cancel()
	if err != nil {
		return nil, fmt.Errorf("trafficgen: responder at %s: %w", addr, err)
	}
	defer c.Close()
	pr := newPeer(c)
	rng := rand.New(rand.NewPCG(p.Seed, 0x4c756d696e61))
	s, err := newSide(ep, p, rng)
	defer s.close()
	if err != nil {
		return nil, pr.fail(fmt.Errorf("trafficgen: requester: %w", err))
	}
	if err := pr.send(message{Params: &p}); err != nil {
		return nil, err
	}
	m, err := pr.recv(exchangeTimeout)
	if err != nil {
		return nil, err
	}
	remote := m.QPs
	local := s.info(p)
	if err := s.connect(remote, p); err != nil {
		return nil, pr.fail(fmt.Errorf("trafficgen: requester: %w", err))
	}
	if err := pr.send(message{QPs: local}); err != nil {
		return nil, err
	}
	if _, err := pr.recv(exchangeTimeout); err != nil {
		return nil, err
	}
	res := newResult(p, local, remote)
	if ready != nil {
		if err := ready(res.Conns()); err != nil {
			return res, pr.fail(fmt.Errorf("trafficgen: metadata: %w", err))
		}
	}
	s.prepare(p, true)
	start := time.Now()
	runErr := run(ctx, s, remote, p, res, nil, nil)
	el := time.Since(start)
	if err := pr.send(message{Done: true, Bytes: res.bytes()}); err != nil {
		return res, errors.Join(runErr, err)
	}
	m, err = pr.recv(exchangeTimeout)
	if err != nil {
		return res, errors.Join(runErr, err)
	}
	if len(m.DataOK) != p.NumQPs {
		return res, errors.Join(runErr, fmt.Errorf("%w: memory checks for %d QPs", ErrPeer, len(m.DataOK)))
	}
	res.finish(p, el, s.check(p, true, res.bytes()), m.DataOK)
	return res, runErr
}
