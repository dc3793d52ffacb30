package hawkeyeagent

import "github.com/rdma-appliance/appliance/internal/hawkeyewire"

// Detector is the detection agent's decision on a real host, where RTTs
// come from outside (a verbs ping, the NIC's congestion-control
// telemetry, a file): per 5-tuple, a base RTT (the smallest seen, unless
// set), and a poll when an RTT passes Threshold percent of it, once per
// Interval per flow. It is the Agent's rule without a simulator; not
// safe for concurrent use.
type Detector struct {
	// Threshold in percent of the base RTT (300); Interval in ns between
	// two polls of a flow.
	Threshold int
	Interval  int64

	base  map[hawkeyewire.FlowKey]int64
	fixed map[hawkeyewire.FlowKey]bool
	last  map[hawkeyewire.FlowKey]int64
	next  uint8
}

// NewDetector starts event ids at first (hosts sharing a fabric should
// start apart, e.g. from their address, as switches deduplicate by id).
func NewDetector(threshold int, interval int64, first uint8) *Detector {
	return &Detector{Threshold: threshold, Interval: interval, base: map[hawkeyewire.FlowKey]int64{}, fixed: map[hawkeyewire.FlowKey]bool{},
		last: map[hawkeyewire.FlowKey]int64{}, next: first}
}

// SetBase fixes a flow's base RTT (the topology's, when known).
func (d *Detector) SetBase(k hawkeyewire.FlowKey, base int64) {
	d.base[k], d.fixed[k] = base, true
}

// Base is a flow's base RTT, 0 before any sample.
func (d *Detector) Base(k hawkeyewire.FlowKey) int64 { return d.base[k] }

// Observe takes an RTT sample of flow k at time now (ns) and returns the
// polling header to send, if any: type flow trace, the event id next in
// turn, the victim k.
func (d *Detector) Observe(k hawkeyewire.FlowKey, rtt, now int64) (hawkeyewire.Poll, bool) {
	if rtt <= 0 {
		return hawkeyewire.Poll{}, false
	}
	b, ok := d.base[k]
	if !ok || (!d.fixed[k] && rtt < b) {
		d.base[k] = rtt
		return hawkeyewire.Poll{}, false
	}
	if rtt*100 <= b*int64(d.Threshold) {
		return hawkeyewire.Poll{}, false
	}
	if l, ok := d.last[k]; ok && now-l < d.Interval {
		return hawkeyewire.Poll{}, false
	}
	d.last[k] = now
	p := hawkeyewire.Poll{Type: hawkeyewire.TypeFlow, Event: d.next, Victim: k}
	d.next++
	return p, true
}
