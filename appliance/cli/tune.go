package cli

// tuneCmd is `appliance tune`: ByteTuning, ECN/PFC watermark tuning with
// simulated annealing on telemetry feedback. Each subcommand's file
// (tune_run.go, tune_bench.go) adds itself to its Sub in init.
var tuneCmd = &Command{
	Name:    "tune",
	Summary: "ByteTuning: ECN/PFC watermark tuning by simulated annealing on telemetry feedback",
}

func init() { register(tuneCmd) }
