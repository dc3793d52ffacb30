package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/internal/report"
)

// writeHTML writes report.html: the summary table and what each stage
// left worth seeing (plots, tables, graphs), one self-contained page.
func (l *Lab) writeHTML(rep *Report) error {
	p := report.NewPage("Appliance lab")
	pass := 0
	for _, r := range rep.Rows {
		if r.Pass {
			pass++
		}
	}
	p.Subtitle = fmt.Sprintf("%s: %d of %d stages passed", rep.Started.Format(time.RFC3339), pass, len(rep.Rows))
	t := report.Table{Header: []string{"system", "result", "took", "what ran", "key figures"}}
	for _, r := range rep.Rows {
		verdict := report.Pass("PASS")
		if !r.Pass {
			verdict = report.Fail("FAIL: " + r.Error)
		}
		figs := make([]string, 0, len(r.Order))
		for _, k := range r.Order {
			figs = append(figs, k+"="+r.Figures[k])
		}
		t.Rows = append(t.Rows, []report.Cell{{Text: r.System}, verdict, {Text: r.Took.Round(time.Millisecond).String()},
			{Text: r.Ran}, {Text: strings.Join(figs, " ")}})
	}
	p.Section("Summary").Table(t)
	for _, r := range rep.Rows {
		switch r.System {
		case "dta":
			l.pre(p, "DTA: Key-Write query success by load factor", "dta-loadfactor.txt")
		case "fabric":
			if err := l.fabricSections(p); err != nil {
				p.Section("Fabric").Paragraphf("the fabric run's results could not be read: %v", err)
			}
		case "hawkeye":
			l.pre(p, "Hawkeye: precision and recall per anomaly type and method", "hawkeye-eval.txt")
			l.hawkeyeSections(p)
		case "tuning":
			if b, err := os.ReadFile(l.Path("tuning/convergence.png")); err == nil {
				p.Section("ByteTuning: convergence").Image("objective and best so far against evaluations", "image/png", b)
			}
			l.pre(p, "ByteTuning: the chosen watermarks", "tuning/watermarks.txt")
		case "hostmesh":
			l.pre(p, "Hostmesh: the analyzer's report", "hostmesh-report.txt")
		case "lumina-tests":
			p.Section("Lumina tests").Paragraph("Each ready-made test's own report: lumina-tests/<test>/<run>/<repeat>/report.html in the output directory.")
		}
	}
	return p.WriteFile(l.Path("report.html"))
}

// hawkeyeSections adds the diagnosis kept of each anomaly type with its
// provenance graph.
func (l *Lab) hawkeyeSections(p *report.Page) {
	l.mu.Lock()
	cases := slices.Clone(l.res.hawkeye)
	l.mu.Unlock()
	for _, c := range cases {
		verdict := "a true positive: the type injected, its root cause ranked first"
		if !c.right {
			verdict = "not a true positive"
		}
		causes := strings.Join(rootCauses(c.d), "; ")
		if causes == "" {
			causes = "none identified"
		}
		sec := p.Section(fmt.Sprintf("Hawkeye: a %s trace, diagnosed", c.injected))
		sec.KeyValues(
			report.KV{Key: "diagnosis", Value: fmt.Sprintf("%s (%s), confidence %.2f", c.d.Type.Describe(), c.d.Type, c.d.Confidence)},
			report.KV{Key: "true positive", Value: report.Verdict(c.right)},
			report.KV{Key: "victim", Value: c.d.Victim},
			report.KV{Key: "root causes", Value: causes},
			report.KV{Key: "PFC spreading path", Value: strings.Join(c.d.Path, " -> ")},
		)
		src := "a detection of one of the anomaly's victims, from the telemetry Hawkeye collected"
		if !c.own {
			src = "no victim of the anomaly was detected: a detection of another flow"
		}
		sec.InlineSVG(fmt.Sprintf("The provenance graph (%s; %s). Also hawkeye/%s.svg, .dot and .json in the output directory.",
			verdict, src, c.injected), c.svg)
	}
}

// pre adds a stage's text artifact, when it exists, as a section.
func (l *Lab) pre(p *report.Page, title, name string) {
	if b, err := os.ReadFile(l.Path(name)); err == nil {
		p.Section(title).Pre(string(b))
	}
}

// fabricSections adds the fabric run's plots and tables.
func (l *Lab) fabricSections(p *report.Page) error {
	b, err := os.ReadFile(l.Path("fabric-results.json"))
	if err != nil {
		return err
	}
	var res fabric.Results
	if err := json.Unmarshal(b, &res); err != nil {
		return err
	}
	series, err := os.Open(l.Path("fabric-series.csv"))
	if err != nil {
		return err
	}
	defer series.Close()
	return fabric.AddReport(p, &res, series)
}
