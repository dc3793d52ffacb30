package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/rdma-appliance/appliance/p4/internal/p4build"
)

// Table renders README.md's generated block: bf-p4c's resource use per
// program, build and chip, then the p4testgen test sets.
func Table(progs []p4build.Program, results map[BuildKey]p4build.Result, sets map[string]TestSet) string {
	var b strings.Builder
	b.WriteString("| program | build | chip | MAU stages (ingress, egress) | stages free | tables | PHV containers | SRAM blocks | TCAM blocks |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range progs {
		for _, v := range p.Variants {
			for _, t := range v.Targets {
				r, ok := results[BuildKey{p.Path, v.FlagString(), t}]
				fmt.Fprintf(&b, "| `%s` | %s | Tofino %d | ", strings.TrimPrefix(p.Path, "p4/"), v.FlagString(), t)
				if !ok {
					b.WriteString("not compiled | | | | | |\n")
					continue
				}
				res, err := p4build.ParseSummary(r.Summary)
				if err != nil {
					fmt.Fprintf(&b, "%s | | | | | |\n", strings.ReplaceAll(r.Summary, "|", "/"))
					continue
				}
				if !r.Fits {
					fmt.Fprintf(&b, "does not fit: %d/%d (%d, %d) | none | %d | | | |\n", res.Stages, res.MaxStages, res.Ingress,
						res.Egress, res.Tables)
					continue
				}
				var phv []string
				for _, u := range res.PHV {
					phv = append(phv, fmt.Sprintf("%s %d/%d", u.Kind, u.Used, u.Total))
				}
				fmt.Fprintf(&b, "%d/%d (%d, %d) | %d | %d | %s | %d/%d | %d/%d |\n", res.Stages, res.MaxStages, res.Ingress,
					res.Egress, res.MaxStages-res.Stages, res.Tables, strings.Join(phv, ", "), res.SRAM, res.SRAM2, res.TCAM, res.TCAM2)
			}
		}
	}
	b.WriteString("\n| program | STF tests (with an output) | PTF tests (with an output) | statements | covered by STF | by PTF | by either |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, p := range progs {
		s, ok := sets[p.Path]
		name := strings.TrimPrefix(p.Path, "p4/")
		if !ok {
			fmt.Fprintf(&b, "| `%s` | none | | | | | |\n", name)
			continue
		}
		st, pt := s.Parts["STF"], s.Parts["PTF"]
		lo, hi := s.Coverage()
		either := fmt.Sprintf("%.0f%%", 100*lo)
		if fmt.Sprintf("%.0f", 100*lo) != fmt.Sprintf("%.0f", 100*hi) {
			either = fmt.Sprintf("%.0f-%.0f%%", 100*lo, 100*hi)
		}
		count := fmt.Sprint(s.StatementsLo)
		switch {
		case s.StatementsLo == 0 || s.StatementsHi == math.MaxInt:
			// Without a statement left uncovered, P4Testgen's figures
			// bound no count.
			count = "not counted"
		case s.StatementsHi != s.StatementsLo:
			count = fmt.Sprintf("%d-%d", s.StatementsLo, s.StatementsHi)
		}
		fmt.Fprintf(&b, "| `%s` | %d (%d) | %d (%d) | %s | %.0f%% | %.0f%% | %s |\n", name, st.Tests, st.Outputs, pt.Tests, pt.Outputs,
			count, 100*st.Coverage, 100*pt.Coverage, either)
	}
	return b.String()
}
