//go:build race

package dtatranslator

// raceEnabled: see TestServiceBackpressure.
const raceEnabled = true
