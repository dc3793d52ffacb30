// Package ns3 runs the fabric simulator's benchmark scenario in ns-3, the
// simulator Hawkeye, ByteTuning and HPCC were evaluated on, so `make
// bench` can compare bench/fabric with it side by side on the same
// topology and the same flows. The scenario is C++ (scenario/fattree.cc,
// embedded here; in a directory of its own because the go command refuses
// C++ sources beside Go files without cgo): a fat-tree of point-to-point
// links with global ECMP routing carrying the flows of a workload CSV as
// TCP bulk transfers.
// Build compiles it against Debian's ns-3 packages (libns3-dev) and caches
// the binary by source hash; Run runs it and parses its one-line report.
// Stock ns-3 has no PFC, ECN marking or DCQCN, so this is a speed
// reference for the same packet work, not a fidelity reference.
package ns3

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric/workload"
	"github.com/rdma-appliance/appliance/internal/topo"
)

//go:embed scenario/fattree.cc
var fattreeSource []byte

// Packages is what to install on Debian (12) for Build to work: the ns-3
// headers and libraries (3.37; libns3-dev pulls libns3.37 and g++).
const Packages = "libns3-dev g++"

// libs are the ns-3 modules the scenario links, by Debian's library names
// (libns3-<module>.so).
var libs = []string{"core", "network", "internet", "point-to-point", "applications", "traffic-control"}

// compiler is $CXX, or g++.
func compiler() string {
	if cxx := os.Getenv("CXX"); cxx != "" {
		return cxx
	}
	return "g++"
}

// Available says why ns-3 scenarios cannot be built here (no C++ compiler,
// no ns-3 headers, a library missing), or nil when they can.
func Available() error {
	cxx, err := exec.LookPath(compiler())
	if err != nil {
		return fmt.Errorf("ns3: no C++ compiler (%s not found; apt-get install %s)", compiler(), Packages)
	}
	if _, err := headerDir(); err != nil {
		return err
	}
	for _, l := range libs {
		name := "libns3-" + l + ".so"
		out, err := exec.Command(cxx, "-print-file-name="+name).Output()
		p := strings.TrimSpace(string(out))
		// The compiler echoes the bare name when the library is not on
		// its search path.
		if err != nil || !filepath.IsAbs(p) {
			return fmt.Errorf("ns3: %s not found by %s (apt-get install %s)", name, compiler(), Packages)
		}
	}
	return nil
}

// headerDir finds the directory holding ns3/simulator.h.
func headerDir() (string, error) {
	dirs := []string{"/usr/include", "/usr/local/include"}
	if out, err := exec.Command("pkg-config", "--variable=includedir", "ns3-core").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); d != "" {
			dirs = append([]string{d}, dirs...)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "ns3", "simulator.h")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("ns3: ns-3 headers not found (no ns3/simulator.h under %s; apt-get install %s)", strings.Join(dirs, ", "), Packages)
}

// Build compiles the fat-tree scenario and returns the binary's path. The
// source is dir/fattree.cc (dir is this package's scenario directory in
// the source tree), or the copy embedded in this package when dir is "".
// Binaries are cached in the user cache directory under a hash of the
// source, the compiler, the flags and the installed ns-3 library, so only
// the first call after a change pays for compiling.
func Build(ctx context.Context, dir string) (string, error) {
	if err := Available(); err != nil {
		return "", err
	}
	src := fattreeSource
	if dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "fattree.cc"))
		if err != nil {
			return "", fmt.Errorf("ns3: %w", err)
		}
		src = b
	}
	inc, _ := headerDir()
	cxx, _ := exec.LookPath(compiler())
	args := []string{"-O2", "-std=c++17", "-I" + inc, "-x", "c++", "-", "-o"}
	var ldflags []string
	for _, l := range libs {
		ldflags = append(ldflags, "-lns3-"+l)
	}

	h := sha256.New()
	h.Write(src)
	fmt.Fprintf(h, "\x00%s\x00%q\x00%q\x00", cxx, args, ldflags)
	if v, err := exec.CommandContext(ctx, cxx, "--version").Output(); err == nil {
		h.Write(v)
	}
	// A different ns-3 behind the same name (libns3-core.so -> .so.37)
	// needs a new binary.
	if out, err := exec.Command(cxx, "-print-file-name=libns3-core.so").Output(); err == nil {
		if real, err := filepath.EvalSymlinks(strings.TrimSpace(string(out))); err == nil {
			h.Write([]byte(real))
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]

	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cacheDir := filepath.Join(cache, "appliance", "ns3")
	bin := filepath.Join(cacheDir, "fattree-"+sum)
	if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return bin, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("ns3: %w", err)
	}
	// Compile to a temporary name and rename, so a concurrent Build or an
	// interrupted one never leaves a half-written binary under the
	// cached name.
	tmp, err := os.CreateTemp(cacheDir, "fattree-*.tmp")
	if err != nil {
		return "", fmt.Errorf("ns3: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.CommandContext(ctx, cxx, append(append(args, tmp.Name()), ldflags...)...)
	cmd.Stdin = bytes.NewReader(src)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("ns3: compiling fattree.cc: %w", ctx.Err())
		}
		return "", fmt.Errorf("ns3: compiling fattree.cc: %v\n%s", err, tail(out.String(), 40))
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return "", fmt.Errorf("ns3: %w", err)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", fmt.Errorf("ns3: %w", err)
	}
	return bin, nil
}

