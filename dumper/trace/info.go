package trace

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// OpCount is how many packets of a trace had an opcode.
type OpCount struct {
	Opcode uint8  `json:"opcode"`
	Name   string `json:"name"`
	Count  int64  `json:"count"`
}

// Info summarises a trace file (`appliance pcap info`).
type Info struct {
	Path       string    `json:"path"`
	Format     string    `json:"format"`
	Compressed bool      `json:"compressed"`
	LinkType   uint32    `json:"link_type"`
	SnapLen    int       `json:"snap_len"`
	Packets    int64     `json:"packets"`
	Bytes      int64     `json:"bytes"`
	Truncated  int64     `json:"truncated"`
	First      time.Time `json:"first"`
	Last       time.Time `json:"last"`
	RoCE       int64     `json:"roce"`
	Other      int64     `json:"other"`
	BadICRC    int64     `json:"bad_icrc"`
	Opcodes    []OpCount `json:"opcodes"`
	Error      string    `json:"error,omitempty"`
}

// Summarise reads the trace at path (pcap or pcapng, compressed or not):
// its format, packets, time span, RoCEv2 opcodes (UDP destination port
// port) and bad ICRCs. A trace cut short (a crash) is summarised up to
// where it breaks, Error saying why.
func Summarise(ctx context.Context, path string, port uint16) (Info, error) {
	r, err := pcap.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer r.Close()
	ti := Info{Path: path, Format: r.Format().String(), Compressed: r.Compressed()}
	var counts [256]int64
	var p roce.Packet
	var rec pcap.Record
	for {
		if ti.Packets%65536 == 0 && ctx.Err() != nil {
			return ti, ctx.Err()
		}
		err := r.Next(&rec)
		data := rec.Data
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// Keep what was read: a capture cut short by a crash is still worth a summary.
			ti.Error = err.Error()
			break
		}
		ts := rec.Time()
		if ti.Packets == 0 {
			ti.First = ts
		}
		ti.Last = ts
		ti.Packets++
		ti.Bytes += int64(rec.OrigLen)
		if rec.CapLen < rec.OrigLen {
			ti.Truncated++
		}
		if roce.ParsePort(data, port, &p) != nil {
			ti.Other++
			continue
		}
		ti.RoCE++
		counts[p.Opcode]++
		if rec.CapLen == rec.OrigLen && p.VerifyICRC(data) != nil {
			ti.BadICRC++
		}
	}
	// pcapng names link type and snap length in interface blocks, which come
	// after the file header: read them once the packets have been read.
	ti.LinkType, ti.SnapLen = uint32(r.LinkType()), r.SnapLen()
	for op, n := range counts {
		if n > 0 {
			ti.Opcodes = append(ti.Opcodes, OpCount{uint8(op), roce.Opcode(op).String(), n})
		}
	}
	return ti, nil
}
