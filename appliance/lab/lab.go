// Package lab is the in-process testbed behind `appliance lab`: it wires the
// software twins of the appliance together on one machine (ports over
// in-process links, and, as the systems land, soft RNICs, the injector,
// dumpers, collectors and the fabric simulator), runs each system's stage on
// an embedded default configuration, and reports one row per stage.
package lab

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rdma-appliance/appliance/appliance/dashboard"
	"github.com/rdma-appliance/appliance/appliance/hostmesh"
	"github.com/rdma-appliance/appliance/dpdk/netns"
	"github.com/rdma-appliance/appliance/internal/spec"
)

//go:embed default.yml
var defaultYAML []byte

// DefaultYAML returns the embedded default configuration.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Spec is the lab configuration.
type Spec struct {
	Wire        WireSpec        `yaml:"wire"`
	Verbs       VerbsSpec       `yaml:"verbs"`
	Lumina      LuminaSpec      `yaml:"lumina"`
	LuminaTests LuminaTestsSpec `yaml:"lumina-tests"`
	DTA         DTASpec         `yaml:"dta"`
	Fabric      FabricSpec      `yaml:"fabric"`
	Hawkeye     HawkeyeSpec     `yaml:"hawkeye"`
	Tuning      TuningSpec      `yaml:"tuning"`
	Hostmesh    HostmeshSpec    `yaml:"hostmesh"`
}

// LoadSpec reads a lab configuration; path "" means the embedded default.
func LoadSpec(path string) (Spec, error) {
	if path == "" {
		return DecodeSpec("<embedded lab default>", defaultYAML)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("reading config: %w", err)
	}
	return DecodeSpec(path, data)
}

// DecodeSpec is LoadSpec for YAML held in memory; name is used in errors.
func DecodeSpec(name string, data []byte) (Spec, error) {
	var s Spec
	doc, err := spec.Decode(name, data, &s)
	if err != nil {
		return Spec{}, err
	}
	s.Wire.validate(doc)
	s.Verbs.validate(doc)
	s.Lumina.validate(doc)
	s.LuminaTests.validate(doc)
	s.DTA.validate(doc)
	s.Fabric.validate(doc)
	s.Hawkeye.validate(doc)
	s.Tuning.validate(doc)
	s.Hostmesh.validate(doc)
	return s, doc.Err()
}

// Row is one stage's line in the summary.
type Row struct {
	System  string            `json:"system"`
	Ran     string            `json:"ran"`
	Figures map[string]string `json:"figures"`
	Order   []string          `json:"-"`
	Pass    bool              `json:"pass"`
	Error   string            `json:"error,omitempty"`
	Took    time.Duration     `json:"took_ns"`
}

// Figure records a key figure in display order.
func (r *Row) Figure(name, format string, args ...any) {
	if r.Figures == nil {
		r.Figures = map[string]string{}
	}
	if _, ok := r.Figures[name]; !ok {
		r.Order = append(r.Order, name)
	}
	r.Figures[name] = fmt.Sprintf(format, args...)
}

// Report is the lab's result.
type Report struct {
	Started time.Time `json:"started"`
	OutDir  string    `json:"out_dir"`
	Rows    []Row     `json:"rows"`
}

// Pass says whether every stage passed.
func (r *Report) Pass() bool {
	for _, row := range r.Rows {
		if !row.Pass {
			return false
		}
	}
	return len(r.Rows) > 0
}

// stage is one system's part of the lab.
type stage struct {
	name    string
	enabled func(Spec) bool
	run     func(ctx context.Context, l *Lab, row *Row) error
}

var stages = []stage{
	{"wire", func(s Spec) bool { return s.Wire.Enabled }, runWire},
	{"verbs", func(s Spec) bool { return s.Verbs.Enabled }, runVerbs},
	{"lumina", func(s Spec) bool { return s.Lumina.Enabled }, runLumina},
	{"lumina-tests", func(s Spec) bool { return s.LuminaTests.Enabled }, runLuminaTests},
	{"dta", func(s Spec) bool { return s.DTA.Enabled }, runDTA},
	{"dta-flow", func(s Spec) bool { return s.DTA.Enabled && s.DTA.FlowControl.Enabled }, runDTAFlow},
	{"fabric", func(s Spec) bool { return s.Fabric.Enabled }, runFabric},
	{"hawkeye", func(s Spec) bool { return s.Hawkeye.Enabled }, runHawkeye},
	{"tuning", func(s Spec) bool { return s.Tuning.Enabled }, runTuning},
	{"hostmesh", func(s Spec) bool { return s.Hostmesh.Enabled }, runHostmesh},
}

