package inject

import (
	"bytes"
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

// TestEventsAsTheSwitch: two behaviours the Tofino program's tests
// pinned. An IPv6 bit error flips a reserved BTH bit, which the ICRC
// covers (the switch cannot reach the ICRC); a RoCE packet that
// roce.Parse rejects (here a transport version other than 0) is still
// matched and mirrored, as every packet to the RoCE port.
func TestEventsAsTheSwitch(t *testing.T) {
	id := time.Now().UnixNano()
	pool, err := dpdk.NewPool(fmt.Sprintf("ev%d", id), 64, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	in0 := ring.NewLink(fmt.Sprintf("ev0%d", id), ring.Config{RingSize: 64})
	in1 := ring.NewLink(fmt.Sprintf("ev1%d", id), ring.Config{RingSize: 64})
	mir := ring.NewLink(fmt.Sprintf("evm%d", id), ring.Config{RingSize: 64})
	src, dst := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	inj, err := New(Config{Traffic: []TrafficPort{{Name: "a", Port: in0.A()}, {Name: "b", Port: in1.A()}},
		Mirrors: []MirrorPort{{Name: "m", Port: mir.A()}},
		Routes:  []Route{{Prefix: netip.PrefixFrom(dst, 128), Port: 1, MAC: header.MAC{2, 0, 0, 0, 0, 2}}}, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	conn := intent.Conn{RequesterIP: src, ResponderIP: dst, ResponderQPN: 0x11, RequesterIPSN: 100}
	key := func(psn uint32) intent.Key {
		return intent.Key{Src: src.As16(), Dst: dst.As16(), DstQPN: 0x11, PSN: psn, Iter: 1}
	}
	es := []intent.Entry{{Key: key(100), Event: mirror.EventBitError}, {Key: key(101), Event: mirror.EventDrop}}
	if err := inj.Table().Load(es, []intent.Conn{conn}, intent.Geometry{Verb: intent.VerbWrite, MessageSize: 64, MTU: 64,
		NumMessages: 2}, intent.Options{}); err != nil {
		t.Fatal(err)
	}
	b := roce.Builder{SrcGID: roce.GID(src.As16()), DstGID: roce.GID(dst.As16()), DestQP: 0x11, HopLimit: 64,
		Opcode: roce.RCWriteOnly, PSN: 100}
	send := func(f []byte) {
		p := pool.Get()
		p.CopyFrom(f)
		if in0.B().TxBurst(0, []*dpdk.Packet{p}) != 1 {
			t.Fatal("cannot send")
		}
		for inj.Poll() {
		}
	}
	recv := func(port *ring.Port) [][]byte {
		var burst [4]*dpdk.Packet
		var out [][]byte
		n := port.RxBurst(0, burst[:])
		for _, p := range burst[:n] {
			out = append(out, append([]byte(nil), p.Data()...))
			p.Free()
		}
		return out
	}
	buf := make([]byte, 512)
	n, err := b.Build(buf, make([]byte, 64))
	if err != nil {
		t.Fatal(err)
	}
	orig := append([]byte(nil), buf[:n]...)
	send(orig)
	got := recv(in1.B())
	if len(got) != 1 {
		t.Fatalf("%d packets forwarded", len(got))
	}
	var p roce.Packet
	if err := roce.Parse(got[0], &p); err != nil {
		t.Fatal(err)
	}
	diff := 0
	for i := 14; i < len(orig); i++ {
		if got[0][i] != orig[i] {
			diff++
			if i != p.BTHOff+8 || got[0][i]^orig[i] != 0x01 {
				t.Errorf("byte %d changed from %#x to %#x", i, orig[i], got[0][i])
			}
		}
	}
	if diff != 1 || p.VerifyICRC(got[0]) == nil {
		t.Errorf("%d bytes changed; the ICRC must fail", diff)
	}

	// PSN 101, transport version 1.
	b.PSN = 101
	n, _ = b.Build(buf, make([]byte, 64))
	bad := append([]byte(nil), buf[:n]...)
	bad[p.BTHOff+1] |= 0x01
	if roce.Parse(bad, &p) == nil {
		t.Fatal("the packet is not malformed")
	}
	send(bad)
	if got := recv(in1.B()); len(got) != 0 {
		t.Errorf("the drop event's packet was forwarded")
	}
	copies := recv(mir.B())
	if len(copies) != 2 || !bytes.Equal(copies[1][14+40+8:], bad[14+40+8:]) {
		t.Errorf("%d copies mirrored, want both packets", len(copies))
	}
	if st := inj.Stats(); st.Ports[0].Malformed != 1 || st.Ports[0].Dropped != 1 || st.Mirrored != 2 {
		t.Errorf("counters %+v", st.Ports[0])
	}
}
