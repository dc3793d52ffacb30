package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/filter"
	"github.com/rdma-appliance/appliance/dumper/capture"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/dumper/trace"
	"github.com/rdma-appliance/appliance/internal/progress"
	"github.com/rdma-appliance/appliance/internal/service"
)

var captureCmd = &Command{
	Name:    "capture",
	Summary: "capture a port to pcapng/pcap with tcpdump filters and RoCE predicates, rotation and per-QP counters",
	Usage:   "-i PORT -w FILE|- [flags] [FILTER EXPRESSION]",
	Long: `Captures frames from any port (an interface name means afpacket:NAME; afpacket:IF with
fanout, eal:... for DPDK, ring:...) with one worker per receive queue (--queues, pinned
with --cores), and writes them as pcapng (default) or pcap with nanosecond timestamps.

The filter is tcpdump's syntax, after the flags; on AF_PACKET it is compiled to classic
BPF and attached in the kernel, so frames it rejects are never copied. --roce adds
predicates on RoCEv2 headers (fields: qpn, opcode, psn, ecn, cnp, nak, icrc-bad,
src-gid, dst-gid, gid; and/or/not and parentheses), for example
  --roce 'qpn 0x11 and (nak or cnp)'   --roce 'opcode "RC RDMA WRITE Only" and psn 0-99'
Opcode names are Wireshark's ("Reliable Connection (RC) - Acknowledge") or the short
ones ("RC Acknowledge"). What BPF can test goes to the kernel with the filter.

-b rotates files like dumpcap: -b filesize:KB, -b duration:SECONDS, -b files:N (keep
the last N); files are named NAME_NNNNN_YYYYMMDDHHMMSS.EXT. -w - writes one stream to
standard output, for | tshark -r -.

Stops on SIGINT/SIGTERM, -c COUNT or --duration, writing out everything captured.
A line per second on standard error shows frames, bytes, rate and drops by where they
happened (kernel ring, port, writer); at the end, per-QP counters (packets,
retransmissions seen, NAKs, CNPs, ECN marks) and each file's summary as
'appliance pcap info' prints it; --json prints the result as JSON, --listen serves
/metrics.

Timestamps are the kernel's receive time, or the NIC's with --hwtstamp where the NIC
stamps (not veth).

On AF_PACKET the ring is 16 blocks of 4 MiB with a 1 s block timeout unless the port
string sets blocksize=, blocks= or timeout= (the capture wakes once per block).

Examples:
  appliance capture -i ens1f1 -w roce.pcapng udp port 4791
  appliance capture -i afpacket:ens1f1,fanout=hash --queues 4 --cores 2-5 -s 128 \
      -b filesize:1000000 -b files:10 -w /data/cap.pcapng.zst --roce 'qpn 0x11'
  appliance capture -i veth0 -w - -c 100 | tshark -r -`,
	Flags: captureFlags,
}

type captureOptions struct {
	port, write, format, cores, roce, listen string
	queues, snap, poolSize, zstdLevel, burst int
	roceport                                 int
	count                                    uint64
	duration                                 time.Duration
	rotate                                   rotateFlag
	zstd, json, quiet, perQueue, hwtstamp    bool
	args                                     []string
}

// rotateFlag collects dumpcap's -b KEY:VALUE options.
type rotateFlag struct {
	size     int64
	duration time.Duration
	files    int
}

func (r *rotateFlag) String() string { return "" }

func (r *rotateFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(val, 10, 64)
	if !ok || err != nil || n <= 0 {
		return fmt.Errorf("want filesize:KB, duration:SECONDS or files:N, got %q", v)
	}
	switch k {
	case "filesize":
		r.size = n * 1000 // dumpcap's kB
	case "duration":
		r.duration = time.Duration(n) * time.Second
	case "files":
		r.files = int(n)
	default:
		return fmt.Errorf("unknown -b key %q: want filesize, duration or files", k)
	}
	return nil
}

func captureFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o captureOptions
	fs.StringVar(&o.port, "i", "", "port to capture: an interface name (afpacket), or driver:device[,options]")
	fs.StringVar(&o.write, "w", "", "output file (- for standard output)")
	fs.StringVar(&o.format, "F", "pcapng", "output format: pcapng or pcap")
	fs.IntVar(&o.snap, "s", 0, "snap length: bytes kept per frame (0: all)")
	fs.Uint64Var(&o.count, "c", 0, "stop after this many frames (0: no limit)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0: no limit)")
	fs.Var(&o.rotate, "b", "rotate: filesize:KB, duration:SECONDS, files:N (repeat for several)")
	fs.BoolVar(&o.zstd, "zstd", false, "compress the output with zstd")
	fs.IntVar(&o.zstdLevel, "zstd-level", 1, "zstd level")
	fs.IntVar(&o.queues, "queues", 1, "receive queues, one worker each (AF_PACKET fanout, DPDK RSS)")
	fs.StringVar(&o.cores, "cores", "", "cores for the workers, one per queue (e.g. 2-5); empty: unpinned, sleeping when idle")
	fs.BoolVar(&o.perQueue, "per-queue", false, "one file per queue (NAME-qN) instead of one for all")
	fs.StringVar(&o.roce, "roce", "", "RoCE predicates (qpn, opcode, psn, ecn, cnp, nak, icrc-bad, src-gid, dst-gid, gid)")
	fs.IntVar(&o.roceport, "roce-port", 4791, "UDP destination port of RoCEv2")
	fs.BoolVar(&o.hwtstamp, "hwtstamp", false, "ask the NIC for hardware receive timestamps (AF_PACKET)")
	fs.IntVar(&o.poolSize, "pool", 8192, "receive buffers (ports that copy into buffers)")
	fs.IntVar(&o.burst, "burst", 64, "receive burst size")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.BoolVar(&o.quiet, "q", false, "no line per second")
	fs.StringVar(&o.listen, "listen", "", "serve /metrics and /healthz on this address")
	return bind(&o, &o.args, runCapture)
}

func runCapture(ctx context.Context, env *Env, o captureOptions) error {
	if o.port == "" || o.write == "" {
		return Usagef("want -i PORT and -w FILE (or -w - for standard output)")
	}
	port := o.port
	if !strings.Contains(port, ":") {
		port = "afpacket:" + port
	}
	if o.hwtstamp && strings.HasPrefix(port, "afpacket:") {
		port += ",hwtstamp=1"
	}
	if strings.HasPrefix(port, "afpacket:") && !strings.Contains(port, "timeout=") {
		// tcpdump's read timeout: a block of the ring is handed over when
		// full or after this long, so at low rates the capture wakes
		// rarely (and a stop waits this long for the last block).
		port += ",timeout=1000ms"
	}
	if strings.HasPrefix(port, "afpacket:") && !strings.Contains(port, "blocksize=") && !strings.Contains(port, "blocks=") {
		// The ring's 64 MiB in 16 blocks of 4 MiB, not the port's 256 of
		// 256 KiB: the capture wakes once per block it is handed, and each
		// wakeup costs as much as a few hundred frames (measured at
		// 0.5 Mpps: 47 ns a frame with 256 KiB blocks, 32 with 4 MiB, 31
		// with 8 MiB). At the timeout above the ring still covers 16 s of a
		// stalled capture at low rates.
		port += ",blocksize=4M,blocks=16"
	}
	var format pcap.Format
	switch o.format {
	case "pcapng":
		format = pcap.FormatPcapNG
	case "pcap":
		format = pcap.FormatPcap
	default:
		return Usagef("-F %q: want pcapng or pcap", o.format)
	}
	if o.roceport <= 0 || o.roceport > 65535 {
		return Usagef("--roce-port %d is not a UDP port", o.roceport)
	}
	var cores []int
	if o.cores != "" {
		var err error
		if cores, err = dpdk.ParseCoreList(o.cores); err != nil {
			return Usagef("%v", err)
		}
	}
	cfg := capture.Config{Port: port, Queues: o.queues, Cores: cores, PoolSize: o.poolSize, Burst: o.burst,
		Filter: strings.Join(o.args, " "), RoCE: o.roce, RoCEPort: uint16(o.roceport), SnapLen: o.snap,
		Count: o.count, Duration: o.duration, PerQueue: o.perQueue,
		Output: capture.Output{Path: o.write, Format: format, Zstd: o.zstd, ZstdLevel: o.zstdLevel,
			FileSize: o.rotate.size, FileDuration: o.rotate.duration, Files: o.rotate.files,
			Application: "appliance capture", Stdout: env.Stdout}}
	if o.rotate.files > 0 && o.rotate.size == 0 && o.rotate.duration == 0 {
		return Usagef("-b files:N needs -b filesize or -b duration")
	}
	s, err := capture.New(cfg)
	if err != nil {
		var se *filter.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("the filter does not compile:\n  %s", strings.ReplaceAll(se.Caret(), "\n", "\n  "))
		}
		var re *capture.RoCEError
		if errors.As(err, &re) {
			return fmt.Errorf("the RoCE filter does not parse at column %d: %s\n  %s\n  %s^", re.Pos+1, re.Msg, re.Expr,
				strings.Repeat(" ", re.Pos))
		}
		return err
	}
	where := "in the kernel"
	if !s.Port().Info().Filtered {
		where = "in user space"
	}
	if cfg.Filter != "" || cfg.RoCE != "" {
		env.Log.Info("capturing", "port", s.Port().Info().Name, "queues", o.queues, "filter", s.Program().Expr, "filter_runs", where)
	} else {
		env.Log.Info("capturing", "port", s.Port().Info().Name, "queues", o.queues)
	}
	if hw, ok := s.Port().(interface{ HWTimestampErr() error }); ok && hw.HWTimestampErr() != nil {
		env.Log.Warn("no hardware timestamps: frames carry the kernel's receive time", "err", hw.HWTimestampErr())
	}
	if o.listen != "" {
		svc := service.New("capture", o.listen, env.Log)
		s.Register(svc)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { _ = svc.Run(sctx) }()
	}
	live := newLiveLine(env.Stderr, o.quiet)
	var tick func(capture.Stats)
	if !o.quiet {
		tick = live.tick
	}
	res, runErr := s.Run(ctx, tick)
	live.done()
	if o.json {
		if err := writeJSON(env.Stdout, res); err != nil {
			return err
		}
	} else {
		out := env.Stdout
		if o.write == "-" {
			out = env.Stderr // standard output carries the capture
		}
		printCaptureResult(ctx, out, res)
	}
	if runErr != nil {
		st := res.Stats
		return fmt.Errorf("%w\n%d frames captured were not written; the files written so far are closed and readable (%d frames in them)",
			runErr, st.WriterDrops, st.Written-min(st.Written, st.WriterDrops))
	}
	return nil
}

