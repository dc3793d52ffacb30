// Package hostmeshanalyzer is Hostmesh's analyzer: it takes the probe results and
// probe paths that the agents (package appliance/hostmesh) upload from every
// host of a rail-optimized RoCE cluster and, window by window (20 s in the
// paper), finds anomalous RNICs (more than 10% of their probes time out;
// their probes then count as RNIC problems for a minute), lets the remaining
// timeouts and high-latency probes vote on links and on switches (the
// paper's Algorithm 1, over the traced paths), tracks SLA percentiles of
// host processing delay and one-way network latency, and reports the RNIC
// and switch-network drop rates with alert lines naming what is suspicious.
// It runs on a file of results (`appliance mesh analyze FILE`), as an HTTP
// service the agents post to (`--serve`), and inside the simulator's
// evaluation.
package hostmeshanalyzer

import (
	"fmt"
	"strings"
)

// Result is one probe's outcome, as an agent reports it.
type Result struct {
	// Host is the agent's host; Src and Dst are RNIC names on it.
	Host string `json:"host"`
	Src  string `json:"src"`
	Dst  string `json:"dst"`
	// The probe's 5-tuple: source and destination addresses, UDP source
	// port (destination 4791).
	SrcIP string `json:"src_ip"`
	DstIP string `json:"dst_ip"`
	SPort uint16 `json:"sport"`
	Seq   uint64 `json:"seq"`
	// At is when it was posted (T1), ns of the host's clock.
	At      int64 `json:"at_ns"`
	Timeout bool  `json:"timeout,omitempty"`
	// NetworkNs is the one-way network latency T3-T2, ProcessingNs the
	// host's processing delay (T4-T1)-(T3-T2) (unset on a timeout).
	NetworkNs    int64 `json:"network_ns,omitempty"`
	ProcessingNs int64 `json:"processing_ns,omitempty"`
}

// SrcKey and DstKey name the RNICs cluster-wide: host/rnic.
func (r *Result) SrcKey() string { return r.Host + "/" + r.Src }

// DstKey is the destination RNIC's cluster-wide name.
func (r *Result) DstKey() string { return r.Host + "/" + r.Dst }

// Tuple is a probe 5-tuple (UDP to 4791 implied).
type Tuple struct {
	SrcIP string `json:"src_ip"`
	DstIP string `json:"dst_ip"`
	SPort uint16 `json:"sport"`
}

func (t Tuple) String() string { return fmt.Sprintf("%s:%d->%s:4791", t.SrcIP, t.SPort, t.DstIP) }

// Tuple is the result's 5-tuple.
func (r *Result) Tuple() Tuple { return Tuple{r.SrcIP, r.DstIP, r.SPort} }

// Path is a traced path of a probe 5-tuple: the switches that answered
// TTL-limited probes, in order.
type Path struct {
	Host  string `json:"host"`
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	Tuple Tuple  `json:"tuple"`
	At    int64  `json:"at_ns"`
	Hops  []string
	// Complete says the trace reached the destination RNIC.
	Complete bool `json:"complete"`
}

// Nodes are the path's nodes from the source RNIC to the destination
// RNIC, RNICs by their cluster-wide names.
func (p *Path) Nodes() []string {
	out := make([]string, 0, len(p.Hops)+2)
	out = append(out, p.Host+"/"+p.Src)
	out = append(out, p.Hops...)
	return append(out, p.Host+"/"+p.Dst)
}

// LinkName is a link's name regardless of direction: its ends sorted,
// joined by "~".
func LinkName(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return a + "~" + b
}

// LinkEnds splits a link name.
func LinkEnds(l string) (string, string) {
	a, b, _ := strings.Cut(l, "~")
	return a, b
}

// Batch is what an agent uploads: results and paths since its last batch,
// the RNICs it lost, and its counters.
type Batch struct {
	Host     string            `json:"host"`
	Results  []Result          `json:"results"`
	Paths    []Path            `json:"paths,omitempty"`
	Down     []string          `json:"down,omitempty"` // RNICs that disappeared
	Counters map[string]uint64 `json:"counters,omitempty"`
	// PFC are the RNICs' pause counters since the last batch.
	PFC []PFC `json:"pfc,omitempty"`
	// PGDrops are switches' ingress discards per priority group since the
	// last batch: what a switch poller (appliance mesh pgdrop, or the
	// simulator's) uploads, with Host naming the poller.
	PGDrops []PGDrop `json:"pg_drops,omitempty"`
}

// PGDrop is one switch port's ingress discards of one priority group over
// an interval of the poller's clock (the agents' clock: both are the
// hosts' synchronized wall clocks), as switches count them (SAI's
// SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS, SONiC's `show
// priority-group drop counters`). A lossless group discards only when a
// frame arrives after its XOFF with the headroom full: headroom too short
// for the cable, or PFC off for the class (section 5, problem #5). Probing
// sees that as lost probes and queues; only the switch can say it was its
// lossless class that dropped them.
type PGDrop struct {
	// Switch is the switch's name as its ICMP answers name it in the
	// probes' traced paths; Port is its own name of the ingress port.
	Switch string `json:"switch"`
	Port   string `json:"port"`
	PG     int    `json:"pg"`
	// From and To bound the interval, ns.
	From     int64  `json:"from_ns"`
	To       int64  `json:"to_ns"`
	Discards uint64 `json:"discards"`
}

// Valid says what is wrong with a record, nil when nothing is: a switch,
// a port, a priority group of 0-15 (switches have 8 or 16) and an
// interval that does not run backwards.
func (d *PGDrop) Valid() error {
	switch {
	case d.Switch == "" || d.Port == "":
		return fmt.Errorf("pg drop: switch %q port %q: both must be named", d.Switch, d.Port)
	case d.PG < 0 || d.PG > 15:
		return fmt.Errorf("pg drop %s %s: priority group %d: 0-15", d.Switch, d.Port, d.PG)
	case d.To < d.From:
		return fmt.Errorf("pg drop %s %s: interval %d..%d runs backwards", d.Switch, d.Port, d.From, d.To)
	}
	return nil
}

// PFC is one RNIC's PFC counters of the probes' (lossless) class over an
// interval of its agent's clock, as the RNIC counts them (mlx5's ethtool
// tx_prioN_pause, rx_prioN_pause and their _duration): pause frames it
// sent to its switch and received from it, and how long each held the
// link. Probing alone cannot tell a probe a pause holds from one a link
// loses; these tell a storming RNIC (section 5, problem #8: RNICs
// "sending a large number of PFC pause frames") from a lossy network.
type PFC struct {
	RNIC string `json:"rnic"`
	// From and To bound the interval, ns of the host's clock.
	From      int64  `json:"from_ns"`
	To        int64  `json:"to_ns"`
	TxPause   uint64 `json:"tx_pause"`
	RxPause   uint64 `json:"rx_pause"`
	TxPauseNs int64  `json:"tx_pause_ns"`
	RxPauseNs int64  `json:"rx_pause_ns"`
}

// Key is the RNIC's cluster-wide name, given its agent's host.
func (p *PFC) Key(host string) string { return host + "/" + p.RNIC }
