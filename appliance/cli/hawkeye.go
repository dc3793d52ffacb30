package cli

var hawkeyeCmd = &Command{Name: "hawkeye", Summary: "Hawkeye: PFC-aware telemetry, causality tracing and provenance diagnosis",
	Sub: []*Command{hawkeyeAgentCmd, hawkeyeDiagnoseCmd, hawkeyeEvalCmd, hawkeyeMergeCmd, hawkeyeSwitchCPUCmd}}
