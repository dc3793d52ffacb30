package header

import "errors"

// MAC is a 48-bit IEEE 802 MAC address. It is a value type so that headers can
// be read into it and compared without allocating.
type MAC [6]byte

// BroadcastMAC is ff:ff:ff:ff:ff:ff.
var BroadcastMAC = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ErrBadMAC is returned by ParseMAC for a string that is not six
// colon- or dash-separated pairs of hex digits.
var ErrBadMAC = errors.New("header: invalid MAC address")

const hexDigits = "0123456789abcdef"

// String formats m as six lower-case hex pairs separated by colons.
func (m MAC) String() string {
	var b [17]byte
	for i, v := range m {
		if i > 0 {
			b[3*i-1] = ':'
		}
		b[3*i] = hexDigits[v>>4]
		b[3*i+1] = hexDigits[v&0xf]
	}
	return string(b[:])
}

// IsBroadcast reports whether m is the all-ones broadcast address.
func (m MAC) IsBroadcast() bool { return m == BroadcastMAC }

// IsMulticast reports whether the group bit (the least significant bit of the
// first octet) is set; broadcast is a multicast address.
func (m MAC) IsMulticast() bool { return m[0]&1 != 0 }

// IsZero reports whether m is 00:00:00:00:00:00.
func (m MAC) IsZero() bool { return m == MAC{} }

// Uint64 returns the address as a 48-bit big-endian integer, the form Lumina's
// mirror metadata uses to carry sequence numbers and timestamps in MAC fields.
func (m MAC) Uint64() uint64 {
	return uint64(m[0])<<40 | uint64(m[1])<<32 | uint64(m[2])<<24 |
		uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}

// MACFromUint64 returns the low 48 bits of v as a MAC address.
func MACFromUint64(v uint64) MAC {
	return MAC{byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// ParseMAC parses "02:00:00:00:00:01" or "02-00-00-00-00-01" (either case).
func ParseMAC(s string) (MAC, error) {
	var m MAC
	if len(s) != 17 {
		return m, ErrBadMAC
	}
	for i := range m {
		if i > 0 {
			if c := s[3*i-1]; c != ':' && c != '-' {
				return m, ErrBadMAC
			}
		}
		hi, ok1 := unhex(s[3*i])
		lo, ok2 := unhex(s[3*i+1])
		if !ok1 || !ok2 {
			return m, ErrBadMAC
		}
		m[i] = hi<<4 | lo
	}
	return m, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
