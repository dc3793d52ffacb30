package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rdma-appliance/appliance/p4/hawkeyetofino"
)

var hawkeyeSwitchCPUCmd = &Command{
	Name:    "switch-cpu",
	Summary: "the Tofino switch CPU's side of telemetry.p4: read the registers on each poll into reports, re-trace",
	Usage:   "-f program.json --port DRIVER:DEV --sde PATH [--out FILE] [--retrace] [--quiet-qdepth BYTES] [flags]",
	Long: `Runs on a Tofino's CPU beside p4/hawkeyetofino/telemetry.p4 (loaded with the program's
setup script): what bench/hawkeyesim's CPU pollers do in the simulator. The data plane
sends the CPU's port (the program's cpu_port) a copy of every polling event new at the
switch, with the port it came in on and the switch's time, and the flows that lost their
register slot to a colliding one. On each copy this command reads the registers of the
--read-epochs newest epochs through bfrt (a bfrt_python script run by the SDE's
run_bfshell.sh, whose output is parsed strictly), builds the switch's report as the
simulator's poller does (per epoch the ports, port-pair meters and flows that counted, the
evicted flows; internal/hawkeyewire's SwitchReport, priced by its report layout) and writes
it as one JSON line to --out: {"event", "victim", "time_ns", "report"}, the records a
collector files under the incident of that event and victim for 'hawkeye diagnose'.
Ports in reports are the program's local indexes (their position in "ports").

A switch is collected at most once every --collect-interval (switch time) and once per
event id within --dedup. --retrace: after reading, send the PFC polling packets the data
plane would send now back in through the CPU's port (they leave by the port their header
names): the victim's egress for a flow trace, every port the arrival port fed for a PFC
trace, when paused (a pause that reached them after the poll passed). --quiet-qdepth
BYTES: a flow trace where the victim's egress was neither paused nor queued (average
queue below BYTES over the epochs read) is neither reported nor re-traced.

program.json is the hawkeyetofino.Program the switch was loaded with (ports with
name, dev_port or front_panel, speed, fec, host; routes; cpu_port), read strictly.
Runs until interrupted, then prints its counters; with --listen it also serves them (GET
/v1/status, /metrics, /healthz). Not run on a switch here: tested against the simulator's
switch with a stand-in bfshell.

Example (Tofino 1's PCIe CPU port):
  appliance hawkeye switch-cpu -f leaf.json --port afpacket:bf_pci0 --sde $SDE --retrace --out reports.jsonl`,
	Flags: hawkeyeSwitchCPUFlags,
}

type hawkeyeSwitchCPUOptions struct {
	file, port, sde, out, listen, name string
	readEpochs, mtu                    int
	interval, dedup                    time.Duration
	retrace, json                      bool
	quiet                              float64
	args                               []string
}

func hawkeyeSwitchCPUFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o hawkeyeSwitchCPUOptions
	fs.StringVar(&o.file, "f", "", "the switch's program (JSON of hawkeyetofino.Program)")
	fs.StringVar(&o.port, "port", "", "the switch CPU's port (driver:device)")
	fs.StringVar(&o.sde, "sde", os.Getenv("SDE"), "the SDE's directory: registers are read with its run_bfshell.sh (default $SDE)")
	fs.StringVar(&o.out, "out", "-", "reports as JSON lines to FILE ('-': stdout)")
	fs.StringVar(&o.name, "name", "", "the switch's name in reports (default the program file's name)")
	fs.IntVar(&o.readEpochs, "read-epochs", hawkeyetofino.Epochs, "newest epochs a collection reads (1..4)")
	fs.IntVar(&o.mtu, "mtu", 1500, "report packets' MTU the reports are priced by (576..9216)")
	fs.DurationVar(&o.interval, "collect-interval", 2*time.Millisecond, "least switch time between two collections")
	fs.DurationVar(&o.dedup, "dedup", 100*time.Millisecond, "an event id collected is not collected again within this")
	fs.BoolVar(&o.retrace, "retrace", false, "send the PFC polling packets the data plane would send now")
	fs.Float64Var(&o.quiet, "quiet-qdepth", 0, "keep out of flow traces where the victim's egress queue averaged below BYTES and was not paused (0: off)")
	fs.BoolVar(&o.json, "json", false, "print the counters as JSON")
	fs.StringVar(&o.listen, "listen", "", "HTTP address for the counters and metrics (none when empty)")
	return bind(&o, &o.args, runHawkeyeSwitchCPU)
}

