package host

import (
	"context"
	"strings"

	"github.com/rdma-appliance/appliance/dpdk"
)

// kernelParam returns the value of name=VALUE on the kernel command line.
func (h *Host) kernelParam(name string) (string, bool) {
	s, ok := readString(h.proc("cmdline"))
	if !ok {
		return "", false
	}
	for _, f := range strings.Fields(s) {
		if f == "--" { // what follows belongs to init
			break
		}
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// coreSet reads a sysfs CPU list ("2-5,8"); empty means none.
func coreSet(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	return dpdk.ParseCoreList(s)
}

func sameCores(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// CheckIsolatedCores warns when no core is isolated: a poller pinned to a core
// the scheduler also hands to other tasks and interrupts loses packets when
// it is preempted. nohz_full should cover the same cores so the tick does not
// interrupt the poll loops either.
func (h *Host) CheckIsolatedCores(_ context.Context) Result {
	var r Result
	r.set(OK)
	online, _ := readString(h.sys("devices/system/cpu/online"))
	if online != "" {
		r.detail("online cores: %s", online)
	}
	isoStr, ok := readString(h.sys("devices/system/cpu/isolated"))
	if !ok {
		r.set(Warn)
		r.detail("%s is unreadable", h.sys("devices/system/cpu/isolated"))
		return r
	}
	iso, err := coreSet(isoStr)
	if err != nil {
		r.set(Warn)
		r.detail("isolated: %q does not parse: %v", isoStr, err)
		return r
	}
	nohzStr, _ := readString(h.sys("devices/system/cpu/nohz_full"))
	nohz, _ := coreSet(nohzStr)
	if nohzStr == "(null)" { // how kernels print an empty nohz_full mask
		nohz = nil
	}
	if len(iso) == 0 {
		r.set(Warn)
		r.detail("no isolated cores: pinned pollers share their cores with the scheduler and interrupts")
		r.fix("isolate the poller cores on the kernel command line, e.g. isolcpus=2-7 nohz_full=2-7 rcu_nocbs=2-7 (on the NIC's NUMA node: appliance ports), reboot, then give those cores to --cores")
		return r
	}
	r.detail("isolated cores: %s", isoStr)
	if len(nohz) == 0 {
		r.set(Warn)
		r.detail("nohz_full: none: the scheduler tick still interrupts the isolated cores")
		r.fix("add nohz_full=%s rcu_nocbs=%s to the kernel command line", isoStr, isoStr)
	} else if !sameCores(iso, nohz) {
		r.set(Warn)
		r.detail("nohz_full cores %s differ from the isolated cores %s", nohzStr, isoStr)
		r.fix("make nohz_full= and isolcpus= name the same cores")
	} else {
		r.detail("nohz_full cores: %s", nohzStr)
	}
	if v, ok := h.kernelParam("isolcpus"); ok {
		r.detail("kernel command line: isolcpus=%s", v)
	}
	return r
}

// CheckClockSource warns unless the clock source is the TSC: every timestamp
// the services take (pcap times, NACK latencies, probe delays) is a clock
// read in the hot path, and other sources (hpet, acpi_pm, a hypervisor's
// clock) cost hundreds of nanoseconds to microseconds each.
func (h *Host) CheckClockSource(_ context.Context) Result {
	var r Result
	r.set(OK)
	base := h.sys("devices/system/clocksource/clocksource0")
	cur, ok := readString(base + "/current_clocksource")
	if !ok {
		r.set(Warn)
		r.detail("%s/current_clocksource is unreadable", base)
		return r
	}
	avail, _ := readString(base + "/available_clocksource")
	r.detail("current: %s", cur)
	if avail != "" {
		r.detail("available: %s", avail)
	}
	if cur == "tsc" {
		return r
	}
	r.set(Warn)
	r.detail("the clock source is %s, not tsc: clock reads in the poll loops are slow", cur)
	if strings.Contains(" "+avail+" ", " tsc ") {
		r.fix("echo tsc > %s/current_clocksource (and clocksource=tsc tsc=reliable on the kernel command line to keep it)", base)
	} else {
		r.fix("the kernel does not offer tsc (it judged the TSC unstable): check the BIOS for an invariant TSC; tsc=reliable on the kernel command line forces it")
	}
	return r
}
