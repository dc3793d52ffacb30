package cli

// meshCmd is `appliance mesh`: Hostmesh, full-mesh probing between the
// RNICs of one host.
var meshCmd = &Command{
	Name:    "mesh",
	Summary: "Hostmesh: probe between a host's RNICs over UD, analyze, evaluate in the simulator",
	Sub:     []*Command{meshAnalyzeCmd, meshEvalCmd, meshMergeCmd, meshPGDropCmd, meshProbeCmd},
}
