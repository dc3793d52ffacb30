//go:build race

package cli

// raceEnabled: the race detector slows simulations tenfold; tests that
// run thousands of them run without it (make test) and skip under it.
const raceEnabled = true
