// Package hawkeyesim is the switch side of Hawkeye running inside the fabric
// simulator's switches through their hooks: the epoch telemetry a switch
// keeps per flow, per port and per port pair, PFC status from the pause
// frames it receives, polling packets that walk the victim flow's path and
// follow PFC causality upstream, the CPU pollers that pack the registers
// into reports (package hawkeyewire's records), and the simulated hosts'
// detection agent that sends a poll when a flow's RTT passes a threshold.
// p4/hawkeyetofino is the same switch logic for Tofino; Switch runs this
// package's logic on one switch driven by Ethernet frames, which is what
// P4Testgen's tests of p4/hawkeyetofino/telemetry.p4 are replayed against.
package hawkeyesim
