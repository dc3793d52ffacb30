// Package host inspects and prepares the machine the appliance's pollers run
// on: reserved huge pages, isolated cores, ports bound to DPDK drivers, RDMA
// devices and the netdevs behind them, PFC/ECN settings, the clock source.
// `appliance doctor` runs its checks and `appliance setup` its fixes.
//
// Everything is read from the sysfs and procfs roots a Host names, so tests
// run every check against a fake tree in a temporary directory; outside tools
// (dcb, mlnx_qos, ethtool) go through functions a test can replace.
package host

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/dpdk/sysfs"
)

// Status is a check's verdict.
type Status string

// The verdicts, from best to worst. FAIL means a service that needs the thing
// will not start or will lose packets; WARN means it runs, but not at its best.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

func (s Status) rank() int {
	switch s {
	case Fail:
		return 2
	case Warn:
		return 1
	}
	return 0
}

// Worse returns the worse of two verdicts.
func Worse(a, b Status) Status {
	if a == "" || b.rank() > a.rank() {
		return b
	}
	return a
}

// Result is one check's outcome: what was found and, when not OK, what to do.
type Result struct {
	Name   string   `json:"name"`
	Status Status   `json:"status"`
	Detail []string `json:"detail"`        // what was found, a line per item
	Fix    []string `json:"fix,omitempty"` // what to do about it, a line per step
}

func (r *Result) set(s Status) { r.Status = Worse(r.Status, s) }

func (r *Result) detail(format string, args ...any) {
	r.Detail = append(r.Detail, fmt.Sprintf(format, args...))
}

func (r *Result) fix(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	for _, f := range r.Fix { // several items may ask for the same step
		if f == line {
			return
		}
	}
	r.Fix = append(r.Fix, line)
}

// Host is the machine as its file systems and tools show it.
type Host struct {
	// Sys is the sysfs mount. Netdevs are listed through dpdk/sysfs, which
	// reads sysfs.Root: keep the two equal (New does).
	Sys string
	// Proc is the procfs mount.
	Proc string
	// LookPath finds a tool (exec.LookPath by default).
	LookPath func(string) (string, error)
	// Run runs a tool and returns its output (stdout and stderr).
	Run func(ctx context.Context, name string, args ...string) ([]byte, error)
}

// New describes the running machine.
func New() *Host {
	return &Host{Sys: sysfs.Root, Proc: "/proc", LookPath: exec.LookPath, Run: runTool}
}

// toolTimeout bounds one tool run: a hung driver query must not hang doctor.
const toolTimeout = 5 * time.Second

func runTool(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

func (h *Host) sys(p ...string) string  { return filepath.Join(append([]string{h.Sys}, p...)...) }
func (h *Host) proc(p ...string) string { return filepath.Join(append([]string{h.Proc}, p...)...) }

func readString(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func readInt(path string) (int, bool) {
	s, ok := readString(path)
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(s)
	return v, err == nil
}

func dirNames(path string) []string {
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// Check is one named check.
type Check struct {
	Name string
	Run  func(h *Host, ctx context.Context) Result
}

// Checks are doctor's checks, in the order it prints them.
var Checks = []Check{
	{"hugepages", (*Host).CheckHugepages},
	{"isolated-cores", (*Host).CheckIsolatedCores},
	{"nics", (*Host).CheckNICs},
	{"dpdk-ports", (*Host).CheckDPDKPorts},
	{"rdma", (*Host).CheckRDMA},
	{"pfc-ecn", (*Host).CheckPFCECN},
	{"clocksource", (*Host).CheckClockSource},
}

// RunAll runs every check.
func (h *Host) RunAll(ctx context.Context) []Result {
	out := make([]Result, 0, len(Checks))
	for _, c := range Checks {
		r := c.Run(h, ctx)
		r.Name = c.Name
		if r.Status == "" {
			r.Status = OK
		}
		out = append(out, r)
	}
	return out
}

// Overall is the worst verdict of rs.
func Overall(rs []Result) Status {
	s := OK
	for _, r := range rs {
		s = Worse(s, r.Status)
	}
	return s
}
