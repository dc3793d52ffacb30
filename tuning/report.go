package tuning

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rdma-appliance/appliance/internal/report"
)

// ConvergenceChart is the objective of every evaluation and the best so
// far against the number of evaluations.
func ConvergenceChart(title string, recs []Record, fixed bool) *report.Chart {
	var x, y, b []float64
	for _, r := range recs {
		x = append(x, float64(r.Eval))
		if fixed {
			y, b = append(y, r.Fixed), append(b, r.BestFixed)
		} else {
			y, b = append(y, r.Score), append(b, r.Best)
		}
	}
	yl := "objective (Eq. 14/15)"
	if fixed {
		yl = "objective, fixed normalisation"
	}
	return &report.Chart{Title: title, XLabel: "evaluations", YLabel: yl, Kind: report.Line, Series: []report.Series{
		{Name: "evaluated", X: x, Y: y}, {Name: "best so far", X: x, Y: b}}}
}

// Inventoried is a target that knows its switches: the simulator.
type Inventoried interface {
	Inventory() []Switch
}

// Inventory is a stand-in switch list for targets without real switches:
// the simulator's switches of the tuned layers with one interface per
// port, or one bottleneck switch for the fluid model, so the chosen
// watermarks can be rendered in any dialect.
func (se *Session) Inventory() []Switch {
	if t, ok := se.Target.(*SwitchTarget); ok {
		return t.Switches
	}
	if t, ok := se.Target.(Inventoried); ok {
		return t.Inventory()
	}
	var out []Switch
	for _, s := range se.Space.Scopes {
		out = append(out, Switch{Name: s, Layer: s, Dialect: "comware", Ports: []string{"Ethernet0"}, Prio: 3})
	}
	return out
}

// standInQueueCells is the queue length a stand-in switch reports its
// percentages of (vrp): Comware's largest WRED limit, so the paper's
// thresholds fit.
const standInQueueCells = comwareMaxLimit

// standIn gives a stand-in inventory (no real switches) the port names of
// the dialect it is rendered in: a simulator's "Ethernet4" is no VRP or
// Comware interface.
func standIn(inv []Switch, dialect string) ([]Switch, error) {
	out := make([]Switch, len(inv))
	for i, sw := range inv {
		dn := sw.Dialect
		if dialect != "" {
			dn = dialect
		}
		d, err := DialectByName(dn)
		if err != nil {
			return nil, err
		}
		sw.Ports = make([]string, len(inv[i].Ports))
		for p := range sw.Ports {
			sw.Ports[p] = d.standInPort(p)
		}
		if sw.QueueCells == 0 {
			sw.QueueCells = standInQueueCells
		}
		out[i] = sw
	}
	return out, nil
}

// WriteReport writes result.json, convergence.svg and .png and
// watermarks.txt (the chosen configuration in the dialect, or each
// switch's own when empty) into dir, and returns the watermarks text.
func (se *Session) WriteReport(dir string, r Result, dialect string) (string, error) {
	if err := ensureDir(dir); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), b, 0o644); err != nil {
		return "", err
	}
	ch := ConvergenceChart(fmt.Sprintf("%s: %s", r.Method, r.Stopped), r.Records, se.Tuner.Objective.Norm == Fixed)
	for name, write := range map[string]func(io.Writer) error{"convergence.svg": ch.SVG, "convergence.png": ch.PNG} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		werr := write(f)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", fmt.Errorf("%s: %w", name, werr)
		}
	}
	if r.Best.Scopes == nil {
		return "", nil
	}
	inv := se.Inventory()
	if _, real := se.Target.(*SwitchTarget); !real {
		if inv, err = standIn(inv, dialect); err != nil {
			return "", err
		}
	}
	txt, err := RenderConfig(r.Best, inv, dialect)
	if err != nil {
		return "", err
	}
	return txt, os.WriteFile(filepath.Join(dir, "watermarks.txt"), []byte(txt), 0o644)
}
