package cli

// dtaCmd is `appliance dta`: Direct Telemetry Access.
var dtaCmd = &Command{
	Name:    "dta",
	Summary: "DTA: collectors, translators and reporters of Direct Telemetry Access",
	Sub:     []*Command{dtaCollectCmd, dtaQueryCmd, dtaReportCmd, dtaSwitchCPUCmd, dtaTofinoCmd, dtaTranslateCmd},
}
