package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/dumper/trace"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

var pcapCmd = &Command{
	Name:    "pcap",
	Summary: "inspect and convert trace files (pcap, pcapng, zstd-compressed)",
	Sub:     []*Command{pcapInfoCmd, pcapConvertCmd},
}

var pcapInfoCmd = &Command{
	Name:    "info",
	Summary: "summarise traces: format, packets, time span, RoCEv2 opcodes, ICRC check",
	Usage:   "[--json] [--port N] FILE...",
	Flags:   pcapInfoFlags,
}

type pcapInfoOptions struct {
	json bool
	port uint
	args []string
}

func pcapInfoFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o pcapInfoOptions
	fs.BoolVar(&o.json, "json", false, "print JSON")
	fs.UintVar(&o.port, "port", roce.UDPPort, "UDP destination port of RoCEv2 (Lumina mirrors rewrite it)")
	return bind(&o, &o.args, runPcapInfo)
}

func runPcapInfo(ctx context.Context, env *Env, o pcapInfoOptions) error {
	if len(o.args) == 0 {
		return Usagef("name at least one trace file")
	}
	var infos []trace.Info
	for _, path := range o.args {
		ti, err := trace.Summarise(ctx, path, uint16(o.port))
		if err != nil {
			return err
		}
		infos = append(infos, ti)
	}
	if o.json {
		if err := writeJSON(env.Stdout, infos); err != nil {
			return err
		}
	} else {
		for _, ti := range infos {
			printTraceInfo(env.Stdout, ti)
		}
	}
	// A trace that stopped early (truncated, corrupt) is summarised as far
	// as it reads, and the exit status says it is damaged, as capinfos'.
	var errs []error
	for _, ti := range infos {
		if ti.Error != "" {
			errs = append(errs, fmt.Errorf("%s: %s", ti.Path, ti.Error))
		}
	}
	return errors.Join(errs...)
}

func printTraceInfo(w io.Writer, ti trace.Info) {
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

// convertAtomically converts into a scratch directory next to out and
// renames the result into place, so a failed conversion leaves no partial
// file (and an existing out untouched). The file keeps out's name inside
// the directory, so whatever out's name says about the format still holds.
func convertAtomically(ctx context.Context, in, out string, opts pcap.WriterOptions) (int64, error) {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".pcap-convert-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, filepath.Base(out))
	n, err := pcap.Convert(ctx, in, tmp, opts)
	if err != nil {
		return n, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return n, err
	}
	return n, nil
}

var pcapConvertCmd = &Command{
	Name:    "convert",
	Summary: "rewrite a trace in another format, snap length or compression",
	Usage:   "[--format pcap|pcapng] [--zstd] [--snap-len N] IN OUT",
	Flags:   pcapConvertFlags,
}

type pcapConvertOptions struct {
	format string
	zstd   bool
	snap   int
	args   []string
}

func pcapConvertFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o pcapConvertOptions
	fs.StringVar(&o.format, "format", "pcap", "output format: pcap (nanosecond) or pcapng")
	fs.BoolVar(&o.zstd, "zstd", false, "compress the output with zstd")
	fs.IntVar(&o.snap, "snap-len", 0, "truncate packets to N bytes (0 keeps them whole)")
	return bind(&o, &o.args, runPcapConvert)
}

func runPcapConvert(ctx context.Context, env *Env, o pcapConvertOptions) error {
	if len(o.args) != 2 {
		return Usagef("want IN and OUT")
	}
	opts := pcap.WriterOptions{Format: pcap.FormatPcap, SnapLen: o.snap, Nanosecond: true}
	switch o.format {
	case "pcap":
	case "pcapng":
		opts.Format = pcap.FormatPcapNG
	default:
		return Usagef("--format %q: want pcap or pcapng", o.format)
	}
	if o.zstd {
		opts.Compress = pcap.CompressZstd
	}
	n, err := convertAtomically(ctx, o.args[0], o.args[1], opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %d packets to %s\n", n, o.args[1])
	return nil
}
