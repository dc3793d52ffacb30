package cli

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"time"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

var dtaReportCmd = &Command{
	Name:    "report",
	Summary: "a DTA reporter emulator: reports at a rate, key distribution, primitive mix, priorities and loss",
	Usage:   "--port DRIVER:DEV --ip IP --translator IP [flags]",
	Long: `Sends DTA reports (UDP 40041 -> 40040, the public generators' ports and 3-byte base
header) to a translator from a packet port, as a switch would, and handles the
translator's ACKs, NACKs (go-back-N resend from the NACKed number, 128 reports kept; a NACK
repeated within 5 ms of a resend from its number is not acted on) and congestion notices
(the rate halves for 10 ms). Without an ACK the window is resent after 5 ms, the wait
doubling up to 200 ms while resends go unanswered.

--mix weighs the primitives, e.g. keywrite=4,append=2,keyincrement=1,postcarder=1;
postcarder sends each flow's --hops postcards in a row. --sketch ID:KIND:COLUMNSxROWS:REPORTERS
keeps a sketch (count-min over Key-Write keys, hyperloglog over Key-Increment keys) and sends
it as Sketch-Merge reports every --sketch-epoch reports and at the end. --loss drops a share
of first transmissions on purpose, to exercise NACKs; --high-share sends that share with
DSCP 46 (high priority at the translator); --high-only with --retransmittable numbers and
keeps only those, as the DTA paper's reporters do (the low-priority rest is the translator's
to drop under congestion); a full window then holds back the high-priority reports alone, in
order, and the low-priority ones go on at the rate.

Example:
  appliance dta report --port afpacket:veth1 --ip 10.9.0.2 --translator 10.9.0.100 \
    --rate 100000 --count 1000000 --mix keywrite=1,append=1 --lists 1,2 --retransmittable --loss 0.01`,
	Flags: dtaReportFlags,
}

type dtaReportOptions struct {
	port, ip, mac, trIP, trMAC, mix, lists, sketch string
	id, keys, red                                  uint
	rate, zipf, high, loss                         float64
	count, seed                                    uint64
	hops, epoch, width                             int
	retx, highOnly, imm, noSeq, json               bool
	linger                                         time.Duration
	args                                           []string
}

func dtaReportFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o dtaReportOptions
	fs.StringVar(&o.port, "port", "", "packet port (driver:device)")
	fs.StringVar(&o.ip, "ip", "", "the reporter's IPv4 address")
	fs.StringVar(&o.mac, "mac", "", "the reporter's MAC (default: the port's)")
	fs.StringVar(&o.trIP, "translator", "", "the translator's IPv4 address")
	fs.StringVar(&o.trMAC, "translator-mac", "", "the translator's MAC (default: resolved with ARP)")
	fs.UintVar(&o.id, "id", 0, "reporter id (Sketch-Merge)")
	fs.Float64Var(&o.rate, "rate", 10000, "reports a second (0: as fast as the port takes them)")
	fs.Uint64Var(&o.count, "count", 10000, "reports to send (0: until interrupted)")
	fs.StringVar(&o.mix, "mix", "keywrite=1", "primitive weights: keywrite, append, keyincrement, postcarder")
	fs.UintVar(&o.keys, "keys", 1<<16, "key space")
	fs.Float64Var(&o.zipf, "zipf", 0, "Zipf skew of keys (> 1; 0: uniform)")
	fs.UintVar(&o.red, "redundancy", 2, "N of Key-Write and Key-Increment")
	fs.StringVar(&o.lists, "lists", "", "Append list ids, comma-separated")
	fs.IntVar(&o.hops, "hops", 5, "Postcarder path length")
	fs.StringVar(&o.sketch, "sketch", "", "ID:KIND:COLUMNSxROWS:REPORTERS, KIND count-min or hyperloglog")
	fs.IntVar(&o.epoch, "sketch-epoch", 0, "reports per sketch epoch (0: one sketch at the end)")
	fs.BoolVar(&o.retx, "retransmittable", false, "number reports and resend on NACK")
	fs.BoolVar(&o.imm, "immediate", false, "set the immediate flag on Key-Writes (WRITE with immediate)")
	fs.Float64Var(&o.high, "high-share", 0, "share of reports sent with DSCP 46")
	fs.BoolVar(&o.highOnly, "high-only", false, "with --retransmittable: number and resend only the high-priority reports")
	fs.Float64Var(&o.loss, "loss", 0, "share of first transmissions dropped on purpose")
	fs.BoolVar(&o.noSeq, "no-seqnum", false, "the 2-byte base header")
	fs.IntVar(&o.width, "data-width", 4, "Key-Write data bytes")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed")
	fs.DurationVar(&o.linger, "linger", 200*time.Millisecond, "wait up to this long after the last report for NACKs (with --retransmittable, until every report is acknowledged)")
	fs.BoolVar(&o.json, "json", false, "print the counters as JSON")
	return bind(&o, &o.args, runDtaReport)
}

