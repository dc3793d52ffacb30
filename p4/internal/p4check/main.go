// Command p4check checks every TNA program under p4/ with the tools beside
// the repository (../shared/tools): p4c's front end first (fast), then
// bf-p4c for Tofino 1 and Tofino 2, every build each program declares
// (see p4build.Variant); it keeps the resource table in README.md and the
// p4testgen STF tests under each program's testdata in step with the
// programs. p4/check.sh runs it.
//
//	p4check           check: fail when a program does not compile or fit,
//	                  or when the README table or a test set is stale
//	p4check -update   rewrite the README table and regenerate the stale
//	                  test sets (make p4check)
//
// Without ../shared it says so and exits 0.
package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/rdma-appliance/appliance/p4/internal/p4build"
)

func main() {
	update := flag.Bool("update", false, "rewrite README.md's table and regenerate stale p4testgen tests")
	jobs := flag.Int("j", runtime.NumCPU(), "compiles at once")
	flag.Parse()
	start := time.Now()
	ok, err := run(*update, *jobs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "p4check:", err)
		os.Exit(1)
	}
	fmt.Printf("p4check: %s in %.0fs\n", map[bool]string{true: "ok", false: "FAILED"}[ok], time.Since(start).Seconds())
	if !ok {
		os.Exit(1)
	}
}

