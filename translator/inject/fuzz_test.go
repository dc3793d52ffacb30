package inject

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dpdk/ring"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// seedFrames are valid frames for the fuzzers to start from: a RoCE WRITE,
// an ARP request for the gateway, and a mirrored copy.
func seedFrames(f *testing.F) {
	b := roce.Builder{SrcGID: roce.GIDFromAddr(ipA), DstGID: roce.GIDFromAddr(ipB), HopLimit: 64,
		Opcode: roce.RCWriteFirst, DestQP: 0x21, PSN: 103, VA: 0x1000, RKey: 7, DMALen: 4096}
	buf := make([]byte, 2048)
	n, _ := b.Build(buf, make([]byte, 256))
	f.Add(append([]byte(nil), buf[:n]...))
	arp := make([]byte, 42)
	k, _ := header.WriteARPRequest(arp, header.MAC{2, 0, 0, 0, 0, 9}, ipA.As4(), [4]byte{10, 0, 0, 254})
	f.Add(arp[:k])
	var p header.Parsed
	m := append([]byte(nil), buf[:n]...)
	_ = header.Decode(m, &p)
	mirror.Write(m, &p, mirror.Meta{Seq: 5, Timestamp: 99, Event: mirror.EventDrop, OrigSrcPort: 4000}, 1234, mirror.DefaultRewritePort)
	f.Add(m)
	f.Add([]byte{})
}

// FuzzInput feeds arbitrary frames to the injector's pipeline: it must
// count what it cannot decode and never panic, and every frame must end up
// freed or queued.
func FuzzInput(f *testing.F) {
	seedFrames(f)
	pool, err := dpdk.NewPool("fuzzinj", 256, 0)
	if err != nil {
		f.Fatal(err)
	}
	la := ring.NewLink(fmt.Sprintf("fuzza%p", f), ring.Config{})
	lb := ring.NewLink(fmt.Sprintf("fuzzb%p", f), ring.Config{})
	lm := ring.NewLink(fmt.Sprintf("fuzzm%p", f), ring.Config{})
	in, err := New(Config{Traffic: []TrafficPort{{Name: "a", Port: la.A()}, {Name: "b", Port: lb.A()}},
		Mirrors: []MirrorPort{{Name: "m", Port: lm.A(), Weight: 1}}, Pool: pool, MirrorSnap: 64, DecTTL: true,
		Routes: []Route{{Prefix: netipPrefix("10.0.0.0/8"), Port: 1}, {Prefix: netipPrefix("::/0"), Port: 0}}})
	if err != nil {
		f.Fatal(err)
	}
	intents, conns, g := listing2()
	if _, err := in.Load(intents, conns, g, intent.Options{OneBased: true}); err != nil {
		f.Fatal(err)
	}
	var drain [64]*dpdk.Packet
	f.Fuzz(func(t *testing.T, frame []byte) {
		pkt := pool.Get()
		if pkt == nil {
			t.Fatal("pool leak: no buffer left")
		}
		if pkt.CopyFrom(frame) < len(frame) {
			pkt.Free()
			return
		}
		in.table.Lock()
		in.input(0, pkt)
		in.table.Unlock()
		in.flushAll()
		for _, p := range []dpdk.Port{la.B(), lb.B(), lm.B()} {
			n := p.RxBurst(0, drain[:])
			dpdk.FreeBulk(drain[:n])
		}
	})
}

func netipPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
