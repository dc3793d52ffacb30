package dashboard

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/internal/report"
)

// WritePage writes the snapshot as one self-contained HTML page that
// reloads itself every refresh (0: never).
func WritePage(w io.Writer, s *Snapshot, refresh time.Duration) error {
	var b bytes.Buffer
	data := struct {
		*Snapshot
		Refresh int
	}{s, int(refresh.Round(time.Second) / time.Second)}
	if err := pageTemplate.Execute(&b, data); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// graph is a diagnosis' provenance graph as the page shows it: the SVG,
// or why it was not shown.
type graph struct {
	SVG     template.HTML
	Refused string
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"graph": func(svg string) graph {
		// The graphs come from our renderer; anything else that is
		// not inert SVG is shown as the reason it was refused. This is
		// the one place the page trusts markup, and only once checked.
		if err := report.CheckInlineSVG([]byte(svg)); err != nil {
			return graph{Refused: err.Error()}
		}
		return graph{SVG: template.HTML(svg)}
	},
	"ns":  func(ns int64) string { return time.Duration(ns).String() },
	"pct": func(v float64) string { return strconv.FormatFloat(100*v, 'f', 2, 64) + "%" },
	"rate": func(v float64) string {
		if v == 0 {
			return "0"
		}
		return formatRate(v)
	},
	"deref": func(b *bool) bool { return b != nil && *b },
	"conf":  func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"join":  strings.Join,
	"time":  func(t time.Time) string { return t.Format("2006-01-02 15:04:05 MST") },
	"loop": func(l []string) string {
		if len(l) == 0 {
			return ""
		}
		return strings.Join(l, " -> ") + " -> " + l[0]
	},
}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="rdma-appliance dashboard">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">
{{end}}<title>{{.Title}}</title>
<style>
:root { color-scheme: light; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222; background: #fff; margin: 20px auto; padding: 0 20px; max-width: 1400px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #ddd; }
h3 { font-size: 16px; margin: 18px 0 6px; }
.sub { color: #666; margin: 0 0 10px; }
nav a { margin-right: 14px; }
a { color: #1f5fa8; }
table { border-collapse: collapse; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d0d0; padding: 4px 10px; text-align: left; vertical-align: top; }
thead th { background: #f1f3f5; }
td.num { text-align: right; }
td.ok { background: #dcf2e0; color: #14532d; font-weight: 600; }
td.bad, p.bad { background: #fbdcdb; color: #7f1d1d; font-weight: 600; }
td.idle { background: #f1f1f1; color: #777; }
.fig { display: inline-block; margin: 0 10px 2px 0; white-space: nowrap; }
.fig b { font-weight: 600; color: #444; }
.graph { overflow-x: auto; border: 1px solid #e1e4e8; margin: 8px 0; }
.graph svg { display: block; }
article.diagnosis { margin-bottom: 26px; }
dl { margin: 4px 0; } dt { font-weight: 600; float: left; clear: left; width: 150px; } dd { margin: 0 0 2px 160px; }
.empty { color: #777; font-style: italic; }
code { font: 12px ui-monospace, Menlo, Consolas, monospace; }
</style>
</head>
<body>
<header>
<h1>{{.Title}}</h1>
<p class="sub">{{if .Source}}{{.Source}} · {{end}}updated {{time .Updated}}{{if .Refresh}} · reloads every {{.Refresh}} s{{end}} · the same data as JSON: <a href="/dashboard.json">/dashboard.json</a></p>
<nav><a href="#services">Services</a><a href="#hawkeye">Hawkeye diagnoses</a><a href="#hostmesh">Hostmesh</a><a href="#dta">DTA lists</a><a href="#lumina">Lumina runs</a></nav>
</header>
<main>
<section id="services">
<h2>Services</h2>
{{if .Services}}<table id="services-table">
<thead><tr><th>service</th><th>kind</th><th>address</th><th>status</th><th>version / uptime</th><th>detail</th><th>figures and rates</th></tr></thead>
<tbody>
{{range .Services}}<tr><td>{{.Name}}</td><td>{{.Kind}}</td><td>{{if .Addr}}<code>{{.Addr}}</code>{{end}}</td><td class="{{if .OK}}ok{{else if or (eq .Status "not yet queried") (eq .Status "running")}}idle{{else}}bad{{end}}">{{.Status}}</td><td>{{.Version}}{{if .Uptime}} · up {{.Uptime}}{{end}}</td><td>{{.Detail}}</td><td>{{range .Figures}}<span class="fig"><b>{{.Name}}</b> {{.Value}}</span> {{end}}</td></tr>
{{end}}</tbody>
</table>
{{else}}<p class="empty">No services known yet.</p>
{{end}}</section>
<section id="hawkeye">
<h2>Hawkeye diagnoses</h2>
{{range $i, $d := .Diagnoses}}<article class="diagnosis">
<h3>{{if $d.Injected}}{{$d.Injected}}: {{end}}{{$d.Describe}}</h3>
<dl>
<dt>diagnosed type</dt><dd><code>{{$d.Type}}</code>{{if $d.Right}}{{if deref $d.Right}} (the injected type){{else}} (<b>not</b> the injected type){{end}}{{end}}, confidence {{conf $d.Confidence}}</dd>
<dt>victim</dt><dd><code>{{$d.Victim}}</code></dd>
<dt>root causes</dt><dd>{{if $d.RootCauses}}{{join $d.RootCauses "; "}}{{else}}none identified{{end}}</dd>
{{if $d.Path}}<dt>PFC spreading path</dt><dd>{{join $d.Path " -> "}}</dd>
{{end}}{{range $d.Loops}}<dt>loop</dt><dd>{{loop .}}</dd>
{{end}}{{if $d.Note}}<dt>note</dt><dd>{{$d.Note}}</dd>
{{end}}</dl>
{{if $d.SVG}}<div class="graph" id="graph-{{$i}}">{{with graph $d.SVG}}{{if .Refused}}<p class="bad">graph not shown: {{.Refused}}</p>{{else}}{{.SVG}}{{end}}{{end}}</div>
<p class="sub"><a href="/dashboard/graph/{{$i}}">the graph alone</a> (SVG)</p>
{{end}}</article>
{{else}}<p class="empty">No diagnosis yet.</p>
{{end}}</section>
<section id="hostmesh">
<h2>Hostmesh: SLA and alerts</h2>
{{with .Hostmesh}}<p>{{.Summary}}</p>
<table id="hostmesh-sla">
<thead><tr><th>probes</th><th>timeouts</th><th>network p50</th><th>network p99</th><th>host processing p50</th><th>switch drop rate</th><th>fault</th><th>named first</th><th>verdict</th></tr></thead>
<tbody><tr><td class="num">{{.Probes}}</td><td class="num">{{.Timeouts}}</td><td class="num">{{ns .NetP50Ns}}</td><td class="num">{{ns .NetP99Ns}}</td><td class="num">{{ns .ProcP50Ns}}</td><td class="num">{{pct .SwitchDropRate}}</td><td>{{.Fault}}{{if .Truth}} ({{.Truth}}){{end}}</td><td>{{.Named}}</td><td class="{{if .Pass}}ok{{else}}bad{{end}}">{{if .Pass}}right{{else}}wrong{{end}}</td></tr></tbody>
</table>
<h3>Alerts</h3>
{{if .Alerts}}<ul>{{range .Alerts}}<li>{{.}}</li>{{end}}</ul>{{else}}<p class="empty">No alert.</p>{{end}}
<p class="sub">A fault-free round raised {{len .FaultFreeAlerts}} alert(s){{if .FaultFreeAlerts}}: {{join .FaultFreeAlerts "; "}}{{end}}.</p>
{{else}}<p class="empty">No Hostmesh round yet.</p>
{{end}}</section>
<section id="dta">
<h2>DTA list rates</h2>
{{if .DTALists}}<table id="dta-lists">
<thead><tr><th>collector</th><th>list</th><th>entries read</th><th>ring size</th><th>entries/s over the run</th><th>entries/s, last second</th></tr></thead>
<tbody>
{{range .DTALists}}<tr><td>{{.Collector}}</td><td class="num">{{.ID}}</td><td class="num">{{.Entries}}</td><td class="num">{{.Capacity}}</td><td class="num">{{rate .Rate}}</td><td class="num">{{rate .LastRate}}</td></tr>
{{end}}</tbody>
</table>
{{else}}<p class="empty">No DTA collection yet.</p>
{{end}}</section>
<section id="lumina">
<h2>Finished Lumina runs</h2>
{{if .Lumina}}<table id="lumina-runs">
<thead><tr><th>test</th><th>trace</th><th>verdict</th><th>packets</th><th>figures</th><th>results</th></tr></thead>
<tbody>
{{range .Lumina}}<tr><td>{{.Test}}</td><td class="{{if .Valid}}ok{{else}}bad{{end}}">{{if .Valid}}valid{{else}}invalid{{end}}</td><td class="{{if .OK}}ok{{else}}bad{{end}}">{{.Verdict}}</td><td class="num">{{if .Packets}}{{.Packets}}{{end}}</td><td>{{.Figures}}</td><td>{{if .Dir}}<code>{{.Dir}}</code>{{end}}</td></tr>
{{end}}</tbody>
</table>
{{else}}<p class="empty">No Lumina run yet.</p>
{{end}}</section>
</main>
</body>
</html>
`
