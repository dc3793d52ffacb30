//go:build dpdk

package dumper

import (
	"context"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/eal"
)

// TestEALSlots captures mirrored copies on a DPDK port (net_ring, whose
// queue loops what it transmits back into its receive queue), which fills
// the arena in the cgo call that receives them (eal.Port.ReadSlots): the
// files hold every copy, restored, as on a ring port.
func TestEALSlots(t *testing.T) {
	if err := ealInit(); err != nil {
		t.Fatal(err)
	}
	pool, err := dpdk.NewPool(t.Name(), 2048, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	port, err := eal.Open("net_ring9", dpdk.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	var _ StreamingSlotReader = port
	d, err := New(Config{Name: "eal", Port: port, NumPkts: 4095, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	base := time.Now().UnixNano()
	frames := map[uint64][]byte{}
	buf := make([]byte, 2048)
	f := &feeder{t: t, pool: pool, port: port}
	for s := uint64(1); s <= n; s++ {
		k := mirrored(buf, s, base)
		frames[s] = append([]byte(nil), buf[:k]...)
		f.send(0, buf[:k])
	}
	waitReceived(t, d, n)
	res, err := d.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Captured != n || res.Written != n || res.Lost() != 0 || len(res.Files) != 1 {
		t.Fatalf("result %+v", res)
	}
	checkFile(t, res.Files[0], DefaultSnapLen, base, frames)
	if st := port.Stats(); st.RxPackets != n {
		t.Fatalf("port %+v", st)
	}
}
