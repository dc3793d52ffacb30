package header

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// refSum is the textbook RFC 1071 loop: big-endian 16-bit words, a trailing
// odd byte padded with zero, carries folded at the end.
func refSum(b []byte, initial uint16) uint16 {
	s := uint64(initial)
	for i := 0; i+1 < len(b); i += 2 {
		s += uint64(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint64(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func TestChecksumRFC1071Example(t *testing.T) {
	// RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got := Sum(b, 0); got != 0xddf2 {
		t.Fatalf("Sum = %#04x, want 0xddf2", got)
	}
	if got := Checksum(b); got != 0x220d {
		t.Fatalf("Checksum = %#04x, want 0x220d", got)
	}
	// The classic IPv4 header example (checksum b861).
	h := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61,
		0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got := IPv4HeaderChecksum(h); got != 0xb861 {
		t.Fatalf("IPv4HeaderChecksum = %#04x, want 0xb861", got)
	}
	if !IPv4(h).ChecksumValid() {
		t.Fatal("ChecksumValid false")
	}
}

func TestSumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4200)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	// All ones is the case that exercises every carry path.
	ones := make([]byte, 4200)
	for i := range ones {
		ones[i] = 0xff
	}
	for _, data := range [][]byte{buf, ones, make([]byte, 4200)} {
		for n := 0; n <= 300; n++ {
			for _, off := range []int{0, 1, 3} {
				b := data[off : off+n]
				init := uint16(r.Uint32())
				if got, want := Sum(b, init), refSum(b, init); got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
					t.Fatalf("len %d off %d init %#x: Sum %#04x, ref %#04x", n, off, init, got, want)
				}
			}
		}
		for _, n := range []int{1024, 1500, 4096, 4199} {
			if got, want := Sum(data[:n], 0), refSum(data[:n], 0); got != want {
				t.Fatalf("len %d: Sum %#04x, ref %#04x", n, got, want)
			}
		}
	}
}

func TestSumChaining(t *testing.T) {
	b := make([]byte, 999)
	for i := range b {
		b[i] = byte(i * 7)
	}
	whole := Sum(b, 0)
	for cut := 0; cut < len(b); cut += 2 {
		if got := Sum(b[cut:], Sum(b[:cut], 0)); got != whole {
			t.Fatalf("cut %d: %#04x != %#04x", cut, got, whole)
		}
	}
	if Combine(0xffff, 0x0001) != 0x0001 || Combine(0x8000, 0x8000) != 0x0001 {
		t.Error("Combine")
	}
}

func TestPseudoHeaders(t *testing.T) {
	src, dst := [4]byte{10, 0, 0, 1}, [4]byte{192, 168, 255, 254}
	var ph [12]byte
	copy(ph[0:], src[:])
	copy(ph[4:], dst[:])
	ph[9] = IPProtoUDP
	binary.BigEndian.PutUint16(ph[10:], 1234)
	if got, want := PseudoHeaderSumIPv4(src, dst, IPProtoUDP, 1234), refSum(ph[:], 0); got != want {
		t.Errorf("v4 %#04x != %#04x", got, want)
	}
	var ph6 [40]byte
	copy(ph6[0:], v6a[:])
	s6 := v6b
	s6[15] = 0xff
	copy(ph6[16:], s6[:])
	binary.BigEndian.PutUint32(ph6[32:], 70000)
	ph6[39] = IPProtoICMPv6
	if got, want := PseudoHeaderSumIPv6(v6a, s6, IPProtoICMPv6, 70000), refSum(ph6[:], 0); got != want {
		t.Errorf("v6 %#04x != %#04x", got, want)
	}
}

func TestUDPChecksumZeroBecomesFFFF(t *testing.T) {
	// Find a datagram whose checksum computes to zero, then check it is sent
	// as 0xffff (zero means "no checksum") and still verifies.
	u := UDP(make([]byte, 10))
	u.Encode(1, 2, 10, 0)
	src, dst := [4]byte{1, 2, 3, 4}, [4]byte{5, 6, 7, 8}
	for v := 0; v < 0x10000; v++ {
		binary.BigEndian.PutUint16(u[8:], uint16(v))
		if ^Sum(u, PseudoHeaderSumIPv4(src, dst, IPProtoUDP, 10)) == 0 {
			c := u.CalculateChecksumIPv4(src, dst)
			if c != 0xffff {
				t.Fatalf("checksum %#04x, want 0xffff", c)
			}
			u.SetChecksum(c)
			if !u.ChecksumValidIPv4(src, dst) {
				t.Fatal("0xffff checksum does not verify")
			}
			return
		}
	}
	t.Fatal("no zero-checksum datagram found")
}

func TestUDPChecksumValidity(t *testing.T) {
	f := unhexFrame(t, vlanIPv4UDP)
	u := UDP(f[42:])
	src, dst := IPv4(f[18:]).Src(), IPv4(f[18:]).Dst()
	u.SetChecksum(0)
	if !u.ChecksumValidIPv4(src, dst) {
		t.Error("zero checksum must be accepted over IPv4")
	}
	u.SetChecksum(0x1234)
	if u.ChecksumValidIPv4(src, dst) {
		t.Error("bad checksum accepted")
	}
	u.SetChecksum(0)
	if u.ChecksumValidIPv6(v6a, v6b) {
		t.Error("zero checksum must be rejected over IPv6")
	}
}

func TestIncrementalUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := IPv4(make([]byte, 20))
	for i := 0; i < 20000; i++ {
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		h[0] = 0x45
		h.UpdateChecksum()
		// Change one random 16-bit field (not the checksum) incrementally.
		// Any field but version/IHL (which would move the header end) and
		// the checksum itself.
		w := []int{2, 4, 6, 8, 12, 14, 16, 18}[r.IntN(8)]
		old := binary.BigEndian.Uint16(h[w:])
		nw := uint16(r.Uint32())
		binary.BigEndian.PutUint16(h[w:], nw)
		h.SetChecksum(ChecksumUpdate16(h.Checksum(), old, nw))
		if !h.ChecksumValid() {
			t.Fatalf("16-bit update of word %d broke the checksum: % x", w, h)
		}
		// And a 32-bit address.
		oldA := binary.BigEndian.Uint32(h[12:])
		newA := r.Uint32()
		binary.BigEndian.PutUint32(h[12:], newA)
		h.SetChecksum(ChecksumUpdate32(h.Checksum(), oldA, newA))
		if !h.ChecksumValid() {
			t.Fatalf("32-bit update broke the checksum: % x", h)
		}
	}
}

func TestDecTTLAndECN(t *testing.T) {
	f := unhexFrame(t, roceV4)
	ip := IPv4(f[14:34])
	for ttl := ip.TTL(); ttl > 1; ttl-- {
		if !ip.DecTTL() || ip.TTL() != ttl-1 || !ip.ChecksumValid() {
			t.Fatalf("DecTTL at %d", ttl)
		}
	}
	if ip.DecTTL() || ip.TTL() != 1 {
		t.Fatal("DecTTL below 1")
	}
	for _, e := range []uint8{ECNCE, ECNECT0, ECNNotECT, ECNECT1} {
		ip.SetECNUpdateChecksum(e)
		if ip.ECN() != e || ip.DSCP() != 26 || !ip.ChecksumValid() {
			t.Fatalf("ECN %d", e)
		}
	}
}
