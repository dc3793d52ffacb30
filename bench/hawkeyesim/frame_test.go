package hawkeyesim

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Dev ports of the test switch: 10 faces host h0, 20 and 30 face switches.
const (
	devHost, devUp, devOther = 10, 20, 30
)

func testSwitch(t *testing.T) *Switch {
	t.Helper()
	ports := []SwitchPort{{Dev: devHost, Bandwidth: 100e9, Host: true}, {Dev: devUp, Bandwidth: 100e9}, {Dev: devOther, Bandwidth: 100e9}}
	routes := []SwitchRoute{
		{Prefix: netip.MustParsePrefix("10.0.0.0/24"), Port: devHost, DstMAC: [6]byte{2, 0, 0, 0, 0, 1}, SrcMAC: [6]byte{2, 0, 0, 0, 0, 0xa}},
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Port: devUp, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, SrcMAC: [6]byte{2, 0, 0, 0, 0, 0xb}},
		{Prefix: netip.MustParsePrefix("10.9.0.0/16"), Discard: true},
	}
	sw, err := NewSwitch("s", DefaultConfig(), ports, routes)
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

// roceFrame is an Ethernet/IPv4/UDP frame to dport of size bytes (no FCS).
func roceFrame(src, dst uint32, sport, dport uint16, size int) []byte {
	f := make([]byte, size)
	binary.BigEndian.PutUint16(f[12:], etherIPv4)
	ip := f[ethLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, ProtoUDP
	binary.BigEndian.PutUint16(ip[2:], uint16(size-ethLen))
	binary.BigEndian.PutUint32(ip[12:], src)
	binary.BigEndian.PutUint32(ip[16:], dst)
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], dport)
	return f
}

func pfcFrame(enable uint8, quanta [8]uint16) []byte {
	f := make([]byte, 60)
	binary.BigEndian.PutUint16(f[12:], etherMACCtl)
	binary.BigEndian.PutUint16(f[14:], opcodePFC)
	f[17] = enable
	for i, q := range quanta {
		binary.BigEndian.PutUint16(f[18+2*i:], q)
	}
	return f
}

func pollFrame(t uint16, ev uint8, victim hawkeyewire.FlowKey) []byte {
	return hawkeyewire.Poll{Type: t, Event: ev, Victim: victim}.AppendFrame(nil, [6]byte{}, [6]byte{})
}

const (
	h0  = 10<<24 | 5     // 10.0.0.5, behind devHost
	far = 10<<24 | 1<<16 // 10.1.0.0, behind devUp
)

func TestSwitchForwards(t *testing.T) {
	sw := testSwitch(t)
	in := roceFrame(far, h0, 1000, roceDport, 100)
	outs, cpu := sw.Packet(1e9, devUp, in, 300)
	if len(outs) != 1 || cpu || outs[0].Port != devHost {
		t.Fatalf("routed to %+v (cpu %v), want one frame on %d", outs, cpu, devHost)
	}
	if want := [12]byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0xa}; [12]byte(outs[0].Frame[:12]) != want {
		t.Errorf("MACs %x, want %x", outs[0].Frame[:12], want)
	}
	if string(outs[0].Frame[12:]) != string(in[12:]) {
		t.Error("the switch changed more than the MACs")
	}
	// The longest prefix wins: 10.9/16 discards inside 10/8.
	if outs, _ := sw.Packet(1e9, devUp, roceFrame(h0, 10<<24|9<<16|1, 1, roceDport, 100), 0); outs != nil {
		t.Errorf("a discarded prefix sent %+v", outs)
	}
	if outs, _ := sw.Packet(1e9, devUp, roceFrame(h0, 11<<24, 1, roceDport, 100), 0); outs != nil {
		t.Errorf("no route, but sent %+v", outs)
	}
	bad := roceFrame(far, h0, 1, roceDport, 100)
	bad[ethLen] = 0x65 // IPv6's version
	if outs, _ := sw.Packet(1e9, devUp, bad, 0); outs != nil {
		t.Errorf("IP version 6 in an IPv4 EtherType was sent: %+v", outs)
	}
	if outs, _ := sw.Packet(1e9, devUp, in[:40], 0); outs != nil {
		t.Errorf("a UDP header cut short was sent: %+v", outs)
	}
	if c := sw.Counts; c.Forwarded != 1 || c.NoRoute != 2 || c.Malformed != 2 {
		t.Errorf("counts %+v", c)
	}
	// Only the RoCE packet counted, once, at its egress with its ingress
	// port, its queue (300 bytes less its own 104) and its bytes.
	r := sw.Collect(1e9)
	if len(r.Epochs) != 1 || len(r.Epochs[0].Flows) != 1 || len(r.Epochs[0].Meters) != 1 {
		t.Fatalf("report %+v", r)
	}
	f, m := r.Epochs[0].Flows[0], r.Epochs[0].Meters[0]
	if f.Key != (hawkeyewire.FlowKey{Src: far, Dst: h0, Sport: 1000, Dport: roceDport, Proto: ProtoUDP}) || f.In != 1 || f.Out != 0 ||
		f.Packets != 1 || f.QdepthSum != 196 {
		t.Errorf("flow record %+v", f)
	}
	if m.In != 1 || m.Out != 0 || m.Bytes != 104 {
		t.Errorf("meter %+v", m)
	}
}

