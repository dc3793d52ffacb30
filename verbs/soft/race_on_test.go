//go:build race

package soft

// raceEnabled is set when the race detector, which allocates on its own, is on.
const raceEnabled = true