// loadHawkeyeProgram reads a program file strictly: an unknown field or
// data after the object is an error naming the file.
func loadHawkeyeProgram(path string) (hawkeyetofino.Program, error) {
	var p hawkeyetofino.Program
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	if dec.More() {
		return p, fmt.Errorf("%s: data after the program", path)
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func (o *hawkeyeSwitchCPUOptions) config() (hawkeyetofino.CPUConfig, error) {
	switch {
	case len(o.args) > 0 || o.file == "" || o.port == "":
		return hawkeyetofino.CPUConfig{}, Usagef("want -f program.json, --port DRIVER:DEV and no arguments")
	case o.sde == "":
		return hawkeyetofino.CPUConfig{}, Usagef("want --sde PATH (or $SDE): the registers are read with its run_bfshell.sh")
	case o.readEpochs < 1 || o.readEpochs > hawkeyetofino.Epochs:
		return hawkeyetofino.CPUConfig{}, Usagef("--read-epochs %d: 1..%d", o.readEpochs, hawkeyetofino.Epochs)
	case o.mtu < 576 || o.mtu > 9216:
		return hawkeyetofino.CPUConfig{}, Usagef("--mtu %d: 576..9216", o.mtu)
	case o.interval < 0 || o.dedup < 0 || o.quiet < 0:
		return hawkeyetofino.CPUConfig{}, Usagef("--collect-interval, --dedup and --quiet-qdepth: not negative")
	}
	p, err := loadHawkeyeProgram(o.file)
	if err != nil {
		return hawkeyetofino.CPUConfig{}, err
	}
	name := o.name
	if name == "" {
		name = p.Name
		if name == "" {
			name = strings.TrimSuffix(filepath.Base(o.file), filepath.Ext(o.file))
		}
	}
	return hawkeyetofino.CPUConfig{Program: p, Switch: name, Bfshell: hawkeyetofino.DefaultBfshell(o.sde), ReadEpochs: o.readEpochs,
		MTU: o.mtu, CollectInterval: int64(o.interval), DedupNs: int64(o.dedup), Retrace: o.retrace, QuietQdepth: o.quiet}, nil
}

func runHawkeyeSwitchCPU(ctx context.Context, env *Env, o hawkeyeSwitchCPUOptions) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	var w io.Writer = env.Stdout
	if o.out != "-" {
		f, err := os.OpenFile(o.out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	cfg.Report = func(r hawkeyetofino.CPUReport) error {
		mu.Lock()
		defer mu.Unlock()
		return enc.Encode(r)
	}
	p, pool, closePort, err := openPacketPort("hawkeye-switch-cpu", o.port, 1024)
	if err != nil {
		return err
	}
	defer closePort()
	cfg.Port, cfg.Pool = p, pool
	c, err := hawkeyetofino.NewCPU(cfg)
	if err != nil {
		return err
	}
	env.Log.Info("hawkeye switch CPU running", "port", o.port, "switch", cfg.Switch, "retrace", o.retrace, "quiet_qdepth", o.quiet)
	if err := runServed(ctx, env, "hawkeye-switch-cpu", o.listen, c.Register, c.Run); err != nil {
		return err
	}
	st := c.Stats()
	if o.json {
		return writeJSON(env.Stderr, st)
	}
	fmt.Fprintf(env.Stderr, "switch CPU: %d polls, %d reports (%d B), %d rate-limited, %d duplicates, %d quiet, %d read errors, %d re-traced, %d evicted flows (%d lost), %d frames dropped\n",
		st.Polls, st.Reports, st.ReportBytes, st.RateLimited, st.Duplicates, st.Quiet, st.ReadErrors, st.Retraced, st.Evicted, st.EvictedLost, st.Malformed)
	return nil
}
