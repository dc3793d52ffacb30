package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-appliance/appliance/p4/internal/p4build"
	"github.com/rdma-appliance/appliance/p4/stf"
)

// How the committed test sets are generated: P4Testgen's Tofino target,
// seed 1 (gen.sh's default), tests spread over statements, once with the
// STF back end and once with the PTF one. The PTF back end lets the test
// choose register contents (it writes them through bfrt), so paths that
// depend on a register (ITER, sequence numbers, flow slots) are explored;
// the STF back end cannot set registers and treats what a register returns
// as unknown.
//
// The programs are preprocessed with -DP4TESTGEN (TestgenDefine): where
// P4Testgen's Tofino model is known to be wrong about a construct, a
// program reads, under that macro, the value the switch has on every path
// P4Testgen can take (egress_rid, which it misreads, is 0 for the unicast
// packets it follows into egress; see translator.p4's EGRESS_RID).
//
// TestCount tests per back end, or the count a program asks for
// (p4build.Program.Tests), from the input ports it names
// (p4build.Program.Ports; translator.p4's STF tests come in by its
// -DP4TESTGEN harness's ports, which stand for the mirror sessions and
// multicast groups P4Testgen does not follow, its PTF tests by the
// others).
const (
	TestCount     = 100
	PathPolicy    = "GREEDY_STATEMENT_SEARCH"
	TestgenDefine = "-DP4TESTGEN"
)

// Backends are P4Testgen's back ends the sets are generated with.
var Backends = []string{"STF", "PTF"}

// TestSet is a program's committed p4testgen tests, per back end.
type TestSet struct {
	Dir   string
	Parts map[string]*SetPart // by back end
	// Statements is how many statements P4Testgen counts in the program
	// (Lo..Hi: derived from the coverage it prints with two digits);
	// Neither the statements no test of either back end reaches.
	StatementsLo, StatementsHi int
	Neither                    []string
}

// SetPart is one back end's tests.
type SetPart struct {
	Tests    int
	Outputs  int     // tests that expect an output packet
	Coverage float64 // statement coverage P4Testgen reports
	// Uncovered are the statements its tests do not reach, as P4Testgen
	// prints them ("file\line: statement").
	Uncovered []string
}

// testCount is how many tests p's set of back end b is generated with.
func testCount(p p4build.Program, b string) int {
	if n := p.Tests[b]; n > 0 {
		return n
	}
	return TestCount
}

// SetDir is where a program's tests live: its package's
// testdata/p4testgen/<name>.
func SetDir(p p4build.Program) string {
	return filepath.Join(p.Package(), "testdata", "p4testgen", p.Name())
}

// stamp names what a set was generated from; a set whose stamp differs
// from the program's is stale.
func stamp(p p4build.Program) (string, error) {
	src, err := os.ReadFile(p.Path)
	if err != nil {
		return "", err
	}
	s := fmt.Sprintf("p4testgen tests of %s (make p4check regenerates them when the program changes)\n"+
		"program sha256 %s\nback ends %s: gen.sh %s OUT %d %s %s -- --path-selection %s --print-coverage\n",
		p.Path, sha(src), strings.Join(Backends, ", "), p.Path, TestCount, strings.Join(p4build.Includes(p.Path), " "), TestgenDefine,
		PathPolicy)
	// What a program's directives change, so that the stamps of the
	// others stay as they were.
	for _, b := range Backends {
		if n := testCount(p, b); n != TestCount {
			s += fmt.Sprintf("%s: %d tests\n", b, n)
		}
		if r := p.Ports[b]; r != "" {
			s += fmt.Sprintf("%s: --port-ranges %s\n", b, r)
		}
	}
	return s, nil
}

// testSets checks every program's test set against its stamp, or with
// update regenerates the stale ones.
func testSets(tools p4build.Tools, progs []p4build.Program, update bool) (map[string]TestSet, bool, error) {
	sets := map[string]TestSet{}
	ok := true
	for _, p := range progs {
		dir := SetDir(p)
		want, err := stamp(p)
		if err != nil {
			return nil, false, err
		}
		got, _ := os.ReadFile(filepath.Join(dir, "STAMP"))
		if string(got) != want {
			if !update {
				fmt.Printf("p4check: FAIL %s: its p4testgen tests are stale: run make p4check\n", p.Path)
				ok = false
			} else if err := generate(tools, p, dir, want); err != nil {
				return nil, false, err
			}
		}
		s, err := ReadSet(dir, p.Name())
		if err != nil {
			if !update && os.IsNotExist(err) {
				continue
			}
			return nil, false, err
		}
		sets[p.Path] = s
		for _, b := range Backends {
			sp := s.Parts[b]
			fmt.Printf("p4check: p4testgen %s %s: %d tests, %d with output, coverage %.2f\n", p.Path, b, sp.Tests, sp.Outputs, sp.Coverage)
		}
	}
	return sets, ok, nil
}

