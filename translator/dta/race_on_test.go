//go:build race

package dta

// raceEnabled: see TestServiceBackpressure.
const raceEnabled = true
