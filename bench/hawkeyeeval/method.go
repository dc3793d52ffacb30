package hawkeyeeval

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/rdma-appliance/appliance/collector/hawkeyeanalyzer"
	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// Method is how telemetry is collected and diagnosed for an incident:
// Hawkeye, or one of the paper's baselines (§4.2) and telemetry ablations
// (§4.3).
type Method int

const (
	// Hawkeye polls the victim's path and follows PFC causality, and
	// collects flow, port and port-pair telemetry there.
	Hawkeye Method = iota
	// VictimOnly polls the victim's path alone (no PFC tracing), with
	// Hawkeye's telemetry.
	VictimOnly
	// FullPolling collects every switch's telemetry at every incident.
	FullPolling
	// PortOnly keeps port records and port-pair meters only; PFC
	// causality tracing still works (it needs nothing else), so it polls
	// what Hawkeye polls.
	PortOnly
	// FlowOnly keeps flow records only; without port-pair meters and
	// port status the switches cannot trace PFC, so it polls the victim's
	// path.
	FlowOnly
	// SpiderMon (NSDI '22) keeps every packet's queuing delay and, on a
	// trigger, collects 36 bytes per flow from the switches on the
	// victim's path and analyses the flow interaction in the victim's
	// queues; it has no PFC visibility.
	SpiderMon
	// NetSight (NSDI '14) collects a postcard of every packet at every
	// hop across the network (15 bytes each); it has no PFC visibility
	// and diagnoses by the same flow-interaction analysis over its
	// postcards.
	NetSight
)

// Methods are every method, in table order.
var Methods = []Method{Hawkeye, VictimOnly, FullPolling, PortOnly, FlowOnly, SpiderMon, NetSight}

func (m Method) String() string {
	switch m {
	case Hawkeye:
		return "hawkeye"
	case VictimOnly:
		return "victim-only"
	case FullPolling:
		return "full-polling"
	case PortOnly:
		return "port-only"
	case FlowOnly:
		return "flow-only"
	case SpiderMon:
		return "spidermon"
	case NetSight:
		return "netsight"
	}
	return fmt.Sprintf("method(%d)", int(m))
}

const (
	// spiderMonFlowBytes and postcardBytes are the baselines' record
	// sizes as the paper gives them (§4.3).
	spiderMonFlowBytes = 36
	postcardBytes      = 15
	reportMTU          = 1500
)

// scope is which switches a method polls at an incident.
type scope int

const (
	scopeTraced scope = iota // the victim's path and PFC causality
	scopeVictim              // the victim's path
	scopeAll                 // every switch
)

func (m Method) scope() scope {
	switch m {
	case Hawkeye, PortOnly:
		return scopeTraced
	case FullPolling, NetSight:
		return scopeAll
	}
	return scopeVictim
}

// streams: the method's telemetry flows continuously rather than being
// collected on a poll, so nothing is reused between incidents.
func (m Method) streams() bool { return m == NetSight }

// shape keeps of switch report r what method m records, and prices it.
func (m Method) shape(r hawkeyewire.SwitchReport) (hawkeyewire.SwitchReport, int) {
	switch m {
	case PortOnly, FlowOnly, SpiderMon, NetSight:
		r.Epochs = slices.Clone(r.Epochs)
		for i := range r.Epochs {
			e := &r.Epochs[i]
			switch m {
			case PortOnly:
				e.Flows = nil
			default:
				e.Ports, e.Meters = nil, nil
			}
			if m == SpiderMon || m == NetSight {
				e.Flows = unpaused(e.Flows)
			}
		}
		switch m {
		case PortOnly:
			r.Evicted = nil
		case SpiderMon, NetSight:
			r.Evicted = unpaused(r.Evicted)
		}
	}
	var b int
	switch m {
	case SpiderMon:
		n := len(r.Evicted)
		for _, e := range r.Epochs {
			n += len(e.Flows)
		}
		b, _ = hawkeyewire.PackedBytes(n, spiderMonFlowBytes, reportMTU)
	case NetSight:
		var pkts int
		for _, e := range r.Epochs {
			for _, f := range e.Flows {
				pkts += int(f.Packets)
			}
		}
		for _, f := range r.Evicted {
			pkts += int(f.Packets)
		}
		b = pkts * postcardBytes
	default:
		b, _ = hawkeyewire.ReportBytes(r, reportMTU)
	}
	r.Bytes = b
	return r, b
}

// unpaused copies flow records without their paused counts: what a
// system without PFC visibility knows of them.
func unpaused(fs []hawkeyewire.FlowRecord) []hawkeyewire.FlowRecord {
	out := slices.Clone(fs)
	for i := range out {
		out[i].Paused = 0
	}
	return out
}

