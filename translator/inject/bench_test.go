package inject

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// Shape of the benchmark traffic: RC WRITE messages of four 1024-byte
// packets (First, Middle, Middle, Last) on benchQPs connections,
// interleaved packet by packet as a NIC's send scheduler would.
const (
	benchQPs     = 8
	benchMTU     = 1024
	benchPPM     = 4
	benchMsgs    = 1024 // messages per connection the exact-PSN entries cover
	benchPayload = benchMTU
)

// injBench is the injector between ring ports with nothing else running:
// the benchmark goroutine plays both hosts and both dumpers, so the
// injector's work can be timed on its own.
type injBench struct {
	in     *Injector
	pool   *dpdk.Pool
	reqTx  dpdk.Port   // requester host end: frames enter the injector here
	respRx dpdk.Port   // responder host end: forwarded frames leave here
	mirRx  []dpdk.Port // dumper ends
	all    []dpdk.Port

	// tmpl[qp][pos] is a prebuilt frame; psnOff is where its PSN sits.
	tmpl   [benchQPs][benchPPM][]byte
	psnOff int
	psn    [benchQPs]uint32
	next   int // packet index across connections
	feed   []*dpdk.Packet
	drain  []*dpdk.Packet
}

func newInjBench(tb testing.TB, burst, mirrorSnap int) *injBench {
	tb.Helper()
	id := time.Now().UnixNano()
	// Rings larger than a burst never fill: the benchmark drains every
	// burst before it sends the next.
	rc := ring.Config{RingSize: 1024}
	la := ring.NewLink(fmt.Sprintf("bia%d", id), rc)
	lb := ring.NewLink(fmt.Sprintf("bib%d", id), rc)
	// Two queues per mirror link, as in newLumina: the copies' random
	// source ports pick the queue, standing for the dumper NIC's RSS.
	m1 := ring.NewLink(fmt.Sprintf("bm1%d", id), ring.Config{RingSize: 1024, Queues: 2})
	m2 := ring.NewLink(fmt.Sprintf("bm2%d", id), ring.Config{RingSize: 1024, Queues: 2})
	pool, err := dpdk.NewPool(fmt.Sprintf("injb%d", id), 4096, 0)
	if err != nil {
		tb.Fatal(err)
	}
	reqIP, respIP := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.1.1")
	cfg := Config{
		Traffic: []TrafficPort{{Name: "p0", Port: la.B()}, {Name: "p1", Port: lb.A()}},
		Mirrors: []MirrorPort{{Name: "dumper1", Port: m1.A(), Weight: 1}, {Name: "dumper2", Port: m2.A(), Weight: 1}},
		Routes: []Route{{Prefix: netip.PrefixFrom(reqIP, 32), Port: 0, MAC: header.MAC(la.A().Info().MAC)},
			{Prefix: netip.PrefixFrom(respIP, 32), Port: 1, MAC: header.MAC(lb.B().Info().MAC)}},
		Pool: pool, Seed: 1, Burst: burst, MirrorSnap: mirrorSnap,
	}
	in, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	bn := &injBench{in: in, pool: pool, reqTx: la.A(), respRx: lb.B(), mirRx: []dpdk.Port{m1.B(), m2.B()},
		all:  []dpdk.Port{la.A(), la.B(), lb.A(), lb.B(), m1.A(), m1.B(), m2.A(), m2.B()},
		feed: make([]*dpdk.Packet, burst), drain: make([]*dpdk.Packet, 64)}
	tb.Cleanup(func() {
		bn.drainAll()
		in.cache.Flush()
		for _, p := range bn.all {
			p.Close()
		}
		if err := pool.Close(); err != nil {
			tb.Error(err)
		}
	})

	conns := make([]intent.Conn, benchQPs)
	for qp := range conns {
		// IPSNs near the top of the PSN space, so the connections wrap
		// at 2^24 during a long run, as real ones do.
		ipsn := uint32(0xfff000 + qp*0x100)
		conns[qp] = intent.Conn{RequesterIP: reqIP, RequesterQPN: uint32(0x100 + qp), RequesterIPSN: ipsn,
			ResponderIP: respIP, ResponderQPN: uint32(0x200 + qp), ResponderIPSN: uint32(0x800000 + qp)}
		bn.psn[qp] = ipsn
		b := roce.Builder{SrcMAC: header.MAC(la.A().Info().MAC), DstMAC: header.MAC(la.B().Info().MAC),
			SrcGID: roce.GIDFromAddr(reqIP), DstGID: roce.GIDFromAddr(respIP), HopLimit: roce.DefaultHopLimit,
			DontFragment: true, SrcPort: uint16(0xc000 + qp), DestQP: conns[qp].ResponderQPN,
			VA: 0x7f0000000000, RKey: 0x1234, DMALen: benchPPM * benchPayload}
		for pos, op := range [benchPPM]roce.Opcode{roce.RCWriteFirst, roce.RCWriteMiddle, roce.RCWriteMiddle, roce.RCWriteLast} {
			b.Opcode, b.PSN, b.AckReq = op, ipsn+uint32(pos), op == roce.RCWriteLast
			buf := make([]byte, roce.MaxFrameOverhead+benchPayload)
			for i := range buf[b.HeaderLen():] {
				buf[b.HeaderLen()+i] = byte(i * (qp + 1))
			}
			n, err := b.BuildInPlace(buf, benchPayload)
			if err != nil {
				tb.Fatal(err)
			}
			bn.tmpl[qp][pos] = buf[:n]
		}
	}
	var np header.Parsed
	if err := header.Decode(bn.tmpl[0][0], &np); err != nil {
		tb.Fatal(err)
	}
	bn.psnOff = np.L4Off + header.UDPHeaderLen + 9 // BTH bytes 9..11

	// The match path with hits on every kind of entry: ECN on every
	// packet of connection 1 (psn: all), ECN on the second packet of
	// every message of connection 0 and a bit error on the last one of
	// connection 2 for the first benchMsgs messages. Past those the
	// exact-PSN lookups miss, which costs the same two map probes.
	g := intent.Geometry{Verb: intent.VerbWrite, MessageSize: benchPPM * benchPayload, MTU: benchMTU, NumMessages: benchMsgs}
	// Each intent names one packet (initial PSN + psn), so every message
	// gets its own two.
	intents := []intent.Intent{{QP: 1, PSN: intent.AllPSNs, Iter: 1, Type: mirror.EventECN}}
	for m := 0; m < benchMsgs; m++ {
		intents = append(intents, intent.Intent{QP: 0, PSN: m*benchPPM + 1, Iter: 1, Type: mirror.EventECN},
			intent.Intent{QP: 2, PSN: m*benchPPM + 3, Iter: 1, Type: mirror.EventBitError})
	}
	if _, err := in.Load(intents, conns, g, intent.Options{}); err != nil {
		tb.Fatal(err)
	}
	return bn
}

