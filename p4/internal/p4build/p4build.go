// Package p4build compiles the TNA programs under p4/ with the Tofino
// compiler bf-p4c (../shared/tools/bf-p4c beside the repository, on
// developer and CI machines only) and reads what it writes: the one-line
// resource summary of its check.sh and the bfrt.json the control planes'
// scripts are checked against. Results are cached by the program's bytes,
// the build flags, the target and the compiler, so make p4check and the Go
// tests that need bfrt.json compile each build once per machine.
package p4build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Tools are the checkers beside the repository.
type Tools struct {
	Dir string // ../shared/tools
}

// ErrNoTools says the tools are not beside the repository: the check is
// skipped, not failed.
var ErrNoTools = errors.New("p4build: ../shared/tools not found (the P4 tools ship only beside the repository on developer and CI machines)")

// Root is the module's root: the directory holding go.mod, found from the
// working directory upwards.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("p4build: no go.mod above the working directory")
		}
		dir = up
	}
}

// FindTools returns the tools beside the module root, or ErrNoTools.
func FindTools(root string) (Tools, error) {
	dir := filepath.Join(filepath.Dir(root), "shared", "tools")
	for _, f := range []string{"p4c/check.sh", "bf-p4c/check.sh", "p4testgen/gen.sh"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return Tools{}, fmt.Errorf("%w: no %s", ErrNoTools, filepath.Join(dir, f))
		}
	}
	if _, err := exec.LookPath("cpp"); err != nil {
		return Tools{}, fmt.Errorf("%w: cpp (the C preprocessor the P4 compilers run) is not installed", ErrNoTools)
	}
	return Tools{Dir: dir}, nil
}

// FrontEnd is p4c's front-end checker.
func (t Tools) FrontEnd() string { return filepath.Join(t.Dir, "p4c", "check.sh") }

// BfP4c is bf-p4c's check.sh.
func (t Tools) BfP4c() string { return filepath.Join(t.Dir, "bf-p4c", "check.sh") }

// Testgen is p4testgen's gen.sh.
func (t Tools) Testgen() string { return filepath.Join(t.Dir, "p4testgen", "gen.sh") }

// Build is one way of compiling a program: its flags (-DNAME) and target.
type Build struct {
	Prog   string   // path of the .p4 file
	Flags  []string // -D flags
	Target int      // 1 (Tofino 1, tna) or 2 (Tofino 2)
}

// Includes are the include directories a program under p4/ is compiled
// with: its own directory and p4/.
func Includes(prog string) []string {
	dir := filepath.Dir(prog)
	return []string{dir, filepath.Dir(dir)}
}

// Result is what bf-p4c said of a build.
type Result struct {
	// Fits is set when check.sh exited 0: the program compiled and its
	// table placement fits the chip's stages.
	Fits bool `json:"fits"`
	// Summary is check.sh's one-line summary (OK or "does not fit").
	Summary string `json:"summary"`
	// Errors are the compiler's messages when it did not fit.
	Errors string `json:"errors,omitempty"`
	// Seconds is how long the compile took (0 from the cache).
	Seconds float64 `json:"seconds"`
	// Dir holds bfrt.json (and the summary) in the cache.
	Dir string `json:"-"`
	// Cached says the result came from the cache.
	Cached bool `json:"-"`
}

// Resources is a summary line read into numbers.
type Resources struct {
	Stages, MaxStages, Ingress, Egress int
	Tables                             int
	// PHV is the containers used by kind ("normal", "T-PHV", "mocha",
	// "dark"), in the summary's order, as "used/total".
	PHV         []PHVUse
	SRAM, SRAM2 int // used, total
	TCAM, TCAM2 int
}

// PHVUse is one kind of PHV container's use.
type PHVUse struct {
	Kind        string
	Used, Total int
}

var (
	stagesRE = regexp.MustCompile(`stages (\d+)/(\d+) \(ingress (\d+), egress (\d+)\)`)
	tablesRE = regexp.MustCompile(`tables (\d+)`)
	phvRE    = regexp.MustCompile(`(PHV normal|T-PHV|mocha|dark) (\d+)/(\d+)`)
	sramRE   = regexp.MustCompile(`SRAM (\d+)/(\d+)`)
	tcamRE   = regexp.MustCompile(`TCAM (\d+)/(\d+)`)
)

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// ParseSummary reads check.sh's summary line (OK or REJECTED ... does not
// fit, which names stages and tables only).
func ParseSummary(s string) (Resources, error) {
	var r Resources
	m := stagesRE.FindStringSubmatch(s)
	if m == nil {
		return r, fmt.Errorf("p4build: no stage count in %q", s)
	}
	r.Stages, r.MaxStages, r.Ingress, r.Egress = atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4])
	if m := tablesRE.FindStringSubmatch(s); m != nil {
		r.Tables = atoi(m[1])
	}
	for _, m := range phvRE.FindAllStringSubmatch(s, -1) {
		kind := strings.TrimPrefix(m[1], "PHV ")
		r.PHV = append(r.PHV, PHVUse{Kind: kind, Used: atoi(m[2]), Total: atoi(m[3])})
	}
	if m := sramRE.FindStringSubmatch(s); m != nil {
		r.SRAM, r.SRAM2 = atoi(m[1]), atoi(m[2])
	}
	if m := tcamRE.FindStringSubmatch(s); m != nil {
		r.TCAM, r.TCAM2 = atoi(m[1]), atoi(m[2])
	}
	return r, nil
}

