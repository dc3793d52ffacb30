package cli

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk"
	"github.com/rdma-appliance/appliance/internal/service"
)

// version is set at link time: -ldflags "-X github.com/rdma-appliance/appliance/appliance/cli.version=v1.2.3".
var version = ""

// Version returns the appliance version: the link-time value, else the module
// version or VCS revision recorded in the binary.
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}

var versionCmd = &Command{
	Name:    "version",
	Summary: "print the version, Go version, build tags and port drivers",
	Usage:   "",
	Flags:   versionFlags,
}

// The services report the version in /healthz.
func init() { service.Version = Version() }

type versionOptions struct{ args []string }

func versionFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o versionOptions
	return bind(&o, &o.args, runVersion)
}

func runVersion(_ context.Context, env *Env, o versionOptions) error {
	if len(o.args) > 0 {
		return Usagef("version takes no arguments")
	}
	var tags []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-tags" && s.Value != "" {
				tags = strings.Split(s.Value, ",")
			}
		}
	}
	fmt.Fprintf(env.Stdout, "appliance %s\n%s %s/%s\nbuild tags: %s\nport drivers: %s\n",
		Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH, orNone(tags), strings.Join(dpdk.Drivers(), ", "))
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}
