package soft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// randSize is log-uniform over 0..max, with the edges (0, 1, MTU-1, MTU,
// MTU+1) favoured, where segmentation bugs live.
func randSize(r *rand.Rand, max, mtu int) int {
	switch r.IntN(8) {
	case 0:
		return 0
	case 1:
		return []int{1, mtu - 1, mtu, mtu + 1, 2 * mtu, 3*mtu - 1}[r.IntN(6)]
	}
	bits := r.IntN(21)
	return min(max, r.IntN(1<<bits+1))
}

type check struct {
	desc string
	want []byte
	got  []byte
}

// runRandom posts batches of random WRs of every type between x and y and
// verifies memory and completions. It returns the first completion error.
func runRandom(t *testing.T, x, y *end, mtu int, rounds int, seed uint64, timeout time.Duration) {
	r := rand.New(rand.NewPCG(seed, 99))
	for round := 0; round < rounds; round++ {
		fill(x.buf, uint64(round)*7+seed)
		fill(y.buf, uint64(round)*13+seed+1)
		var wrs []verbs.SendWR
		var recvs []verbs.RecvWR
		var checks []check
		xo, yo := 0, 0 // bump allocators in the two buffers
		nrecv := 0
		for k := 0; k < 1+r.IntN(8); k++ {
			op := []verbs.WROpcode{verbs.WRSend, verbs.WRSendWithImm, verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm,
				verbs.WRRDMARead, verbs.WRAtomicFetchAndAdd, verbs.WRAtomicCmpAndSwp}[r.IntN(7)]
			n := randSize(r, 1<<20, mtu)
			if op.IsAtomic() {
				n = 8
				xo, yo = (xo+7)&^7, (yo+7)&^7
			}
			if xo+n > len(x.buf) || yo+n > len(y.buf) {
				break
			}
			wr := verbs.SendWR{ID: uint64(k), Opcode: op, Flags: verbs.SendSignaled, Imm: uint32(k) + 1000,
				RemoteAddr: y.mr.Addr() + uint64(yo), RKey: y.mr.RKey()}
			if n > 0 {
				wr.SGL = []verbs.SGE{{Addr: x.mr.Addr() + uint64(xo), Length: uint32(n), LKey: x.mr.LKey()}}
				// Split some into several SGEs.
				if n > 3 && r.IntN(3) == 0 && !op.IsAtomic() {
					a := 1 + r.IntN(n-2)
					wr.SGL = []verbs.SGE{{Addr: x.mr.Addr() + uint64(xo), Length: uint32(a), LKey: x.mr.LKey()},
						{Addr: x.mr.Addr() + uint64(xo+a), Length: uint32(n - a), LKey: x.mr.LKey()}}
				}
			}
			if n <= 256 && (op == verbs.WRSend || op == verbs.WRRDMAWrite) && r.IntN(2) == 0 {
				wr.Flags |= verbs.SendInline
			}
			desc := fmt.Sprintf("round %d wr %d %v %d bytes mtu %d", round, k, op, n, mtu)
			switch op {
			case verbs.WRSend, verbs.WRSendWithImm:
				recvs = append(recvs, verbs.RecvWR{ID: uint64(k), SGL: []verbs.SGE{{Addr: y.mr.Addr() + uint64(yo),
					Length: uint32(n), LKey: y.mr.LKey()}}})
				nrecv++
				checks = append(checks, check{desc: desc, want: x.buf[xo : xo+n], got: y.buf[yo : yo+n]})
			case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
				if op == verbs.WRRDMAWriteWithImm {
					recvs = append(recvs, verbs.RecvWR{ID: uint64(k)})
					nrecv++
				}
				checks = append(checks, check{desc: desc, want: x.buf[xo : xo+n], got: y.buf[yo : yo+n]})
			case verbs.WRRDMARead:
				checks = append(checks, check{desc: desc, want: y.buf[yo : yo+n], got: x.buf[xo : xo+n]})
			case verbs.WRAtomicFetchAndAdd, verbs.WRAtomicCmpAndSwp:
				old := binary.NativeEndian.Uint64(y.buf[yo:])
				wr.CompareAdd, wr.Swap = r.Uint64(), r.Uint64()
				var nw uint64
				if op == verbs.WRAtomicFetchAndAdd {
					nw = old + wr.CompareAdd
				} else {
					if r.IntN(2) == 0 {
						wr.CompareAdd = old
					}
					nw = old
					if old == wr.CompareAdd {
						nw = wr.Swap
					}
				}
				var ow, nwb [8]byte
				binary.NativeEndian.PutUint64(ow[:], old)
				binary.NativeEndian.PutUint64(nwb[:], nw)
				checks = append(checks, check{desc: desc + " (returned)", want: ow[:], got: x.buf[xo : xo+8]},
					check{desc: desc + " (remote)", want: nwb[:], got: y.buf[yo : yo+8]})
			}
			wrs = append(wrs, wr)
			xo += n + r.IntN(64)
			yo += n + r.IntN(64)
		}
		// Expected contents are snapshots of the sources before the
		// transfer (sources and destinations never overlap).
		for i := range checks {
			checks[i].want = append([]byte(nil), checks[i].want...)
		}
		if len(recvs) > 0 {
			must(t, y.qp.PostRecv(recvs))
		}
		must(t, x.qp.PostSend(wrs))
		wcs := waitWC(t, x.scq, len(wrs), timeout)
		for i, wc := range wcs {
			if wc.Status != verbs.WCSuccess || wc.ID != uint64(i) || wc.Opcode != wcOpcode(wrs[i].Opcode) {
				t.Fatalf("round %d: completion %d: %+v (wr %v %d bytes)", round, i, wc, wrs[i].Opcode, wrs[i].Len())
			}
		}
		rwcs := waitWC(t, y.rcq, nrecv, timeout)
		for _, wc := range rwcs {
			if wc.Status != verbs.WCSuccess {
				t.Fatalf("round %d: receive completion %+v", round, wc)
			}
			w := wrs[wc.ID]
			if wc.ByteLen != uint32(w.Len()) || (w.Opcode.HasImm() && (wc.Imm != w.Imm || wc.Flags&verbs.WCWithImm == 0)) {
				t.Fatalf("round %d: receive completion %+v for %v of %d", round, wc, w.Opcode, w.Len())
			}
		}
		for _, c := range checks {
			if !bytes.Equal(c.want, c.got) {
				i := 0
				for i < len(c.want) && c.want[i] == c.got[i] {
					i++
				}
				t.Fatalf("%s: memory differs from byte %d", c.desc, i)
			}
		}
	}
}

