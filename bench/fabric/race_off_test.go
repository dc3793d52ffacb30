//go:build !race

package fabric

// raceEnabled: the race detector slows a run tenfold; tests that run
// whole scenarios several times run fewer of them under it.
const raceEnabled = false
