package floors

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// listModule is `go list -deps -json ./...` at the module's root, the
// module's own packages only.
func listModule(t *testing.T) []Package {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json", "./...")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if _, ok := rel(p.ImportPath); ok {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) < 40 {
		t.Fatalf("go list found %d of the module's packages", len(pkgs))
	}
	return pkgs
}

// TestModuleKeepsItsFloors: no package of the module, nor its tests,
// imports against the floors.
func TestModuleKeepsItsFloors(t *testing.T) {
	pkgs := listModule(t)
	for _, v := range Check(pkgs) {
		t.Error(v)
	}
	// Every package sits on a floor, and every floor is used.
	used := map[Floor]int{}
	for _, p := range pkgs {
		r, _ := rel(p.ImportPath)
		f, ok := FloorOf(r)
		if !ok {
			t.Errorf("%s is on no floor", r)
		}
		used[f]++
	}
	for f := Ports; f <= Face; f++ {
		if used[f] == 0 {
			t.Errorf("no package on the %v floor", f)
		}
	}
}

// TestCheckCatches: each rule fails on a deliberate violation, and what the
// rules allow passes.
func TestCheckCatches(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	for _, c := range []struct {
		name string
		pkg  Package
		want string // "" when allowed
	}{
		{"upward", Package{ImportPath: m("translator/inject"), Imports: []string{m("appliance/cli")}},
			"upward import from the systems floor to the face floor"},
		{"systems to harness", Package{ImportPath: m("tuning"), Imports: []string{m("bench/fabric")}},
			"upward import from the systems floor to the harness floor"},
		{"ports to RDMA", Package{ImportPath: m("dpdk/ring"), Imports: []string{m("verbs/roce")}},
			"upward import from the ports floor to the RDMA floor"},
		{"collector to translator", Package{ImportPath: m("collector/dtacollector"), Imports: []string{m("translator/dtatranslator")}},
			"collectors and translators never import each other"},
		{"translator to collector", Package{ImportPath: m("translator/inject"), Imports: []string{m("collector/luminaanalyzer")}},
			"collectors and translators never import each other"},
		{"plumbing to a format", Package{ImportPath: m("internal/service"), Imports: []string{m("internal/mirror")}},
			"the plumbing imports nothing of the project but other plumbing"},
		{"plumbing to RDMA", Package{ImportPath: m("internal/metrics"), Imports: []string{m("verbs")}},
			"the plumbing imports nothing of the project but other plumbing"},
		{"test upward", Package{ImportPath: m("dumper"), XTestImports: []string{m("appliance/lumina")}},
			"(test): an upward import from the systems floor to the face floor"},
		{"unknown folder", Package{ImportPath: m("tools/x"), Imports: []string{m("dpdk")}}, "on no floor"},
		{"downward", Package{ImportPath: m("appliance/lab"), Imports: []string{m("bench/fabric"), m("dpdk"), m("internal/spec")}}, ""},
		{"format to ports", Package{ImportPath: m("internal/mirror"), Imports: []string{m("dpdk/header"), m("verbs/roce")}}, ""},
		{"plumbing to plumbing", Package{ImportPath: m("internal/service"), Imports: []string{m("internal/metrics")}}, ""},
		{"test drives a sibling", Package{ImportPath: m("collector/dtacollector"), TestImports: []string{m("translator/dtatranslator")}}, ""},
		{"another module", Package{ImportPath: m("dpdk"), Imports: []string{"golang.org/x/sys/unix", "fmt"}}, ""},
	} {
		vs := Check([]Package{c.pkg})
		switch {
		case c.want == "" && len(vs) > 0:
			t.Errorf("%s: flagged %v", c.name, vs)
		case c.want != "" && (len(vs) != 1 || !strings.Contains(vs[0].String(), c.want)):
			t.Errorf("%s: got %v, want one violation saying %q", c.name, vs, c.want)
		}
	}
}
