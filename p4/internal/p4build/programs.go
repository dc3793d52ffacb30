package p4build

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Targets are the chips a program's default build is compiled for.
var Targets = []int{1, 2}

// Variant is one build of a program that make p4check compiles: the
// default (no flags, Tofino 1 and 2) and every variant its source declares
// with a line
//
//	p4check: build -DNAME [-DNAME...] [tofino2] [nofit=tofinoN]
//
// in a comment. A variant is compiled for Tofino 1, and for Tofino 2 too
// with tofino2 (each compile costs CI time); nofit names a target the
// build is known not to fit yet: its result is reported in the README, not
// failed.
type Variant struct {
	Flags   []string
	Targets []int
	NoFit   []int
}

// Program is a TNA program under p4/ and its variants.
type Program struct {
	Path     string // relative to the module root, as "p4/dtatofino/translator.p4"
	Variants []Variant
	// Tests is how many tests make p4check asks P4Testgen for, by back
	// end (STF, PTF): a line
	//
	//	p4check: tests [BACKEND] N
	//
	// in a comment (without a back end, for both); absent, p4check's
	// default.
	Tests map[string]int
	// Ports are the input ports P4Testgen's tests of a back end (STF,
	// PTF) may use (its --port-ranges), by back end: a line
	//
	//	p4check: ports BACKEND LO:HI[,LO:HI...]
	//
	// per back end; absent, any port.
	Ports map[string]string
}

// Name is the program's file name without .p4.
func (p Program) Name() string { return strings.TrimSuffix(filepath.Base(p.Path), ".p4") }

// Package is the Go package directory holding the program.
func (p Program) Package() string { return filepath.Dir(p.Path) }

// FlagString is a variant's flags for tables and messages ("default"
// without flags).
func (v Variant) FlagString() string {
	if len(v.Flags) == 0 {
		return "default"
	}
	return strings.Join(v.Flags, " ")
}

var (
	mainRE      = regexp.MustCompile(`(?m)^\s*(Pipeline|Switch)\s*\(`)
	directiveRE = regexp.MustCompile(`p4check:\s*build\s+([^\n*]*)`)
	testsRE     = regexp.MustCompile(`p4check:\s*tests\s+([^\n*]*)`)
	portsRE     = regexp.MustCompile(`p4check:\s*ports\s+([^\n*]*)`)
	rangesRE    = regexp.MustCompile(`^\d+:\d+(,\d+:\d+)*$`)
)

// Programs finds every TNA program under root/p4 (a file that
// instantiates a Pipeline or Switch), sorted by path.
func Programs(root string) ([]Program, error) {
	var out []Program
	err := filepath.WalkDir(filepath.Join(root, "p4"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".p4") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !mainRE.Match(src) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		p := Program{Path: filepath.ToSlash(rel), Variants: []Variant{{Targets: Targets}}}
		for _, m := range directiveRE.FindAllStringSubmatch(string(src), -1) {
			v, err := parseVariant(m[1])
			if err != nil {
				return fmt.Errorf("%s: %v", rel, err)
			}
			p.Variants = append(p.Variants, v)
		}
		for _, m := range testsRE.FindAllStringSubmatch(string(src), -1) {
			f := strings.Fields(m[1])
			backends := []string{"STF", "PTF"}
			if len(f) == 2 && (f[0] == "STF" || f[0] == "PTF") {
				backends, f = f[:1], f[1:]
			}
			n, err := 0, error(nil)
			if len(f) == 1 {
				n, err = strconv.Atoi(f[0])
			}
			if len(f) != 1 || err != nil || n <= 0 || p.Tests[backends[0]] != 0 || p.Tests[backends[len(backends)-1]] != 0 {
				return fmt.Errorf("%s: p4check directive \"tests %s\": one per back end, as tests [STF|PTF] N, N above 0",
					rel, strings.TrimSpace(m[1]))
			}
			if p.Tests == nil {
				p.Tests = map[string]int{}
			}
			for _, b := range backends {
				p.Tests[b] = n
			}
		}
		for _, m := range portsRE.FindAllStringSubmatch(string(src), -1) {
			f := strings.Fields(m[1])
			if len(f) != 2 || (f[0] != "STF" && f[0] != "PTF") || !rangesRE.MatchString(f[1]) || p.Ports[f[0]] != "" {
				return fmt.Errorf("%s: p4check directive \"ports %s\": one per back end, as ports STF|PTF LO:HI[,LO:HI...]",
					rel, strings.TrimSpace(m[1]))
			}
			if p.Ports == nil {
				p.Ports = map[string]string{}
			}
			p.Ports[f[0]] = f[1]
		}
		out = append(out, p)
		return nil
	})
	slices.SortFunc(out, func(a, b Program) int { return strings.Compare(a.Path, b.Path) })
	return out, err
}

func parseVariant(s string) (Variant, error) {
	v := Variant{Targets: []int{1}}
	for _, f := range strings.Fields(s) {
		switch {
		case strings.HasPrefix(f, "-D"):
			v.Flags = append(v.Flags, f)
		case f == "tofino2":
			v.Targets = []int{1, 2}
		case f == "nofit=tofino1":
			v.NoFit = append(v.NoFit, 1)
		case f == "nofit=tofino2":
			v.NoFit = append(v.NoFit, 2)
		default:
			return v, fmt.Errorf("p4check directive: %q is none of -DNAME, tofino2, nofit=tofinoN", f)
		}
	}
	if len(v.Flags) == 0 {
		return v, fmt.Errorf("p4check directive %q: a variant needs flags", s)
	}
	return v, nil
}
