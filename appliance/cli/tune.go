package cli

// tuneCmd is `appliance tune`: ByteTuning, ECN/PFC watermark tuning with
// simulated annealing on telemetry feedback.
var tuneCmd = &Command{
	Name:    "tune",
	Summary: "ByteTuning: ECN/PFC watermark tuning by simulated annealing on telemetry feedback",
	Sub:     []*Command{tuneBenchCmd, tuneDiscriminateCmd, tuneMergeCmd, tuneOnlineCmd, tunePaperCmd, tuneRunCmd},
}