// Lab runs the stages.
type Lab struct {
	Spec   Spec
	OutDir string
	Log    *slog.Logger
	// Progress receives one line per stage start and end; nil for none.
	Progress io.Writer
	// Netns runs the packet paths of the lumina, lumina-tests and dta
	// stages over veth pairs between network namespaces (AF_PACKET
	// ports) instead of in-process rings; it needs root.
	Netns bool

	// What the dashboard shows (Snapshot) while the lab runs and after.
	mu      sync.Mutex
	started time.Time
	current string // the stage running
	rows    []Row
	res     results
}

// results are what the stages leave besides their rows, for the report
// and the dashboard.
type results struct {
	hawkeye  []*hawkeyeCase
	hostmesh *hostmesh.LabResult
	dtaLists []dashboard.DTAList
	lumina   []dashboard.LuminaRun
}

// record updates the results under the lock the dashboard reads them by.
func (l *Lab) record(f func(r *results)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.res)
}

// Path is a file under the output directory.
func (l *Lab) Path(name string) string { return filepath.Join(l.OutDir, name) }

// Run runs every enabled stage and writes summary.json. A failing stage is
// reported in its row by name and does not stop the others.
func (l *Lab) Run(ctx context.Context) (*Report, error) {
	if err := os.MkdirAll(l.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("lab: output directory: %w", err)
	}
	if l.Log == nil {
		l.Log = slog.Default()
	}
	if l.Netns {
		if err := netns.Available(); err != nil {
			return nil, fmt.Errorf("lab --netns: %w", err)
		}
	}
	rep := &Report{Started: time.Now(), OutDir: l.OutDir}
	l.mu.Lock()
	l.started, l.rows, l.res = rep.Started, nil, results{}
	l.mu.Unlock()
	for _, st := range stages {
		if !st.enabled(l.Spec) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		row := Row{System: st.name}
		l.mu.Lock()
		l.current = st.name
		l.mu.Unlock()
		if l.Progress != nil {
			fmt.Fprintf(l.Progress, "lab: %s: running\n", st.name)
		}
		t0 := time.Now()
		err := st.run(ctx, l, &row)
		row.Took = time.Since(t0)
		if err != nil {
			row.Pass = false
			row.Error = err.Error()
		}
		if l.Progress != nil {
			fmt.Fprintf(l.Progress, "lab: %s: %s in %s\n", st.name, passWord(row.Pass), row.Took.Round(time.Millisecond))
		}
		rep.Rows = append(rep.Rows, row)
		l.mu.Lock()
		l.current, l.rows = "", append(l.rows, row)
		l.mu.Unlock()
	}
	if err := l.writeHTML(rep); err != nil {
		return rep, fmt.Errorf("lab: writing report.html: %w", err)
	}
	f, err := os.Create(l.Path("summary.json"))
	if err != nil {
		return rep, fmt.Errorf("lab: %w", err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return rep, fmt.Errorf("lab: writing summary: %w", err)
	}
	return rep, ctx.Err()
}

func passWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// WriteSummary prints the summary table.
func (r *Report) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SYSTEM\tRESULT\tTOOK\tWHAT RAN\tKEY FIGURES")
	for _, row := range r.Rows {
		figs := make([]string, 0, len(row.Order))
		for _, k := range row.Order {
			figs = append(figs, k+"="+row.Figures[k])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.System, passWord(row.Pass), row.Took.Round(time.Millisecond), row.Ran, strings.Join(figs, " "))
		if row.Error != "" {
			fmt.Fprintf(tw, "\t\t\terror: %s\t\n", row.Error)
		}
	}
	tw.Flush()
}
