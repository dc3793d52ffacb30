//go:build !race

package dtatranslator

const raceEnabled = false
