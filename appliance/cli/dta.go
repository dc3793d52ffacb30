package cli

// dtaCmd is `appliance dta`: Direct Telemetry Access. Each subcommand's
// file (dta_collect.go, dta_query.go, dta_translate.go, dta_report.go)
// adds itself to its Sub in init.
var dtaCmd = &Command{
	Name:    "dta",
	Summary: "DTA: collectors, translators and reporters of Direct Telemetry Access",
}

func init() { register(dtaCmd) }