// Result is what one ns-3 run reports.
type Result struct {
	SimNs   int64         // simulated time reached, ns
	Packets int64         // packets (data and ACKs) received by hosts
	Hops    int64         // packets received by any device: link traversals
	Wall    time.Duration // wall-clock time of the simulation proper
	Setup   time.Duration // wall-clock time building the network and routes
	Flows   int           // flows read from the CSV
	RxBytes int64         // payload bytes the receivers got
}

// HopsPerSec is the packet-hop rate: link traversals simulated per
// wall-clock second, the benchmark's figure of merit.
func (r Result) HopsPerSec() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Hops) / r.Wall.Seconds()
}

// Run runs the scenario binary on a k-ary fat-tree whose links have rate
// bw ("100G", "100Gbps") and delay ("1us"), carrying the flows of
// flowsCSV (as workload.WriteCSV writes them; src and dst are host
// indices, which in topo.FatTree are node indices) for duration of
// simulated time.
func Run(ctx context.Context, bin string, k int, bw string, delay string, flowsCSV string, duration time.Duration) (Result, error) {
	if k < 2 || k%2 != 0 || k > 64 {
		return Result{}, fmt.Errorf("ns3: fat-tree k=%d, want an even number 2..64", k)
	}
	bps, err := topo.ParseBandwidth(bw)
	if err != nil {
		return Result{}, fmt.Errorf("ns3: %w", err)
	}
	if bps != float64(uint64(bps)) {
		return Result{}, fmt.Errorf("ns3: bandwidth %q is not a whole number of bit/s", bw)
	}
	delayNs, err := topo.ParseDelay(delay)
	if err != nil {
		return Result{}, fmt.Errorf("ns3: %w", err)
	}
	if duration <= 0 {
		return Result{}, fmt.Errorf("ns3: duration %v, want a positive time", duration)
	}
	if _, err := os.Stat(flowsCSV); err != nil {
		return Result{}, fmt.Errorf("ns3: flows: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin,
		"--k="+strconv.Itoa(k),
		"--bps="+strconv.FormatUint(uint64(bps), 10),
		"--delay_ns="+strconv.FormatInt(delayNs, 10),
		"--duration_ns="+strconv.FormatInt(duration.Nanoseconds(), 10),
		"--flows="+flowsCSV)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("ns3: %w", ctx.Err())
		}
		return Result{}, fmt.Errorf("ns3: %s: %v\n%s", filepath.Base(bin), err, tail(stderr.String(), 20))
	}
	r, err := parseReport(stdout.String())
	if err != nil {
		return Result{}, fmt.Errorf("%w\nstderr:\n%s", err, tail(stderr.String(), 20))
	}
	return r, nil
}

// RunFlows builds the scenario (cached) and runs it on flows, writing them
// to a temporary CSV: the one call a benchmark needs.
func RunFlows(ctx context.Context, k int, bw string, delay string, flows []workload.Flow, duration time.Duration) (Result, error) {
	bin, err := Build(ctx, "")
	if err != nil {
		return Result{}, err
	}
	f, err := os.CreateTemp("", "ns3-flows-*.csv")
	if err != nil {
		return Result{}, fmt.Errorf("ns3: %w", err)
	}
	defer os.Remove(f.Name())
	if err := workload.WriteCSV(f, flows); err != nil {
		f.Close()
		return Result{}, fmt.Errorf("ns3: %w", err)
	}
	if err := f.Close(); err != nil {
		return Result{}, fmt.Errorf("ns3: %w", err)
	}
	return Run(ctx, bin, k, bw, delay, f.Name(), duration)
}

// parseReport reads the scenario's "ns3 key=value ..." line.
func parseReport(out string) (Result, error) {
	var line string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "ns3 ") {
			line = strings.TrimSpace(l)
		}
	}
	if line == "" {
		return Result{}, fmt.Errorf("ns3: no report line in the output %q", tail(out, 5))
	}
	var r Result
	seen := map[string]bool{}
	for _, kv := range strings.Fields(line)[1:] {
		key, val, ok := strings.Cut(kv, "=")
		if !ok {
			return Result{}, fmt.Errorf("ns3: report %q: %q is not key=value", line, kv)
		}
		v, err := strconv.ParseInt(val, 10, 64)
		if err != nil || v < 0 {
			return Result{}, fmt.Errorf("ns3: report %q: %s=%q is not a count", line, key, val)
		}
		seen[key] = true
		switch key {
		case "sim_ns":
			r.SimNs = v
		case "rx_packets":
			r.Packets = v
		case "hops":
			r.Hops = v
		case "wall_ns":
			r.Wall = time.Duration(v)
		case "setup_ns":
			r.Setup = time.Duration(v)
		case "flows":
			r.Flows = int(v)
		case "rx_bytes":
			r.RxBytes = v
		}
	}
	var missing []string
	for _, k := range []string{"sim_ns", "rx_packets", "hops", "wall_ns"} {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return Result{}, errors.New("ns3: report " + strconv.Quote(line) + " lacks " + strings.Join(missing, ", "))
	}
	return r, nil
}

// tail keeps the last n lines of s, for error messages.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
