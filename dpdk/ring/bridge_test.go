package ring

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
)

// TestBridgeLossless: three senders flood one slow receiver through the
// bridge. Dropping, the bridge loses what the receiver's ring cannot
// hold; lossless, it pauses the senders instead and every frame arrives,
// in each sender's order.
func TestBridgeLossless(t *testing.T) {
	for _, lossless := range []bool{false, true} {
		t.Run(fmt.Sprintf("lossless=%v", lossless), func(t *testing.T) {
			pool, err := dpdk.NewPool(fmt.Sprintf("br%v%p", lossless, t), 8192, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			var near, far []dpdk.Port
			for i := range 4 {
				l := NewLink(fmt.Sprintf("br%v%p-%d", lossless, t, i), Config{RingSize: 64})
				near, far = append(near, l.A()), append(far, l.B())
				defer l.A().Close()
				defer l.B().Close()
			}
			b := NewBridge(far...)
			b.Lossless = lossless
			mac := func(i int) []byte { return []byte{2, 0, 0, 0, 0, byte(i)} }
			frame := func(src, dst, seq int) *dpdk.Packet {
				p := pool.Get()
				f := make([]byte, 60)
				copy(f[0:6], mac(dst))
				copy(f[6:12], mac(src))
				binary.BigEndian.PutUint32(f[14:], uint32(seq))
				p.CopyFrom(f)
				return p
			}
			// The receiver (port 0) speaks first so the bridge learns it.
			near[0].TxBurst(0, []*dpdk.Packet{frame(0, 1, 0)})
			b.Poll()
			rx := make([]*dpdk.Packet, 8)
			for near[1].RxBurst(0, rx) > 0 {
			}
			const per = 2000
			sent := make([]int, 4)
			got := map[int][]int{}
			received := 0
			for round := 0; received < 3*per && round < 100000; round++ {
				for s := 1; s <= 3; s++ {
					if sent[s] < per && near[s].TxBurst(0, []*dpdk.Packet{frame(s, 0, sent[s])}) == 1 {
						sent[s]++
					}
				}
				b.Poll()
				// The receiver reads 8 frames every fourth round: slower
				// than three senders.
				if round%4 == 0 {
					n := near[0].RxBurst(0, rx)
					for _, p := range rx[:n] {
						d := p.Data()
						src := int(d[11])
						got[src] = append(got[src], int(binary.BigEndian.Uint32(d[14:])))
						received++
						p.Free()
					}
				}
				if !lossless && sent[1] == per && sent[2] == per && sent[3] == per && round > 20000 {
					break
				}
			}
			if !lossless {
				if b.Dropped == 0 || received == 3*per {
					t.Fatalf("dropping bridge: %d dropped, %d of %d received", b.Dropped, received, 3*per)
				}
				return
			}
			if b.Dropped != 0 || received != 3*per || b.Paused == 0 {
				t.Fatalf("lossless bridge: %d dropped, %d of %d received, %d paused polls", b.Dropped, received, 3*per, b.Paused)
			}
			for s := 1; s <= 3; s++ {
				for i, v := range got[s] {
					if v != i {
						t.Fatalf("sender %d: frame %d is %d", s, i, v)
					}
				}
			}
		})
	}
}