// send puts n frames into the requester end's ring: each a copy of its
// connection's template with the connection's next PSN patched in. The
// ICRC is left as the template has it: the injector never checks it
// (the receiving RNIC does), so recomputing it would only time the feed.
func (bn *injBench) send(n int) int {
	k := bn.pool.GetBulk(bn.feed[:n])
	// Stamp the burst as a DPDK driver does (one clock read per burst).
	now := dpdk.Nanotime()
	for _, pkt := range bn.feed[:k] {
		pkt.Timestamp = now
		qp := bn.next % benchQPs
		pos := (bn.next / benchQPs) % benchPPM
		bn.next++
		pkt.CopyFrom(bn.tmpl[qp][pos])
		d := pkt.Data()
		psn := bn.psn[qp]
		d[bn.psnOff], d[bn.psnOff+1], d[bn.psnOff+2] = byte(psn>>16), byte(psn>>8), byte(psn)
		bn.psn[qp] = (psn + 1) & roce.PSNMask
	}
	sent := bn.reqTx.TxBurst(0, bn.feed[:k])
	dpdk.FreeBulk(bn.feed[sent:k])
	clear(bn.feed[:k])
	return sent
}

// drainAll frees everything the injector forwarded or mirrored and
// returns how many forwarded frames and copies it found.
func (bn *injBench) drainAll() (fwd, mir int) {
	for n := bn.respRx.RxBurst(0, bn.drain); n > 0; n = bn.respRx.RxBurst(0, bn.drain) {
		fwd += n
		dpdk.FreeBulk(bn.drain[:n])
	}
	for _, p := range bn.mirRx {
		for q := 0; q < p.Info().RxQueues; q++ {
			for n := p.RxBurst(q, bn.drain); n > 0; n = p.RxBurst(q, bn.drain) {
				mir += n
				dpdk.FreeBulk(bn.drain[:n])
			}
		}
	}
	clear(bn.drain)
	return fwd, mir
}

