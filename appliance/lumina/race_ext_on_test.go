//go:build race

package lumina_test

// Under the race detector the soft RNICs' loops stall for milliseconds,
// longer than the CNP pacing intervals the closed-loop tests infer.
const raceDetector = true
