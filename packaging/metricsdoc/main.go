// Command metricsdoc writes docs/metrics.md: every Prometheus metric the
// appliance's services register, with type, labels and help text, read from
// the source so the list cannot drift from the code. It finds calls of the
// internal/metrics registry's methods (Counter, Gauge, the Func and Vec
// forms, Collect) whose name is a string literal, or a literal plus a field
// of a range over a table of {name, help, ...} literals, the pattern the
// services use for families of per-port or per-collector counters; the
// client_golang constructors a registry's MustRegister takes
// (prometheus.NewCounter(prometheus.CounterOpts{Name: ..., Help: ...}) and
// the like); and the Go runtime's and the process's collectors.
//
// Run it from the module root: go run ./packaging/metricsdoc > docs/metrics.md
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Metric is one registered family.
type Metric struct {
	Name, Type, Help string
	Labels           []string
	Pkg, File        string
	Line             int
}

// methods maps a registry method to its metric type ("" = from an argument)
// and the index of its first label argument (-1: none).
var methods = map[string]struct {
	typ    string
	labels int
}{
	"Counter": {"counter", -1}, "CounterFunc": {"counter", -1}, "CounterVec": {"counter", 2},
	"Gauge": {"gauge", -1}, "GaugeFunc": {"gauge", -1}, "GaugeVec": {"gauge", 2},
	"Collect": {"", -1},
}

// ctors maps a client_golang constructor to its metric type and the index
// of its label argument (-1: none); its first argument is the Opts literal.
var ctors = map[string]struct {
	typ    string
	labels int
}{
	"NewCounter": {"counter", -1}, "NewCounterFunc": {"counter", -1}, "NewCounterVec": {"counter", 1},
	"NewGauge": {"gauge", -1}, "NewGaugeFunc": {"gauge", -1}, "NewGaugeVec": {"gauge", 1},
	"NewHistogram": {"histogram", -1}, "NewHistogramVec": {"histogram", 1},
	"NewSummary": {"summary", -1}, "NewSummaryVec": {"summary", 1},
}

// runtimeCollectors are client_golang's collectors of the Go runtime's and
// the process's metrics: their families are the library's, documented as
// one row each.
var runtimeCollectors = map[string]Metric{
	"NewGoCollector":      {Name: "go_*", Type: "various", Help: "The Go runtime's metrics (client_golang's Go collector): goroutines, threads, garbage collection, memory, GOGC, GOMEMLIMIT, GOMAXPROCS."},
	"NewProcessCollector": {Name: "process_*", Type: "various", Help: "The process's metrics (client_golang's process collector): CPU time, resident and virtual memory, open file descriptors, start time, network bytes."},
}

// services names the command that serves a package's metrics.
var services = map[string]string{
	"internal/service":           "every service",
	"dumper":                     "appliance dump",
	"translator/inject":          "appliance inject run",
	"translator/dtatranslator":   "appliance dta translate",
	"collector/dtacollector":     "appliance dta collect",
	"collector/hostmeshanalyzer": "appliance mesh analyze",
	"appliance/hostmesh":         "appliance mesh probe",
	"p4/dtatofino":               "appliance dta switch-cpu and dta tofino",
}

func main() {
	var ms []Metric
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch {
			case path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor"):
				return filepath.SkipDir
			case path == "internal/metrics" || path == "packaging":
				return filepath.SkipDir // the registry itself, and this generator
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		found, err := scan(path)
		ms = append(ms, found...)
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "metricsdoc:", err)
		os.Exit(1)
	}
	write(ms)
}