// TestRCRandom runs random batches of every WR type and size over each path
// MTU on a clean link.
func TestRCRandom(t *testing.T) {
	for _, mtu := range []verbs.MTU{verbs.MTU256, verbs.MTU512, verbs.MTU1024, verbs.MTU2048, verbs.MTU4096} {
		t.Run(mtu.String(), func(t *testing.T) {
			p := newPair(t, Config{}, Config{}, nil)
			x := newEnd(t, p.a, verbs.QPTypeRC, 3<<20, false)
			y := newEnd(t, p.b, verbs.QPTypeRC, 3<<20, false)
			prm := defaultRC()
			prm.mtu = mtu
			// Nothing is lost on this link: a 67 ms ACK timeout keeps a
			// starved poll loop (-race on a loaded 2-core machine) from
			// running the QP out of retries, which is not this test's
			// subject.
			prm.timeout = 14
			connect(t, x, y, prm)
			rounds := 6
			if testing.Short() {
				rounds = 2
			}
			runRandom(t, x, y, mtu.Bytes(), rounds, uint64(mtu), 20*time.Second)
		})
	}
}

// TestRCRandomLossy runs the random batches over links that drop, corrupt
// and reorder packets in both directions: memory must always end right.
func TestRCRandomLossy(t *testing.T) {
	for _, mode := range []string{"drop", "corrupt", "reorder", "mixed", "drop-retransmission"} {
		t.Run(mode, func(t *testing.T) {
			var ports [2]*lossyPort
			wrap := func(side int, pt dpdk.Port) dpdk.Port {
				ports[side] = &lossyPort{Port: pt}
				return ports[side]
			}
			p := newPair(t, Config{}, Config{}, wrap)
			x := newEnd(t, p.a, verbs.QPTypeRC, 2<<20, false)
			y := newEnd(t, p.b, verbs.QPTypeRC, 2<<20, false)
			prm := defaultRC()
			prm.mtu = verbs.MTU1024
			prm.timeout = 12 // ~17 ms: seven retries must outlast a starved poll loop on a loaded 2-core CI machine
			connect(t, x, y, prm)
			for side := range ports {
				r := rand.New(rand.NewPCG(uint64(side), 5))
				lost := map[uint32]int{} // PSN -> copies dropped
				ports[side].setDecide(func(i int, pk *roce.Packet, _ []byte) fate {
					if mode == "drop-retransmission" {
						// Drop a packet and its first retransmission.
						if n, ok := lost[pk.PSN]; ok && n < 2 && pk.Opcode != roce.OpCNP {
							lost[pk.PSN]++
							return drop
						}
						if r.IntN(50) == 0 && pk.Opcode != roce.OpCNP {
							lost[pk.PSN] = 1
							return drop
						}
						return pass
					}
					if r.IntN(50) != 0 {
						return pass
					}
					switch mode {
					case "drop":
						return drop
					case "corrupt":
						return corrupt
					case "reorder":
						return hold
					}
					return fate(1 + r.IntN(3))
				})
			}
			runRandom(t, x, y, 1024, 4, 42, 60*time.Second)
			t.Logf("dropped %d/%d; A %v; B %v", ports[0].dropped.Load(), ports[1].dropped.Load(),
				nonzero(p.a.Counters()), nonzero(p.b.Counters()))
			if ports[0].dropped.Load()+ports[1].dropped.Load() == 0 && (mode == "drop" || mode == "drop-retransmission") {
				t.Fatal("nothing was dropped")
			}
			if mode == "corrupt" && p.a.Counter(CntRxICRCEncapsulated)+p.b.Counter(CntRxICRCEncapsulated) == 0 {
				t.Fatal("no ICRC errors counted")
			}
		})
	}
}

func nonzero(m map[string]uint64) map[string]uint64 {
	for k, v := range m {
		if v == 0 {
			delete(m, k)
		}
	}
	return m
}
