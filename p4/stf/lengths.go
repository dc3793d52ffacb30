package stf

import "encoding/binary"

// FixLengths makes the test's input packet's length fields true to its
// length: the IPv4 total length, the IPv6 payload length and the UDP
// length (of an unfragmented IPv4 datagram or an IPv6 packet whose next
// header is UDP), for untagged Ethernet frames. P4Testgen leaves them at
// whatever satisfies the path, usually 0, because the programs never read
// them; the Go twins decode packets as hosts send them and drop a packet
// whose lengths disagree with its size. Since a program that neither reads
// nor writes these fields passes them through, the same bytes are set in
// the expected packet where it has them unmasked, when it has the input's
// layout (the same length and headers up to UDP). Adapters call it for
// programs of which that holds, and say so.
func (tc *Test) FixLengths() {
	type field struct {
		off int
		val uint16
	}
	f := tc.In
	if len(f) < 14 {
		return
	}
	var set []field
	l3 := 14
	switch binary.BigEndian.Uint16(f[12:14]) {
	case 0x0800:
		if len(f) < l3+20 {
			return
		}
		hl := int(f[l3]&0x0f) * 4
		set = append(set, field{l3 + 2, uint16(len(f) - l3)})
		frag := binary.BigEndian.Uint16(f[l3+6:]) & 0x1fff
		if f[l3+9] == 17 && frag == 0 && hl >= 20 && len(f) >= l3+hl+8 {
			set = append(set, field{l3 + hl + 4, uint16(len(f) - l3 - hl)})
		}
	case 0x86dd:
		if len(f) < l3+40 {
			return
		}
		set = append(set, field{l3 + 4, uint16(len(f) - l3 - 40)})
		if f[l3+6] == 17 && len(f) >= l3+48 {
			set = append(set, field{l3 + 44, uint16(len(f) - l3 - 40)})
		}
	default:
		return
	}
	e := tc.Expect
	sameLayout := e != nil && len(e.Data) == len(f) && e.Care[12] == 0xff && e.Care[13] == 0xff &&
		e.Data[12] == f[12] && e.Data[13] == f[13]
	for _, s := range set {
		binary.BigEndian.PutUint16(f[s.off:], s.val)
		if sameLayout {
			for i := s.off; i < s.off+2; i++ {
				e.Data[i] = e.Data[i]&^e.Care[i] | f[i]&e.Care[i]
			}
		}
	}
}
