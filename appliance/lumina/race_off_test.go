//go:build !race

package lumina

const raceEnabled = false