func run(update bool, jobs int) (bool, error) {
	root, err := p4build.Root()
	if err != nil {
		return false, err
	}
	tools, err := p4build.FindTools(root)
	if errors.Is(err, p4build.ErrNoTools) {
		fmt.Printf("p4check: skipped: %v\n", err)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	progs, err := p4build.Programs(root)
	if err != nil {
		return false, err
	}
	if len(progs) == 0 {
		fmt.Println("p4check: no P4 programs under p4/")
		return true, nil
	}
	if err := os.Chdir(root); err != nil {
		return false, err
	}
	ok := frontEnd(tools, progs)
	if !ok {
		return false, nil
	}
	results, ok2 := backEnd(tools, progs, jobs)
	ok = ok && ok2
	sets, ok3, err := testSets(tools, progs, update)
	if err != nil {
		return false, err
	}
	ok = ok && ok3
	ok5, err := saveResults(filepath.Join(root, ResultsFile), results, update)
	if err != nil {
		return false, err
	}
	table := Table(progs, results, sets)
	ok4, err := readme(filepath.Join(root, "README.md"), table, update)
	if err != nil {
		return false, err
	}
	return ok && ok4 && ok5, nil
}

// frontEnd runs p4c's front end on every build: seconds for all of them,
// so a plain error shows before the long compiles.
func frontEnd(tools p4build.Tools, progs []p4build.Program) bool {
	ok := true
	for _, p := range progs {
		for _, v := range p.Variants {
			args := append(append([]string{p.Path}, p4build.Includes(p.Path)...), v.Flags...)
			out, err := exec.Command(tools.FrontEnd(), args...).CombinedOutput()
			if err != nil {
				fmt.Printf("p4check: front end FAIL %s %s\n%s", p.Path, v.FlagString(), out)
				ok = false
				continue
			}
			fmt.Printf("p4check: front end ok   %s %s\n", p.Path, v.FlagString())
		}
	}
	return ok
}

// BuildKey names one compile: program, variant, target.
type BuildKey struct {
	Prog    string
	Variant string
	Target  int
}

// backEnd compiles every build for every target, jobs at a time.
func backEnd(tools p4build.Tools, progs []p4build.Program, jobs int) (map[BuildKey]p4build.Result, bool) {
	type job struct {
		key   BuildKey
		build p4build.Build
		nofit bool
	}
	var all []job
	for _, p := range progs {
		for _, v := range p.Variants {
			for _, t := range v.Targets {
				all = append(all, job{BuildKey{p.Path, v.FlagString(), t}, p4build.Build{Prog: p.Path, Flags: v.Flags, Target: t},
					slices.Contains(v.NoFit, t)})
			}
		}
	}
	results := map[BuildKey]p4build.Result{}
	var mu sync.Mutex
	ok := true
	ch := make(chan job)
	var wg sync.WaitGroup
	for range max(jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				r, err := tools.Compile(j.build)
				mu.Lock()
				name := fmt.Sprintf("%s %s tofino%d", j.key.Prog, j.key.Variant, j.key.Target)
				when := "cached"
				if !r.Cached {
					when = fmt.Sprintf("%.0fs", r.Seconds)
				}
				switch {
				case err != nil:
					fmt.Printf("p4check: bf-p4c   FAIL %s: %v\n", name, err)
					ok = false
				case r.Fits && j.nofit:
					// Better than declared: the README shows it, and the
					// directive should go.
					fmt.Printf("p4check: bf-p4c   ok   %s (%s), declared nofit: drop the directive\n", name, when)
					results[j.key] = r
				case r.Fits:
					fmt.Printf("p4check: bf-p4c   ok   %s (%s)\n", name, when)
					results[j.key] = r
				case j.nofit:
					fmt.Printf("p4check: bf-p4c   nofit %s (%s), as declared: %s\n", name, when, r.Summary)
					results[j.key] = r
				default:
					fmt.Printf("p4check: bf-p4c   FAIL %s (%s)\n%s\n", name, when, r.Errors)
					ok = false
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range all {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return results, ok
}

// ResultsFile keeps bf-p4c's verdicts of the README's table, so that
// TestREADME renders the table again where the compiler is not.
const ResultsFile = "p4/internal/p4check/testdata/bf-p4c.json"

type savedResult struct {
	Prog    string `json:"prog"`
	Variant string `json:"build"`
	Target  int    `json:"tofino"`
	Fits    bool   `json:"fits"`
	Summary string `json:"summary"`
}

// saveResults checks (or, with update, rewrites) ResultsFile.
func saveResults(path string, results map[BuildKey]p4build.Result, update bool) (bool, error) {
	var out []savedResult
	for k, r := range results {
		out = append(out, savedResult{k.Prog, k.Variant, k.Target, r.Fits, r.Summary})
	}
	slices.SortFunc(out, func(a, b savedResult) int {
		return cmp.Or(cmp.Compare(a.Prog, b.Prog), cmp.Compare(a.Variant, b.Variant), cmp.Compare(a.Target, b.Target))
	})
	js, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return false, err
	}
	js = append(js, '\n')
	old, _ := os.ReadFile(path)
	if bytes.Equal(old, js) {
		return true, nil
	}
	if update {
		fmt.Printf("p4check: %s rewritten\n", path)
		return true, os.WriteFile(path, js, 0o644)
	}
	fmt.Printf("p4check: FAIL %s is stale: run make p4check\n", path)
	return false, nil
}

// LoadResults reads ResultsFile.
func LoadResults(path string) (map[BuildKey]p4build.Result, error) {
	js, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var saved []savedResult
	if err := json.Unmarshal(js, &saved); err != nil {
		return nil, err
	}
	out := map[BuildKey]p4build.Result{}
	for _, r := range saved {
		out[BuildKey{r.Prog, r.Variant, r.Target}] = p4build.Result{Fits: r.Fits, Summary: r.Summary}
	}
	return out, nil
}

// readme checks (or, with update, rewrites) the generated block of path.
func readme(path, table string, update bool) (bool, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	got, err := ReplaceBlock(src, table)
	if err != nil {
		return false, fmt.Errorf("%s: %v", path, err)
	}
	if bytes.Equal(got, src) {
		fmt.Println("p4check: README.md table up to date")
		return true, nil
	}
	if update {
		fmt.Println("p4check: README.md table rewritten")
		return true, os.WriteFile(path, got, 0o644)
	}
	fmt.Println("p4check: FAIL README.md's resource table is stale: run make p4check")
	return false, nil
}

// Markers of README.md's generated block.
const (
	BeginMark = "<!-- p4check: begin (make p4check writes this table; do not edit) -->"
	EndMark   = "<!-- p4check: end -->"
)

// ReplaceBlock puts block between the markers of src.
func ReplaceBlock(src []byte, block string) ([]byte, error) {
	i := bytes.Index(src, []byte(BeginMark))
	j := bytes.Index(src, []byte(EndMark))
	if i < 0 || j < i {
		return nil, fmt.Errorf("no %q ... %q block", BeginMark, EndMark)
	}
	var out bytes.Buffer
	out.Write(src[:i+len(BeginMark)])
	out.WriteString("\n")
	out.WriteString(block)
	out.Write(src[j:])
	return out.Bytes(), nil
}

func sha(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }
