package cli

// meshCmd is `appliance mesh`: Hostmesh, full-mesh probing between the
// RNICs of one host. Each subcommand's file (mesh_probe.go,
// mesh_analyze.go, mesh_eval.go) adds itself to its Sub in init.
var meshCmd = &Command{
	Name:    "mesh",
	Summary: "Hostmesh: probe between a host's RNICs over UD, analyze, evaluate in the simulator",
}

func init() { register(meshCmd) }
