package mirror_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

var (
	ipA = netip.MustParseAddr("10.0.0.1")
	ipB = netip.MustParseAddr("10.0.0.2")
)

// seedFrames are valid frames for the fuzzer to start from: a RoCE WRITE
// and its mirrored copy.
func seedFrames(f *testing.F) {
	b := roce.Builder{SrcGID: roce.GIDFromAddr(ipA), DstGID: roce.GIDFromAddr(ipB), HopLimit: 64,
		Opcode: roce.RCWriteFirst, DestQP: 0x21, PSN: 103, VA: 0x1000, RKey: 7, DMALen: 4096}
	buf := make([]byte, 2048)
	n, _ := b.Build(buf, make([]byte, 256))
	f.Add(append([]byte(nil), buf[:n]...))
	var p header.Parsed
	m := append([]byte(nil), buf[:n]...)
	_ = header.Decode(m, &p)
	mirror.Write(m, &p, mirror.Meta{Seq: 5, Timestamp: 99, Event: mirror.EventDrop, OrigSrcPort: 4000}, 1234, mirror.DefaultRewritePort)
	f.Add(m)
	f.Add([]byte{})
}

func TestMirrorMetadata(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		b := roce.Builder{SrcMAC: header.MAC{2, 0, 0, 0, 0, 1}, DstMAC: header.MAC{2, 0, 0, 0, 0, 2},
			SrcGID: roce.GIDFromAddr(ipA), DstGID: roce.GIDFromAddr(ipB), HopLimit: 64, TrafficClass: 0x6a,
			SrcPort: 0xc001, Opcode: roce.RCSendOnly, DestQP: 0x123, PSN: 77}
		if v6 {
			b.SrcGID = roce.GIDFromAddr(netip.MustParseAddr("fd00::1"))
			b.DstGID = roce.GIDFromAddr(netip.MustParseAddr("fd00::2"))
		}
		frame := make([]byte, 512)
		n, err := b.Build(frame, []byte("payload!"))
		if err != nil {
			t.Fatal(err)
		}
		frame = frame[:n]
		var p header.Parsed
		if err := header.Decode(frame, &p); err != nil {
			t.Fatal(err)
		}
		m := mirror.Meta{Seq: 0x0102030405060708, Timestamp: 0x7fff_1234_5678_9abc, Event: mirror.EventECN, OrigSrcPort: 0xc001}
		mirror.Write(frame, &p, m, 0x5555, mirror.DefaultRewritePort)
		// Golden bytes: the 48 low bits of the sequence in the source MAC,
		// of the timestamp in the destination MAC.
		if got := frame[6:12]; string(got) != "\x03\x04\x05\x06\x07\x08" {
			t.Fatalf("src MAC % x", got)
		}
		if got := frame[0:6]; string(got) != "\x12\x34\x56\x78\x9a\xbc" {
			t.Fatalf("dst MAC % x", got)
		}
		u := p.UDP(frame)
		if u.SrcPort() != 0x5555 || u.DstPort() != mirror.DefaultRewritePort || u.Checksum() != 0xc001 {
			t.Fatalf("udp %d %d %#x", u.SrcPort(), u.DstPort(), u.Checksum())
		}
		if !v6 && (!p.IPv4(frame).ChecksumValid() || p.IPv4(frame).TTL() != uint8(mirror.EventECN)) {
			t.Fatal("ipv4 header after WriteMirror")
		}
		got, err := mirror.Read(frame, &p)
		want := mirror.Meta{Seq: m.Seq & mirror.Mask48, Timestamp: m.Timestamp & mirror.Mask48, Event: mirror.EventECN, OrigSrcPort: 0xc001}
		if err != nil || got != want {
			t.Fatalf("read %v %v, want %v", got, err, want)
		}
		// A mirrored copy is not RoCE to anyone until restored.
		var rp roce.Packet
		if roce.Parse(frame, &rp) == nil {
			t.Fatal("mirrored copy parses as RoCEv2")
		}
		if _, err := mirror.Restore(frame, &p); err != nil {
			t.Fatal(err)
		}
		if err := roce.Parse(frame, &rp); err != nil || rp.VerifyICRC(frame) != nil {
			t.Fatalf("restored copy: %v / icrc %v", err, rp.VerifyICRC(frame))
		}
		if rp.SrcPort != 0xc001 || rp.ECN != header.ECNCE || rp.DestQP != 0x123 || rp.PSN != 77 {
			t.Fatalf("restored %+v", rp)
		}
		if !v6 && !p.IPv4(frame).ChecksumValid() {
			t.Fatal("restored ipv4 checksum")
		}
	}
	var p header.Parsed
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	_ = header.Decode(arp, &p)
	if _, err := mirror.Read(arp, &p); !errors.Is(err, mirror.ErrNotMirrored) {
		t.Fatalf("arp: %v", err)
	}
}

// FuzzMirrorMeta reads and restores arbitrary frames as mirrored copies.
func FuzzMirrorMeta(f *testing.F) {
	seedFrames(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var p header.Parsed
		if header.DecodeTruncated(frame, &p) != nil {
			return
		}
		m, err := mirror.Read(frame, &p)
		if err != nil {
			return
		}
		r, err := mirror.Restore(frame, &p)
		if err != nil || r != m {
			t.Fatalf("restore read %v, %v; read alone %v", r, err, m)
		}
	})
}
