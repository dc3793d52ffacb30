//go:build rdma

package ibv

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/verbs"
	"github.com/rdma-appliance/appliance/verbs/verbstest"
)

// TestConformance runs the provider-agnostic verbs suite on the first RDMA
// device libibverbs lists, as both A and B: two QPs of one RNIC talk through
// its loopback. It needs a RoCE port that is up with a RoCEv2 GID (IPv4
// preferred), and skips where there is no device (no kernel RDMA support:
// ibv_get_device_list fails with ENOSYS).
func TestConformance(t *testing.T) {
	if !Available {
		t.Skip("built without cgo: the ibv provider is a stub")
	}
	names, err := DeviceNames()
	if err != nil {
		t.Skipf("no RDMA devices on this host: %v", err)
	}
	if len(names) == 0 {
		t.Skip("no RDMA devices on this host: ibv_get_device_list is empty")
	}
	name := names[0]
	d, err := verbs.OpenDevice("ibv:" + name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close %s: %v", name, err)
		}
	})
	const port = 1
	pa, err := d.QueryPort(port)
	if err != nil {
		t.Fatalf("%s: query port %d: %v", name, port, err)
	}
	if pa.State != verbs.PortActive {
		t.Skipf("%s port %d is %v, not active", name, port, pa.State)
	}
	gidx := -1
	for i, g := range pa.GIDs {
		if g.IsIPv4() {
			gidx = i
			break
		}
		if gidx < 0 {
			gidx = i
		}
	}
	if gidx < 0 {
		t.Skipf("%s port %d has no RoCEv2 GID (is it an InfiniBand port, or has its netdev no address?)", name, port)
	}
	t.Logf("%s port %d: RoCEv2 GID %d %v, active MTU %v", name, port, gidx, pa.GIDs[gidx], pa.ActiveMTU)
	env := verbstest.Env{
		A: d, B: d,
		PortA: port, PortB: port,
		GIDIndexA: gidx, GIDIndexB: gidx,
		// RoCE NICs (mlx5, rxe) implement UC.
		UC: true,
		// The NIC checks L_Keys when it executes a request: a bad one
		// completes with WCLocProtErr.
		PostChecksKeys: false,
		// ibv_post_* accept requests on a QP in ERR and the NIC flushes
		// them (IBTA); the provider refuses posts before RTS only.
		PostToErrorQPFlushes: true,
		// Not SameClock: one NIC's clock, but its loopback may write the
		// receive completion before the send completion.
	}
	if strings.HasPrefix(name, "mlx") {
		// ConnectX on little-endian hosts returns the original value
		// of an atomic big-endian (IBV_ATOMIC_HCA_REPLY_BE).
		env.AtomicReplyOrder = binary.BigEndian
	}
	verbstest.Run(t, env)
}
