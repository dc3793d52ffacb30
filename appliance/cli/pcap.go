package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

func init() {
	register(&Command{
		Name:    "pcap",
		Summary: "inspect and convert trace files (pcap, pcapng, zstd-compressed)",
		Sub: []*Command{
			{
				Name:    "info",
				Summary: "summarise traces: format, packets, time span, RoCEv2 opcodes, ICRC check",
				Usage:   "[--json] [--port N] FILE...",
				Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
					asJSON := fs.Bool("json", false, "print JSON")
					port := fs.Uint("port", roce.UDPPort, "UDP destination port of RoCEv2 (Lumina mirrors rewrite it)")
					return func(ctx context.Context, env *Env, args []string) error {
						if len(args) == 0 {
							return Usagef("name at least one trace file")
						}
						var infos []traceInfo
						for _, path := range args {
							ti, err := summarise(ctx, path, uint16(*port))
							if err != nil {
								return err
							}
							infos = append(infos, ti)
						}
						if *asJSON {
							enc := json.NewEncoder(env.Stdout)
							enc.SetIndent("", "  ")
							return enc.Encode(infos)
						}
						for _, ti := range infos {
							ti.print(env.Stdout)
						}
						return nil
					}
				},
			},
			{
				Name:    "convert",
				Summary: "rewrite a trace in another format, snap length or compression",
				Usage:   "[--format pcap|pcapng] [--zstd] [--snap-len N] IN OUT",
				Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
					format := fs.String("format", "pcap", "output format: pcap (nanosecond) or pcapng")
					zstd := fs.Bool("zstd", false, "compress the output with zstd")
					snap := fs.Int("snap-len", 0, "truncate packets to N bytes (0 keeps them whole)")
					return func(ctx context.Context, env *Env, args []string) error {
						if len(args) != 2 {
							return Usagef("want IN and OUT")
						}
						opts := pcap.WriterOptions{Format: pcap.FormatPcap, SnapLen: *snap, Nanosecond: true}
						switch *format {
						case "pcap":
						case "pcapng":
							opts.Format = pcap.FormatPcapNG
						default:
							return Usagef("--format %q: want pcap or pcapng", *format)
						}
						if *zstd {
							opts.Compress = pcap.CompressZstd
						}
						n, err := convert(ctx, args[0], args[1], opts)
						if err != nil {
							return err
						}
						fmt.Fprintf(env.Stdout, "wrote %d packets to %s\n", n, args[1])
						return nil
					}
				},
			},
		},
	})
}

type opCount struct {
	Opcode uint8  `json:"opcode"`
	Name   string `json:"name"`
	Count  int64  `json:"count"`
}

type traceInfo struct {
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
	Opcodes    []opCount `json:"opcodes"`
	Error      string    `json:"error,omitempty"`
}

func summarise(ctx context.Context, path string, port uint16) (traceInfo, error) {
	r, err := pcap.Open(path)
	if err != nil {
		return traceInfo{}, err
	}
	defer r.Close()
	ti := traceInfo{Path: path, Format: r.Format().String(), Compressed: r.Compressed()}
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
			ti.Opcodes = append(ti.Opcodes, opCount{uint8(op), roce.Opcode(op).String(), n})
		}
	}
	return ti, nil
}

func (ti traceInfo) print(w io.Writer) {
	comp := ""
	if ti.Compressed {
		comp = ", zstd"
	}
	fmt.Fprintf(w, "%s: %s%s, link type %d, snap length %d\n", ti.Path, ti.Format, comp, ti.LinkType, ti.SnapLen)
	fmt.Fprintf(w, "  packets %d (%d bytes on the wire, %d truncated by the snap length)\n", ti.Packets, ti.Bytes, ti.Truncated)
	if ti.Packets > 0 {
		fmt.Fprintf(w, "  from %s to %s (%s)\n", ti.First.UTC().Format(time.RFC3339Nano), ti.Last.UTC().Format(time.RFC3339Nano), ti.Last.Sub(ti.First))
	}
	fmt.Fprintf(w, "  RoCEv2 %d, other %d, bad ICRC %d (only whole packets are checked)\n", ti.RoCE, ti.Other, ti.BadICRC)
	if ti.Error != "" {
		fmt.Fprintf(w, "  stopped early: %s\n", ti.Error)
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, o := range ti.Opcodes {
		fmt.Fprintf(tw, "    0x%02x\t%s\t%d\n", o.Opcode, o.Name, o.Count)
	}
	tw.Flush()
}

func convert(ctx context.Context, in, out string, opts pcap.WriterOptions) (int64, error) {
	r, err := pcap.Open(in)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var w *pcap.Writer
	var n int64
	var rec pcap.Record
	for {
		if n%65536 == 0 && ctx.Err() != nil {
			break
		}
		err := r.Next(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if w != nil {
				w.Close()
			}
			return n, fmt.Errorf("%s: %w", in, err)
		}
		if w == nil { // the first record says the link type (pcapng has no file-wide one)
			opts.LinkType = rec.LinkType
			if w, err = pcap.Create(out, opts); err != nil {
				return 0, err
			}
		}
		if err := w.WritePacket(rec.Timestamp, rec.Data, rec.OrigLen); err != nil {
			w.Close()
			return n, fmt.Errorf("%s: %w", out, err)
		}
		n++
	}
	if w == nil { // an empty trace still converts to an empty file
		opts.LinkType = r.LinkType()
		var err error
		if w, err = pcap.Create(out, opts); err != nil {
			return 0, err
		}
	}
	if err := w.Close(); err != nil {
		return n, err
	}
	return n, ctx.Err()
}
