package trafficgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// pair is two soft RNICs on a ring link.
func pair(t *testing.T) (Endpoint, Endpoint, *soft.Device) {
	t.Helper()
	l := ring.NewLink(fmt.Sprintf("tg%p", t), ring.Config{RingSize: 4096})
	a4, b4 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	a, err := soft.NewDevice(fmt.Sprintf("tga%p", t), l.A(), soft.Config{GIDs: []netip.Addr{a4}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := soft.NewDevice(fmt.Sprintf("tgb%p", t), l.B(), soft.Config{GIDs: []netip.Addr{b4}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for _, d := range []*soft.Device{a, b} {
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { a.Close(); b.Close(); cancel(); l.A().Close(); l.B().Close() })
	return Endpoint{Dev: a, GID: a4}, Endpoint{Dev: b, GID: b4}, b
}

func TestVerbs(t *testing.T) {
	for _, p := range []Params{
		{Verb: intent.VerbWrite, NumQPs: 4, MsgsPerQP: 5, MessageSize: 10000, MTU: 1024, TxDepth: 2},
		{Verb: intent.VerbRead, NumQPs: 2, MsgsPerQP: 3, MessageSize: 5000, MTU: 4096},
		{Verb: intent.VerbSend, NumQPs: 3, MsgsPerQP: 4, MessageSize: 1, MTU: 256, TxDepth: 4},
		{Verb: intent.VerbSendRead, NumQPs: 4, SendQPs: 2, MsgsPerQP: 3, MessageSize: 3000, MTU: 1024},
		{Verb: intent.VerbWrite, NumQPs: 3, MsgsPerQP: 4, MessageSize: 2000, MTU: 1024, BarrierSync: true},
	} {
		t.Run(string(p.Verb), func(t *testing.T) {
			req, resp, _ := pair(t)
			var meta []intent.Conn
			res, err := Run(context.Background(), req, resp, p, func(c []intent.Conn) error { meta = c; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK() || len(meta) != p.NumQPs || meta[0].RequesterIP != req.GID || meta[0].ResponderQPN == 0 {
				t.Fatalf("result %+v meta %+v", res.QPs, meta)
			}
			for _, q := range res.QPs {
				if len(q.MCT) != p.MsgsPerQP || q.Bytes != int64(p.MsgsPerQP*p.MessageSize) {
					t.Fatalf("QP %+v", q)
				}
			}
			if res.Goodput <= 0 {
				t.Fatal("no goodput")
			}
		})
	}
}

// TestMetadataHookAborts: an error from the metadata hook stops the run
// before any traffic.
func TestMetadataHookAborts(t *testing.T) {
	req, resp, b := pair(t)
	_, err := Run(context.Background(), req, resp, Params{NumQPs: 2}, func([]intent.Conn) error { return errors.New("injector down") })
	if err == nil || b.Counter(soft.CntRxPackets) != 0 {
		t.Fatalf("err %v, responder received %d", err, b.Counter(soft.CntRxPackets))
	}
}

// TestPeerVanishes: the responder goes away mid-run; every QP ends with
// an error completion (retry exceeded) instead of hanging.
func TestPeerVanishes(t *testing.T) {
	req, resp, b := pair(t)
	p := Params{NumQPs: 2, MsgsPerQP: 1000, MessageSize: 4096, Timeout: 8, RetryCnt: 2}
	start := time.Now()
	res, err := Run(context.Background(), req, resp, p, func([]intent.Conn) error {
		go func() { time.Sleep(5 * time.Millisecond); b.Close() }()
		return nil
	})
	if !errors.Is(err, ErrFailed) || res.OK() || time.Since(start) > 10*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Params{{Verb: "atomic"}, {NumQPs: -1}, {MTU: 1000}, {TxDepth: 5000}, {Timeout: 40}, {RetryCnt: 9}} {
		if err := p.Defaults().Validate(); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}

// TestRate: a paced run takes at least its messages' schedule.
func TestRate(t *testing.T) {
	req, resp, _ := pair(t)
	p := Params{NumQPs: 2, MsgsPerQP: 10, MessageSize: 10000, Rate: 80e6, TxDepth: 4}
	res, err := Run(context.Background(), req, resp, p, nil)
	if err != nil || !res.OK() {
		t.Fatal(err)
	}
	if floor := 9 * time.Millisecond; res.Elapsed < floor || res.Goodput > 2*80e6*1.3 {
		t.Fatalf("%v elapsed (floor %v), goodput %.3g", res.Elapsed, floor, res.Goodput)
	}
}

// TestMultiGID: each QP takes its own GID, and the metadata says which.
func TestMultiGID(t *testing.T) {
	l := ring.NewLink(fmt.Sprintf("tgm%p", t), ring.Config{RingSize: 4096})
	ga := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.11")}
	gb := []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.12")}
	a, err := soft.NewDevice(fmt.Sprintf("tgma%p", t), l.A(), soft.Config{GIDs: ga})
	if err != nil {
		t.Fatal(err)
	}
	b, err := soft.NewDevice(fmt.Sprintf("tgmb%p", t), l.B(), soft.Config{GIDs: gb})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { a.Close(); b.Close(); cancel(); l.A().Close(); l.B().Close() }()
	for _, d := range []*soft.Device{a, b} {
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Run(ctx, Endpoint{Dev: a, MultiGID: ga}, Endpoint{Dev: b, MultiGID: gb}, Params{NumQPs: 3}, nil)
	if err != nil || !res.OK() {
		t.Fatal(err)
	}
	c := res.Conns()
	if c[0].RequesterIP != ga[0] || c[1].RequesterIP != ga[1] || c[2].RequesterIP != ga[0] || c[1].ResponderIP != gb[1] {
		t.Fatalf("conns %+v", c)
	}
}

// TestTwoHosts runs the exchange over TCP: the responder serves on a
// listener, the requester dials it, each on its own RNIC.
func TestTwoHosts(t *testing.T) {
	for _, p := range []Params{
		{Verb: intent.VerbWrite, NumQPs: 3, MsgsPerQP: 4, MessageSize: 5000, MTU: 1024, TxDepth: 2},
		{Verb: intent.VerbRead, NumQPs: 2, MsgsPerQP: 3, MessageSize: 3000},
		{Verb: intent.VerbSend, NumQPs: 2, MsgsPerQP: 20, MessageSize: 100, TxDepth: 4},
		{Verb: intent.VerbSendRead, NumQPs: 4, SendQPs: 2, MsgsPerQP: 5, MessageSize: 2000},
	} {
		t.Run(string(p.Verb), func(t *testing.T) {
			req, resp, _ := pair(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			type served struct {
				ok  []bool
				err error
			}
			ch := make(chan served, 1)
			go func() {
				_, ok, err := Serve(context.Background(), ln, resp)
				ch <- served{ok, err}
			}()
			var meta []intent.Conn
			res, err := Dial(context.Background(), ln.Addr().String(), req, p, func(c []intent.Conn) error { meta = c; return nil })
			if err != nil {
				t.Fatal(err)
			}
			sv := <-ch
			if sv.err != nil || len(sv.ok) != p.NumQPs {
				t.Fatalf("responder: %v %v", sv.err, sv.ok)
			}
			if !res.OK() || len(meta) != p.NumQPs || meta[0].ResponderIP != resp.GID {
				t.Fatalf("result %+v meta %+v", res.QPs, meta)
			}
		})
	}
}

// TestTwoHostsPeerGone: a responder that is not there, or that refuses
// the parameters, ends the requester with an error naming the peer.
func TestTwoHostsPeerGone(t *testing.T) {
	req, resp, _ := pair(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go func() { _, _, _ = Serve(context.Background(), ln, resp) }()
	// Parameters that do not validate never reach the exchange.
	bad := Params{NumQPs: 1}
	bad.MTU = 1000
	if _, err := Dial(context.Background(), addr, req, bad, nil); err == nil {
		t.Fatal("bad parameters accepted")
	}
	ln.Close()
	DialTimeout = 300 * time.Millisecond
	defer func() { DialTimeout = 10 * time.Second }()
	if _, err := Dial(context.Background(), addr, req, Params{}, nil); err == nil || !strings.Contains(err.Error(), "responder at") {
		t.Fatalf("no responder: %v", err)
	}
}