// Verdict is what a diagnosis said, in the evaluation's terms.
type Verdict struct {
	Anomaly Anomaly // NoAnomaly: none of the six recognised
	// Host is a root-cause host (ranked first), Flows the root-cause
	// flows, best first.
	Host  string
	Flows []hawkeyewire.FlowKey
	// initiator is the analyzer's initial congestion point (port), ""
	// when it named none.
	initiator string
}

// diagnose is method m's diagnosis of an incident's telemetry. path is
// the victim's egress ports (the polling packet's path), which port-level
// telemetry needs to place the victim.
func (m Method) diagnose(t *hawkeyewire.Telemetry, path []hawkeyeanalyzer.PortID) Verdict {
	switch m {
	case SpiderMon, NetSight:
		return flowInteraction(t)
	case PortOnly:
		return Analyzer(t, hawkeyeanalyzer.Options{VictimPath: path})
	}
	return Analyzer(t, hawkeyeanalyzer.Options{})
}

// Analyzer is collector/hawkeyeanalyzer's diagnosis with its types mapped
// to the injected ones and its ranked root causes.
func Analyzer(t *hawkeyewire.Telemetry, opt hawkeyeanalyzer.Options) Verdict {
	return verdictOf(hawkeyeanalyzer.Diagnose(t, opt))
}

func verdictOf(d *hawkeyeanalyzer.Diagnosis) Verdict {
	v := Verdict{Anomaly: NoAnomaly, Flows: d.RootFlows(), initiator: d.Initiator}
	if hs := d.RootHosts(); len(hs) > 0 {
		v.Host = hs[0]
	}
	switch d.Type {
	case hawkeyeanalyzer.Incast:
		v.Anomaly = Incast
	case hawkeyeanalyzer.Storm:
		v.Anomaly = Storm
	case hawkeyeanalyzer.DeadlockInLoop:
		v.Anomaly = InLoopDeadlock
	case hawkeyeanalyzer.DeadlockOutOfLoopContention:
		v.Anomaly = OutLoopContention
	case hawkeyeanalyzer.DeadlockOutOfLoopInjection:
		v.Anomaly = OutLoopInjection
	case hawkeyeanalyzer.Contention:
		v.Anomaly = Contention
	}
	return v
}

// minVictimQueue (bytes) is the average queue the victim must have met at
// a hop for the flow-interaction analysis to blame that hop's contention:
// the analyzer's MinContention.
const minVictimQueue = 2000

// flowInteraction is the diagnosis of SpiderMon and NetSight, the
// flow-interaction paradigm of traditional networks (§2.3): find the hop
// where the victim queued longest and blame the flows that filled that
// queue, ranked by the queue they held (the sum of the depths their
// packets met). Without PFC visibility every queue is contention, so it
// can name no other type.
func flowInteraction(t *hawkeyewire.Telemetry) Verdict {
	type hopKey struct {
		sw  string
		out int
	}
	type acc struct {
		packets uint64
		qsum    uint64
	}
	flows := map[hopKey]map[hawkeyewire.FlowKey]*acc{}
	add := func(sw string, f *hawkeyewire.FlowRecord) {
		k := hopKey{sw, f.Out}
		m := flows[k]
		if m == nil {
			m = map[hawkeyewire.FlowKey]*acc{}
			flows[k] = m
		}
		a := m[f.Key]
		if a == nil {
			a = &acc{}
			m[f.Key] = a
		}
		a.packets += uint64(f.Packets)
		a.qsum += f.QdepthSum
	}
	for _, r := range t.Reports {
		for ei := range r.Epochs {
			for fi := range r.Epochs[ei].Flows {
				add(r.Switch, &r.Epochs[ei].Flows[fi])
			}
		}
		for fi := range r.Evicted {
			add(r.Switch, &r.Evicted[fi])
		}
	}
	var worst hopKey
	best := -1.0
	for k, m := range flows {
		a := m[t.Victim]
		if a == nil {
			continue
		}
		q := float64(a.qsum) / float64(max(a.packets, 1))
		if q > best || (q == best && (k.sw < worst.sw || k.sw == worst.sw && k.out < worst.out)) {
			worst, best = k, q
		}
	}
	if best < minVictimQueue {
		return Verdict{Anomaly: NoAnomaly}
	}
	type ranked struct {
		key  hawkeyewire.FlowKey
		qsum uint64
	}
	var rs []ranked
	for k, a := range flows[worst] {
		rs = append(rs, ranked{k, a.qsum})
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := cmp.Compare(b.qsum, a.qsum); c != 0 {
			return c
		}
		return cmpKey(a.key, b.key)
	})
	v := Verdict{Anomaly: Contention}
	for _, r := range rs {
		v.Flows = append(v.Flows, r.key)
	}
	return v
}

func cmpKey(a, b hawkeyewire.FlowKey) int {
	return cmp.Or(cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.Sport, b.Sport),
		cmp.Compare(a.Dport, b.Dport), cmp.Compare(a.Proto, b.Proto))
}
