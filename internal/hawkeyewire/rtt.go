package hawkeyewire

// Ethernet's framing as the detection threshold's base counts it: the
// preamble and inter-frame gap every frame carries on the wire, and the
// smallest frame (an ACK).
const (
	WireOverhead = 20
	MinFrame     = 64
)

// HopRTT is one link's share of a round trip without queues (ns): its
// delay both ways (ns), a data frame of frameBytes (headers included)
// serialised out and a minimum frame (the ACK) back, at bps bits/s, each
// with WireOverhead. bench/hawkeyesim sums it along a path (PathRTT,
// MaxRTT), the real agent over the fabric's longest path (BaseRTT): the
// same base the evaluation detects with.
func HopRTT(delay, bps float64, frameBytes int) float64 {
	return 2*delay + float64(frameBytes+WireOverhead+MinFrame+WireOverhead)*8e9/bps
}

// BaseRTT is the round trip without queues (ns) over a path of hops
// links of delay ns and bps bits/s each: the paper's §5 base for the
// detection threshold, "2-4 times the maximum RTT (determined by the
// maximum hop count)", with hops the longest host-to-host path's links
// (6 on a fat-tree: host, ToR, aggregation, core and back). Zero when
// hops is not positive or the link has no speed.
func BaseRTT(hops int, delay, bps float64, frameBytes int) int64 {
	if hops <= 0 || !(bps > 0) {
		return 0
	}
	var rtt float64
	for range hops {
		rtt += HopRTT(delay, bps, frameBytes)
	}
	return int64(rtt)
}
