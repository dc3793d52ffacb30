package header

import "encoding/binary"

// TCPMinHeaderLen is the size of a TCP header without options.
const TCPMinHeaderLen = 20

// TCP flag bits as returned by TCP.Flags.
const (
	TCPFlagFIN = 0x01
	TCPFlagSYN = 0x02
	TCPFlagRST = 0x04
	TCPFlagPSH = 0x08
	TCPFlagACK = 0x10
	TCPFlagURG = 0x20
	TCPFlagECE = 0x40
	TCPFlagCWR = 0x80
)

// TCP is a minimal view of a TCP header, enough for flow hashing and for
// locating the payload (the appliance's control traffic is TCP, its data
// plane is not).
type TCP []byte

// IsValid reports whether the view holds a complete header with a sane data
// offset.
func (t TCP) IsValid() bool {
	if len(t) < TCPMinHeaderLen {
		return false
	}
	n := t.HeaderLen()
	return n >= TCPMinHeaderLen && n <= len(t)
}

// SrcPort returns the source port.
func (t TCP) SrcPort() uint16 { return binary.BigEndian.Uint16(t[0:2]) }

// DstPort returns the destination port.
func (t TCP) DstPort() uint16 { return binary.BigEndian.Uint16(t[2:4]) }

// Seq returns the sequence number.
func (t TCP) Seq() uint32 { return binary.BigEndian.Uint32(t[4:8]) }

// Ack returns the acknowledgment number.
func (t TCP) Ack() uint32 { return binary.BigEndian.Uint32(t[8:12]) }

// HeaderLen returns the data offset in bytes.
func (t TCP) HeaderLen() int { return int(t[12]>>4) * 4 }

// Flags returns the eight flag bits.
func (t TCP) Flags() uint8 { return t[13] }

// Window returns the window field.
func (t TCP) Window() uint16 { return binary.BigEndian.Uint16(t[14:16]) }

// Checksum returns the checksum field.
func (t TCP) Checksum() uint16 { return binary.BigEndian.Uint16(t[16:18]) }

// Payload returns the bytes after the header.
func (t TCP) Payload() []byte { return t[t.HeaderLen():] }

// SetSrcPort sets the source port.
func (t TCP) SetSrcPort(p uint16) { binary.BigEndian.PutUint16(t[0:2], p) }

// SetDstPort sets the destination port.
func (t TCP) SetDstPort(p uint16) { binary.BigEndian.PutUint16(t[2:4], p) }

// SetChecksum sets the checksum field.
func (t TCP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(t[16:18], c) }