func generate(tools p4build.Tools, p p4build.Program, dir, stampText string) error {
	tmp := dir + ".new"
	os.RemoveAll(tmp)
	for _, b := range Backends {
		out := tmp
		if b == "PTF" {
			out = filepath.Join(tmp, "ptf")
		}
		args := append([]string{p.Path, out, strconv.Itoa(testCount(p, b))}, p4build.Includes(p.Path)...)
		args = append(args, TestgenDefine, "--", "--path-selection", PathPolicy, "--print-coverage")
		if b == "PTF" {
			args = append(args, "--test-name", p.Name())
		}
		if r := p.Ports[b]; r != "" {
			args = append(args, "--port-ranges", r)
		}
		cmd := exec.Command(tools.Testgen(), args...)
		cmd.Env = append(os.Environ(), "P4TESTGEN_BACKEND="+b)
		log, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("p4testgen %s %s: %v\n%s", b, p.Path, err, log)
		}
		if err := os.WriteFile(filepath.Join(tmp, "uncovered-"+strings.ToLower(b)+".txt"),
			[]byte(strings.Join(lastUncovered(string(log)), "\n")+"\n"), 0o644); err != nil {
			return err
		}
		if b == "PTF" {
			// One file; its paths name the output directory, which is
			// the test's name on a switch: make it the set's.
			src, err := os.ReadFile(filepath.Join(out, p.Name()+".py"))
			if err != nil {
				return err
			}
			src = []byte(strings.ReplaceAll(string(src), out+"/"+p.Name(), p.Name()))
			if err := os.WriteFile(filepath.Join(tmp, p.Name()+".py"), src, 0o644); err != nil {
				return err
			}
			if err := os.RemoveAll(out); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "STAMP"), []byte(stampText), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	fmt.Printf("p4check: p4testgen %s: regenerated\n", p.Path)
	return os.Rename(tmp, dir)
}

// lastUncovered reads P4Testgen's last "Not covered program nodes" list
// (--print-coverage prints one after every test): one line per
// statement, a statement's continuation lines joined to it.
func lastUncovered(log string) []string {
	var cur []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "Not covered program nodes:":
			cur, in = nil, true
		case !in:
		case strings.HasPrefix(l, "\t") && strings.Contains(l, ".p4\\"):
			cur = append(cur, strings.TrimSpace(l))
		case strings.HasPrefix(l, " ") && len(cur) > 0:
			cur[len(cur)-1] += " " + strings.TrimSpace(l)
		default:
			in = false
		}
	}
	return cur
}

var coverageRE = regexp.MustCompile(`(?m)^\s*# Current statement coverage: ([0-9.]+)`)

// ReadSet reads a committed test set's figures.
func ReadSet(dir, name string) (TestSet, error) {
	s := TestSet{Dir: dir, Parts: map[string]*SetPart{}}
	tests, err := stf.Load(dir)
	if err != nil {
		if _, serr := os.Stat(dir); os.IsNotExist(serr) {
			return s, serr
		}
		return s, err
	}
	for _, b := range Backends {
		sp := &SetPart{}
		s.Parts[b] = sp
		var srcs []string
		if b == "STF" {
			files, _ := filepath.Glob(filepath.Join(dir, "*.stf"))
			srcs = append(srcs, files...)
		} else {
			srcs = []string{filepath.Join(dir, name+".py")}
		}
		for _, f := range srcs {
			src, err := os.ReadFile(f)
			if err != nil {
				return s, err
			}
			for _, m := range coverageRE.FindAllSubmatch(src, -1) {
				if c, err := strconv.ParseFloat(string(m[1]), 64); err == nil && c > sp.Coverage {
					sp.Coverage = c
				}
			}
		}
		unc, err := os.ReadFile(filepath.Join(dir, "uncovered-"+strings.ToLower(b)+".txt"))
		if err != nil {
			return s, err
		}
		for _, l := range strings.Split(strings.TrimSpace(string(unc)), "\n") {
			if l != "" {
				sp.Uncovered = append(sp.Uncovered, l)
			}
		}
	}
	for _, tc := range tests {
		b := "STF"
		if tc.PTF {
			b = "PTF"
		}
		s.Parts[b].Tests++
		if tc.Expect != nil {
			s.Parts[b].Outputs++
		}
	}
	// Statements: each back end's uncovered count and two-digit coverage
	// bound the total; both bounds hold.
	lo, hi := 0, math.MaxInt
	for _, sp := range s.Parts {
		u := float64(len(sp.Uncovered))
		if sp.Coverage >= 0.995 || u == 0 {
			continue
		}
		lo = max(lo, int(math.Ceil(u/(1-(sp.Coverage-0.005))-1e-9)))
		hi = min(hi, int(math.Floor(u/(1-(sp.Coverage+0.005))+1e-9)))
	}
	s.StatementsLo, s.StatementsHi = lo, hi
	both := map[string]bool{}
	for _, l := range s.Parts["PTF"].Uncovered {
		both[l] = true
	}
	for _, l := range s.Parts["STF"].Uncovered {
		if both[l] {
			s.Neither = append(s.Neither, l)
		}
	}
	sort.Strings(s.Neither)
	return s, nil
}

// Coverage is the share of statements reached by a test of either back
// end, as a range when the statement count is.
func (s TestSet) Coverage() (lo, hi float64) {
	if len(s.Neither) == 0 && s.allReached() {
		return 1, 1
	}
	if s.StatementsLo == 0 || s.StatementsHi == math.MaxInt {
		return 0, 0
	}
	n := float64(len(s.Neither))
	return 1 - n/float64(s.StatementsLo), 1 - n/float64(s.StatementsHi)
}

// allReached says a back end's tests reached every statement, so that
// its uncovered list (empty) bounds no statement count, and the count is
// not needed: every statement is covered.
func (s TestSet) allReached() bool {
	for _, sp := range s.Parts {
		if sp.Coverage >= 0.995 && len(sp.Uncovered) == 0 {
			return true
		}
	}
	return false
}
