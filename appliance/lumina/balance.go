package lumina

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rdma-appliance/appliance/bench/trafficgen"
	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/translator/inject"
)

// BalanceConfig is the per-packet load-balancing experiment of the Lumina
// paper (Figure 7b) in software. The requester's QPs are paced to
// QPRate each (the traffic generator posts messages on a schedule), and
// every dumper worker is limited to Headroom times its fair share of
// the mirrored copies: the pool as a whole has room to spare, but no
// dumper can take two connections' worth. Per-packet round-robin gives
// each dumper its share and the trace stays whole; a flow-based mirror
// puts every connection's copies on one dumper, and when two connections
// land on the same one its queue overflows and the trace has gaps.
type BalanceConfig struct {
	Rounds  int // per balance mode
	Dumpers int
	NumQPs  int
	// QPRate is each QP's pace in bit/s; Duration how long each round's
	// traffic lasts (the message count follows from both).
	QPRate   float64
	Duration time.Duration
	// Headroom is each dumper's capacity over its fair share (>1).
	Headroom float64
	// RingSize is the mirror links' queue depth: the burst a dumper
	// absorbs before it drops.
	RingSize int
	Netns    bool
	Dir      string
	// Progress, when set, is called after every round.
	Progress func(b inject.Balance, round int, ok bool)
}

// Defaults fills what is zero with the settings of `make bench`.
func (c BalanceConfig) Defaults() BalanceConfig {
	if c.Rounds == 0 {
		c.Rounds = 100
	}
	if c.Dumpers == 0 {
		c.Dumpers = 4
	}
	if c.NumQPs == 0 {
		c.NumQPs = 4
	}
	// A dumper queue holds RingSize/share seconds of its share (here
	// about 80 ms): the longest stall a dumper survives under per-packet
	// balancing. A dumper with two connections fills it in 1/(2-Headroom)
	// of that (107 ms), so rounds last longer than that.
	if c.QPRate == 0 {
		c.QPRate = 100e6
	}
	if c.Duration == 0 {
		c.Duration = 250 * time.Millisecond
	}
	if c.Headroom == 0 {
		c.Headroom = 1.25
	}
	if c.RingSize == 0 {
		c.RingSize = 1024
	}
	return c
}

// BalanceRow is one balance mode's outcome.
type BalanceRow struct {
	Balance string `json:"balance"`
	Rounds  int    `json:"rounds"`
	Passed  int    `json:"passed"`
	// Lost sums the copies missing from the traces over all rounds.
	Lost uint64 `json:"lost"`
	// Packets is the mean trace length per round.
	Packets float64 `json:"packets"`
	// FirstFailure says why the first failed round failed.
	FirstFailure string `json:"first_failure,omitempty"`
	// Starved counts the rounds in which the machine kept a dumper off
	// its core while copies waited, for long enough to fill half its
	// queue: in one stall (BalanceResult.StallBudget) or over the round
	// (capacity lost to stalls above BalanceResult.LostBudget copies).
	// The machine, not the balancing, then decided whether copies were
	// lost. StarvedFailed are those that failed integrity.
	Starved       int `json:"starved"`
	StarvedFailed int `json:"starved_failed"`
}

// FailedUnstarved are the rounds that failed integrity although every
// dumper kept polling: the balancing's own failures.
func (r BalanceRow) FailedUnstarved() int { return r.Rounds - r.Passed - r.StarvedFailed }

// PassRate is the fraction of rounds whose trace passed integrity.
func (r BalanceRow) PassRate() float64 {
	if r.Rounds == 0 {
		return 0
	}
	return float64(r.Passed) / float64(r.Rounds)
}

// BalanceResult is the experiment's table.
type BalanceResult struct {
	Config       BalanceConfig `json:"-"`
	CapacityPPS  float64       `json:"dumper_capacity_pps"`
	OfferedPPS   float64       `json:"offered_pps"`
	Rows         []BalanceRow  `json:"rows"`
	TrafficFails int           `json:"traffic_failures"`
	// StallBudget is half of how long a dumper's queue holds its share
	// of the copies under per-packet balancing; a round with a longer
	// stall counts as starved.
	StallBudget time.Duration `json:"stall_budget_ns"`
	// LostBudget is half a dumper's queue, in copies: a round in which a
	// dumper lost more of its capacity to stalls counts as starved.
	LostBudget uint64 `json:"lost_budget"`
}

// mirroredPerByte estimates the copies per byte a WRITE stream makes at
// MTU 1024: a data packet per 1024 bytes plus the coalesced ACKs (the
// soft RNIC acknowledges about one packet in 32 of a long message).
const mirroredPerByte = 1.0 / 1024 * 1.04