// config checks the flags and turns them into the reporter's
// configuration (the source MAC comes from the port).
func (o *dtaReportOptions) config() (dtatranslator.ReporterConfig, error) {
	var cfg dtatranslator.ReporterConfig
	if len(o.args) > 0 || o.port == "" {
		return cfg, Usagef("want --port DRIVER:DEV and no arguments")
	}
	src, err := netip.ParseAddr(o.ip)
	if err != nil || !src.Is4() {
		return cfg, Usagef("--ip %q: an IPv4 address", o.ip)
	}
	dst, err := netip.ParseAddr(o.trIP)
	if err != nil || !dst.Is4() {
		return cfg, Usagef("--translator %q: an IPv4 address", o.trIP)
	}
	cfg = dtatranslator.ReporterConfig{ID: uint16(o.id), SrcIP: src, DstIP: dst, Rate: o.rate, Count: o.count,
		Keys: uint32(o.keys), Zipf: o.zipf, Redundancy: uint8(o.red), Hops: o.hops, SketchEpoch: o.epoch,
		Retransmittable: o.retx, HighOnly: o.highOnly, Immediate: o.imm, HighShare: o.high, Loss: o.loss, Seed: o.seed,
		Format: dtawire.Format{NoSeqnum: o.noSeq, DataWidth: o.width}}
	if o.trMAC != "" {
		if cfg.DstMAC, err = header.ParseMAC(o.trMAC); err != nil {
			return cfg, Usagef("--translator-mac: %v", err)
		}
	}
	if err := cfg.ParseMix(o.mix); err != nil {
		return cfg, Usagef("--mix: %v", err)
	}
	if err := cfg.ParseLists(o.lists); err != nil {
		return cfg, Usagef("--lists: %v", err)
	}
	if o.sketch != "" {
		if err := cfg.ParseSketch(o.sketch); err != nil {
			return cfg, Usagef("--sketch: %v", err)
		}
	}
	return cfg, nil
}

func runDtaReport(ctx context.Context, env *Env, o dtaReportOptions) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	p, pool, closePort, err := openPacketPort("dta-report", o.port, 4096)
	if err != nil {
		return err
	}
	defer closePort()
	cfg.SrcMAC = header.MAC(p.Info().MAC)
	if o.mac != "" {
		if cfg.SrcMAC, err = header.ParseMAC(o.mac); err != nil {
			return Usagef("--mac: %v", err)
		}
	}
	st, err := dtatranslator.RunReporter(ctx, cfg, p, pool, o.linger)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(env.Stdout, st)
	}
	fmt.Fprintf(env.Stdout, "reporter %d: %d reports in %v (%.0f/s), %d lost on purpose, %d resent on %d NACKs, %d congestion notices\n",
		cfg.ID, st.Sent, time.Duration(st.ElapsedNs).Round(time.Millisecond), st.RateOf(), st.Lost, st.Resent, st.NACKs, st.Congestion)
	if st.SentHigh > 0 || st.SentSlowed > 0 {
		fmt.Fprintf(env.Stdout, "  %d high priority, %d sent at half rate after congestion notices\n", st.SentHigh, st.SentSlowed)
	}
	return nil
}