func scan(path string) ([]Metric, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, err
	}
	var out []Metric
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pos := fset.Position(call.Pos())
		at := func(m Metric) Metric {
			m.Pkg, m.File, m.Line = filepath.ToSlash(filepath.Dir(path)), filepath.ToSlash(path), pos.Line
			return m
		}
		if pkg, ok := sel.X.(*ast.Ident); ok {
			switch pkg.Name {
			case "collectors":
				if m, ok := runtimeCollectors[sel.Sel.Name]; ok {
					out = append(out, at(m))
				}
				return true
			case "prometheus":
				if m, ok := fromOpts(call, ctors[sel.Sel.Name].typ, ctors[sel.Sel.Name].labels); ok {
					out = append(out, at(m))
				}
				return true
			}
		}
		if len(call.Args) < 2 {
			return true
		}
		m, ok := methods[sel.Sel.Name]
		if !ok {
			return true
		}
		for _, row := range expand(call.Args, stack) {
			name, help := row.str(call.Args[0]), row.str(call.Args[1])
			if name == "" || !validName(name) {
				continue
			}
			typ := m.typ
			var labels []string
			if sel.Sel.Name == "Collect" {
				if len(call.Args) < 4 {
					continue
				}
				typ = typeName(row.expr(call.Args[2]))
				labels = stringList(call.Args[3])
			} else if m.labels >= 0 {
				for _, a := range call.Args[m.labels:] {
					labels = append(labels, lit(a))
				}
			}
			out = append(out, at(Metric{Name: name, Type: typ, Help: help, Labels: labels}))
		}
		return true
	})
	return out, nil
}

// fromOpts reads a client_golang constructor's Opts literal: Name (joined
// to Namespace and Subsystem as the library joins them), Help, and the
// label names of the Vec forms.
func fromOpts(call *ast.CallExpr, typ string, labelArg int) (Metric, bool) {
	if typ == "" || len(call.Args) == 0 {
		return Metric{}, false
	}
	cl, ok := call.Args[0].(*ast.CompositeLit)
	if !ok {
		return Metric{}, false
	}
	f := map[string]string{}
	for _, el := range cl.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok {
				f[k.Name] = row{}.str(kv.Value)
			}
		}
	}
	var parts []string
	for _, p := range []string{f["Namespace"], f["Subsystem"], f["Name"]} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	m := Metric{Name: strings.Join(parts, "_"), Type: typ, Help: f["Help"]}
	if f["Name"] == "" || !validName(m.Name) {
		return Metric{}, false
	}
	if labelArg >= 0 && labelArg < len(call.Args) {
		m.Labels = stringList(call.Args[labelArg])
	}
	return m, true
}

func validName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// row is one element of a table a registration loops over: the range
// variable's name and the element's fields by name (nil outside a loop).
type row struct {
	v      string
	fields map[string]ast.Expr
}

// expr resolves v.field to the element's expression.
func (r row) expr(e ast.Expr) ast.Expr {
	if s, ok := e.(*ast.SelectorExpr); ok {
		if id, ok := s.X.(*ast.Ident); ok && id.Name == r.v && r.fields != nil {
			if x, ok := r.fields[s.Sel.Name]; ok {
				return x
			}
		}
	}
	return e
}

// str resolves a string expression: a literal, v.field, or their sum.
func (r row) str(e ast.Expr) string {
	switch x := r.expr(e).(type) {
	case *ast.BasicLit:
		return lit(x)
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			a, b := r.str(x.X), r.str(x.Y)
			if a != "" && b != "" {
				return a + b
			}
		}
	case *ast.ParenExpr:
		return r.str(x.X)
	}
	return ""
}

// expand returns the rows a registration stands for: one plain row, or one
// per table element when its name uses the variable of an enclosing range
// over a composite literal (inline or assigned to a variable).
func expand(args []ast.Expr, stack []ast.Node) []row {
	v := rangeVarOf(args[0])
	if v == "" {
		return []row{{}}
	}
	for i := len(stack) - 1; i >= 0; i-- {
		rs, ok := stack[i].(*ast.RangeStmt)
		if !ok {
			continue
		}
		id, ok := rs.Value.(*ast.Ident)
		if !ok || id.Name != v {
			continue
		}
		cl := compositeOf(rs.X)
		if cl == nil {
			return nil
		}
		names := fieldNames(cl)
		var rows []row
		for _, el := range cl.Elts {
			ecl, ok := el.(*ast.CompositeLit)
			if !ok {
				continue
			}
			r := row{v: v, fields: map[string]ast.Expr{}}
			for j, fe := range ecl.Elts {
				if kv, ok := fe.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok {
						r.fields[k.Name] = kv.Value
					}
				} else if j < len(names) {
					r.fields[names[j]] = fe
				}
			}
			rows = append(rows, r)
		}
		return rows
	}
	return nil
}

