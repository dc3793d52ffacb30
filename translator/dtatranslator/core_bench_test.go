package dtatranslator

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// BenchmarkServiceCore is the translator's whole path on one core: the
// benchmark's goroutine plays the reporters and the collector's RNIC on the
// far end of the translator's ring port and calls Service.Poll itself, so
// nothing else competes for the core. Each round hands the translator a
// burst of reports (Key-Write N=2 and Append, made by a Reporter
// beforehand), lets it receive, parse, translate, build the WRITEs with
// their ICRC and transmit them, then reads those WRITEs and answers with one
// cumulative ACK, which the translator receives, checks and applies.
// reports/s/core counts only the time spent in Poll; reports/s counts the
// whole round, the benchmark's own reporter and collector work included.
func BenchmarkServiceCore(b *testing.B) {
	const burst = 32
	name := fmt.Sprintf("core%p", b)
	pool, err := dpdk.NewPool(name, 8192, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	l := ring.NewLink(name, ring.Config{RingSize: 1024})
	defer func() { l.A().Close(); l.B().Close() }()
	s, err := DecodeSpec("t.yml", []byte("ip: 10.9.0.100\nburst: 32\ncollectors:\n  - name: c\n    exchange: 127.0.0.1:9\n"))
	if err != nil {
		b.Fatal(err)
	}
	svc, err := NewService(s, l.A(), pool, nil)
	if err != nil {
		b.Fatal(err)
	}
	trMAC := header.MAC(l.A().Info().MAC)
	trIP := netip.MustParseAddr("10.9.0.100")
	collMAC := header.MAC{0x02, 0, 0, 0, 0, 0x09}
	collIP := netip.MustParseAddr("10.9.0.1")
	const collQPN = 0x11
	// What an exchange would have handed over: the collector's regions.
	offer := &dtamem.Offer{Name: "c", IP: collIP, MAC: collMAC.String(), QPN: collQPN, MTU: 1024, MaxAtomic: 16,
		Regions: dtamem.Regions{
			KeyWrite: &dtamem.KeyWriteRegion{Addr: 1 << 20, RKey: 5, Slots: 1 << 16},
			Lists:    map[uint32]dtamem.ListRegion{1: {Addr: 1 << 30, RKey: 6, Entries: 1 << 16}},
			Batch:    1,
		}}
	svc.events <- collEvent{i: 0, offer: offer, psn: 0}
	svc.Poll()
	if svc.colls[0].conn == nil {
		b.Fatalf("no connection: %s", svc.colls[0].lastErr.Load())
	}
	localQPN := svc.colls[0].localQPN

	// The reports, made once by a Reporter on a link of its own; the same
	// frames go round (not retransmittable, so no sequence to keep).
	frames := reportFrames(b, pool, trMAC, trIP, 4096)

	ack := roce.Builder{SrcMAC: collMAC, DstMAC: trMAC, SrcGID: roce.GIDFromAddr(collIP), DstGID: roce.GIDFromAddr(trIP),
		HopLimit: roce.DefaultHopLimit, DontFragment: true, Opcode: roce.RCAck, DestQP: localQPN,
		Syndrome: roce.ACKSyndrome(31)}
	var ackBuf [128]byte
	in := make([]*dpdk.Packet, burst)
	out := make([]*dpdk.Packet, 4*burst)
	var rp roce.Packet
	var inPoll time.Duration
	writes, next := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(burst, b.N-done)
		if got := pool.GetBulk(in[:n]); got != n {
			b.Fatalf("pool: %d of %d", got, n)
		}
		for i, p := range in[:n] {
			p.CopyFrom(frames[(next+i)%len(frames)])
		}
		next += n
		if sent := l.B().TxBurst(0, in[:n]); sent != n {
			b.Fatalf("ring took %d of %d", sent, n)
		}
		done += n
		t0 := time.Now()
		for svc.Poll() {
		}
		inPoll += time.Since(t0)
		// The collector: read the WRITEs, answer the last with an ACK.
		last, have := uint32(0), false
		for {
			m := l.B().RxBurst(0, out)
			if m == 0 {
				break
			}
			for _, p := range out[:m] {
				if roce.Parse(p.Data(), &rp) == nil && rp.DestQP == collQPN {
					last, have = rp.PSN, true
					writes++
				}
			}
			dpdk.FreeBulk(out[:m])
		}
		if have {
			ack.PSN, ack.MSN = last, last
			k, err := ack.Build(ackBuf[:], nil)
			if err != nil {
				b.Fatal(err)
			}
			p := pool.Get()
			p.CopyFrom(ackBuf[:k])
			if l.B().TxBurst(0, []*dpdk.Packet{p}) != 1 {
				p.Free()
			}
		}
	}
	t0 := time.Now()
	for svc.Poll() { // the last ACK
	}
	inPoll += time.Since(t0)
	b.StopTimer()
	st, conn := svc.stats, svc.colls[0].conn.Stats
	if conn.ACKs == 0 || st.Malformed > 0 || st.TxDropped > 0 || st.Reports != uint64(b.N) {
		b.Fatalf("reports %d of %d, acks %d, malformed %d, tx dropped %d; %+v", st.Reports, b.N, conn.ACKs, st.Malformed, st.TxDropped, st)
	}
	b.ReportMetric(float64(b.N)/inPoll.Seconds(), "reports/s/core")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
	b.ReportMetric(float64(writes)/float64(b.N), "writes/report")
}

// reportFrames makes n report frames to the translator (Key-Write N=2 and
// Append, half each) with a Reporter.
func reportFrames(b *testing.B, pool *dpdk.Pool, trMAC header.MAC, trIP netip.Addr, n int) [][]byte {
	b.Helper()
	l := ring.NewLink(fmt.Sprintf("corerep%p", b), ring.Config{RingSize: 8192})
	defer func() { l.A().Close(); l.B().Close() }()
	cfg := ReporterConfig{Keys: 1 << 14, Redundancy: 2, Lists: []uint32{1}, Count: uint64(n), Seed: 1,
		SrcMAC: header.MAC(l.A().Info().MAC), DstMAC: trMAC, SrcIP: netip.MustParseAddr("10.9.0.10"), DstIP: trIP}
	cfg.Mix.KeyWrite, cfg.Mix.Append = 1, 1
	r, err := NewReporter(cfg, l.A(), pool)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Run(context.Background(), 0); err != nil {
		b.Fatal(err)
	}
	frames := make([][]byte, 0, n)
	pkts := make([]*dpdk.Packet, 64)
	for len(frames) < n {
		m := l.B().RxBurst(0, pkts)
		if m == 0 {
			b.Fatalf("the reporter made %d of %d frames", len(frames), n)
		}
		for _, p := range pkts[:m] {
			frames = append(frames, append([]byte(nil), p.Data()...))
		}
		dpdk.FreeBulk(pkts[:m])
	}
	return frames
}
