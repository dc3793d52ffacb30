// Package floors holds the import rules of the module's floors, which a test
// of this package checks against `go list -deps -json ./...` (DESIGN.md,
// "Floors"):
//
//	face     appliance/, packaging/   the binary, CLI, lab, dashboard, agents, orchestrators
//	harness  bench/                   the fabric simulator and what runs in it, peers side by side
//	systems  translator/ collector/ dumper/ p4/ tuning/
//	shared   internal/                plumbing (service, metrics, spec, report, progress, floors) and formats
//	RDMA     verbs/
//	ports    dpdk/
//
// A package imports only its own floor and the floors below it. On the
// shared floor the plumbing imports nothing of the project but other
// plumbing, and formats import only dpdk/, verbs/ and the shared floor.
// Collectors and translators never import each other: what they share is a
// format on the shared floor. Tests follow the floor order too (a test may
// drive a sibling on its own floor, as the collector's tests drive the real
// translator to write into it, but never a floor above).
package floors

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the module path the rules are written for.
const Module = "github.com/rdma-appliance/appliance"

// Floor is a level of the module, from the ports (0) up to the face.
type Floor int

// The floors, bottom up.
const (
	Ports Floor = iota
	RDMA
	Shared
	Systems
	Harness
	Face
)

var floorNames = [...]string{"ports", "RDMA", "shared", "systems", "harness", "face"}

func (f Floor) String() string { return floorNames[f] }

// plumbing are the shared floor's packages that every service uses; they
// import nothing of the project but each other.
var plumbing = map[string]bool{"internal/service": true, "internal/metrics": true, "internal/spec": true,
	"internal/report": true, "internal/floors": true, "internal/progress": true}

// FloorOf places a package (its path inside the module); false for a path
// outside every floor.
func FloorOf(rel string) (Floor, bool) {
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "dpdk":
		return Ports, true
	case "verbs":
		return RDMA, true
	case "internal":
		return Shared, true
	case "translator", "collector", "dumper", "p4", "tuning":
		return Systems, true
	case "bench":
		return Harness, true
	case "appliance", "packaging":
		return Face, true
	}
	return 0, false
}

// Package is what the rules read of one package: `go list -json`'s fields.
type Package struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// Violation is one import that breaks a rule.
type Violation struct {
	From, To string // paths inside the module
	Test     bool   // the import is a test's
	Rule     string
}

func (v Violation) String() string {
	t := ""
	if v.Test {
		t = " (test)"
	}
	return fmt.Sprintf("%s imports %s%s: %s", v.From, v.To, t, v.Rule)
}

// rel is p inside the module, or false for another module's package.
func rel(p string) (string, bool) {
	if p == Module {
		return "", true
	}
	return strings.CutPrefix(p, Module+"/")
}

// Check applies the rules to every import of pkgs between the module's
// packages and returns the violations, sorted.
func Check(pkgs []Package) []Violation {
	var out []Violation
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			if v, bad := check(from, imp, false); bad {
				out = append(out, v)
			}
		}
		for _, imp := range append(append([]string(nil), p.TestImports...), p.XTestImports...) {
			if v, bad := check(from, imp, true); bad {
				out = append(out, v)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func check(from, imp string, test bool) (Violation, bool) {
	to, ok := rel(imp)
	if !ok || to == from {
		return Violation{}, false
	}
	v := Violation{From: from, To: to, Test: test}
	ff, okf := FloorOf(from)
	ft, okt := FloorOf(to)
	switch {
	case !okf:
		v.Rule = "the importer is on no floor (add its folder to floors.FloorOf)"
	case !okt:
		v.Rule = "the imported package is on no floor (add its folder to floors.FloorOf)"
	case ft > ff:
		v.Rule = fmt.Sprintf("an upward import from the %v floor to the %v floor", ff, ft)
	case test:
		return v, false
	case plumbing[from] && !plumbing[to]:
		v.Rule = "the plumbing imports nothing of the project but other plumbing"
	case sibling(from, to):
		v.Rule = "collectors and translators never import each other: share a format on the shared floor"
	default:
		return v, false
	}
	return v, true
}

func sibling(a, b string) bool {
	ta, _, _ := strings.Cut(a, "/")
	tb, _, _ := strings.Cut(b, "/")
	return ta == "collector" && tb == "translator" || ta == "translator" && tb == "collector"
}