// rangeVarOf finds X in a name expression "lit" + X.field.
func rangeVarOf(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.BinaryExpr:
		if v := rangeVarOf(x.X); v != "" {
			return v
		}
		return rangeVarOf(x.Y)
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name
		}
	}
	return ""
}

func compositeOf(e ast.Expr) *ast.CompositeLit {
	switch x := e.(type) {
	case *ast.CompositeLit:
		return x
	case *ast.Ident:
		if x.Obj == nil {
			return nil
		}
		if as, ok := x.Obj.Decl.(*ast.AssignStmt); ok {
			for i, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name == x.Name && i < len(as.Rhs) {
					return compositeOf(as.Rhs[i])
				}
			}
		}
		if vs, ok := x.Obj.Decl.(*ast.ValueSpec); ok {
			for i, n := range vs.Names {
				if n.Name == x.Name && i < len(vs.Values) {
					return compositeOf(vs.Values[i])
				}
			}
		}
	}
	return nil
}

// fieldNames lists the element struct's field names in order, for
// positional element literals.
func fieldNames(cl *ast.CompositeLit) []string {
	at, ok := cl.Type.(*ast.ArrayType)
	if !ok {
		return nil
	}
	var st *ast.StructType
	switch t := at.Elt.(type) {
	case *ast.StructType:
		st = t
	case *ast.Ident:
		if t.Obj != nil {
			if ts, ok := t.Obj.Decl.(*ast.TypeSpec); ok {
				st, _ = ts.Type.(*ast.StructType)
			}
		}
	}
	if st == nil {
		return nil
	}
	var names []string
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
	}
	return names
}

func lit(e ast.Expr) string {
	if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
		if s, err := strconv.Unquote(b.Value); err == nil {
			return s
		}
	}
	return ""
}

func stringList(e ast.Expr) []string {
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, el := range cl.Elts {
		out = append(out, lit(el))
	}
	return out
}

func typeName(e ast.Expr) string {
	if s, ok := e.(*ast.SelectorExpr); ok {
		switch s.Sel.Name {
		case "CounterType", "CounterValue":
			return "counter"
		case "GaugeType", "GaugeValue":
			return "gauge"
		}
	}
	return "?"
}

func write(ms []Metric) {
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].Pkg != ms[j].Pkg {
			return pkgOrder(ms[i].Pkg) < pkgOrder(ms[j].Pkg)
		}
		return ms[i].Name < ms[j].Name
	})
	fmt.Println("# Metrics")
	fmt.Println()
	fmt.Println("Every service serves its metrics on `GET /metrics` at its listen address (`appliance status`")
	fmt.Println("lists them): the Prometheus text format, or OpenMetrics to a scraper that asks for it, gzip-compressed")
	fmt.Println("when the scraper accepts it. Each service's registry holds its own families, the ones every service")
	fmt.Println("has, and the Go runtime's and the process's. HTTP requests are counted by route (`path` is the")
	fmt.Println("pattern the request matched, `other` when none did). This file is generated from the metric")
	fmt.Println("registrations in the source by `go run ./packaging/metricsdoc` (`make docs`); do not edit it by")
	fmt.Println("hand. The Grafana dashboard `packaging/grafana/appliance.json` plots them.")
	pkg := ""
	for _, m := range ms {
		if m.Pkg != pkg {
			pkg = m.Pkg
			svc := services[pkg]
			if svc == "" {
				svc = "package " + pkg
			}
			fmt.Printf("\n## %s (`%s`)\n\n", svc, pkg)
			fmt.Println("| metric | type | labels | help | source |")
			fmt.Println("|---|---|---|---|---|")
		}
		labels := strings.Join(m.Labels, ", ")
		if labels == "" {
			labels = "-"
		}
		fmt.Printf("| `%s` | %s | %s | %s | %s:%d |\n", m.Name, m.Type, labels, strings.ReplaceAll(m.Help, "|", "\\|"), m.File, m.Line)
	}
}

func pkgOrder(p string) string {
	if p == "internal/service" {
		return "" // the metrics every service has come first
	}
	return p
}
