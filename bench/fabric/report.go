package fabric

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/internal/report"
)

// Report is a run's summary page: the counters, the FCT distribution by
// flow size, and the queue and pause time series of the busiest switch
// ports, read back from the series CSV (SetSeries) so that only the
// plotted ports' samples are ever in memory. series may be nil.
func Report(title string, res *Results, series io.Reader) (*report.Page, error) {
	p := report.NewPage(title)
	p.Subtitle = fmt.Sprintf("%v simulated", time.Duration(res.SimNs))
	if err := AddReport(p, res, series); err != nil {
		return nil, err
	}
	return p, nil
}

// AddReport adds Report's sections to a page another report builds (the
// lab's).
func AddReport(p *report.Page, res *Results, series io.Reader) error {
	st := res.Stats
	done := 0
	for _, f := range res.Flows {
		if f.Done {
			done++
		}
	}
	p.Section("Fabric summary").KeyValues(
		report.KV{Key: "flows started / done", Value: fmt.Sprintf("%d / %d", len(res.Flows), done)},
		report.KV{Key: "FCT p50 / p99", Value: fmt.Sprintf("%v / %v", time.Duration(res.FCTPercentile(50)), time.Duration(res.FCTPercentile(99)))},
		report.KV{Key: "events / packet hops", Value: fmt.Sprintf("%d / %d", st.Events, st.Hops)},
		report.KV{Key: "drops (TTL, no route)", Value: fmt.Sprintf("%d (%d, %d)", st.Drops, st.TTLDrops, st.NoRoute)},
		report.KV{Key: "ECN marks / CNPs", Value: fmt.Sprintf("%d / %d", st.ECNMarks, st.CNPs)},
		report.KV{Key: "PFC XOFF frames / injected pauses", Value: fmt.Sprintf("%d / %d", st.PauseFrames, st.InjectedPauses)},
		report.KV{Key: "retransmitted packets / timeouts", Value: fmt.Sprintf("%d / %d", st.Retransmits, st.Timeouts)},
	)
	// FCT by size class: small flows suffer queueing, large ones
	// bandwidth sharing; one CDF would hide either.
	classes := []struct {
		name   string
		lo, hi int64
	}{{"< 100 KB", 0, 100 << 10}, {"100 KB - 1 MB", 100 << 10, 1 << 20}, {">= 1 MB", 1 << 20, 1 << 62}}
	fct := &report.Chart{Title: "Flow completion time by flow size", XLabel: "FCT (µs)", YLabel: "share of flows", Kind: report.Step}
	for _, c := range classes {
		var v []float64
		for _, f := range res.Flows {
			if f.Done && f.Size >= c.lo && f.Size < c.hi {
				v = append(v, float64(f.FCT)/1e3)
			}
		}
		if len(v) > 0 {
			fct.Series = append(fct.Series, report.CDF(fmt.Sprintf("%s (%d)", c.name, len(v)), v))
		}
	}
	p.Section("Fabric flows").Chart(fct)
	// The busiest ports by deepest queue.
	ports := slices.Clone(res.Ports)
	slices.SortStableFunc(ports, func(a, b PortResult) int { return cmp.Compare(b.MaxQueue, a.MaxQueue) })
	ports = ports[:min(4, len(ports))]
	rows := [][]report.Cell{}
	for _, pr := range ports {
		rows = append(rows, report.Row(fmt.Sprintf("%s:%d -> %s", pr.Node, pr.Port, pr.Peer), pr.MaxQueue, pr.Drops, pr.ECNMarks,
			pr.PauseSent, pr.PauseRx, time.Duration(pr.PausedNs).String()))
	}
	p.Section("Fabric: busiest ports").Table(report.Table{Header: []string{"port", "max queue (B)", "drops (ingress)", "ECN marks",
		"XOFF sent", "PFC frames received", "paused"}, Rows: rows})
	if series != nil && len(ports) > 0 && ports[0].MaxQueue > 0 {
		q, paused, err := readSeries(series, ports)
		if err != nil {
			return err
		}
		p.Chart(&report.Chart{Title: "Egress queue of the busiest ports", XLabel: "time (µs)", YLabel: "queue (KB)", Kind: report.Line, Series: q})
		if len(paused) > 0 {
			p.Chart(&report.Chart{Title: "Paused (any priority)", XLabel: "time (µs)", YLabel: "paused", Kind: report.Step, Series: paused})
		}
	}
	return nil
}

// readSeries picks the given ports' samples out of a series CSV.
func readSeries(r io.Reader, ports []PortResult) (q, paused []report.Series, err error) {
	idx := map[string]int{}
	for i, pr := range ports {
		idx[pr.Node+","+strconv.Itoa(pr.Port)] = i
		name := fmt.Sprintf("%s:%d", pr.Node, pr.Port)
		q = append(q, report.Series{Name: name})
		paused = append(paused, report.Series{Name: name})
	}
	sc := bufio.NewScanner(r)
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) != 5 {
			return nil, nil, fmt.Errorf("fabric: series line %q", sc.Text())
		}
		i, ok := idx[f[1]+","+f[2]]
		if !ok {
			continue
		}
		t, _ := strconv.ParseFloat(f[0], 64)
		b, _ := strconv.ParseFloat(f[3], 64)
		m, _ := strconv.Atoi(f[4])
		q[i].X, q[i].Y = append(q[i].X, t/1e3), append(q[i].Y, b/1024)
		pv := 0.0
		if m != 0 {
			pv = 1
		}
		paused[i].X, paused[i].Y = append(paused[i].X, t/1e3), append(paused[i].Y, pv)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	any := false
	for _, s := range paused {
		if slices.Contains(s.Y, 1) {
			any = true
		}
	}
	if !any {
		paused = nil
	}
	return q, paused, nil
}
