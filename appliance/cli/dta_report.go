package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/translator/dtatranslator"
)

func init() {
	dtaCmd.Sub = append(dtaCmd.Sub, &Command{
		Name:    "report",
		Summary: "a DTA reporter emulator: reports at a rate, key distribution, primitive mix, priorities and loss",
		Usage:   "--port DRIVER:DEV --ip IP --translator IP [flags]",
		Long: `Sends DTA reports (UDP 40041 -> 40040, the public generators' ports and 3-byte base
header) to a translator from a packet port, as a switch would, and handles the
translator's ACKs, NACKs (go-back-N resend from the NACKed number, 128 reports kept) and
congestion notices (the rate halves for 10 ms).

--mix weighs the primitives, e.g. keywrite=4,append=2,keyincrement=1,postcarder=1;
postcarder sends each flow's --hops postcards in a row. --sketch ID:KIND:COLUMNSxROWS:REPORTERS
keeps a sketch (count-min over Key-Write keys, hyperloglog over Key-Increment keys) and sends
it as Sketch-Merge reports every --sketch-epoch reports and at the end. --loss drops a share
of first transmissions on purpose, to exercise NACKs; --high-share sends that share with
DSCP 46 (high priority at the translator).

Example:
  appliance dta report --port afpacket:veth1 --ip 10.9.0.2 --translator 10.9.0.100 \
    --rate 100000 --count 1000000 --mix keywrite=1,append=1 --lists 1,2 --retransmittable --loss 0.01`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			port := fs.String("port", "", "packet port (driver:device)")
			ip := fs.String("ip", "", "the reporter's IPv4 address")
			mac := fs.String("mac", "", "the reporter's MAC (default: the port's)")
			trIP := fs.String("translator", "", "the translator's IPv4 address")
			trMAC := fs.String("translator-mac", "", "the translator's MAC (default: resolved with ARP)")
			id := fs.Uint("id", 0, "reporter id (Sketch-Merge)")
			rate := fs.Float64("rate", 10000, "reports a second (0: as fast as the port takes them)")
			count := fs.Uint64("count", 10000, "reports to send (0: until interrupted)")
			mix := fs.String("mix", "keywrite=1", "primitive weights: keywrite, append, keyincrement, postcarder")
			keys := fs.Uint("keys", 1<<16, "key space")
			zipf := fs.Float64("zipf", 0, "Zipf skew of keys (> 1; 0: uniform)")
			red := fs.Uint("redundancy", 2, "N of Key-Write and Key-Increment")
			lists := fs.String("lists", "", "Append list ids, comma-separated")
			hops := fs.Int("hops", 5, "Postcarder path length")
			sketch := fs.String("sketch", "", "ID:KIND:COLUMNSxROWS:REPORTERS, KIND count-min or hyperloglog")
			epoch := fs.Int("sketch-epoch", 0, "reports per sketch epoch (0: one sketch at the end)")
			retx := fs.Bool("retransmittable", false, "number reports and resend on NACK")
			imm := fs.Bool("immediate", false, "set the immediate flag on Key-Writes (WRITE with immediate)")
			high := fs.Float64("high-share", 0, "share of reports sent with DSCP 46")
			loss := fs.Float64("loss", 0, "share of first transmissions dropped on purpose")
			noSeq := fs.Bool("no-seqnum", false, "the 2-byte base header")
			width := fs.Int("data-width", 4, "Key-Write data bytes")
			seed := fs.Uint64("seed", 1, "random seed")
			linger := fs.Duration("linger", 200*time.Millisecond, "wait up to this long after the last report for NACKs (with --retransmittable, until every report is acknowledged)")
			asJSON := fs.Bool("json", false, "print the counters as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 || *port == "" {
					return Usagef("want --port DRIVER:DEV and no arguments")
				}
				src, err := netip.ParseAddr(*ip)
				if err != nil || !src.Is4() {
					return Usagef("--ip %q: an IPv4 address", *ip)
				}
				dst, err := netip.ParseAddr(*trIP)
				if err != nil || !dst.Is4() {
					return Usagef("--translator %q: an IPv4 address", *trIP)
				}
				cfg := dtatranslator.ReporterConfig{ID: uint16(*id), SrcIP: src, DstIP: dst, Rate: *rate, Count: *count,
					Keys: uint32(*keys), Zipf: *zipf, Redundancy: uint8(*red), Hops: *hops, SketchEpoch: *epoch,
					Retransmittable: *retx, Immediate: *imm, HighShare: *high, Loss: *loss, Seed: *seed,
					Format: dtawire.Format{NoSeqnum: *noSeq, DataWidth: *width}}
				if *trMAC != "" {
					if cfg.DstMAC, err = header.ParseMAC(*trMAC); err != nil {
						return Usagef("--translator-mac: %v", err)
					}
				}
				if err := parseMix(*mix, &cfg); err != nil {
					return Usagef("--mix: %v", err)
				}
				for _, f := range strings.FieldsFunc(*lists, func(r rune) bool { return r == ',' }) {
					v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
					if err != nil {
						return Usagef("--lists: %q", f)
					}
					cfg.Lists = append(cfg.Lists, uint32(v))
				}
				if *sketch != "" {
					if err := parseSketchFlag(*sketch, &cfg); err != nil {
						return Usagef("--sketch: %v", err)
					}
				}
				pool, err := dpdk.NewPool("dta-report", 4096, 0)
				if err != nil {
					return err
				}
				defer pool.Close()
				p, err := dpdk.Open(*port, dpdk.Config{Pool: pool, RxQueues: 1, TxQueues: 1, Promiscuous: true})
				if err != nil {
					return err
				}
				defer p.Close()
				cfg.SrcMAC = header.MAC(p.Info().MAC)
				if *mac != "" {
					if cfg.SrcMAC, err = header.ParseMAC(*mac); err != nil {
						return Usagef("--mac: %v", err)
					}
				}
				r, err := dtatranslator.NewReporter(cfg, p, pool)
				if err != nil {
					return err
				}
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err = r.Resolve(rctx)
				cancel()
				if err != nil {
					return err
				}
				if err := r.Run(ctx, *linger); err != nil {
					return err
				}
				st := r.Stats
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(st)
				}
				fmt.Fprintf(env.Stdout, "reporter %d: %d reports in %v (%.0f/s), %d lost on purpose, %d resent on %d NACKs, %d congestion notices\n",
					cfg.ID, st.Sent, time.Duration(st.ElapsedNs).Round(time.Millisecond), st.RateOf(), st.Lost, st.Resent, st.NACKs, st.Congestion)
				return nil
			}
		},
	})
}