// CacheDir is where compile results are kept:
// $P4CHECK_CACHE, else $XDG_CACHE_HOME/appliance-p4check, else
// ~/.cache/appliance-p4check.
func CacheDir() string {
	if d := os.Getenv("P4CHECK_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "appliance-p4check")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cache", "appliance-p4check")
	}
	return filepath.Join(os.TempDir(), "appliance-p4check")
}

var (
	compilerIDOnce sync.Once
	compilerID     string
	compilerIDErr  error
)

// compiler identifies the compiler and its wrapper, so a new build of
// either invalidates the cache.
func (t Tools) compiler() (string, error) {
	compilerIDOnce.Do(func() {
		h := sha256.New()
		for _, f := range []string{"bf-p4c/check.sh", "bf-p4c/bin/p4c-barefoot.zst", "bf-p4c/bin/p4c-barefoot"} {
			fh, err := os.Open(filepath.Join(t.Dir, f))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				compilerIDErr = err
				return
			}
			_, err = io.Copy(h, fh)
			fh.Close()
			if err != nil {
				compilerIDErr = err
				return
			}
		}
		compilerID = hex.EncodeToString(h.Sum(nil))
	})
	return compilerID, compilerIDErr
}

// Key names a build's cache entry: the program's bytes, its flags and
// target, and the compiler.
func (t Tools) Key(b Build) (string, error) {
	src, err := os.ReadFile(b.Prog)
	if err != nil {
		return "", err
	}
	cid, err := t.compiler()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "p4build v1\n%s\n%d\n%s\n%x\n", cid, b.Target, strings.Join(b.Flags, " "), sha256.Sum256(src))
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// Compile returns bf-p4c's result for b, from the cache when the same
// program, flags, target and compiler were compiled before.
func (t Tools) Compile(b Build) (Result, error) {
	key, err := t.Key(b)
	if err != nil {
		return Result{}, err
	}
	dir := filepath.Join(CacheDir(), key)
	if r, err := readResult(dir); err == nil {
		r.Cached = true
		return r, nil
	}
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return Result{}, err
	}
	tmp, err := os.MkdirTemp(CacheDir(), key+".tmp")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "out")
	args := append([]string{b.Prog}, Includes(b.Prog)...)
	args = append(args, b.Flags...)
	cmd := exec.Command(t.BfP4c(), args...)
	cmd.Env = append(os.Environ(), "BF_P4C_OUT="+out, "BF_P4C_QUIET=1", fmt.Sprintf("TOFINO_TARGET=%d", b.Target))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	r := Result{Seconds: time.Since(start).Seconds()}
	var exit *exec.ExitError
	switch {
	case err == nil:
		r.Fits = true
		r.Summary = strings.TrimSpace(stdout.String())
		if strings.Contains(r.Summary, "check.sh: SKIP") {
			return Result{}, fmt.Errorf("%w: %s", ErrNoTools, r.Summary)
		}
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		// Rejected: the program does not compile or does not fit. The
		// verdict is cached like a success, so a build known not to fit
		// is not compiled again.
		r.Errors = lastLines(stderr.String(), 40)
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.HasPrefix(l, "check.sh: REJECTED") {
				r.Summary = strings.TrimSpace(l)
			}
		}
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		return Result{}, fmt.Errorf("%w: %s", ErrNoTools, lastLines(stderr.String(), 3))
	default:
		return Result{}, fmt.Errorf("p4build: %s %v: %v\n%s", t.BfP4c(), args, err, lastLines(stderr.String(), 40))
	}
	if err := os.MkdirAll(filepath.Join(tmp, "keep"), 0o755); err != nil {
		return Result{}, err
	}
	if r.Fits {
		if err := os.Rename(filepath.Join(out, "bfrt.json"), filepath.Join(tmp, "keep", "bfrt.json")); err != nil {
			return Result{}, err
		}
	}
	js, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "keep", "result.json"), js, 0o644); err != nil {
		return Result{}, err
	}
	// Another process may have filled the entry meanwhile: either copy
	// is the same.
	if err := os.Rename(filepath.Join(tmp, "keep"), dir); err != nil {
		if r2, err2 := readResult(dir); err2 == nil {
			r2.Seconds = r.Seconds
			return r2, nil
		}
		return Result{}, err
	}
	r.Dir = dir
	r.Summary = cleanSummary(r.Summary)
	return r, nil
}

func readResult(dir string) (Result, error) {
	var r Result
	js, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(js, &r); err != nil {
		return r, err
	}
	r.Dir, r.Seconds = dir, 0
	r.Summary = cleanSummary(r.Summary)
	return r, nil
}

var (
	outputInRE = regexp.MustCompile(`; output in \S+$`)
	secondsRE  = regexp.MustCompile(`, \d+s\)`)
)

// cleanSummary drops what differs between two compiles of the same
// build: the output directory check.sh names and the compile time.
func cleanSummary(s string) string {
	return secondsRE.ReplaceAllString(outputInRE.ReplaceAllString(s, ""), ")")
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
