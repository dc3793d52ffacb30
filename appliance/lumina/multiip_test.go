package lumina_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/bench/trafficgen"
	"github.com/rdma-appliance/appliance/collector/luminaanalyzer"
	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/dumper"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/dumper/trace"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/translator/inject"
	"github.com/rdma-appliance/appliance/verbs/soft"
)

// Lumina §6.4's setting has several requesters (10.0.0.11, .12, .13) and
// one responder, which is what tells a per-port CNP pacer from a
// per-destination-IP one. appliance/lumina's testbed gives each side one
// address, so this file puts the same pieces together with a requester
// RNIC holding two addresses: the injector routes the requester's /24,
// and two traffic generators run at once, one per address.

// multiGroup is one traffic generator of a run over the multi-address
// setup, from requester address ip. Several may share an address.
type multiGroup struct {
	ip     netip.Addr
	numQPs int
}

func runMultiIP(t *testing.T, resp soft.Profile, groups []multiGroup, p trafficgen.Params, in []intent.Intent) *luminaanalyzer.Report {
	t.Helper()
	name := fmt.Sprintf("mip%d-%d", os.Getpid(), tbSeq.Add(1))
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	respIP := netip.MustParseAddr("10.0.1.1")

	pool, err := dpdk.NewPool(name, 16384, dpdk.Headroom+4096+512)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rc := ring.Config{Queues: 1, RingSize: 16384}
	reqL, respL, dumpL := ring.NewLink(name+"-req", rc), ring.NewLink(name+"-resp", rc), ring.NewLink(name+"-dump", rc)
	for _, l := range []*ring.Link{reqL, respL, dumpL} {
		defer l.A().Close()
		defer l.B().Close()
	}
	var ips []netip.Addr
	for _, g := range groups {
		if !slices.Contains(ips, g.ip) {
			ips = append(ips, g.ip)
		}
	}
	req, err := soft.NewDevice(name+"-req", reqL.A(), soft.Config{GIDs: ips, Profile: soft.ProfileCX5, PoolSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer req.Close()
	rsp, err := soft.NewDevice(name+"-resp", respL.A(), soft.Config{GIDs: []netip.Addr{respIP}, Profile: resp, PoolSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Close()
	// ITER counted per message (the P4 program's rule): a spurious
	// retransmission on a stalled machine must not stop later messages
	// from being marked.
	inj, err := inject.New(inject.Config{Pool: pool, Seed: 1, IterMode: intent.IterP4,
		Traffic: []inject.TrafficPort{{Name: "requester", Port: reqL.B()}, {Name: "responder", Port: respL.B()}},
		Routes: []inject.Route{
			{Prefix: netip.MustParsePrefix("10.0.0.0/24"), Port: 0, MAC: header.MAC(reqL.A().Info().MAC)},
			{Prefix: netip.PrefixFrom(respIP, 32), Port: 1, MAC: header.MAC(respL.A().Info().MAC)},
		},
		Mirrors: []inject.MirrorPort{{Name: "dumper0", Port: dumpL.A(), Weight: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dumper.New(dumper.Config{Name: "dumper0", Port: dumpL.B(), Dir: dir, File: "dumper0.pcap", NumPkts: 1<<16 - 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	runCtx, stop := context.WithCancel(ctx)
	var loops sync.WaitGroup
	loops.Add(1)
	go func() {
		defer loops.Done()
		_ = inj.Run(runCtx)
	}()
	defer func() {
		stop()
		loops.Wait()
	}()
	for _, dev := range []*soft.Device{req, rsp} {
		if err := dev.Start(runCtx); err != nil {
			t.Fatal(err)
		}
	}
	inj.Reset()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}

	// The generators meet in their metadata hooks: the injector is
	// loaded once, with every connection, before any traffic.
	p = p.Defaults()
	geom := intent.Geometry{Verb: p.Verb, MessageSize: p.MessageSize, MTU: p.MTU, NumMessages: p.MsgsPerQP}
	var mu sync.Mutex
	conns := make([][]intent.Conn, len(groups))
	arrived := 0
	loaded := make(chan struct{})
	var loadErr error
	results := make([]*trafficgen.Result, len(groups))
	errs := make([]error, len(groups))
	var gens sync.WaitGroup
	for i, g := range groups {
		gp := p
		gp.NumQPs, gp.Seed = g.numQPs, p.Seed+uint64(i)
		gens.Add(1)
		go func() {
			defer gens.Done()
			results[i], errs[i] = trafficgen.Run(ctx, trafficgen.Endpoint{Dev: req, GID: g.ip, GIDIndex: slices.Index(ips, g.ip)},
				trafficgen.Endpoint{Dev: rsp, GID: respIP}, gp, func(cs []intent.Conn) error {
					mu.Lock()
					conns[i] = cs
					arrived++
					last := arrived == len(groups)
					mu.Unlock()
					if last {
						_, loadErr = inj.Load(in, slices.Concat(conns...), geom, intent.Options{})
						close(loaded)
					}
					select {
					case <-loaded:
						return loadErr
					case <-ctx.Done():
						return ctx.Err()
					}
				})
		}()
	}
	gens.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Let the last copies reach the dumper, then stop and merge.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		st, ds := inj.Stats(), d.Status()
		if ds.Captured+ds.ArenaFull+ds.PortDropped >= st.Mirrored {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	st := inj.Stats()
	res, err := d.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src := trace.Source{Name: "dumper0"}
	for _, f := range res.Files {
		src.Paths = append(src.Paths, f.Path)
	}
	merged := dir + "/" + luminaanalyzer.TraceFile
	w, err := pcap.Create(merged, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet, Nanosecond: true})
	if err != nil {
		t.Fatal(err)
	}
	_, merr := trace.Merge(ctx, []trace.Source{src}, w, trace.Options{Mirrored: int64(st.Mirrored),
		RxRoCE: int64(st.RxRoCE), FirstSeq: 1})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if merr != nil {
		t.Fatalf("integrity: %v", merr)
	}

	m := &luminaanalyzer.Meta{Test: t.Name(), Trace: luminaanalyzer.TraceFile, Geometry: geom, TxDepth: p.TxDepth, Timeout: p.Timeout,
		RetryCnt: p.RetryCnt, Intents: in, Injector: st, Requester: req.Counters(), Responder: rsp.Counters(),
		RequesterNIC: nicConfig(soft.ProfileCX5), ResponderNIC: nicConfig(resp), Valid: true}
	for _, r := range results {
		m.Conns = append(m.Conns, r.Conns()...)
		for _, q := range r.QPs {
			var v []int64
			for _, x := range q.MCT {
				v = append(v, int64(x))
			}
			m.MCT = append(m.MCT, v)
		}
	}
	rep, err := luminaanalyzer.AnalyzeOptions(ctx, merged, m, softOptions)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		var sb strings.Builder
		_ = rep.WriteText(&sb)
		t.Log("\n" + sb.String())
	}
	return rep
}

// TestClosedLoopCNPScopeMultiIP: two requester addresses, two QPs from the
// first and one from the second (one traffic generator each: a generator
// fills its buffers before traffic, and equal ones start together), to one
// responder; every message's 11th
// packet CE-marked. Per port, per destination IP and per QP now group the
// QPs three different ways (per IP pair groups them as per destination IP:
// there is one responder address), and the analyzer must single out the
// configured one: Lumina's CX6 against CX4/CX5 finding (Table 4). Many
// short messages keep the three QPs running side by side for some fifty
// milliseconds, ten pacing intervals: what tells the scopes apart is a
// CNP to one address within an interval of one to the other, or a mark
// left unanswered an interval after its address's last CNP. On a loaded
// machine a generator may still start late; a run whose QPs' marks did
// not overlap for five intervals is run again (the test's precondition,
// not the analyzer's).
func TestClosedLoopCNPScopeMultiIP(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector stalls the soft RNICs for longer than the CNP intervals this test infers from the trace")
	}
	const interval = 5 * time.Millisecond
	a, b := netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("10.0.0.12")
	groups := []multiGroup{{a, 1}, {a, 1}, {b, 1}}
	p := trafficgen.Params{Verb: intent.VerbWrite, MsgsPerQP: 600, MessageSize: 4 << 10, MTU: 1024, TxDepth: 1,
		Timeout: 14, RetryCnt: 7, Seed: 11}
	in := everyMessage(3, p.MsgsPerQP, 4, 2, mirror.EventECN)
	for _, tc := range []struct {
		name       string
		prof       soft.Profile
		scope      soft.CNPScope
		consistent []string
	}{
		{"per-port (cx6)", soft.ProfileCX6, soft.CNPPerPort, []string{luminaanalyzer.ScopePort}},
		{"per-dest-ip (cx5)", soft.ProfileCX5, soft.CNPPerDestIP, []string{luminaanalyzer.ScopeDestIP, luminaanalyzer.ScopeIPPair}},
		{"per-qp", soft.ProfileCX5, soft.CNPPerQP, []string{luminaanalyzer.ScopeQP}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.prof
			resp.CNPScope, resp.MinTimeBetweenCNPs = tc.scope, interval
			var rep *luminaanalyzer.Report
			overlapped := false
			for try := 1; try <= 3; try++ {
				rep = runMultiIP(t, resp, groups, p, in)
				ov := markOverlap(rep)
				if overlapped = ov >= 5*interval; overlapped {
					break
				}
				t.Logf("run %d: the QPs' marks overlapped for %v only; again", try, ov)
			}
			wantCompliant(t, rep)
			cn := rep.CNP
			if cn.CEMarked != 1800 || cn.CEAnswered != cn.CNPs || cn.Unexplained != 0 || cn.CNPs < 2 {
				t.Fatalf("CNPs %d, CE %d answered %d, unexplained %d", cn.CNPs, cn.CEMarked, cn.CEAnswered, cn.Unexplained)
			}
			// QPs that never ran side by side leave nothing that tells
			// the scopes apart: the analyzer may then keep several, but
			// never refute the configured one.
			if !overlapped && slices.Contains(cn.Consistent, tc.consistent[0]) {
				t.Logf("the machine never ran the QPs side by side (3 runs); only checked that %s stays consistent (%v)",
					tc.consistent[0], cn.Consistent)
			} else if !slices.Equal(cn.Consistent, tc.consistent) {
				var ev []string
				for _, e := range cn.Events {
					if e.Kind == "cnp" {
						ev = append(ev, fmt.Sprintf("conn %d %.3fms", e.Conn, float64(e.TimeNs-rep.Summary.FirstNs)/1e6))
					}
				}
				t.Fatalf("consistent scopes %v, want %v: %+v\nCNPs: %s", cn.Consistent, tc.consistent, cn.Scopes,
					strings.Join(ev, ", "))
			}
			for _, sc := range cn.Scopes {
				if sc.Scope == tc.consistent[0] &&
					((sc.UpperNs >= 0 && sc.UpperNs < int64(interval)-cn.ToleranceNs) || sc.LowerNs > int64(interval)+cn.ToleranceNs) {
					t.Fatalf("interval %v outside (%v, %v] ± %v", interval, time.Duration(sc.LowerNs),
						time.Duration(sc.UpperNs), time.Duration(cn.ToleranceNs))
				}
			}
			dsts := map[string]bool{}
			for _, pr := range cn.ByIPPair {
				dsts[pr.Dst] = true
			}
			if tc.scope != soft.CNPPerPort && (!dsts["10.0.0.11"] || !dsts["10.0.0.12"]) {
				t.Fatalf("CNPs by IP pair %+v", cn.ByIPPair)
			}
			wantCounters(t, rep, "responder np_cnp_sent", "responder np_ecn_marked_roce_packets")
		})
	}
}

// markOverlap is how long every connection was sending CE-marked packets.
func markOverlap(rep *luminaanalyzer.Report) time.Duration {
	first, last := map[int]int64{}, map[int]int64{}
	for _, e := range rep.CNP.Events {
		if e.Kind != "ce" {
			continue
		}
		if _, ok := first[e.Conn]; !ok {
			first[e.Conn] = e.TimeNs
		}
		last[e.Conn] = e.TimeNs
	}
	var from, to int64 = 0, 1<<63 - 1
	for c := range rep.Connections {
		from, to = max(from, first[c]), min(to, last[c])
	}
	return time.Duration(max(to-from, 0))
}
