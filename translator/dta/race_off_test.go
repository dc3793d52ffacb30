//go:build !race

package dta

const raceEnabled = false
