//go:build race

package trace

// The race detector adds allocations of its own.
const raceEnabled = true