// RunBalance runs the experiment: Rounds rounds with per-packet WRR, then
// as many with flow-hash mirroring, a fresh testbed per mode.
func RunBalance(ctx context.Context, cfg BalanceConfig) (*BalanceResult, error) {
	cfg = cfg.Defaults()
	if cfg.Headroom <= 1 || cfg.Dumpers < 2 || cfg.NumQPs < 2 {
		return nil, errors.New("lumina: balance experiment needs headroom > 1, at least 2 dumpers and 2 QPs")
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "lumina-balance")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	offered := cfg.QPRate / 8 * float64(cfg.NumQPs) * mirroredPerByte
	capacity := offered / float64(cfg.Dumpers) * cfg.Headroom
	res := &BalanceResult{Config: cfg, CapacityPPS: capacity, OfferedPPS: offered,
		StallBudget: time.Duration(float64(cfg.RingSize) / (offered / float64(cfg.Dumpers)) / 2 * 1e9),
		LostBudget:  uint64(cfg.RingSize / 2)}
	const msgSize = 64 << 10
	msgs := max(1, int(cfg.QPRate/8*cfg.Duration.Seconds()/msgSize))
	for _, bal := range []inject.Balance{inject.BalanceWRR, inject.BalanceFlowHash} {
		dumpers := make([]DumperSpec, cfg.Dumpers)
		for i := range dumpers {
			dumpers[i] = DumperSpec{Capacity: capacity, NumPkts: 1 << 16}
		}
		name := "balance-wrr"
		if bal == inject.BalanceFlowHash {
			name = "balance-flow"
		}
		tb, err := NewTestbed(TestbedConfig{Name: fmt.Sprintf("%s%d", name, os.Getpid()), Netns: cfg.Netns,
			Dumpers: dumpers, Balance: bal, RingSize: cfg.RingSize, Dir: cfg.Dir})
		if err != nil {
			return nil, err
		}
		row := BalanceRow{Balance: balanceName(bal), Rounds: cfg.Rounds}
		var pkts uint64
		for r := 0; r < cfg.Rounds; r++ {
			p := trafficgen.Params{Verb: intent.VerbWrite, NumQPs: cfg.NumQPs, MsgsPerQP: msgs, MessageSize: msgSize,
				MTU: 1024, TxDepth: 4, Timeout: 14, Rate: cfg.QPRate, Seed: uint64(r + 1)}
			run, err := tb.RunEvents(ctx, p, nil, tb.Path(name+".pcap"))
			if err != nil && run == nil {
				tb.Close()
				return nil, err
			}
			if run.Traffic == nil || !run.Traffic.OK() {
				res.TrafficFails++
			}
			ok := err == nil && run.IntegrityErr == nil
			stall, lost := starvation(run.Capture)
			starved := stall > res.StallBudget || lost > res.LostBudget
			if starved {
				row.Starved++
			}
			switch {
			case ok:
				row.Passed++
			case starved:
				row.StarvedFailed++
			}
			if !ok && row.FirstFailure == "" {
				row.FirstFailure = fmt.Sprintf("round %d: %v", r, errors.Join(err, run.IntegrityErr))
				if starved {
					row.FirstFailure += fmt.Sprintf(" (starved: a dumper stalled up to %v and lost %d copies of capacity, budgets %v and %d)",
						stall.Round(time.Millisecond), lost, res.StallBudget.Round(time.Millisecond), res.LostBudget)
				}
			}
			if run.Trace != nil {
				pkts += run.Trace.Packets
				row.Lost += run.Trace.Missing
			}
			if cfg.Progress != nil {
				cfg.Progress(bal, r, ok)
			}
			if ctx.Err() != nil {
				break
			}
		}
		row.Packets = float64(pkts) / float64(cfg.Rounds)
		res.Rows = append(res.Rows, row)
		if err := tb.Close(); err != nil {
			return res, err
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// starvation is the longest any dumper of the capture went without
// polling, and the most capacity one lost to the machine.
func starvation(c *Capture) (stall time.Duration, lost uint64) {
	if c == nil {
		return 0, 0
	}
	for _, r := range c.Results {
		stall, lost = max(stall, r.MaxStall), max(lost, r.LostService)
	}
	return stall, lost
}

func balanceName(b inject.Balance) string {
	if b == inject.BalanceFlowHash {
		return "flow-hash"
	}
	return "per-packet WRR"
}

// Table renders the result as the paper's comparison.
func (r *BalanceResult) Table() string {
	s := fmt.Sprintf("per-packet load balancing (Lumina Fig. 7b): %d dumpers at %.0f copies/s each, %d QPs offering %.0f copies/s\n",
		r.Config.Dumpers, r.CapacityPPS, r.Config.NumQPs, r.OfferedPPS)
	s += fmt.Sprintf("%-16s %8s %10s %12s %14s %9s\n", "mirroring", "rounds", "integrity", "lost copies", "packets/round", "starved")
	for _, row := range r.Rows {
		s += fmt.Sprintf("%-16s %8d %9.0f%% %12d %14.0f %5d (%d failed)\n", row.Balance, row.Rounds, 100*row.PassRate(), row.Lost, row.Packets,
			row.Starved, row.StarvedFailed)
	}
	s += fmt.Sprintf("starved: the machine kept a dumper off its core while copies waited, over %v at once or %d copies of capacity in the round (half its queue); it, not the balancing, decided those rounds\n",
		r.StallBudget.Round(time.Millisecond), r.LostBudget)
	return s
}
