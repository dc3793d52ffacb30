//go:build race

package pcap

// The race detector slows everything ~10x and adds allocations of its own.
const raceEnabled = true
