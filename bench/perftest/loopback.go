package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// LoopbackOptions shape an in-process test.
type LoopbackOptions struct {
	// Cores pins the server's and the client's thread (each drives its
	// own soft RNIC); nil leaves them to the scheduler.
	Cores []int
	// Profile is the soft RNICs' behaviour profile (zero: CX5).
	Profile soft.Profile
	// Server and Client receive each side's report; nil for none.
	Server, Client io.Writer
	// Capture, when set, wraps each side's port (0 server, 1 client), e.g.
	// to record the packets of the run.
	Capture func(side int, p dpdk.Port) dpdk.Port
	// Devices, when set, is called with both devices once they exist
	// (for counters).
	Devices func(server, client *soft.Device)
}

var loopSeq atomic.Uint32

// Loopback runs test p between two soft RNICs joined by an in-process ring
// link, one thread per side driving its RNIC, and returns both sides'
// results.
func Loopback(ctx context.Context, p Params, opt LoopbackOptions) (client, server []Result, err error) {
	server, err = loopback(ctx, opt, func(ctx context.Context, conn io.ReadWriter, cfg Config) (err error) {
		client, err = RunClient(ctx, conn, cfg, p, opt.Client)
		return err
	})
	return client, server, err
}

// PingLoopback runs Ping against a server on an in-process link (the
// agent's ping without a network) and returns the number of samples.
func PingLoopback(ctx context.Context, pp PingParams, opt LoopbackOptions, fn func(PingSample)) (n int, err error) {
	// The end of ctx ends the pings; the server stops when told.
	_, err = loopback(context.WithoutCancel(ctx), opt, func(_ context.Context, conn io.ReadWriter, cfg Config) (err error) {
		n, err = Ping(ctx, conn, cfg, pp, fn)
		return err
	})
	return n, err
}

// loopback runs a server and the client side runClient between two soft
// RNICs joined by an in-process ring link, one thread per side.
func loopback(ctx context.Context, opt LoopbackOptions, runClient func(context.Context, io.ReadWriter, Config) error) (server []Result, err error) {
	if opt.Cores != nil && len(opt.Cores) != 2 {
		return nil, fmt.Errorf("perftest: loopback pins two threads, got %d cores", len(opt.Cores))
	}
	n := loopSeq.Add(1)
	link := ring.NewLink(fmt.Sprintf("perftest%d", n), ring.Config{RingSize: 4096})
	defer link.A().Close()
	defer link.B().Close()
	gids := []netip.Addr{netip.MustParseAddr("192.168.77.1"), netip.MustParseAddr("192.168.77.2")}
	ports := []dpdk.Port{link.A(), link.B()}
	devs := make([]*soft.Device, 2)
	for i := range devs {
		port := ports[i]
		if opt.Capture != nil {
			port = opt.Capture(i, port)
		}
		devs[i], err = soft.NewDevice(fmt.Sprintf("perf%d%c", n, 'a'+i), port, soft.Config{
			GIDs: gids[i : i+1], Profile: opt.Profile, PoolSize: 8192,
			// The peer is known: no ARP round before the first message.
			Neighbors: map[netip.Addr]header.MAC{gids[1-i]: header.MAC(ports[1-i].Info().MAC)},
		})
		if err != nil {
			return nil, err
		}
		defer devs[i].Close()
	}
	if opt.Devices != nil {
		opt.Devices(devs[0], devs[1])
	}
	cs, cc := net.Pipe()
	defer cs.Close()
	defer cc.Close()
	var wg sync.WaitGroup
	var serr, cerr error
	run := func(i int, conn net.Conn, errp *error, f func(Config) error) {
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if opt.Cores != nil {
			if err := dpdk.Pin(opt.Cores[i]); err != nil {
				*errp = fmt.Errorf("perftest: pinning to core %d: %w", opt.Cores[i], err)
				conn.Close()
				return
			}
		}
		if *errp = f(Config{Device: devs[i], Poll: devs[i].Poll}); *errp != nil {
			// Unblock the other side if it waits on the exchange.
			conn.Close()
		}
	}
	wg.Add(2)
	go run(0, cs, &serr, func(cfg Config) (err error) {
		server, err = RunServer(ctx, cs, cfg, opt.Server)
		return err
	})
	go run(1, cc, &cerr, func(cfg Config) error { return runClient(ctx, cc, cfg) })
	wg.Wait()
	// Report the side that failed first, not the other's "peer closed".
	switch {
	case cerr != nil && serr != nil && errors.Is(serr, ErrPeer):
		return server, cerr
	case cerr != nil && serr != nil && errors.Is(cerr, ErrPeer):
		return server, serr
	}
	return server, errors.Join(cerr, serr)
}
