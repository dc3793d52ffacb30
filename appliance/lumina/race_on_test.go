//go:build race

package lumina

// Under the race detector the soft RNICs' loops stall for milliseconds,
// which the analyzers' timing checks rightly read as odd behaviour.
const raceEnabled = true
