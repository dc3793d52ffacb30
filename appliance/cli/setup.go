package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/rdma-appliance/appliance/appliance/host"
)

// setupCmd is `appliance setup`: fixes for what `appliance doctor` reports.
var setupCmd = &Command{
	Name:    "setup",
	Summary: "prepare this host for the bare-metal runtime (huge pages)",
	Sub:     []*Command{setupHugepagesCmd},
}

var setupHugepagesCmd = &Command{
	Name:    "hugepages",
	Summary: "reserve N huge pages of a size, globally or on one NUMA node, and verify",
	Usage:   "[--size 2M|1G] [--node N] [--dry-run] [--json] N",
	Long: `Writes N to the size's nr_hugepages in sysfs (globally, or on --node's), reads
it back and reports what the kernel granted. It grants what it can: when
memory is fragmented it reserves fewer pages and the command fails saying so
(1 GiB pages are best reserved at boot: hugepagesz=1G hugepages=N). Writing
needs root; --dry-run prints the file and value it would write.

The reservation does not survive a reboot: put it on the kernel command line
(hugepages=N) or in /etc/sysctl.d (vm.nr_hugepages = N) for that.`,
	Flags: setupHugepagesFlags,
}

type setupHugepagesOptions struct {
	size      string
	node      int
	dry, json bool
	args      []string
}

func setupHugepagesFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o setupHugepagesOptions
	fs.StringVar(&o.size, "size", "2M", "huge page size: 2M or 1G")
	fs.IntVar(&o.node, "node", -1, "NUMA node to reserve on (-1: the global pool, spread by the kernel)")
	fs.BoolVar(&o.dry, "dry-run", false, "print what would be written, write nothing")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	return bind(&o, &o.args, runSetupHugepages)
}

func runSetupHugepages(_ context.Context, env *Env, o setupHugepagesOptions) error {
	if len(o.args) != 1 {
		return Usagef("want one argument: the number of pages")
	}
	n, err := strconv.Atoi(o.args[0])
	if err != nil || n < 0 {
		return Usagef("%q is not a page count", o.args[0])
	}
	kB, err := host.ParseSize(o.size)
	if err != nil {
		return Usagef("%v", err)
	}
	st, err := newHost().SetHugepages(n, kB, o.node, o.dry)
	if err != nil && !errors.Is(err, host.ErrShort) {
		return err
	}
	if o.json {
		if jerr := writeJSON(env.Stdout, st); jerr != nil {
			return jerr
		}
		return err
	}
	where := "globally"
	if st.Node >= 0 {
		where = fmt.Sprintf("on NUMA node %d", st.Node)
	}
	if st.DryRun {
		fmt.Fprintf(env.Stdout, "would write %d to %s (%s pages %s; now %d)\n", n, st.Path,
			host.SizeName(kB), where, st.Before)
		return nil
	}
	fmt.Fprintf(env.Stdout, "%s pages %s: %d before, %d asked, %d reserved (%s)\n", host.SizeName(kB), where,
		st.Before, st.Asked, st.Got, host.SizeName(st.Got*kB))
	return err
}