// liveLine prints the counters once a second: in place on a terminal, a
// line each otherwise.
type liveLine struct {
	w     io.Writer
	tty   bool
	quiet bool
	last  capture.Stats
	drawn bool
}

func newLiveLine(w io.Writer, quiet bool) *liveLine {
	return &liveLine{w: w, tty: progress.IsTerminal(w), quiet: quiet}
}

func (l *liveLine) tick(st capture.Stats) {
	if l.quiet {
		return
	}
	dt := (st.Elapsed - l.last.Elapsed).Seconds()
	rate, bw := 0.0, 0.0
	if dt > 0 {
		rate = float64(st.Received-l.last.Received) / dt
		bw = float64(st.Bytes-l.last.Bytes) * 8 / dt
	}
	line := fmt.Sprintf("%6.0fs  %d frames  %s  %s  %s  written %d  dropped: kernel %d, port %d, writer %d",
		st.Elapsed.Seconds(), st.Received, humanBytes(st.Bytes), humanRate(rate, "fps"), humanRate(bw, "bit/s"),
		st.Written, st.KernelDrops, st.PortDrops, st.WriterDrops)
	if l.tty {
		fmt.Fprintf(l.w, "\r%s\x1b[K", line)
		l.drawn = true
	} else {
		fmt.Fprintln(l.w, line)
	}
	l.last = st
}

func (l *liveLine) done() {
	if l.drawn {
		fmt.Fprintln(l.w)
	}
}

func humanBytes(b uint64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}

func humanRate(v float64, unit string) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2f G%s", v/1e9, unit)
	case v >= 1e6:
		return fmt.Sprintf("%.2f M%s", v/1e6, unit)
	case v >= 1e3:
		return fmt.Sprintf("%.1f k%s", v/1e3, unit)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

func printCaptureResult(ctx context.Context, w io.Writer, r *capture.Result) {
	st := r.Stats
	where := "user space"
	if r.Kernel {
		where = "the kernel"
	}
	fmt.Fprintf(w, "%s: %d frames (%s) in %s, %d written; stopped by %s\n", r.Port, st.Received, humanBytes(st.Bytes),
		st.Elapsed.Round(time.Millisecond), st.Written, r.Stopped)
	if r.Filter != "" || r.RoCE != "" {
		fmt.Fprintf(w, "  filter %q, RoCE %q, run in %s; %d rejected in user space, %d by the RoCE filter\n",
			r.Filter, r.RoCE, where, st.Filtered, st.RoCERejected)
	}
	fmt.Fprintf(w, "  dropped: kernel ring %d, port %d, writer %d; hardware timestamps %d\n",
		st.KernelDrops, st.PortDrops, st.WriterDrops, st.HWTimestamps)
	if len(r.QPs) > 0 {
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  dst GID\tQPN\tpackets\tretrans\tNAKs\tCNPs\tECN\tPSN first..last\t")
		for i, q := range r.QPs {
			if i == 20 {
				fmt.Fprintf(tw, "  (%d more QPs in --json)\t\t\t\t\t\t\t\t\n", len(r.QPs)-20)
				break
			}
			fmt.Fprintf(tw, "  %s\t0x%06x\t%d\t%d\t%d\t%d\t%d\t%d..%d\t\n", q.DstGID, q.QPN, q.Packets, q.Retransmissions,
				q.NAKs, q.CNPs, q.ECNMarked, q.FirstPSN, q.LastPSN)
		}
		tw.Flush()
	}
	for _, f := range r.Files {
		if f.Removed || f.Path == "-" || f.Path == "" {
			continue
		}
		ti, err := trace.Summarise(ctx, f.Path, r.RoCEPort)
		if err != nil {
			fmt.Fprintf(w, "%s: %v\n", f.Path, err)
			continue
		}
		printTraceInfo(w, ti)
	}
}
