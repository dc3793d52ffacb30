package hostmesh

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
)

// window is a hand-made report of the window ending at end (ms) whose
// suspects, ranked as given, are "kind name" pairs.
func window(end int64, suspects ...string) *hostmeshanalyzer.Report {
	r := &hostmeshanalyzer.Report{Start: (end - 20) * 1e6, End: end * 1e6}
	for _, s := range suspects {
		kind, name, _ := strings.Cut(s, " ")
		r.Suspects = append(r.Suspects, hostmeshanalyzer.Suspect{Kind: kind, Name: name, Alert: "ALERT " + s})
		r.Alerts = append(r.Alerts, "ALERT "+s)
	}
	return r
}

var (
	link = Element{hostmeshanalyzer.KindLink, "rail1~spine0"}
	rnic = Element{hostmeshanalyzer.KindRNIC, "m2/n1"}
)

const faultAt = 65e6 // in the window ending at 80 ms

// TestScoreRules pins the scoring on hand-made runs.
func TestScoreRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		truth   Element
		reps    []*hostmeshanalyzer.Report
		correct bool
		false_  int
		detect  int64 // ms, -1 for none
	}{
		{"right and alone", link, []*hostmeshanalyzer.Report{window(60), window(80, "link rail1~spine0"), window(100, "link rail1~spine0")}, true, 0, 15},
		// A second, wrong alert counts even when the top suspect is right.
		{"right with a wrong second alert", link, []*hostmeshanalyzer.Report{window(80, "link rail1~spine0", "switch spine0")}, true, 1, 15},
		// The top suspect is taken across all kinds: a link ranked above
		// the right RNIC is a miss, though the RNIC was alerted on.
		{"right kind ranked second", rnic, []*hostmeshanalyzer.Report{window(80, "link rail1~spine0", "rnic m2/n1")}, false, 1, 15},
		// The right element named as another kind is not it.
		{"wrong kind", rnic, []*hostmeshanalyzer.Report{window(80, "link m2/n1~rail1")}, false, 1, -1},
		// Alerts before the fault are false, and do not decide the top.
		{"alert before the fault", link, []*hostmeshanalyzer.Report{window(60, "rnic m0/n0"), window(80), window(100, "link rail1~spine0")}, true, 1, 35},
		// The first window alerting after the fault decides, even if a
		// later one gets it right.
		{"wrong first", link, []*hostmeshanalyzer.Report{window(80, "switch spine0"), window(100, "link rail1~spine0")}, false, 1, 35},
		{"silent after the fault", link, []*hostmeshanalyzer.Report{window(80), window(100)}, false, 0, -1},
		{"every window counts", link, []*hostmeshanalyzer.Report{window(80, "link rail1~spine0", "rnic m0/n0"), window(100, "rnic m0/n0")}, true, 2, 15},
		// A fault-free run passes only without any alert.
		{"fault-free, quiet", Element{}, []*hostmeshanalyzer.Report{window(20), window(40)}, true, 0, -1},
		{"fault-free, one alert", Element{}, []*hostmeshanalyzer.Report{window(20), window(40, "link rail1~spine0")}, false, 1, -1},
	} {
		at := int64(faultAt)
		if tc.truth.Kind == "" {
			at = 0
		}
		o := Score(tc.truth, at, tc.reps)
		detect := int64(-1)
		if o.DetectNs >= 0 {
			detect = o.DetectNs / 1e6
		}
		if o.Correct != tc.correct || o.FalseAlerts != tc.false_ || len(o.False) != tc.false_ || detect != tc.detect {
			t.Errorf("%s: correct %v, %d false alerts %q, detect %d ms; want %v, %d, %d ms", tc.name, o.Correct, o.FalseAlerts, o.False,
				detect, tc.correct, tc.false_, tc.detect)
		}
		if o.ProbingNs != int64(len(tc.reps))*20e6 {
			t.Errorf("%s: probing %d ns", tc.name, o.ProbingNs)
		}
	}
}

// TestEvalRowFigures: a row's figures and goal from its runs: false
// alerts per run and per hour of probing at the paper's time scale, the
// detection time at that scale, and the goal missed by one false alert
// in five runs.
func TestEvalRowFigures(t *testing.T) {
	row := EvalRow{Hosts: 4, Fault: FaultLinkFlap}
	for k := range 5 {
		o := Outcome{Correct: true, DetectNs: int64(10+k) * 1e6, ProbingNs: int64(6 * 20 * time.Millisecond)}
		if k == 0 {
			o.FalseAlerts, o.False = 1, []string{"ALERT switch spine0"}
		}
		row.add(&Run{Fault: FaultLinkFlap, Truth: link, Outcome: o})
	}
	row.finish()
	// 5 runs x 6 windows x 20 s = 10 minutes of probing.
	if row.Top1 != 1 || row.FalseAlertsPerRun != 0.2 || math.Abs(row.FalseAlertsPerHour-6) > 1e-9 || row.DetectSeconds != 12 ||
		row.DetectSecondsMax != 14 || !strings.Contains(row.Goal, "false alerts") || len(row.Misses) != 1 {
		t.Fatalf("%+v", row)
	}
	quiet := EvalRow{Fault: FaultNone}
	quiet.add(&Run{Fault: FaultNone, Outcome: Outcome{Correct: false, FalseAlerts: 1, DetectNs: -1}})
	quiet.add(&Run{Fault: FaultNone, Outcome: Outcome{Correct: true, DetectNs: -1}})
	quiet.finish()
	if quiet.Top1 != 0.5 || !strings.Contains(quiet.Goal, "1 fault-free runs alerted") || quiet.Detected != 0 {
		t.Fatalf("%+v", quiet)
	}
}