func TestSwitchTraces(t *testing.T) {
	sw := testSwitch(t)
	victim := hawkeyewire.FlowKey{Src: h0, Dst: far, Sport: 7, Dport: roceDport, Proto: ProtoUDP}
	const now = 5e9
	// Traffic from devOther out of devUp, then devUp paused (class 3,
	// 65535 quanta: 335.54 us at 100G).
	if outs, _ := sw.Packet(now, devOther, roceFrame(h0+1, far, 9, roceDport, 1000), 0); len(outs) != 1 {
		t.Fatal("data not forwarded")
	}
	if outs, _ := sw.Packet(now, devUp, pfcFrame(1<<3, [8]uint16{3: 65535}), 0); outs != nil {
		t.Fatal("a PFC frame was forwarded")
	}
	// A flow trace from the host: on to the victim's egress, devUp, with
	// the PFC bit (it is paused) and the ports it took; the CPU collects.
	outs, cpu := sw.Packet(now+1000, devHost, pollFrame(hawkeyewire.TypeFlow, 7, victim), 0)
	if len(outs) != 1 || !cpu || outs[0].Port != devUp {
		t.Fatalf("flow trace sent %+v (cpu %v)", outs, cpu)
	}
	h, ok := hawkeyewire.ParseFrame(outs[0].Frame)
	if !ok || h.Type() != hawkeyewire.TypeBoth || h.Ingress() != devHost || h.Egress() != devUp || h.Event() != 7 || h.Victim() != victim {
		t.Errorf("sent %+v", h.Poll())
	}
	// The same event again: a duplicate.
	if outs, cpu := sw.Packet(now+2000, devHost, pollFrame(hawkeyewire.TypeFlow, 7, victim), 0); outs != nil || cpu {
		t.Errorf("duplicate sent %+v (cpu %v)", outs, cpu)
	}
	// A PFC trace arriving on devOther (the neighbour asks who paused
	// it): devUp had traffic from devOther and is paused, so a copy goes
	// there; the host port gets none.
	outs, _ = sw.Packet(now+3000, devOther, pollFrame(hawkeyewire.TypePFC, 8, victim), 0)
	if len(outs) != 1 || outs[0].Port != devUp {
		t.Fatalf("PFC trace sent %+v", outs)
	}
	if h, _ := hawkeyewire.ParseFrame(outs[0].Frame); h.Type() != hawkeyewire.TypePFC || h.Ingress() != devOther {
		t.Errorf("PFC copy %+v", h.Poll())
	}
	// An invalid polling header (a type bit above the two) is dropped.
	if outs, cpu := sw.Packet(now, devHost, pollFrame(0x101, 9, victim), 0); outs != nil || cpu {
		t.Errorf("invalid poll sent %+v", outs)
	}
	st := sw.Stats()
	if st.Polls != 3 || st.Duplicates != 1 || st.PollsSent != 2 || st.PFCCopies != 2 || sw.Counts.PFC != 1 || sw.Counts.Malformed != 1 {
		t.Errorf("stats %+v, counts %+v", st, sw.Counts)
	}
	// The registers saw the pause frame and the pause still running.
	r := sw.Collect(now + 4000)
	var up *hawkeyewire.PortRecord
	for i, p := range r.Epochs[len(r.Epochs)-1].Ports {
		if p.Port == 1 {
			up = &r.Epochs[len(r.Epochs)-1].Ports[i]
		}
	}
	if up == nil || up.PauseFrames != 1 || !up.PausedNow || up.PauseLeftNs != 335_540-4000 {
		t.Errorf("devUp's record %+v", up)
	}
}

func TestNewSwitchRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		ports  []SwitchPort
		routes []SwitchRoute
	}{
		"dev port twice":  {ports: []SwitchPort{{Dev: 1, Bandwidth: 1e9}, {Dev: 1, Bandwidth: 1e9}}},
		"dev port range":  {ports: []SwitchPort{{Dev: 512, Bandwidth: 1e9}}},
		"no bandwidth":    {ports: []SwitchPort{{Dev: 1}}},
		"host bits":       {routes: []SwitchRoute{{Prefix: netip.MustParsePrefix("10.0.0.1/8")}}},
		"prefix twice":    {routes: []SwitchRoute{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}, {Prefix: netip.MustParsePrefix("10.0.0.0/8")}}},
		"IPv6":            {routes: []SwitchRoute{{Prefix: netip.MustParsePrefix("::/0")}}},
		"route port over": {routes: []SwitchRoute{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Port: 600}}},
	} {
		if _, err := NewSwitch("s", DefaultConfig(), c.ports, c.routes); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzSwitchPacket: any frame on any port is routed, traced, taken or
// counted as dropped, never a crash; what leaves is a frame of the same
// length on a port of the switch or of a route.
func FuzzSwitchPacket(f *testing.F) {
	victim := hawkeyewire.FlowKey{Src: h0, Dst: far, Sport: 7, Dport: roceDport, Proto: ProtoUDP}
	f.Add(uint16(devUp), roceFrame(far, h0, 1000, roceDport, 100))
	f.Add(uint16(devHost), pollFrame(hawkeyewire.TypeBoth, 1, victim))
	f.Add(uint16(devUp), pfcFrame(0xff, [8]uint16{1, 2, 3, 4, 5, 6, 7, 8}))
	f.Add(uint16(99), []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, port uint16, frame []byte) {
		sw := testSwitch(t)
		in := int(port & hawkeyewire.MaxPort)
		// The data first, so a trace finds meters and a pause.
		sw.Packet(1e9, devOther, roceFrame(h0+1, far, 9, roceDport, 1000), 0)
		sw.Packet(1e9, devUp, pfcFrame(1<<3, [8]uint16{3: 100}), 0)
		outs, _ := sw.Packet(1e9+10, in, frame, int64(len(frame)))
		for _, o := range outs {
			if len(o.Frame) != len(frame) || (o.Port != devHost && o.Port != devUp && o.Port != devOther) {
				t.Fatalf("sent %d bytes on %d for %d in", len(o.Frame), o.Port, len(frame))
			}
		}
		c := sw.Counts
		if c.Forwarded+c.NoRoute+c.Malformed+c.PFC+c.Other != 3 && sw.Stats().Polls == 0 {
			t.Fatalf("a frame neither counted nor traced: %+v", c)
		}
	})
}

// BenchmarkSwitchPacket: a RoCEv2 data frame through Switch.Packet
// (route, MAC rewrite, the epoch telemetry), over 512 flows.
func BenchmarkSwitchPacket(b *testing.B) {
	sw, err := NewSwitch("s", DefaultConfig(), []SwitchPort{{Dev: devHost, Bandwidth: 100e9, Host: true}, {Dev: devUp, Bandwidth: 100e9}},
		[]SwitchRoute{{Prefix: netip.MustParsePrefix("10.0.0.0/24"), Port: devHost}})
	if err != nil {
		b.Fatal(err)
	}
	frames := make([][]byte, 512)
	for i := range frames {
		frames[i] = roceFrame(far+uint32(i), h0, uint16(i), roceDport, 1082)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if outs, _ := sw.Packet(int64(i)*100, devUp, frames[i&511], int64(i&63)*1086); len(outs) != 1 {
			b.Fatal("not forwarded")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}