// parseMix reads keywrite=4,append=1,... into cfg.Mix.
func parseMix(s string, cfg *dtatranslator.ReporterConfig) error {
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return fmt.Errorf("%q: want primitive=weight", kv)
		}
		switch k {
		case "keywrite", "key-write":
			cfg.Mix.KeyWrite = n
		case "append":
			cfg.Mix.Append = n
		case "keyincrement", "key-increment":
			cfg.Mix.KeyIncrement = n
		case "postcarder":
			cfg.Mix.Postcarder = n
		default:
			return fmt.Errorf("%q: keywrite, append, keyincrement or postcarder", k)
		}
	}
	return nil
}

// parseSketchFlag reads ID:KIND:COLUMNSxROWS:REPORTERS.
func parseSketchFlag(s string, cfg *dtatranslator.ReporterConfig) error {
	f := strings.Split(s, ":")
	if len(f) != 4 {
		return fmt.Errorf("%q: want ID:KIND:COLUMNSxROWS:REPORTERS", s)
	}
	id, err := strconv.ParseUint(f[0], 10, 16)
	if err != nil {
		return fmt.Errorf("id %q", f[0])
	}
	var reg dtamem.SketchRegion
	switch f[1] {
	case "count-min":
		reg.Kind = dtawire.SketchCountMin
	case "hyperloglog":
		reg.Kind = dtawire.SketchHyperLogLog
	default:
		return fmt.Errorf("kind %q: count-min or hyperloglog", f[1])
	}
	cs, rs, ok := strings.Cut(f[2], "x")
	c, err1 := strconv.ParseUint(cs, 10, 32)
	r, err2 := strconv.Atoi(rs)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("geometry %q: COLUMNSxROWS", f[2])
	}
	n, err := strconv.Atoi(f[3])
	if err != nil {
		return fmt.Errorf("reporters %q", f[3])
	}
	reg.Columns, reg.Rows, reg.Reporters = uint32(c), r, n
	if err := reg.Validate(); err != nil {
		return err
	}
	cfg.Sketch, cfg.SketchID = &reg, uint16(id)
	return nil
}
