package lumina

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/bench/trafficgen"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/translator/inject"
)

// BalanceConfig is the per-packet load-balancing experiment of the Lumina
// paper (Figure 7b), as the paper ran it, on the twin with a clock: the
// requester sends messages of 100 KB, 500 KB and 1 MB at line rate, the
// switch mirrors every RoCE packet, and the copies go either to the pool
// of dumpers by per-packet weighted round-robin, or each ingress port's to
// one dumper (the paper's tweaked Lumina: "mirror traffic from an ingress
// port to a specific server"). Each dumper is a NIC receive ring and a
// core whose cost per copy is the dumper's own, measured on this machine
// (MeasureDumperCost), not a configured cap: where a port's line rate in
// frames is above what one core takes, per-port mirroring fills the ring
// and loses copies, and round-robin spreads them over the pool.
type BalanceConfig struct {
	// Rounds per mirroring mode, line rate and message size (the
	// paper's 100).
	Rounds int
	// Dumpers in the pool (default 4, the paper's "several hosts as a
	// traffic dumper pool"); per-port mirroring can use only one per
	// traffic port of them, round-robin uses them all.
	Dumpers int
	// Sizes are the message sizes (default the paper's 100 KB, 500 KB,
	// 1 MB) and Messages how many one round sends (default 10).
	Sizes    []int
	Messages int
	// SpeedsGbps are the line rates to run (default 100, the paper's,
	// 400 and 800, where one core's capacity is reached).
	SpeedsGbps []int
	// Ring is the dumpers' receive ring (default DefaultDumperRing).
	Ring int
	// Cost is the dumpers' cost per copy; nil measures it.
	Cost *DumperCost
	Dir  string
	// Progress, when set, is called after every round.
	Progress func(b inject.Balance, speedGbps, size, round int, ok bool)
}

// Defaults fills what is zero with the paper's settings.
func (c BalanceConfig) Defaults() BalanceConfig {
	if c.Rounds == 0 {
		c.Rounds = 100
	}
	if c.Dumpers == 0 {
		c.Dumpers = 4
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int{100 << 10, 500 << 10, 1 << 20}
	}
	if c.Messages == 0 {
		c.Messages = 10
	}
	if len(c.SpeedsGbps) == 0 {
		c.SpeedsGbps = []int{100, 400, 800}
	}
	if c.Ring == 0 {
		c.Ring = DefaultDumperRing
	}
	return c
}

// balanceMTU is the RoCE MTU of the experiment's messages.
const balanceMTU = 1024

// BalanceRow is one mirroring mode at one line rate and message size.
type BalanceRow struct {
	Balance     string `json:"balance"`
	SpeedGbps   int    `json:"speed_gbps"`
	MessageSize int    `json:"message_size"`
	Rounds      int    `json:"rounds"`
	Passed      int    `json:"passed"`
	// Lost sums the copies missing from the traces over all rounds, and
	// Discarded the copies the dumpers' NICs discarded (ring full).
	Lost      uint64 `json:"lost"`
	Discarded uint64 `json:"discarded"`
	// Packets is the mean trace length per round.
	Packets float64 `json:"packets"`
	// FirstFailure says why the first failed round failed.
	FirstFailure string `json:"first_failure,omitempty"`
}

// PassRate is the fraction of rounds whose trace passed integrity.
func (r BalanceRow) PassRate() float64 {
	if r.Rounds == 0 {
		return 0
	}
	return float64(r.Passed) / float64(r.Rounds)
}

// BalanceResult is the experiment's table.
type BalanceResult struct {
	Config BalanceConfig `json:"-"`
	// Cost is the dumpers' measured cost per copy and CapacityPPS one
	// core's capacity at its median.
	Cost        *DumperCost  `json:"dumper_cost"`
	CapacityPPS float64      `json:"dumper_capacity_pps"`
	Rows        []BalanceRow `json:"rows"`
	// TrafficFails counts rounds whose messages did not all complete.
	TrafficFails int `json:"traffic_failures"`
}

// Row finds the row of a mode, line rate and size.
func (r *BalanceResult) Row(b inject.Balance, speedGbps, size int) *BalanceRow {
	for i := range r.Rows {
		x := &r.Rows[i]
		if x.Balance == balanceName(b) && x.SpeedGbps == speedGbps && x.MessageSize == size {
			return x
		}
	}
	return nil
}

// Total sums a mirroring mode's rows at one line rate (0: every rate)
// over the message sizes.
func (r *BalanceResult) Total(b inject.Balance, speedGbps int) BalanceRow {
	t := BalanceRow{Balance: balanceName(b), SpeedGbps: speedGbps}
	for _, x := range r.Rows {
		if x.Balance != t.Balance || speedGbps != 0 && x.SpeedGbps != speedGbps {
			continue
		}
		t.Rounds += x.Rounds
		t.Passed += x.Passed
		t.Lost += x.Lost
		t.Discarded += x.Discarded
	}
	return t
}

// LineFrameRate is the frames per second a port sends at line rate with
// RoCE WRITE packets of a full MTU (RoCEv2 over IPv4: Ethernet 14, IP
// 20, UDP 8, BTH 12, ICRC 4 and FCS 4, plus the wire's preamble and gap).
func LineFrameRate(speedGbps int) float64 {
	return float64(speedGbps) * 1e9 / 8 / float64(balanceMTU+14+20+8+12+4+wireOverhead)
}

