package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/dtatofino"
)

var dtaSwitchCPUCmd = &Command{
	Name:    "switch-cpu",
	Summary: "the switch CPU's side of the Tofino translator's flow control: resend the reports its meter queued",
	Usage:   "--port DRIVER:DEV --rate N [flags]",
	Long: `Runs on a Tofino's CPU beside p4/dtatofino/translator.p4 with flow control on: the
pipeline sends a high-priority report that finds its collector's meter red to the CPU's
port (flow_control.cpu_port, queue cpu_queue), untranslated; this command reads those
reports from the CPU port's netdev and sends them back in through it, at most --rate a
second (bursts of --burst), in the order they came. The pipeline takes what comes in on the
CPU's port as a high-priority resend, which skips the sequence check: a report is
translated once the meter lets it through, and comes back here while it does not. Set
--rate below the meter's rate (flow_control.rate) by what new reports take of it.

Frames that are not DTA reports to UDP 40040 (in the --no-seqnum / --data-width format the
reporters use) are counted and dropped; reports beyond --depth queued are counted and lost
(the pipeline already took their sequence numbers, so their reporters do not resend them).
Runs until interrupted, then prints its counters; with --listen it also serves them (GET
/v1/status, /metrics, /healthz).

Example (Tofino 1's PCIe CPU port):
  appliance dta switch-cpu --port afpacket:bf_pci0 --rate 20000`,
	Flags: dtaSwitchCPUFlags,
}

type dtaSwitchCPUOptions struct {
	port, listen string
	rate         uint64
	burst, qlen  int
	width        int
	noSeq, json  bool
	args         []string
}

func dtaSwitchCPUFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o dtaSwitchCPUOptions
	fs.StringVar(&o.port, "port", "", "the switch CPU's port (driver:device)")
	fs.Uint64Var(&o.rate, "rate", 0, "reports a second sent back in (at least 1)")
	fs.IntVar(&o.burst, "burst", 32, "reports sent back at once at most (1..1024)")
	fs.IntVar(&o.qlen, "depth", 1<<16, "reports held at most")
	fs.BoolVar(&o.noSeq, "no-seqnum", false, "the reports' 2-byte base header")
	fs.IntVar(&o.width, "data-width", 4, "Key-Write data bytes of the reports")
	fs.BoolVar(&o.json, "json", false, "print the counters as JSON")
	fs.StringVar(&o.listen, "listen", "", "HTTP address for the counters and metrics (none when empty)")
	return bind(&o, &o.args, runDtaSwitchCPU)
}

func (o *dtaSwitchCPUOptions) config() (dtatofino.CPUAgentConfig, error) {
	switch {
	case len(o.args) > 0 || o.port == "":
		return dtatofino.CPUAgentConfig{}, Usagef("want --port DRIVER:DEV and no arguments")
	case o.rate == 0:
		return dtatofino.CPUAgentConfig{}, Usagef("--rate: at least 1 report a second")
	case o.burst < 1 || o.burst > 1024:
		return dtatofino.CPUAgentConfig{}, Usagef("--burst %d: 1..1024", o.burst)
	case o.qlen < 1 || o.qlen > 1<<24:
		return dtatofino.CPUAgentConfig{}, Usagef("--depth %d: 1..%d", o.qlen, 1<<24)
	}
	f := dtawire.Format{NoSeqnum: o.noSeq, DataWidth: o.width}
	if err := f.Validate(); err != nil {
		return dtatofino.CPUAgentConfig{}, Usagef("--data-width: %v", err)
	}
	return dtatofino.CPUAgentConfig{Rate: o.rate, Burst: o.burst, Depth: o.qlen, Format: f}, nil
}

func runDtaSwitchCPU(ctx context.Context, env *Env, o dtaSwitchCPUOptions) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	// The queue holds packet buffers: the pool covers it and a burst.
	p, _, closePort, err := openPacketPort("dta-switch-cpu", o.port, o.qlen+2*o.burst+64)
	if err != nil {
		return err
	}
	defer closePort()
	cfg.Port = p
	a, err := dtatofino.NewCPUAgent(cfg)
	if err != nil {
		return err
	}
	env.Log.Info("switch CPU agent running", "port", o.port, "rate", o.rate, "burst", o.burst, "depth", o.qlen)
	if err := runServed(ctx, env, "dta-switch-cpu", o.listen, a.Register, a.Run); err != nil {
		return err
	}
	st := a.Stats()
	if o.json {
		return writeJSON(env.Stdout, st)
	}
	fmt.Fprintf(env.Stdout, "switch CPU: %d reports taken, %d sent back, %d lost to a full queue, %d still queued at the end, %d frames not reports\n",
		st.Received, st.Resent, st.Overflow, st.Discarded, st.Malformed)
	return nil
}

// runServed runs loop until ctx ends; with listen, a service named name
// serves what register adds to it meanwhile, and its failure to start
// stops the loop too.
func runServed(ctx context.Context, env *Env, name, listen string, register func(*service.Service), loop func(context.Context)) error {
	if listen == "" {
		loop(ctx)
		return nil
	}
	svc := service.New(name, listen, env.Log)
	register(svc)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { loop(ctx); close(done) }()
	err := svc.Run(ctx)
	cancel() // the service failed to start, or ctx ended: stop the loop too
	<-done
	return err
}