// BenchmarkInjector is the software injector's pipeline on one core:
// receive, ITER and match, mirror copy with metadata to a dumper chosen
// by weighted round-robin, ECN or bit-error rewrite, forward. One op is
// one packet. Traffic flows one way, with no ACKs back from the
// responder, so every packet is a data packet that takes the whole match
// and mirror path. The benchmark goroutine also feeds the requester ring and
// drains the responder and mirror rings between polls; "Mpps" counts only
// the time inside Poll (one clock read on each side of it per burst), and
// "loop-Mpps" the whole loop, feed and drain included: a lower bound.
//
// mirror=whole copies every packet whole (the injector's default);
// mirror=128 truncates the copies to the dumpers' 128-byte snap length,
// as a Tofino mirror session's max_pkt_len would, which leaves the copy
// of the payload out of the per-packet work.
func BenchmarkInjector(b *testing.B) {
	for _, snap := range []int{0, 128} {
		name := "mirror=whole"
		if snap > 0 {
			name = fmt.Sprintf("mirror=%d", snap)
		}
		b.Run(name, func(b *testing.B) { benchInjector(b, snap) })
	}
}

func benchInjector(b *testing.B, snap int) {
	const burst = 32
	bn := newInjBench(b, burst, snap)
	var polled time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		sent := bn.send(min(burst, b.N-done))
		t0 := time.Now()
		bn.in.Poll()
		polled += time.Since(t0)
		fwd, mir := bn.drainAll()
		if fwd != sent || mir != sent {
			b.Fatalf("sent %d, forwarded %d, mirrored %d; injector %+v", sent, fwd, mir, bn.in.Stats())
		}
		done += sent
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/polled.Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "loop-Mpps")
	if _, hits := bn.in.Table().Entries(); b.N >= benchQPs*benchPPM*benchMsgs {
		var h uint64
		for _, x := range hits {
			h += x
		}
		// Every exact-PSN entry hit once and the psn: all entry on every
		// packet of its connection: the table did match.
		if want := uint64(2*benchMsgs) + uint64(b.N/benchQPs); h < want {
			b.Fatalf("%d table hits, want at least %d", h, want)
		}
	}
}

// TestInjectorPollAllocs: once the pools and rings are warm, a burst
// through the pipeline (and the feed and drain around it) allocates
// nothing.
func TestInjectorPollAllocs(t *testing.T) {
	const burst = 32
	bn := newInjBench(t, burst, 0)
	// Warm the injector's pool cache and every mirror queue.
	for range 64 {
		bn.send(burst)
		bn.in.Poll()
		bn.drainAll()
	}
	var fwd, mir int
	allocs := testing.AllocsPerRun(1000, func() {
		sent := bn.send(burst)
		bn.in.Poll()
		f, m := bn.drainAll()
		if f != sent || m != sent {
			t.Fatalf("sent %d, forwarded %d, mirrored %d", sent, f, m)
		}
		fwd, mir = fwd+f, mir+m
	})
	if allocs != 0 {
		t.Fatalf("a burst of %d through Poll allocates %.1f times", burst, allocs)
	}
	st := bn.in.Stats()
	if st.RxRoCE == 0 || st.Mirrored != st.RxRoCE || fwd == 0 || mir != fwd {
		t.Fatalf("forwarded %d, mirrored %d; injector %+v", fwd, mir, st)
	}
	var ecn, corrupt uint64
	for _, p := range st.Ports {
		ecn += p.ECNMarked
		corrupt += p.Corrupted
	}
	if ecn == 0 || corrupt == 0 {
		t.Fatalf("no events applied: ecn %d, bit errors %d", ecn, corrupt)
	}
}