// RunBalance runs the experiment: for each line rate and mode, a virtual
// testbed whose dumpers draw their costs from the same seeded streams
// (both modes see the same machine), and Rounds rounds per message size.
func RunBalance(ctx context.Context, cfg BalanceConfig) (*BalanceResult, error) {
	cfg = cfg.Defaults()
	if cfg.Rounds < 1 || cfg.Dumpers < 2 || cfg.Messages < 1 || cfg.Ring < 1 {
		return nil, errors.New("lumina: balance experiment needs rounds, messages and a ring of at least 1, and 2 dumpers")
	}
	for _, s := range cfg.Sizes {
		if s < balanceMTU || s > 16<<20 {
			return nil, fmt.Errorf("lumina: balance experiment: message size %d outside %d..16 MiB", s, balanceMTU)
		}
	}
	for _, g := range cfg.SpeedsGbps {
		if g < 1 || g > 1600 {
			return nil, fmt.Errorf("lumina: balance experiment: line rate %d Gbit/s outside 1..1600", g)
		}
	}
	res := &BalanceResult{Config: cfg, Cost: cfg.Cost}
	if res.Cost == nil {
		// Copies of full-MTU frames, in the dumper's own receive burst.
		c, err := MeasureDumperCost(4000, 32, balanceMTU+62+16)
		if err != nil {
			return nil, err
		}
		res.Cost = c
	}
	res.CapacityPPS = res.Cost.Rate()
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "lumina-balance")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	for _, speed := range cfg.SpeedsGbps {
		for _, bal := range []inject.Balance{inject.BalanceWRR, inject.BalanceIngressPort} {
			if err := runBalanceMode(ctx, cfg, res, bal, speed); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

func runBalanceMode(ctx context.Context, cfg BalanceConfig, res *BalanceResult, bal inject.Balance, speed int) error {
	// A dumper's arena holds a round's copies even if it got them all:
	// the data packets of the largest message size and an ACK each. It
	// was sized for 16 MB messages whatever the sizes (84 MB touched per
	// dumper at ten messages).
	largest := slices.Max(cfg.Sizes)
	dumpers := make([]DumperSpec, cfg.Dumpers)
	for i := range dumpers {
		dumpers[i] = DumperSpec{NumPkts: 2*cfg.Messages*((largest+balanceMTU-1)/balanceMTU) + 1024}
	}
	name := fmt.Sprintf("balance-%s-%dg", bal, speed)
	tb, err := NewTestbed(TestbedConfig{Name: fmt.Sprintf("%s-%d", name, os.Getpid()), Virtual: true,
		SpeedMbps: speed * 1000, Dumpers: dumpers, Balance: bal, Dir: cfg.Dir,
		DumperCost: res.Cost, DumperRing: cfg.Ring, DumperSeed: uint64(speed)})
	if err != nil {
		return err
	}
	defer tb.Close()
	for _, size := range cfg.Sizes {
		row := BalanceRow{Balance: balanceName(bal), SpeedGbps: speed, MessageSize: size, Rounds: cfg.Rounds}
		var pkts uint64
		for r := 0; r < cfg.Rounds; r++ {
			p := trafficgen.Params{Verb: intent.VerbWrite, NumQPs: 1, MsgsPerQP: cfg.Messages, MessageSize: size,
				MTU: balanceMTU, TxDepth: 4, Timeout: 14, Seed: uint64(r + 1)}
			run, err := tb.RunEvents(ctx, p, nil, tb.Path(name+".pcap"))
			if err != nil && run == nil {
				return err
			}
			if run.Traffic == nil || !run.Traffic.OK() {
				res.TrafficFails++
			}
			ok := err == nil && run.IntegrityErr == nil
			if ok {
				row.Passed++
			} else if row.FirstFailure == "" {
				row.FirstFailure = fmt.Sprintf("round %d: %v", r, errors.Join(err, run.IntegrityErr))
			}
			if run.Trace != nil {
				pkts += run.Trace.Packets
				row.Lost += run.Trace.Missing
			}
			if run.Capture != nil {
				for _, d := range run.Capture.Results {
					row.Discarded += d.PortDropped
				}
			}
			if cfg.Progress != nil {
				cfg.Progress(bal, speed, size, r, ok)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		row.Packets = float64(pkts) / float64(cfg.Rounds)
		res.Rows = append(res.Rows, row)
	}
	return nil
}

func balanceName(b inject.Balance) string {
	if b == inject.BalanceIngressPort {
		return "per-port"
	}
	return "per-packet WRR"
}

// Table renders the result as the paper's figure: the share of rounds
// whose trace passed the integrity check, per mirroring mode, line rate
// and message size.
func (r *BalanceResult) Table() string {
	var b strings.Builder
	how := "measured here"
	if r.Config.Cost != nil {
		how = "configured"
	}
	fmt.Fprintf(&b, "per-packet load balancing (Lumina Fig. 7b) on the twin: %d dumpers, ring %d, one core each at %.1f ns/copy median (p99 %.1f): %.1f Mcopies/s %s\n",
		r.Config.Dumpers, r.Config.Ring, r.Cost.Median, r.Cost.P99, r.CapacityPPS/1e6, how)
	fmt.Fprintf(&b, "%-15s %6s %8s %6s %10s %10s %10s %13s\n", "mirroring", "Gbit/s", "Mframe/s", "msg", "integrity", "lost", "discarded", "packets/round")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "%-15s %6d %8.1f %6s %9.0f%% %10d %10d %13.0f\n", row.Balance, row.SpeedGbps, LineFrameRate(row.SpeedGbps)/1e6,
			sizeName(row.MessageSize), 100*row.PassRate(), row.Lost, row.Discarded, row.Packets)
	}
	b.WriteString("Mframe/s: one port's frames at line rate; per-port mirroring gives them all to one dumper, round-robin spreads them\n")
	return b.String()
}

func sizeName(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
