package inject

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestBalanceIngressPort: with per-port mirroring the copies of what
// traffic port i received go to dumper i, whatever the connection, and a
// third dumper gets nothing; round-robin spreads the same frames over all
// three.
func TestBalanceIngressPort(t *testing.T) {
	for _, bal := range []Balance{BalanceIngressPort, BalanceWRR} {
		t.Run(bal.String(), func(t *testing.T) {
			id := time.Now().UnixNano()
			pool, err := dpdk.NewPool(fmt.Sprintf("bal%d", id), 256, 4096)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			tr := []*ring.Link{ring.NewLink(fmt.Sprintf("bal0%d", id), ring.Config{RingSize: 64}),
				ring.NewLink(fmt.Sprintf("bal1%d", id), ring.Config{RingSize: 64})}
			var mirrors []MirrorPort
			var mir []*ring.Link
			for i := range 3 {
				l := ring.NewLink(fmt.Sprintf("balm%d-%d", i, id), ring.Config{RingSize: 64})
				mir = append(mir, l)
				mirrors = append(mirrors, MirrorPort{Name: fmt.Sprint("m", i), Port: l.A(), Weight: 1})
			}
			a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.1.1")
			inj, err := New(Config{Traffic: []TrafficPort{{Name: "a", Port: tr[0].A()}, {Name: "b", Port: tr[1].A()}},
				Mirrors: mirrors, Balance: bal, Pool: pool,
				Routes: []Route{{Prefix: netip.PrefixFrom(b, 32), Port: 1, MAC: header.MAC{2, 0, 0, 0, 0, 2}},
					{Prefix: netip.PrefixFrom(a, 32), Port: 0, MAC: header.MAC{2, 0, 0, 0, 0, 1}}}})
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 512)
			// Six frames in on port a (two connections), three on port b.
			for i, in := range []struct {
				port     int
				src, dst netip.Addr
				qp       uint32
			}{{0, a, b, 0x11}, {0, a, b, 0x12}, {0, a, b, 0x11}, {0, a, b, 0x12}, {0, a, b, 0x11}, {0, a, b, 0x12},
				{1, b, a, 0x21}, {1, b, a, 0x21}, {1, b, a, 0x21}} {
				rb := roce.Builder{SrcGID: roce.GID(in.src.As16()), DstGID: roce.GID(in.dst.As16()), DestQP: in.qp,
					HopLimit: 64, Opcode: roce.RCWriteOnly, PSN: uint32(i)}
				n, err := rb.Build(buf, make([]byte, 64))
				if err != nil {
					t.Fatal(err)
				}
				p := pool.Get()
				p.CopyFrom(buf[:n])
				if tr[in.port].B().TxBurst(0, []*dpdk.Packet{p}) != 1 {
					t.Fatal("cannot send")
				}
				for inj.Poll() {
				}
			}
			var got [3]int
			var burst [16]*dpdk.Packet
			for i, l := range mir {
				n := l.B().RxBurst(0, burst[:])
				got[i] = n
				dpdk.FreeBulk(burst[:n])
			}
			for _, l := range tr {
				n := l.B().RxBurst(0, burst[:])
				dpdk.FreeBulk(burst[:n])
			}
			want := [3]int{6, 3, 0}
			if bal == BalanceWRR {
				want = [3]int{3, 3, 3}
			}
			if got != want {
				t.Fatalf("copies per dumper %v, want %v", got, want)
			}
		})
	}
}
