package pcap

import "time"

// LinkType is a LINKTYPE_* value from the tcpdump.org link-layer header
// type registry. It is stored in the pcap global header and in every pcapng
// Interface Description Block.
type LinkType uint32

// Link types commonly produced by the appliance. Any other registry value
// may be used as a LinkType too.
const (
	LinkTypeNull      LinkType = 0   // BSD loopback
	LinkTypeEthernet  LinkType = 1   // IEEE 802.3 Ethernet; RoCEv2 mirrors use this
	LinkTypeRaw       LinkType = 101 // raw IPv4/IPv6, no link header
	LinkTypeLinuxSLL  LinkType = 113 // Linux "cooked" capture v1
	LinkTypeIPv4      LinkType = 228
	LinkTypeIPv6      LinkType = 229
	LinkTypeLinuxSLL2 LinkType = 276 // Linux "cooked" capture v2
)

// Format selects the trace container.
type Format uint8

const (
	// FormatPcap is the classic libpcap format. It is the zero value
	// because it is the most widely readable container.
	FormatPcap Format = iota
	// FormatPcapNG is pcapng: several interfaces per file and per-packet
	// options (flags, comments).
	FormatPcapNG
)

func (f Format) String() string {
	switch f {
	case FormatPcap:
		return "pcap"
	case FormatPcapNG:
		return "pcapng"
	}
	return "unknown"
}

// Compression selects an optional compression layer around the trace.
type Compression uint8

const (
	CompressNone Compression = iota
	// CompressZstd wraps the trace in a single zstd frame. The result is a
	// normal .pcap.zst / .pcapng.zst file: `zstd -d` restores the plain
	// trace, and Wireshark/tshark built with zstd support (4.0 is tested)
	// open it directly.
	CompressZstd
)

const (
	// MaxSnapLen is the largest captured length accepted for one packet,
	// on read and on write. It equals libpcap's MAXIMUM_SNAPLEN, so every
	// file tcpdump/Wireshark would accept for Ethernet passes; anything
	// bigger in a file is treated as corruption rather than as a reason to
	// allocate.
	MaxSnapLen = 262144
	// DefaultSnapLen is used by the Writer when WriterOptions.SnapLen is 0.
	DefaultSnapLen = MaxSnapLen
)

// Record describes one packet.
type Record struct {
	// Timestamp is the capture time in nanoseconds since the Unix epoch,
	// UTC. pcapng Simple Packet Blocks carry no timestamp; for them it is 0.
	Timestamp int64
	// CapLen is the number of bytes captured, len(Data).
	CapLen int
	// OrigLen is the packet's length on the wire; CapLen < OrigLen means
	// the packet was truncated to the snap length.
	OrigLen int
	// Interface is the pcapng interface ID (index into Reader.Interfaces
	// for the current section). Always 0 for classic pcap.
	Interface int
	// LinkType is the link type of the packet's interface.
	LinkType LinkType
	// Flags is the pcapng epb_flags / pack_flags option, 0 if absent.
	Flags uint32
	// Comment is the packet's first opt_comment, nil if absent. Like Data
	// it aliases the reader's buffer.
	Comment []byte
	// Data holds the captured bytes. When filled by Reader.Next it aliases
	// the Reader's internal buffer and is valid only until the next call to
	// a Reader method; copy it (or use Reader.ReadPacket) to keep it.
	Data []byte
}

// Time returns Timestamp as a time.Time.
func (r *Record) Time() time.Time { return time.Unix(0, r.Timestamp) }

// Interface describes a pcapng interface (classic pcap files have exactly
// one, implied by the global header).
type Interface struct {
	LinkType LinkType
	// SnapLen is the interface's snap length; 0 means "no limit" (still
	// bounded by MaxSnapLen).
	SnapLen int
	// Name is if_name (for example "mlx5_0/1"). Names longer than
	// maxIfNameLen bytes are truncated on read.
	Name string
	// Description is if_description and Filter if_filter (a libpcap
	// expression); the Writer writes them, the Reader does not read them.
	Description string
	Filter      string
	// TsResol is the raw if_tsresol value: with the high bit clear,
	// timestamps count units of 10^-n seconds, with it set, 2^-n seconds
	// (n = low 7 bits). 6 (microseconds) when the option is absent.
	// Ignored by Writer.AddInterface: a Writer records every interface in
	// its own resolution.
	TsResol uint8
	// TsOffset is if_tsoffset, seconds added to every timestamp of the
	// interface. Ignored by Writer.AddInterface.
	TsOffset int64
}
